"""``make demo``: lmlow's answer in miniature, measured on your machine in about ten minutes.

The converged tables' setting, shrunk to what converges in minutes: the LM text is the first
quarter of the bundled technical corpus's training pages (60k words of Python documentation;
valid and test unchanged), the vectors are GloVe on the bundled pretraining text plus that LM
text (each line ending in ``<eos>``), the vocabulary is every training word plus the vectors'
words, the same for every model. Two LSTMs, the standard configuration (tied, random) and the
one the converged tables recommend (:mod:`lmlow.recommendation`, generated from them), train
side by side with the Adam protocol's optimiser and convergence rule (the rate halves after an
epoch without a new best; 3 such epochs in a row end the run): the paper's recipe, under which
the recommendation's tables were trained, took 53-90 epochs, 14-25 minutes of one core, to
each configuration's best on this text (experiments/freezing/technical/sweep-sgd), beyond a
demo's budget for two runs and GloVe. A KenLM 5-gram scores the same tokens. When the
recommendation also scores models of the demo's optimiser (Adam) with flags (``EVAL_FLAGS``,
by optimiser: ``--map-unseen-inputs``, ``--map-unseen-outputs``), the recommended model is
scored that way too, as a row of its own. It prints
the table, draws the learning curves with the 5-gram as a line, and ends with two sentences
computed from the numbers it just measured: which model wins overall, and on rare words.
Reuses what a previous run built. Usage: python -m lmlow.demo [--out runs/demo]
"""
from __future__ import annotations

import argparse
import math
import shutil
import sys
from functools import partial
from pathlib import Path

from lmlow.cpus import available_cpus
from lmlow.files import make_folder, staged_outputs
from lmlow.plots import plot_validation_curves
from lmlow.sweepdir import SweepDir

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "corpora" / "pydocs-mini"
QUARTER_LINES = 2508       # the converged tables' LM text (experiments/converged/common.sh)
# the converged tables' model and rule (experiments/README.md, Protocol)
MODEL = dict(emb_size=100, hidden_size=256, dropout=0.4, dropouth=0.3, dropouti=0.65,
             dropoute=0.1, wdrop=0.5, schedule="plateau", gamma=0.5, patience=3)
RECOMMENDED = "recommended: "   # the recommended model's label, before its flags


def configurations() -> dict[str, dict]:
    import lmlow.recommendation as recommendation
    return {"standard (tied, random)": dict(tie=True, init=("random",)),
            RECOMMENDED + recommendation.FLAGS: dict(recommendation.SETTINGS)}


def main(argv=None) -> int:
    from lmlow.errors import LmlowError

    ap = argparse.ArgumentParser(description="lmlow's recommendation against the standard "
                                 "configuration and a 5-gram, converged, on the bundled corpus.")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "demo",
                    help="where the corpus, vectors, runs, table and plot go, and are reused "
                    "from (default runs/demo)")
    ap.add_argument("--max-epochs", type=int, default=80,
                    help="cap on each LSTM's epochs; the convergence rule ends them first "
                    "(default 80, the tables' cap; >= 1)")
    ap.add_argument("--glove-epochs", type=int, default=25, help="GloVe epochs (default 25, "
                    "the tables' vectors; >= 1)")
    args = ap.parse_args(argv)
    if args.max_epochs < 1 or args.glove_epochs < 1:
        ap.error("--max-epochs and --glove-epochs must be at least 1")
    try:
        return _demo(args)
    except LmlowError as e:
        print(f"demo: error: {e}", file=sys.stderr)
        return 1


def _demo(args) -> int:
    import lmlow.recommendation as recommendation
    from lmlow.rundir import RunDir, maps_of
    from lmlow.runs import evaluation

    make_folder(args.out)
    corpus = _quarter(args.out / "corpus")
    vectors = _vectors(args.out / "vectors.100d.txt", corpus, args.glove_epochs)
    names = _train_lstms(args, corpus, vectors)
    kenlm = _kenlm(args.out / "kenlm5", corpus, vectors)
    rows = [_row("KenLM 5-gram", kenlm, evaluation)]
    rows += [_row(label, RunDir(args.out / "runs" / f"{folder}.seed1"), evaluation)
             for label, folder in names.items()]
    recommended = RunDir(args.out / "runs" / f"{names[RECOMMENDED + recommendation.FLAGS]}.seed1")
    flags = scored_as_recommended(recommended)
    if flags:
        inputs, outputs = maps_of(flags)
        rows.append(_row(f"recommended with {flags}", recommended,
                         partial(evaluation, map_unseen_inputs=inputs, map_unseen_outputs=outputs)))
    table = _table(rows)
    verdict = conclusion(rows)
    md, _, _, png = SweepDir(args.out).results        # the demo's folder reads as a sweep's
    series = [{"label": label, "rows": RunDir(args.out / "runs" / f"{folder}.seed1").metrics(),
               "group": i} for i, (label, folder) in enumerate(names.items())]
    # the table and its plot together or neither, never through a link planted under a name
    with staged_outputs(args.out, [md.name, png.name], force=True) as stage:
        (stage / md.name).write_text(table + "\n\n" + verdict + "\n", encoding="utf-8")
        plot_validation_curves(series, stage / png.name, x=("step",), size=(6.5, 4.2),
                               baselines={"KenLM 5-gram (valid)": rows[0]["valid"]})
    print("\n" + table + "\n\n" + verdict)
    print(f"\ntable: {md}; learning curves: {png}")
    return 0


def scored_as_recommended(run) -> str:
    """The flags the recommendation scores this run with ('': none): those chosen for the
    optimiser it was trained with (``EVAL_FLAGS``), the tables having found they help under it."""
    import lmlow.recommendation as recommendation
    from lmlow.files import read_json

    return recommendation.EVAL_FLAGS.get(read_json(run.config)["optimizer"], "")


def _quarter(folder: Path) -> Path:
    """The LM text: the bundled training pages' first quarter, valid/test as they are."""
    if (folder / "test.txt").exists():
        return folder
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with open(BUNDLED / "train.txt", encoding="utf-8") as f, \
            open(tmp / "train.txt", "w", encoding="utf-8") as out:
        for _, line in zip(range(QUARTER_LINES), f):
            out.write(line)
    for split in ("valid", "test"):
        shutil.copy(BUNDLED / f"{split}.txt", tmp / f"{split}.txt")
    tmp.rename(folder)
    return folder


def _vectors(path: Path, corpus: Path, epochs: int) -> Path:
    """GloVe on all the in-domain text: the pretraining text and the LM's training split."""
    from lmlow.glove import GloveConfig, save_vectors, train_glove

    if path.exists():
        return path
    print(f"1. GloVe vectors (100 dims, {epochs} epochs) on the bundled pretraining text and "
          "the LM text", flush=True)
    kv, rep = train_glove([BUNDLED / "pretrain.txt.gz", corpus / "train.txt"],
                          GloveConfig(dim=100, epochs=epochs))
    save_vectors(kv, path, force=True)
    print(f"   {rep.vocabulary} words in {rep.seconds_counting + rep.seconds_training:.0f}s",
          flush=True)
    return path


def _train_lstms(args, corpus: Path, vectors: Path) -> dict[str, str]:
    """Both LSTMs at once, one process each (the sweep's executor: resumed if interrupted,
    scored on valid and test when done); label -> run folder name."""
    from lmlow.errors import LmlowError
    from lmlow.rundir import RunDir
    from lmlow.sweep import Run, config_name, execute

    threads = max(1, available_cpus() // 2)
    runs, names = [], {}
    for label, settings in configurations().items():
        name = config_name(settings)
        names[label] = name
        runs.append(Run(name, {"corpus": str(corpus), "preset": "small", **MODEL,
                               "embeddings": str(vectors), "extend_vocab": True,
                               "max_epochs": args.max_epochs, **settings, "seed": 1}, 1))
    out = args.out / "runs"
    if not all(RunDir(out / r.folder).finished for r in runs):
        print(f"2. the two LSTMs side by side until they converge (a few minutes each; "
              f"logs: {SweepDir(out).logs})", flush=True)
    failed = [r.folder for r, code in execute(runs, out, jobs=2, threads=threads,
                                              log=lambda m: print("   " + m, flush=True)) if code]
    if failed:
        raise LmlowError(f"training {', '.join(failed)} failed: see {SweepDir(out).logs}")
    return names


def _kenlm(folder: Path, corpus: Path, vectors: Path):
    from lmlow.ngram import train_ngram
    from lmlow.rundir import RunDir

    run = RunDir(folder)
    if not run.finished:
        print("3. KenLM 5-gram (modified Kneser-Ney) on the same tokens", flush=True)
        train_ngram(corpus, run.path, order=5, force=True, quiet=True, embeddings=str(vectors),
                    extend_vocab=True)
    return run


def _row(label: str, run, evaluation) -> dict:
    from lmlow.evaluate import pooled_perplexity

    valid, test = evaluation(run, "valid"), evaluation(run, "test")
    rare_ppl, n = pooled_perplexity(test["bins"])        # test words seen 1-5 times in training
    rare_ppl = float("nan") if rare_ppl is None else rare_ppl
    summary = run.summary()
    return {"configuration": label, "valid": valid["perplexity"], "test": test["perplexity"],
            "test_rare": rare_ppl, "rare_tokens": n, "epochs": summary.get("epochs"),
            "stopped_by": summary.get("stopped_by"),
            "minutes": float(summary.get("train_seconds", 0)) / 60}


def _table(rows: list[dict]) -> str:
    from lmlow.tables import markdown
    return markdown(["configuration", "valid ppl", "test ppl", "test ppl, words seen 1-5 times",
                     "epochs", "stopped by", "training min"],
                    [[r["configuration"], r["valid"], r["test"], r["test_rare"],
                      r["epochs"] if r["epochs"] is not None else "",
                      r["stopped_by"] or "", r["minutes"]] for r in rows], digits=4)


def conclusion(rows: list[dict]) -> str:
    """Two sentences from the measured rows: the winner on validation perplexity, and the
    winner on the test words seen 1-5 times in training, each against every other row. One
    seed each, so a row within 2% of the best (:data:`lmlow.paired.ONE_SEED`, the margin the
    tables use for one seed) is level with it, not beaten; a row without a finite perplexity
    (a diverged run) is named apart, never ranked."""
    overall = ranking(rows, "valid", "validation perplexity", "{:.1f}")
    n = max((r["rare_tokens"] for r in rows), default=0)
    rare = ranking(rows, "test_rare", "perplexity", "{:,.0f}") if n else None
    second = (f"On the {n:,} test words seen 1-5 times in training, {rare}" if rare else
              "No test word was seen 1-5 times in training, so rare words were not compared.")
    return f"Overall, {overall} {second}"


def ranking(rows: list[dict], key: str, measure: str, fmt: str) -> str:
    """The clause naming the best row by ``key`` (lower is better), those level with it, and
    the rest with their values."""
    from lmlow.paired import ONE_SEED

    def short(r):
        return r["configuration"].split(":")[0].split(" (")[0]

    def listing(items: list[str]) -> str:
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

    ranked = sorted((r for r in rows if math.isfinite(r[key])), key=lambda r: r[key])
    broken = [short(r) for r in rows if not math.isfinite(r[key])]
    tail = f" ({listing(broken)}: no finite {measure})" if broken else ""
    if not ranked:
        return f"no model has a finite {measure}{tail}."
    best = ranked[0]
    level = [r for r in ranked[1:] if r[key] <= best[key] * (1 + ONE_SEED)]
    rest = [f"{short(r)} {fmt.format(r[key])} ({100 * (r[key] / best[key] - 1):.1f}% higher)"
            for r in ranked[1 + len(level):]]
    if level:
        head = (f"{listing([short(r) for r in [best, *level]])} are level ({measure} "
                f"{', '.join(fmt.format(r[key]) for r in [best, *level])}: within "
                f"{100 * ONE_SEED:g}%, closer than one seed can tell apart)")
        return head + (f", ahead of {listing(rest)}" if rest else "") + tail + "."
    head = f"{short(best)} wins with {measure} {fmt.format(best[key])}"
    return head + (f", against {listing(rest)}" if rest else "") + tail + "."


if __name__ == "__main__":
    sys.exit(main())
