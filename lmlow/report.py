"""``lmlow report SWEEP_DIR``: one table row per configuration (mean +- sd over seeds), the
validation learning curves of all runs in one plot, and with ``--paired CONFIG`` every
configuration against that one seed by seed (:mod:`lmlow.paired`). With
``--map-unseen-inputs``/``--map-unseen-outputs`` each configuration the maps apply to is
scored with them (:mod:`lmlow.input_map`), so with the flags the recommendation names
(``lmlow.recommendation.EVAL_FLAGS``) a sweep compares the configurations as it scores them."""
from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

from lmlow.config import Config, EmbeddingRoles, same_run_differs
from lmlow.errors import LmlowError
from lmlow.files import atomic_write_json, atomic_write_text, read_json, staged_outputs
from lmlow.paired import Paired
from lmlow.plots import plot_validation_curves
from lmlow.rundir import LSTM, MAP_FLAGS, NGRAM, RunDir, map_flags
from lmlow.sweepdir import SweepDir
from lmlow.tables import markdown, to_csv

COLUMNS = ["configuration", "tie", "input", "output", "unigram bias", "seeds", "trainable params",
           "frozen params", "valid ppl", "valid sd", "test ppl", "test sd", "converged",
           "best epoch", "best minutes", "tokens/s", "minutes", "precision"]


def run_folders(sweep_dir: Path, kind: str = LSTM) -> list[RunDir]:
    """The finished runs of a sweep folder of ``kind`` (LSTM, which Transformer runs are too,
    or NGRAM: an n-gram run kept in the sweep folder is a baseline row, not a configuration
    read with an LSTM's defaults)."""
    if not Path(sweep_dir).is_dir():
        what = "not a folder" if Path(sweep_dir).exists() else "no such folder"
        raise LmlowError(f"{sweep_dir}: {what}; expected a sweep folder (run folders inside)")
    folders = [p for p in sorted(Path(sweep_dir).iterdir()) if p.is_dir()]
    linked = next((p for p in folders if p.is_symlink()), None)
    if linked is not None:       # before any run is scored: its evaluations are written there
        raise LmlowError(f"{linked}: a symbolic link among the sweep's runs; lmlow does not "
                         "write a run's evaluations through a link: put the run folder itself "
                         "there, or move the link out")
    runs = (RunDir(p) for p in folders)
    return [r for r in runs if r.finished and r.kind == kind]


def convergence(run: RunDir) -> dict:
    """When a finished run's best checkpoint was measured (epoch, minutes of training) and
    whether the run converged: ended by its own early-stopping rule (``--patience`` epochs
    without a new best), not by a cap on epochs, updates or time."""
    cfg, summary, rows = read_json(run.config), run.summary(), run.metrics()
    scored = [r for r in rows if r.get("valid_ppl") is not None]      # null: a NaN validation
    best = min(scored, key=lambda r: r["valid_ppl"]) if scored else {}
    stopped = summary.get("stopped_by") or _stopped_by(cfg, summary, rows)
    elapsed = best.get("elapsed")
    return {"converged": stopped == "patience", "stopped_by": stopped,
            "best_epoch": best.get("epoch"),
            "best_minutes": None if elapsed is None else elapsed / 60}


def _stopped_by(cfg: dict, summary: dict, rows: list[dict]) -> str:
    """Why a run that predates ``summary['stopped_by']`` ended, from its metrics."""
    epochs = [r for r in rows if r.get("valid_ppl") is not None and not r.get("partial_epoch")]
    stale, best = 0, math.inf
    for r in epochs:
        stale, best = (0, r["valid_ppl"]) if r["valid_ppl"] < best else (stale + 1, best)
    if cfg.get("patience") and stale >= cfg["patience"]:
        return "patience"
    if summary.get("epochs", 0) >= cfg.get("max_epochs", math.inf):
        return "epochs"
    return "steps" if cfg.get("max_steps") and summary.get("steps", 0) >= cfg["max_steps"] else "time"


NO_MAPS = (False, False)


def scored_with(maps: tuple[bool, bool]) -> str:
    """The flags of the maps a row was scored with ('as trained' without any)."""
    return map_flags(maps) or "as trained"


def collect(sweep_dir: Path, maps: tuple[bool, bool] = NO_MAPS) -> list[dict]:
    """One row per configuration; seeds are the runs named ``CONFIG.seedN``. ``maps``: the
    maps asked for (inputs, outputs), applied to the configurations they apply to."""
    groups = configurations(sweep_dir)
    rows = [configuration_row(name, runs, maps) for name, runs in groups.items()]
    # as the paper's Table 1: worst first (a NaN perplexity, a diverged run's, first of all)
    rows.sort(key=lambda r: -r["valid ppl"] if not math.isnan(r["valid ppl"]) else -math.inf)
    return rows


def configurations(sweep_dir: Path) -> dict[str, list[RunDir]]:
    """The finished LSTM/Transformer runs of a sweep by configuration (``CONFIG.seedN``)."""
    groups: dict[str, list[RunDir]] = {}
    for run in run_folders(sweep_dir):
        groups.setdefault(re.sub(r"\.seed\d+$", "", run.name), []).append(run)
    if not groups:
        raise LmlowError(f"{sweep_dir}: no finished runs (run folders with {RunDir.SUMMARY})")
    return groups


def _ppl(ev: dict) -> float:
    """An evaluation's perplexity; NaN where lmlow wrote null (a NaN or infinite one)."""
    return math.nan if ev["perplexity"] is None else ev["perplexity"]


def _mean_known(xs: list) -> float | None:
    """The mean of a column over seeds; None (an empty cell) unless every seed has it."""
    return statistics.mean(xs) if xs and all(x is not None for x in xs) else None


def configuration_row(name: str, runs: list[RunDir], maps: tuple[bool, bool] = NO_MAPS) -> dict:
    """The table row of one configuration: its runs' (seeds') mean and sd, and per seed what
    paired comparisons read; ``maps`` as :func:`collect`'s."""
    from lmlow.runs import evaluation   # torch: imported when a report is made, not with the module

    cfg = read_json(runs[0].config)
    summaries = [r.summary() for r in runs]
    roles = EmbeddingRoles.of(cfg)
    applied = roles.maps(*maps)        # (an n-gram folder: tied by default, so none)
    valid = [_ppl(evaluation(r, "valid", *applied)) for r in runs]
    test = [_ppl(evaluation(r, "test", *applied)) for r in runs]
    speeds = [s["tokens_per_s"] for s in summaries if "tokens_per_s" in s]  # whole run, wall clock
    conv = [convergence(r) for r in runs]
    return {"configuration": name, **roles.columns(),
            "seeds": len(runs), "trainable params": summaries[0].get("trainable"),
            "frozen params": summaries[0].get("frozen"),
            "valid ppl": statistics.mean(valid), "valid sd": _sd(valid),
            "test ppl": statistics.mean(test), "test sd": _sd(test),
            "converged": f"{sum(c['converged'] for c in conv)}/{len(runs)}",
            "best epoch": _mean_known([c["best_epoch"] for c in conv]),
            "best minutes": _mean_known([c["best_minutes"] for c in conv]),
            "tokens/s": round(statistics.mean(speeds)) if speeds else None,
            "minutes": statistics.mean(s["train_seconds"] for s in summaries) / 60,
            "runs": [str(r.path) for r in runs],
            # per seed, for paired comparisons (experiments/claims.py)
            "seed list": [read_json(r.config).get("seed") for r in runs],
            "valid ppls": valid, "test ppls": test,
            "stopped by": [c["stopped_by"] for c in conv],
            "precision": _precisions(summaries),
            # only when maps were asked for: a plain report's rows stay as they were
            **({"maps": list(applied), "scored with": scored_with(applied)}
               if any(maps) else {})}


def _precisions(summaries: list[dict]) -> str:
    """What the runs of a row computed in (summary.json records it since issue 25; earlier
    runs say only their setting, usually ``auto``, which resolved by the machine)."""
    seen = sorted({p for s in summaries
                   for p in (s.get("precisions") or [s.get("precision", "not recorded")])})
    return ", ".join(seen)


def mixed_precision(rows: list[dict]) -> str | None:
    """A warning when a table's runs computed in different precisions, naming the runs that
    changed precision when resumed (a long CPU run resumed on a CPU without bf16 trains on in
    fp32: the paper regime's seed-2 pair), whose epochs ``metrics.jsonl`` tells apart."""
    seen = sorted({p.strip() for r in rows for p in str(r.get("precision") or "").split(",")
                   if p.strip() and p.strip() != "not recorded"})
    if len(seen) < 2:
        return None
    resumed = [Path(run).name for r in rows for run in r.get("runs", ())
               if RunDir(run).finished
               and len(set(read_json(RunDir(run).summary_file).get("precisions") or ())) > 1]
    within = (f"; {len(resumed)} run(s) changed precision when resumed ({', '.join(resumed)}: "
              "each epoch's is in its metrics.jsonl)" if resumed else "")
    return (f"mixed precisions in one table ({', '.join(seen)}): its comparisons mix "
            f"arithmetic{within}; pin --precision for every run")


def mixed_settings(rows: list[dict]) -> str | None:
    """A warning when the runs of one row differ in more than their seed (and what a resume
    may change, or where a file lies): run folders put together by hand, or planned before
    `lmlow sweep` refused it, whose mean is of two experiments. (A row's parameter columns
    are its first run's.)"""
    for row in (r for r in rows if len(r.get("runs", ())) > 1):
        first, *others = row["runs"]
        mine = Config.load(RunDir(first).config).to_dict()
        for other in others:
            theirs = Config.load(RunDir(other).config).to_dict()
            differ = [k for k in same_run_differs(mine, theirs) if k != "seed"]
            if differ:
                k = differ[0]
                return (f"the runs of {row['configuration']} differ in {k} ({Path(first).name}: "
                        f"{mine[k]!r}, {Path(other).name}: {theirs[k]!r}): its row is the mean "
                        "of two experiments")
    return None


def mixed_vectors(rows: list[dict]) -> str | None:
    """A warning when the runs of a table read different vectors under one file name (a file
    rebuilt on another machine, say: GloVe built with -march=native need not give the same
    bits), or when some of them were trained before lmlow recorded which (data.json)."""
    digests: dict[str, set] = {}
    unknown: dict[str, int] = {}
    for run_dir in (r for row in rows for r in row.get("runs", ())):
        run = RunDir(run_dir)
        if run.kind == NGRAM:          # reads only the vectors' words (foreign_baselines)
            continue
        named = read_json(run.config).get("embeddings") if run.config.is_file() else None
        read = run.recorded_vectors()
        if read:
            digests.setdefault(read["file"], set()).add(read["sha256"])
        elif named:
            unknown[Path(named).name] = unknown.get(Path(named).name, 0) + 1
    for name, seen in sorted(digests.items()):
        if len(seen) > 1:
            return (f"the runs of this table read {len(seen)} different files named {name} "
                    "(sha256 in each run's data.json): its comparisons mix vectors")
        if unknown.get(name):
            return (f"{unknown[name]} run(s) of this table read {name} before lmlow recorded the "
                    "vectors' sha256 (data.json), so whether they read the file the others did "
                    "is not known")
    return None


def foreign_baselines(rows: list[dict], baselines: list[Path]) -> str | None:
    """The baselines whose tokens are those of no run of the table: their perplexity is over
    other tokens (another corpus, K, word list or vectors' words), so the row is no
    comparison. Judged twice: by :meth:`RunDir.vocabulary_digest` (``vocab.txt``, or the hash
    in ``summary.json`` where a committed folder left it out), and by the validation split as
    each evaluation counted it (its tokens, and of them ``<unk>``), which folders from before
    lmlow kept the hash also record."""
    def words(run_dir) -> str | None:
        return RunDir(run_dir).vocabulary_digest()

    runs = [(r, tuple(row.get("maps", NO_MAPS))) for row in rows for r in row.get("runs", ())]
    table_words = {words(r) for r, _ in runs} - {None}
    table_tokens = {_tokens(r, maps) for r, maps in runs}

    def other(b) -> bool:
        w = words(b)
        return bool(table_words and w is not None and w not in table_words
                    or table_tokens and _tokens(b) not in table_tokens)
    foreign = [str(b) for b in baselines if other(b)]
    if not foreign:
        return None
    return (f"{', '.join(foreign)}: other tokens than every run of this table (another "
            "vocabulary or validation text), so {} perplexity is no comparison; give the "
            "baseline the runs' corpus and --unk-threshold, --vocab or --extend-vocab "
            "vectors".format("its" if len(foreign) == 1 else "their"))


def _tokens(run_dir, maps: tuple[bool, bool] = NO_MAPS) -> tuple[int, int]:
    """A run's validation split as its evaluation counted it: tokens, and of them ``<unk>``
    (the evaluation its row read, with the maps the row applied: cached, not scored again)."""
    from lmlow.runs import evaluation

    ev = evaluation(RunDir(run_dir), "valid", *maps)
    return ev["tokens"], ev["unk_tokens"]


def _sd(xs: list[float]) -> float | None:
    if len(xs) < 2:
        return None
    return math.nan if any(math.isnan(x) for x in xs) else statistics.stdev(xs)


def check_baseline(run_dir: Path) -> RunDir:
    """A baseline folder, refused in one line before any run of the table is scored: a run,
    and a finished one if it is an LSTM or Transformer run."""
    run = RunDir(run_dir).require()
    if run.kind != NGRAM and not run.finished:
        raise LmlowError(f"{run_dir}: not finished (no {RunDir.SUMMARY}); a baseline row "
                         "is a finished run")
    return run


def baseline_row(run_dir: Path, maps: tuple[bool, bool] = NO_MAPS) -> dict:
    """A KenLM run folder as an extra row, named by its order (and its data size and K); an
    LSTM or Transformer run as a row of its own, named by its folder, with its curve, scored
    with the table's ``maps`` where they apply to it, as the table's rows are."""
    from lmlow.runs import evaluation

    run = check_baseline(run_dir)
    if run.kind != NGRAM:
        return configuration_row(Path(run_dir).name, [run], maps)
    cfg = read_json(run.config)
    name = f"KenLM {cfg['order']}-gram" if "order" in cfg else Path(run_dir).name
    if cfg.get("train_fraction", 1) < 1:           # one row per data size in a datasize table
        name += f".data{cfg['train_fraction']:g}"
    if cfg.get("unk_threshold", 0) > 0:             # one row per K in an unk table
        name += f".K{cfg['unk_threshold']}"
    return {"configuration": name, "tie": "", "input": "", "output": "", "unigram bias": "",
            "seeds": 1, "trainable params": None, "frozen params": None,
            "valid ppl": _ppl(evaluation(run, "valid")), "valid sd": None,
            "test ppl": _ppl(evaluation(run, "test")), "test sd": None,
            "converged": "", "best epoch": None, "best minutes": None,
            "tokens/s": None, "minutes": cfg.get("train_seconds", 0) / 60, "runs": [str(run_dir)],
            "precision": ""}


def missing_runs(sweep_dir: Path) -> tuple[int, list[str]]:
    """(planned runs, the planned runs not finished) from the sweep's plan: a report of a
    sweep in progress says what it does not include yet."""
    from lmlow.sweep import load_plan

    plan = load_plan(sweep_dir) or []
    return len(plan), [r.folder for r in plan if not RunDir(Path(sweep_dir) / r.folder).finished]


PAIRED_COLUMNS = ["configuration", "against", "seeds paired", "difference per seed",
                  "mean difference", "mean difference %", "margin", "verdict"]


def reference_of(name: str, ref: str, names: set[str]) -> str | None:
    """The row ``name`` is compared with: ``ref`` itself, or in a grid of groups (``ours.K2``,
    ``ours.data0.5``) ``ref`` with the same group suffix (``standard.K2``), the longest
    such suffix that names a row; None when no row of ``ref`` shares the group."""
    suffixes = [n[len(ref):] for n in names
                if n == ref or (n.startswith(ref + ".") and name.endswith(n[len(ref):]))]
    return ref + max(suffixes, key=len) if suffixes else None


def paired_references(names: set[str], ref: str) -> dict[str, str | None]:
    """Each configuration's reference under ``--paired ref`` (:func:`reference_of`), refused
    in one line when ``ref`` names no configuration (checked before the runs are scored)."""
    if not ref.strip():
        raise LmlowError(f"--paired {ref!r}: empty; give the configuration to compare with "
                         f"(the sweep has: {', '.join(sorted(names))})")
    refs = {n: reference_of(n, ref, names) for n in names}
    if not any(refs.values()):
        raise LmlowError(f"--paired {ref}: no configuration of that name in the sweep "
                         f"(it has: {', '.join(sorted(names))})")
    return refs


def _measured_over(row: dict) -> tuple[set, set]:
    """What a row's perplexities are over: its runs' validation tokens (and ``<unk>`` among
    them) and vocabularies. Rows over other tokens (``--paired standard.K2`` beside
    ``ours.K5``) are no pair: the difference would be K's, not the configuration's."""
    maps = tuple(row.get("maps", NO_MAPS))
    runs = row["runs"]
    return ({_tokens(r, maps) for r in runs},
            {RunDir(r).vocabulary_digest() for r in runs} - {None})


def _same_tokens(a: tuple[set, set], b: tuple[set, set]) -> bool:
    """Whether two rows (:func:`_measured_over`) are over the same tokens. A row whose runs all
    predate the word list's hash (no ``vocab.txt`` committed, no digest in ``summary.json``)
    has no vocabularies to compare, and differs from none by them: a table whose older seed
    lacked the hash called its rows two sets of tokens (2026-12-03, paper-regime/), though
    every run counted the same validation tokens and ``<unk>``."""
    return a[0] == b[0] and (a[1] == b[1] or not a[1] or not b[1])


def mixed_tokens(rows: list[dict]) -> str | None:
    """A warning when the configuration rows were measured over different tokens (another
    vocabulary or validation text: another K, data size, word list or corpus): the table ranks
    them worst first, but a perplexity over a smaller vocabulary is lower for that alone, so
    they rank only among rows of the same tokens (which `--paired` alone compares)."""
    over = [(row["configuration"], _measured_over(row)) for row in rows]
    groups: dict[tuple, list[str]] = {}
    for name, (tokens, words) in sorted(over, key=lambda o: not o[1][1]):  # hashed first
        key = next((k for k in groups if _same_tokens(k, (tokens, words))),
                   (frozenset(tokens), frozenset(words)))
        groups.setdefault(key, []).append(name)
    if len(groups) < 2:
        return None
    named = "; ".join(g[0] + (f" and {len(g) - 1} more" if len(g) > 1 else "")
                      for g in groups.values())
    return (f"the rows are measured over {len(groups)} different sets of tokens (another "
            f"vocabulary or validation text: {named}): a perplexity ranks only among rows of "
            "its own set")


def add_paired(rows: list[dict], ref: str) -> str:
    """Every configuration of the sweep against ``ref`` (in a grid of groups, ``ref`` of its
    own group), seed by seed (lmlow.paired): each row gets a ``paired`` entry (for
    results.json); returns the Markdown section."""
    by_name = {r["configuration"]: r for r in rows if "seed list" in r}
    refs = paired_references(set(by_name), ref)
    over = {}                 # each row's tokens and vocabularies, hashed once per row

    def measured_over(row: dict) -> tuple[set, set]:
        name = row["configuration"]
        if name not in over:
            over[name] = _measured_over(row)
        return over[name]

    table, other = [], []
    for r in rows:
        against = refs.get(r["configuration"])
        if against is None or against == r["configuration"]:
            continue
        if not _same_tokens(measured_over(r), measured_over(by_name[against])):
            other.append(f"{r['configuration']} (against {against})")
            continue
        p = Paired.of_rows(by_name[against], r).summary()
        r["paired"] = {"against": against, **p}
        table.append([r["configuration"], against, len(p["seeds"]),
                      ", ".join(f"{x:+.1f}" for x in p["diffs"]), p["mean diff"],
                      p["mean diff %"], p["margin"], p["verdict"]])
    grouped = " (of its own group: data size, K, ...)" if any(t[1] != ref for t in table) else ""
    skipped = (f"Not compared, over other tokens than their reference (another vocabulary or "
               f"validation text: another K, data size or corpus): {', '.join(other)}.\n\n"
               if other else "")
    return (f"\n## Against {ref}, seed by seed\n\n{skipped}Difference: the configuration's validation "
            f"perplexity minus that of {ref}{grouped}, same seed (below 0: better). "
            "*better*/*worse*: every "
            "seed's difference has that sign and their mean is beyond the margin (the "
            "half-width of the 95% t-interval of the differences: Student's t with n - 1 "
            "degrees of freedom times their standard error, at least 0.5% of the perplexity; "
            "with one seed 2%); otherwise *no clear difference*.\n\n"
            + markdown(PAIRED_COLUMNS, table, digits=4) + "\n")


BIN_KINDS = (("bins", "the predicted word"), ("context_bins", "the word read before it"))


def _bin_ppls(row: dict, key: str) -> dict[str, dict[int, float]] | None:
    """bin -> seed -> validation perplexity over the bin's tokens, from each run's cached
    evaluation; None when a run's evaluation lacks ``key`` (``context_bins`` is recorded by
    evaluations made since it exists)."""
    from lmlow.runs import evaluation

    out: dict[str, dict[int, float]] = {}
    for seed, run in zip(row["seed list"], row["runs"]):
        bins = evaluation(RunDir(run), "valid", *row.get("maps", NO_MAPS)).get(key)
        if not bins:
            return None
        for b in bins:
            if b["tokens"]:
                out.setdefault(b["bin"], {})[seed] = b["perplexity"]
    return out


def add_paired_bins(rows: list[dict]) -> str:
    """Each row compared in ``add_paired`` again, bin by bin of the training frequency of the
    predicted word and of the word read before it (the same paired rule, on the perplexity over
    each bin's tokens): where a configuration wins or loses, e.g. on rare words. Adds ``bins``
    and ``context bins`` to each row's ``paired`` entry; returns the Markdown."""
    parts = []
    for key, what in BIN_KINDS:
        # each row's evaluations read once: a reference serves every row of its group
        ppls = {r["configuration"]: _bin_ppls(r, key) for r in rows if "seed list" in r}
        table, names = [], []
        for r in rows:
            if "paired" not in r:
                continue
            ref, other = ppls[r["paired"]["against"]], ppls[r["configuration"]]
            if ref is None or other is None:
                continue
            cells = {b: Paired(ref[b], other.get(b, {})).summary() for b in ref}
            r["paired"][key.replace("_", " ")] = cells
            names = names or list(cells)
            table.append([r["configuration"], r["paired"]["against"]]
                         + [_bin_cell(cells.get(b)) for b in names])
        if table:
            parts.append(f"\n### By the training frequency of {what}\n\n"
                         + markdown(["configuration", "against"] + names, table) + "\n")
    if not parts:
        return ""
    return ("\nThe same comparison over the validation tokens of each training-frequency bin "
            "(`lmlow eval`'s bins; `<unk>` targets by their own count, at K=0 among *unseen*): "
            "the mean difference in % of the reference's perplexity on those tokens, and the "
            "verdict where the rule finds one.\n" + "".join(parts))


def _bin_cell(p: dict | None) -> str:
    if not p or p["mean diff %"] is None:
        return ""
    word = {"better": " better", "worse": " worse"}.get(p["verdict"], "")
    return f"{p['mean diff %']:+.1f}%{word}"


def write_report(sweep_dir: Path, baselines: list[Path] | Path | None = None,
                 paired: str | None = None, maps: tuple[bool, bool] = NO_MAPS,
                 wait: bool = False) -> tuple[list[Path], list[str]]:
    """The four files (written all or none) and the warnings the table states (mixed
    precisions, a baseline over other tokens), which the command repeats on stderr."""
    sweep_dir = Path(sweep_dir)
    if isinstance(baselines, (str, Path)):
        baselines = [baselines]
    # n-gram runs kept in the sweep folder are baselines too
    baselines = list(baselines or ()) + [r.path for r in run_folders(sweep_dir, NGRAM)
                                         if r.path.resolve() not in
                                         {Path(b).resolve() for b in baselines or ()}]
    # the flags checked before any run is scored (a typo cost a whole scoring pass)
    for b in baselines:
        check_baseline(b)
    if paired is not None:         # '' too: it made a report without the comparison
        paired_references(set(configurations(sweep_dir)), paired)
    paths = SweepDir(sweep_dir).results
    with staged_outputs(sweep_dir, [p.name for p in paths], force=True, wait=wait) as stage:
        # the table is made under the folder's lock: made before a --wait, it left out the
        # runs that finished meanwhile and replaced the newer report the wait was for
        rows, md_text, csv_text, warnings = _table(sweep_dir, baselines, paired, maps)
        md, csv, js, png = (stage / p.name for p in paths)     # all four or none replaced
        atomic_write_text(md, md_text)
        atomic_write_text(csv, csv_text)
        atomic_write_json(js, rows)
        plot_curves(rows, png)
    return list(paths), warnings


def _table(sweep_dir: Path, baselines: list[Path], paired: str | None,
           maps: tuple[bool, bool]) -> tuple[list[dict], str, str, list[str]]:
    """The report's rows, results.md and results.csv texts, and warnings (the runs scored
    where their evaluations are not cached)."""
    rows = collect(sweep_dir, maps)
    section = add_paired(rows, paired) + add_paired_bins(rows) if paired else ""
    extra = [baseline_row(b, maps) for b in baselines]
    foreign = foreign_baselines(rows, baselines)
    other_tokens = mixed_tokens(rows)
    rows += extra
    columns = COLUMNS + (["scored with"] if any(maps) else [])
    table = [[r.get(c, "") for c in columns] for r in rows]
    planned, missing = missing_runs(sweep_dir)
    partial = (f"\n\n**Partial: {planned - len(missing)} of {planned} planned runs finished**; "
               f"not yet: {', '.join(missing)}." if missing else "")
    warnings = [w for w in (mixed_settings(rows), mixed_precision(rows), mixed_vectors(rows),
                            other_tokens, foreign) if w]
    partial += "".join(f"\n\n**Warning: {w}.**" for w in warnings)
    if any(maps):
        partial += ("\n\n*scored with*: the configurations that "
                    f"{' and '.join(f'`{f}`' for f, on in zip(MAP_FLAGS, maps) if on)} apply to "
                    "(untied, that side initialised from vectors and trained) are scored with "
                    "them, with no training (lmlow.input_map); the others as trained.")
    text = (f"# {sweep_dir.name}\n\nValidation and test perplexity of each "
            "run's best checkpoint; mean and sd over seeds. *converged*: runs (of "
            "the seeds) that ended by their early-stopping rule, not by a cap on "
            "epochs, updates or time; *best epoch/minutes*: when the best checkpoint "
            f"was measured (mean).{partial}\n\n" + markdown(columns, table, digits=4)
            + "\n" + section)
    return rows, text, to_csv(columns, table), warnings


def plot_curves(rows: list[dict], out: Path) -> None:
    """Validation curves against minutes, one colour per configuration (its seeds alike);
    rows without curves (a baseline) as dashed lines at their perplexity."""
    series, baselines = [], {}
    for i, row in enumerate(rows):
        curves = [RunDir(run).metrics() for run in row["runs"]] if row["tie"] else []
        if row["tie"]:
            series += [{"label": row["configuration"] if j == 0 else None, "rows": c, "group": i}
                       for j, c in enumerate(curves)]
        elif math.isfinite(row["valid ppl"]):
            baselines[row["configuration"]] = row["valid ppl"]
    plot_validation_curves(series, out, baselines=baselines, colours="tab20", size=(9, 5.5))


def report(sweep_dir: Path, baselines: list[Path] | None = None,
           paired: str | None = None, maps: tuple[bool, bool] = NO_MAPS,
           wait: bool = False) -> tuple[str, list[str]]:
    """``lmlow report``: write the files and return what to print (the files written and
    the table) and the table's warnings (mixed precisions, a baseline over other tokens).
    ``wait``: if another command is writing into the sweep folder (another report of it),
    wait for it rather than refuse."""
    paths, warnings = write_report(sweep_dir, baselines, paired, maps, wait)
    text = "\n".join(f"wrote {p}" for p in paths) + "\n" + paths[0].read_text()
    return text, warnings
