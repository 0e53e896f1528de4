"""``lmlow analyze`` and ``lmlow compare``: the frequency analyses of LSTM runs, with their
tables and plots.

- :func:`analyze`: bias vs log-unigram correlations (Kobayashi Table 3), KL(unigram || average
  prediction) with and without the bias (Kobayashi Table 1), log-prob of the ground truth vs
  its frequency with and without the bias (Meister Fig. 4), plots;
- :func:`compare`: ALC (area under the learning curve) of the validation curves of runs.
"""
from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lmlow.analysis.frequency import bias_stats, distribution_stats
from lmlow.analysis.stats import alc, binned_means, kl_divergence, unigram_distribution
from lmlow.config import check_values, setting
from lmlow.data.corpus import SPLITS
from lmlow.errors import LmlowError
from lmlow.evaluate import exp_loss
from lmlow.files import atomic_write_json, atomic_write_text, read_json, staged_outputs
from lmlow.plots import plot_validation_curves, pyplot
from lmlow.rundir import LSTM, NGRAM, RunDir
from lmlow.sweepdir import refuse_foreign_output


@dataclass
class AnalyzeOptions:
    """What `lmlow analyze` measures (its flags are generated from these fields)."""
    split: str = setting("valid", "the text the predictions are measured on")
    tokens: int = setting(0, "use only the first N tokens of the split (0: all)", metavar="N")
    bins: int = setting(20, "equal-width log-frequency bins of the binned plots", metavar="N")
    RANGES: typing.ClassVar[dict] = {"tokens": "[0, inf)", "bins": "[1, 1000]"}
    CHOICES: typing.ClassVar[dict] = {"split": SPLITS}


@dataclass
class CompareOptions:
    """What `lmlow compare` integrates (its flags are generated from these fields)."""
    steps: int | None = setting(None, "also the ALC over updates 0..N (the curve is "
                                "interpolated at N; empty for a run that stopped before N or "
                                "has no validation at update 0: --track-frequency adds it)",
                                metavar="N")
    metric: str = setting("loss", "the curve to integrate: validation cross-entropy in nats "
                          "(loss), or perplexity (ppl)")
    RANGES: typing.ClassVar[dict] = {"steps": "[1, inf)"}
    CHOICES: typing.ClassVar[dict] = {"metric": ("loss", "ppl")}


def analyze(run_dir: Path, out: Path | None = None, corpus: Path | None = None,
            checkpoint: str | None = None, device: str = "auto", force: bool = False,
            **options) -> dict:
    """Frequency analyses of an LSTM run's ``checkpoint`` (``options``: :class:`AnalyzeOptions`,
    the split and its first ``tokens`` tokens): writes OUT/analysis.json and PNG plots (OUT
    defaults to RUN_DIR/analysis) and returns the JSON's content. The files appear together
    or not at all."""
    opts = AnalyzeOptions(**options)
    check_values(opts)
    split, tokens, bins = opts.split, opts.tokens, opts.bins
    rd = RunDir(run_dir).require(LSTM)
    run_dir = rd.path
    checkpoint = checkpoint or rd.default_checkpoint()   # best, or last before a validation
    if not rd.checkpoint(checkpoint).exists():
        raise LmlowError(f"{run_dir}: no {checkpoint}.pt (train the run first)")
    trusted = out is not None
    if trusted:
        refuse_foreign_output(out, "analyze")
    out = Path(out) if out else rd.analysis_dir
    names = ["analysis.json", "bias_vs_frequency.png", "logprob_vs_frequency.png",
             "prediction_vs_frequency.png"]
    frequency = rd.frequency()
    if frequency:
        names.append("frequency_curves.png")
    with staged_outputs(out, names, force, trusted, optional=["frequency_curves.png"]) as stage:
        return _analyze(rd, split, stage, tokens, bins, corpus, checkpoint, device, frequency)


def _analyze(rd: RunDir, split: str, stage: Path, tokens: int, bins: int, corpus: Path | None,
             checkpoint: str, device: str, frequency: list[dict]) -> dict:
    from lmlow.runs import LSTMRun

    run_dir = rd.path
    run = LSTMRun(run_dir, checkpoint, device)
    counts = run.vocab.count_array()
    unigram = unigram_distribution(counts)
    ids = run.encoded(split, corpus).ids
    ids = np.asarray(ids[:tokens] if tokens else ids, dtype=np.int64)
    stats = distribution_stats(run.model, ids, run.vocab.eos_id, unigram, (1.0, 0.0),
                               run.config.eval_batch_size, run.config.bptt, run.device)
    full, nob = stats[1.0], stats[0.0]
    bias = run.model.decoder.bias.detach().cpu().numpy().astype(np.float64)
    seen = counts > 0
    log_u = np.log(unigram[seen])
    uniform = np.full(len(unigram), 1 / len(unigram))

    # Meister Fig. 4: per target type, the mean log-prob it gets; binned by log unigram
    targets = ids[seen[ids]]
    per_type = {}
    for name, st in (("full", full), ("no_bias", nob)):
        lp = st.logprobs[seen[ids]]
        sums = np.bincount(targets, weights=lp, minlength=len(counts))
        n_t = np.bincount(targets, minlength=len(counts))
        types = np.flatnonzero(n_t)
        per_type[name] = (types, sums[types] / n_t[types])
    types = per_type["full"][0]
    if not len(types):
        raise LmlowError(f"{split}: none of the {len(ids)} tokens scored is a word seen in "
                         "training (only <unk> and words training lacks): nothing to bin by "
                         "frequency; score more of the split (--tokens 0: all of it)")
    fig4 = {name: binned_means(np.log(unigram[types]), per_type[name][1], bins)
            for name in per_type}
    # Kobayashi Fig. 1: mean predicted probability vs unigram probability, binned by log unigram
    fig1 = {name: binned_means(log_u, np.log(np.maximum(st.mean_distribution[seen], 1e-300)), bins)
            for name, st in (("full", full), ("no_bias", nob))}

    result = {
        "run": str(run_dir), "checkpoint": checkpoint, "split": split, "tokens": int(len(ids)),
        "init": list(run.config.init), "tie": run.config.tie, "vocabulary": len(counts),
        "words_seen_in_training": int(seen.sum()),
        **bias_stats(bias, unigram),
        "kl_unigram_avg": kl_divergence(unigram, full.mean_distribution),
        "kl_unigram_avg_no_bias": kl_divergence(unigram, nob.mean_distribution),
        "kl_uniform_avg": kl_divergence(uniform, full.mean_distribution),
        "kl_uniform_avg_no_bias": kl_divergence(uniform, nob.mean_distribution),
        "kl_unigram_token": full.kl_unigram_token, "kl_unigram_token_no_bias": nob.kl_unigram_token,
        "perplexity": exp_loss(full.cross_entropy), "perplexity_no_bias": exp_loss(nob.cross_entropy),
        "logprob_vs_frequency": fig4, "prediction_vs_frequency": fig1,
        "frequency_jsonl": frequency,
    }
    atomic_write_json(stage / "analysis.json", result)
    title = f"{run_dir.name} ({', '.join(run.config.init)} init)"
    _plot_bias(bias[seen], log_u, result, title, stage / "bias_vs_frequency.png")
    _plot_binned(fig4, "log unigram probability of the target (training)",
                 "mean ln p(target), per word type", title + f", {split}",
                 stage / "logprob_vs_frequency.png")
    _plot_binned(fig1, "log unigram probability (training)",
                 "log of mean predicted probability", title + f", {split}",
                 stage / "prediction_vs_frequency.png", diagonal=True)
    if result["frequency_jsonl"]:
        plot_frequency_curves({run_dir.name: result["frequency_jsonl"]}, stage / "frequency_curves.png")
    return result


SUMMARY_KEYS = ["bias_spearman", "bias_pearson", "bias_norm", "bias_kl_unigram", "kl_unigram_avg",
                "kl_unigram_avg_no_bias", "kl_uniform_avg", "kl_uniform_avg_no_bias",
                "perplexity", "perplexity_no_bias"]


def analysis_summary(r: dict) -> dict:
    """The numbers `lmlow analyze --json` prints (the curves stay in analysis.json)."""
    return {k: r[k] for k in ["run", "split", "tokens", *SUMMARY_KEYS]}


def analysis_text(r: dict, out: Path) -> str:
    """What `lmlow analyze` prints: KL and perplexity with and without the bias, the bias's
    correlation with log unigram, where the files went."""
    from lmlow.tables import markdown

    table = markdown(["", "with bias", "bias dropped"], [
        ["KL(unigram || mean prediction)", r["kl_unigram_avg"], r["kl_unigram_avg_no_bias"]],
        ["KL(uniform || mean prediction)", r["kl_uniform_avg"], r["kl_uniform_avg_no_bias"]],
        ["perplexity", r["perplexity"], r["perplexity_no_bias"]]], digits=4)
    return (f"{r['run']} ({', '.join(r['init'])} init) on {r['split']}, {r['tokens']} tokens:\n"
            f"{table}\nbias vs log unigram: Spearman {r['bias_spearman']:.3f}, Pearson "
            f"{r['bias_pearson']:.3f}; ||b|| {r['bias_norm']:.2f}; KL(unigram || softmax(b)) "
            f"{r['bias_kl_unigram']:.3f}\nwrote {out}/analysis.json and plots")


def _plot_bias(bias, log_u, r, title, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    ax.scatter(log_u, bias, s=3, alpha=0.3, lw=0)
    ax.set_xlabel("log unigram probability (training)")
    ax.set_ylabel("output bias b")
    ax.set_title(f"{title}\nSpearman {r['bias_spearman']:.3f}, Pearson {r['bias_pearson']:.3f}",
                 fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_binned(series: dict, xlabel: str, ylabel: str, title: str, path: Path,
                 diagonal: bool = False) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    labels = {"full": "all parameters", "no_bias": "bias dropped (W h only)"}
    for name, rows in series.items():
        ax.plot([r["x"] for r in rows], [r["y"] for r in rows], "o-", ms=3, label=labels[name])
    if diagonal:
        xs = [r["x"] for rows in series.values() for r in rows]
        ax.plot([min(xs), max(xs)], [min(xs), max(xs)], "k--", lw=0.8, label="unigram")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_frequency_curves(runs: dict[str, list[dict]], path: Path) -> None:
    """Meister Fig. 1 (divergence from unigram and uniform, cross-entropy) and Figs. 13-14
    (bias KL from unigram, bias norm) against updates on a log axis, one colour per run."""
    plt = pyplot()
    panels = [("kl_unigram_token", "KL(unigram || p), per token"),
              ("kl_uniform_token", "KL(uniform || p), per token"),
              ("cross_entropy", "cross-entropy (nats)"),
              ("kl_unigram_avg", "KL(unigram || mean p)"),
              ("bias_kl_unigram", "KL(unigram || softmax(b))"),
              ("bias_norm", "||b||_2")]
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5))
    for (key, label), ax in zip(panels, axes.flat):
        for i, (name, rows) in enumerate(runs.items()):
            pts = sorted({r["step"]: r for r in rows}.values(), key=lambda r: r["step"])
            ys = [np.nan if r.get(key) is None else r[key] for r in pts]
            ax.plot([r["step"] + 1 for r in pts], ys, "o-", ms=3,
                    color=f"C{i}", label=name)
        ax.set_xscale("log")
        ax.set_xlabel("update + 1 (log scale)")
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- lmlow compare

COMPARE_COLUMNS = ["run", "init", "updates", "minutes", "ALC@N", "ALC (all updates)",
                   "ALC (wall time)", "final valid ppl", "best valid ppl"]


def learning_curve(run_dir: Path) -> list[dict]:
    """The validation evaluations of metrics.jsonl in update order (the last row of a step)."""
    run = RunDir(run_dir).require()
    if run.kind == NGRAM:
        raise LmlowError(f"{run.path}: an n-gram run has no learning curve (compare LSTM or "
                         "Transformer runs)")
    rows = run.learning_curve()
    if not rows:
        raise LmlowError(f"{run.metrics_file}: no validation evaluations (train the run first)")
    return rows


def compare(run_dirs: list[Path], **options) -> list[dict]:
    """One row per run: ALC of the validation ``metric`` (loss in nats, or ppl) over the first
    ``steps`` updates, over all updates and over wall time, and final and best perplexity
    (``options``: :class:`CompareOptions`)."""
    opts = CompareOptions(**options)
    check_values(opts)
    steps, metric = opts.steps, opts.metric
    if not run_dirs:
        raise LmlowError("give at least one run folder")
    key = "valid_loss" if metric == "loss" else "valid_ppl"
    labels = run_labels(run_dirs)
    note_if_not_comparable(run_dirs)
    rows = []
    for run, label in zip(map(Path, run_dirs), labels):
        curve = learning_curve(run)
        cfg = read_config(run)
        ys = [r[key] for r in curve]
        step_x = [r["step"] for r in curve]
        timed = [r for r in curve if "elapsed" in r]
        rows.append({
            "run": str(run), "label": label, "init": ",".join(cfg.get("init", ["?"])),
            "updates": step_x[-1], "minutes": (timed[-1]["elapsed"] / 60) if timed else None,
            # over updates 0..N, as the flag says: a curve that starts later (a run that did
            # not validate its untrained model) has none, not an ALC over another interval
            "ALC@N": _number(alc(step_x, ys, steps)) if steps and step_x[0] == 0 else None,
            "ALC (all updates)": alc(step_x, ys),
            "ALC (wall time)": alc([r["elapsed"] for r in timed], [r[key] for r in timed])
            if len(timed) > 1 else None,
            "final valid ppl": curve[-1]["valid_ppl"],
            # the best a checkpoint holds: update 0's validation (--track-frequency) is the
            # untrained model, which no best.pt keeps
            "best valid ppl": min((r["valid_ppl"] for r in curve if r["step"] > 0), default=None),
            "first update": step_x[0], "metric": metric, "steps": steps,
            "curve": [{"step": r["step"], "elapsed": r.get("elapsed"), "valid_loss": r["valid_loss"],
                       "valid_ppl": r["valid_ppl"]} for r in curve],
        })
    note_intervals(rows, steps)
    return rows


def _number(x: float) -> float | None:
    """None for NaN (an ALC over updates the run never reached): an empty cell in the tables
    and null in JSON, as the flag's help says."""
    return None if math.isnan(x) else x


def note_intervals(rows: list[dict], steps: int | None) -> None:
    """Say (stderr) when the runs' curves start at different updates, so their ALCs over all
    updates cover different intervals, and which runs have no ALC@N (no validation at update
    0, which ``--track-frequency`` adds)."""
    import sys

    if len({r["first update"] for r in rows}) > 1:
        print("lmlow: note: the runs' curves start at different updates (first update: "
              + ", ".join(f"{r['label']} {r['first update']}" for r in rows)
              + "); their ALCs over all updates cover different intervals", file=sys.stderr)
    late = [r["label"] for r in rows if steps and r["first update"] != 0]
    if late:
        print(f"lmlow: note: no ALC@{steps} for {', '.join(late)}: the ALC over updates 0..N "
              "needs a validation of the untrained model (train with --track-frequency)",
              file=sys.stderr)


def run_labels(run_dirs: list[Path]) -> list[str]:
    """Each run's name in plots: its folder's name, or as many of its last path parts as tell
    it from the others (``adam/standard.seed1`` beside ``sgd/standard.seed1``: two sweeps' runs
    of one configuration had one label, and the frequency plot kept one of them). The same run
    given twice is refused."""
    parts = [Path(p).resolve().parts for p in run_dirs]
    seen: dict[tuple, Path] = {}
    for p, given in zip(parts, run_dirs):
        if p in seen:
            raise LmlowError(f"{given}: given twice (as {seen[p]})")
        seen[p] = given
    for k in range(1, max(map(len, parts), default=0) + 1):
        labels = ["/".join(p[-k:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    return [str(p) for p in run_dirs]


def read_config(run_dir: Path) -> dict:
    try:
        return read_json(RunDir(run_dir).config)
    except LmlowError:
        return {}


def measured_over(run: Path) -> tuple[str, str] | None:
    """What a run's validation perplexities are over: the validation text (its sha256 in
    ``data.json``) and the vocabulary (:meth:`RunDir.vocabulary_digest`); None if either is
    missing or not what lmlow writes (a note is not worth a refusal)."""
    folder = RunDir(run)
    if not folder.data_file.is_file():
        return None
    try:
        valid = folder.recorded_fingerprint().get("valid", {}).get("sha256")
        words = folder.vocabulary_digest()
    except LmlowError:
        return None
    return None if valid is None or words is None else (valid, words)


def note_if_not_comparable(run_dirs) -> None:
    """Say (stderr) when the runs were validated on different text or over different
    vocabularies (another corpus, K or vector vocabulary): their perplexities and ALCs then
    measure different things, and a table of them invites a wrong comparison."""
    import sys

    seen = {m for m in map(measured_over, run_dirs) if m is not None}
    if len(seen) > 1:
        print("lmlow: note: these runs were validated on different text or over different "
              "vocabularies; their perplexities and ALCs are not comparable", file=sys.stderr)


def compare_table(rows: list[dict]) -> tuple[list[str], list[list]]:
    """Headers and cells of the comparison (no ALC@N column without ``steps``)."""
    steps = rows[0]["steps"] if rows else None
    cols = [c for c in COMPARE_COLUMNS if steps or c != "ALC@N"]
    headers = [f"ALC@{steps}" if c == "ALC@N" else c for c in cols]
    return headers, [["" if r[c] is None else r[c] for c in cols] for r in rows]


def compare_markdown(rows: list[dict]) -> str:
    from lmlow.tables import markdown

    what = "cross-entropy (nats)" if rows and rows[0]["metric"] == "loss" else "perplexity"
    untimed = [r["label"] for r in rows if r["ALC (wall time)"] is None]
    blank = (f"; no ALC (wall time) for {', '.join(untimed)}: a curve over time needs two "
             "timed validations, and it has one" if untimed else "")
    return (f"ALC: mean validation {what} over the interval (lower is better){blank}\n\n"
            + markdown(*compare_table(rows), digits=4))


COMPARE_FILES = ["compare.md", "compare.csv", "compare.json", "curves.png", "frequency_curves.png"]


def check_compare_out(out: Path, force: bool = False) -> None:
    """`compare --out`'s refusals before the runs are read and their notes said."""
    from lmlow.files import check_outputs
    refuse_foreign_output(out, "compare")
    check_outputs(out, COMPARE_FILES, force)


def write_compare(rows: list[dict], out: Path, force: bool = False) -> list[Path]:
    """OUT/compare.md, .csv, .json, curves.png, and frequency_curves.png when runs have
    frequency.jsonl; all or none of them, nothing overwritten without ``force``."""
    from lmlow.tables import to_csv

    out = Path(out)
    refuse_foreign_output(out, "compare")
    tracked = {r["label"]: RunDir(r["run"]).frequency() for r in rows}
    tracked = {k: v for k, v in tracked.items() if v}
    names = COMPARE_FILES[:-1] + (COMPARE_FILES[-1:] if tracked else [])
    with staged_outputs(out, names, force, optional=COMPARE_FILES[-1:]) as stage:
        atomic_write_text(stage / names[0], compare_markdown(rows) + "\n")
        atomic_write_text(stage / names[1], to_csv(*compare_table(rows)))
        atomic_write_json(stage / names[2], rows)
        plot_compare(rows, stage / names[3])
        if tracked:
            plot_frequency_curves(tracked, stage / names[4])
    return [out / n for n in names]


def plot_compare(rows: list[dict], path: Path) -> None:
    steps = rows[0]["steps"] if rows else None
    series = [{"label": f"{r['label']} ({r['init']})", "rows": r["curve"], "group": i}
              for i, r in enumerate(rows)]
    plot_validation_curves(series, path, x=("step", "elapsed"), mark_step=steps)


__all__ = ["AnalyzeOptions", "CompareOptions", "analyze", "compare", "compare_markdown", "compare_table", "learning_curve",
           "plot_frequency_curves", "write_compare"]
