"""The output bias as a unigram expert: frequency analyses of AWD-LSTM runs.

Meister et al. (2023) initialise the bias b of the output layer, softmax(W h + b), with the
log-unigram distribution and measure learning efficiency (area under the learning curve, ALC)
and how frequency is split between b and the contextual logits W h; Kobayashi et al. (2023)
show that b carries word frequency and that scaling it (W h + lambda b) trades frequency for
diversity. This module has the metrics and the three things built on them:

- :class:`FrequencyTracker`: during training (``--track-frequency``), at updates 0, 1, 2, 4,
  8, ... and at every epoch end, the statistics of Meister et al.'s Fig. 1 and Figs. 13-14 on
  a fixed validation sample, appended to ``RUN_DIR/frequency.jsonl``;
- :func:`analyze` (``lmlow analyze``): bias vs log-unigram correlations (Kobayashi Table 3),
  KL(unigram || average prediction) with and without the bias (Kobayashi Table 1), log-prob
  of the ground truth vs its frequency with and without the bias (Meister Fig. 4), plots;
- :func:`compare` (``lmlow compare``): ALC of the validation curves of several runs.

Conventions. "Unigram" is the training split's relative frequency after the UNK rule
(``vocab.count_array()`` normalised; a word with count 0 has probability 0, and its terms drop
out of KL(unigram || q)). KL(p || q) = sum_w p(w) ln(p(w)/q(w)), in nats. The model's "average
predicted distribution" on a text is the mean over its tokens of p(. | context) (Kobayashi's
"word prediction distribution"); Meister's Fig. 1 instead averages the per-token divergence
KL(r || p(. | context)) over tokens; both are recorded.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lmlow.errors import LmlowError

FREQUENCY_FILE = "frequency.jsonl"
SAMPLE_TOKENS = 4000          # validation tokens the training-time tracker scores


# --------------------------------------------------------------------------- metrics

def unigram_distribution(counts) -> np.ndarray:
    """Relative frequencies (float64); zero counts stay 0."""
    c = np.asarray(counts, dtype=np.float64)
    if c.sum() <= 0:
        raise LmlowError("no training counts: the unigram distribution is undefined")
    return c / c.sum()


def kl_divergence(p, q) -> float:
    """KL(p || q) = sum p ln(p/q) in nats; terms with p = 0 are 0; inf where q = 0 < p."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    m = p > 0
    with np.errstate(divide="ignore"):
        return float(np.sum(p[m] * (np.log(p[m]) - np.log(q[m]))))


def softmax(x) -> np.ndarray:
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their average rank (as Spearman's rho needs)."""
    order = np.argsort(x, kind="mergesort")
    sx = x[order]
    ranks = np.empty(len(x), np.float64)
    starts = np.flatnonzero(np.concatenate([[True], sx[1:] != sx[:-1]]))
    ends = np.concatenate([starts[1:], [len(x)]])
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + 1 + e) / 2
    return ranks


def pearson(x, y) -> float:
    """Pearson's correlation; NaN when either sequence is constant."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError("pearson needs two sequences of the same length >= 2")
    x, y = x - x.mean(), y - y.mean()
    denom = math.sqrt(float((x * x).sum() * (y * y).sum()))
    return float((x * y).sum() / denom) if denom > 0 else float("nan")


def spearman(x, y) -> float:
    """Spearman's rank correlation (scipy's when installed; the same number without it);
    NaN when either sequence is constant (a zero-initialised bias at step 0)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError("spearman needs two sequences of the same length >= 2")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    try:
        from scipy.stats import spearmanr
    except ImportError:
        return pearson(_ranks(x), _ranks(y))
    return float(spearmanr(x, y).statistic)


def alc(xs, ys, end: float | None = None) -> float:
    """Area under the curve (xs, ys) by the trapezoidal rule from xs[0] to ``end`` (default
    the last x), divided by the interval's length: the curve's mean value, Meister et al.'s
    ALC. The curve is interpolated linearly at ``end``; NaN if it stops before ``end``."""
    xs, ys = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    if len(xs) == 0 or len(xs) != len(ys):
        raise ValueError("alc needs equally long, non-empty xs and ys")
    if np.any(np.diff(xs) < 0):
        raise ValueError("alc needs increasing xs")
    end = xs[-1] if end is None else float(end)
    if len(xs) == 1:
        return float(ys[0]) if end == xs[0] else float("nan")
    if not xs[0] < end <= xs[-1]:
        return float("nan")
    keep = xs < end
    px = np.concatenate([xs[keep], [end]])
    py = np.concatenate([ys[keep], [np.interp(end, xs, ys)]])
    area = float(np.sum((px[1:] - px[:-1]) * (py[1:] + py[:-1]) / 2))
    return area / (end - xs[0])


def ngrams(tokens: list, n: int) -> list[tuple]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def distinct_n(samples: list[list], n: int) -> float:
    """Distinct-n (Li et al. 2016): unique n-grams / all n-grams, counted within each sample
    and pooled over the samples; NaN when there is no n-gram."""
    grams = [g for s in samples for g in ngrams(list(s), n)]
    return len(set(grams)) / len(grams) if grams else float("nan")


def ngram_diversity(samples: list[list], orders=(2, 3, 4)) -> float:
    """N-gram diversity as Kobayashi et al. define it: the product over n of Distinct-n."""
    return float(np.prod([distinct_n(samples, n) for n in orders]))


# --------------------------------------------------------------------------- model statistics

@dataclass
class ScaleStats:
    """What one pass over a text gives for one bias scale lambda."""
    bias_scale: float
    logprobs: np.ndarray           # ln p(target | context) per token
    mean_distribution: np.ndarray  # mean over tokens of p(. | context)
    kl_unigram_token: float        # mean over tokens of KL(unigram || p(. | context))
    kl_uniform_token: float        # mean over tokens of KL(uniform || p(. | context))

    @property
    def cross_entropy(self) -> float:
        return -float(np.mean(self.logprobs))


def distribution_stats(model, ids, eos_id: int, unigram: np.ndarray, scales=(1.0,),
                       batch_size: int = 10, bptt: int = 70, device=None) -> dict[float, ScaleStats]:
    """Score ``ids`` once through the LSTM and, for each bias scale lambda, the softmax of
    W h + lambda b over the whole vocabulary: per-token log-probability of the target, the
    average predicted distribution and the per-token divergences from unigram and uniform.
    Leaves the model in eval mode."""
    import torch

    from lmlow.evaluate import lstm_outputs

    n, v = len(ids), len(unigram)
    u = torch.as_tensor(unigram, dtype=torch.float64)
    neg_entropy = float((u[u > 0] * u[u > 0].log()).sum())
    uf = u.float().to(device or next(model.parameters()).device)
    acc = {s: {"lp": np.full(n, np.nan), "mean": torch.zeros(v, dtype=torch.float64),
               "klu": 0.0, "klf": 0.0} for s in scales}
    with torch.no_grad():
        bias = model.decoder.bias.float()
        for output, y, pos in lstm_outputs(model, ids, eos_id, batch_size, bptt, device=device):
            wh = torch.nn.functional.linear(output, model.decoder.weight).float()
            for s in scales:
                logp = torch.log_softmax(wh + s * bias, dim=-1)
                a = acc[s]
                a["lp"][pos] = logp.gather(-1, y.unsqueeze(-1)).squeeze(-1).cpu().numpy()
                a["mean"] += logp.exp().sum(0, dtype=torch.float64).cpu()
                cross = (logp @ uf).double().sum()       # sum over tokens of u . ln p
                a["klu"] += neg_entropy * len(y) - float(cross)
                a["klf"] += -math.log(v) * len(y) - float(logp.mean(-1).double().sum())
    return {s: ScaleStats(s, a["lp"], (a["mean"] / n).numpy(), a["klu"] / n, a["klf"] / n)
            for s, a in acc.items()}


def bias_stats(bias: np.ndarray, unigram: np.ndarray) -> dict:
    """The bias's L2 norm, KL(unigram || softmax(b)) (Meister Figs. 13-14), and its Spearman
    and Pearson correlation with the log-unigram distribution over words seen in training."""
    bias = np.asarray(bias, np.float64)
    seen = unigram > 0
    return {"bias_norm": float(np.linalg.norm(bias)),
            "bias_kl_unigram": kl_divergence(unigram, softmax(bias)),
            "bias_spearman": spearman(bias[seen], np.log(unigram[seen])),
            "bias_pearson": pearson(bias[seen], np.log(unigram[seen]))}


def frequency_record(model, ids, eos_id: int, unigram: np.ndarray, batch_size: int = 10,
                     bptt: int = 70, device=None) -> dict:
    """One row of frequency.jsonl: Meister Fig. 1 and Figs. 13-14 on the text ``ids``."""
    st = distribution_stats(model, ids, eos_id, unigram, (1.0,), batch_size, bptt, device)[1.0]
    uniform = np.full(len(unigram), 1 / len(unigram))
    return {"tokens": len(ids), "cross_entropy": st.cross_entropy,
            "kl_unigram_token": st.kl_unigram_token, "kl_uniform_token": st.kl_uniform_token,
            "kl_unigram_avg": kl_divergence(unigram, st.mean_distribution),
            "kl_uniform_avg": kl_divergence(uniform, st.mean_distribution),
            **bias_stats(model.decoder.bias.detach().cpu().numpy(), unigram)}


class FrequencyTracker:
    """Appends :func:`frequency_record` rows to RUN_DIR/frequency.jsonl at updates 0, 1, 2, 4,
    8, ... (:meth:`at_step`) and whenever asked (:meth:`record`, at epoch ends).

    It scores the first ``tokens`` validation tokens in eval mode without gradients and puts
    the model back in training mode; it draws no random numbers, so a tracked run trains
    exactly as an untracked one. (Under NT-ASGD it sees the raw weights, not the averages.)"""

    def __init__(self, model, valid_ids, counts, eos_id: int, run_dir: Path, batch_size: int = 10,
                 bptt: int = 70, device=None, tokens: int = SAMPLE_TOKENS, fresh: bool = True):
        self.model, self.eos_id, self.device = model, eos_id, device
        self.ids = np.asarray(valid_ids[:tokens], dtype=np.int64)
        self.unigram = unigram_distribution(counts)
        self.batch_size, self.bptt = batch_size, bptt
        self.path = Path(run_dir) / FREQUENCY_FILE
        if fresh:                       # a new run (or --force) starts a new file
            self.path.unlink(missing_ok=True)
        self.done = {r["step"] for r in read_jsonl(self.path)}  # a resumed run's rows

    @staticmethod
    def due(step: int) -> bool:
        return step == 0 or (step & (step - 1)) == 0

    def at_step(self, step: int, epoch: float, elapsed: float) -> None:
        if self.due(step):
            self.record(step, epoch, elapsed, "step")

    def record(self, step: int, epoch: float, elapsed: float, event: str = "epoch") -> None:
        if step in self.done:           # one row per update count
            return
        training = self.model.training
        try:
            row = frequency_record(self.model, self.ids, self.eos_id, self.unigram,
                                   self.batch_size, self.bptt, self.device)
        finally:
            self.model.train(training)
        row = {"step": step, "epoch": round(epoch, 4), "elapsed": round(elapsed, 1),
               "event": event, **row}
        with open(self.path, "a") as f:
            f.write(to_json(row) + "\n")
        self.done.add(step)


def to_json(obj, **kw) -> str:
    """JSON with NaN and infinities written as null (strict JSON readers refuse NaN)."""
    def clean(x):
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        if isinstance(x, np.generic):
            return clean(x.item())
        return x
    return json.dumps(clean(obj), **kw)


def read_jsonl(path: Path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                raise LmlowError(f"{path}:{i}: not a JSON line") from None
    return rows


# --------------------------------------------------------------------------- lmlow analyze

def binned_means(x: np.ndarray, y: np.ndarray, bins: int, weights=None) -> list[dict]:
    """Split the range of x into ``bins`` equal intervals; mean of y (weighted) in each."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    edges = np.linspace(x.min(), x.max(), bins + 1)
    which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
    w = np.ones_like(y) if weights is None else np.asarray(weights, np.float64)
    out = []
    for k in range(bins):
        m = which == k
        if m.any():
            out.append({"lo": float(edges[k]), "hi": float(edges[k + 1]), "x": float(x[m].mean()),
                        "y": float(np.average(y[m], weights=w[m])), "n": int(m.sum())})
    return out


def analyze(run_dir: Path, split: str = "valid", out: Path | None = None, tokens: int = 0,
            bins: int = 20, corpus: Path | None = None, checkpoint: str = "best",
            device: str = "auto", force: bool = False, quiet: bool = True) -> dict:
    """Frequency analyses of an LSTM run's ``checkpoint`` on ``split`` (its first ``tokens``
    tokens, 0 = all): writes OUT/analysis.json and PNG plots (OUT defaults to RUN_DIR/analysis)
    and returns the JSON's content."""
    from lmlow.errors import refuse_overwrite
    from lmlow.runs import LSTMRun

    run_dir = Path(run_dir)
    if not (run_dir / f"{checkpoint}.pt").exists():
        raise LmlowError(f"{run_dir}: not an LSTM run folder (no {checkpoint}.pt)")
    out = Path(out) if out else run_dir / "analysis"
    names = ["analysis.json", "bias_vs_frequency.png", "logprob_vs_frequency.png",
             "prediction_vs_frequency.png"]
    if (run_dir / FREQUENCY_FILE).exists():
        names.append("frequency_curves.png")
    refuse_overwrite([out / n for n in names], force)
    if tokens < 0 or bins < 1:
        raise LmlowError("--tokens must be >= 0 and --bins >= 1")
    run = LSTMRun(run_dir, checkpoint, device)
    counts = run.vocab.count_array()
    unigram = unigram_distribution(counts)
    ids = run.corpus(corpus).encode(split).ids
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
        "perplexity": math.exp(full.cross_entropy), "perplexity_no_bias": math.exp(nob.cross_entropy),
        "logprob_vs_frequency": fig4, "prediction_vs_frequency": fig1,
        "frequency_jsonl": read_jsonl(run_dir / FREQUENCY_FILE),
    }
    out.mkdir(parents=True, exist_ok=True)
    from lmlow.data.textio import atomic_write_text
    atomic_write_text(out / "analysis.json", to_json(result, indent=1) + "\n")
    title = f"{run_dir.name} ({', '.join(run.config.init)} init)"
    _plot_bias(bias[seen], log_u, result, title, out / "bias_vs_frequency.png")
    _plot_binned(fig4, "log unigram probability of the target (training)",
                 "mean ln p(target), per word type", title + f", {split}",
                 out / "logprob_vs_frequency.png")
    _plot_binned(fig1, "log unigram probability (training)",
                 "log of mean predicted probability", title + f", {split}",
                 out / "prediction_vs_frequency.png", diagonal=True)
    if result["frequency_jsonl"]:
        plot_frequency_curves({run_dir.name: result["frequency_jsonl"]}, out / "frequency_curves.png")
    return result


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _plot_bias(bias, log_u, r, title, path: Path) -> None:
    plt = _pyplot()
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
    plt = _pyplot()
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
    plt = _pyplot()
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
    path = Path(run_dir) / "metrics.jsonl"
    if not Path(run_dir).is_dir():
        raise LmlowError(f"{run_dir}: no such run folder")
    rows = [r for r in read_jsonl(path) if "valid_loss" in r and "step" in r]
    if not rows:
        raise LmlowError(f"{path}: no validation evaluations (train the run first)")
    by_step = {r["step"]: r for r in rows}
    return [by_step[s] for s in sorted(by_step)]


def compare(run_dirs: list[Path], steps: int | None = None, metric: str = "loss") -> list[dict]:
    """One row per run: ALC of the validation ``metric`` (loss in nats, or ppl) over the first
    ``steps`` updates, over all updates and over wall time, and final and best perplexity."""
    if metric not in ("loss", "ppl"):
        raise LmlowError("--metric: choose loss or ppl")
    if steps is not None and steps <= 0:
        raise LmlowError("--steps must be positive")
    if not run_dirs:
        raise LmlowError("give at least one run folder")
    key = "valid_loss" if metric == "loss" else "valid_ppl"
    rows = []
    for run in map(Path, run_dirs):
        curve = learning_curve(run)
        cfg = read_config(run)
        ys = [r[key] for r in curve]
        step_x = [r["step"] for r in curve]
        timed = [r for r in curve if "elapsed" in r]
        rows.append({
            "run": str(run), "init": ",".join(cfg.get("init", ["?"])),
            "updates": step_x[-1], "minutes": (timed[-1]["elapsed"] / 60) if timed else None,
            "ALC@N": alc(step_x, ys, steps) if steps else None,
            "ALC (all updates)": alc(step_x, ys),
            "ALC (wall time)": alc([r["elapsed"] for r in timed], [r[key] for r in timed])
            if len(timed) > 1 else None,
            "final valid ppl": curve[-1]["valid_ppl"],
            "best valid ppl": min(r["valid_ppl"] for r in curve),
            "first update": step_x[0], "metric": metric, "steps": steps,
            "curve": [{"step": r["step"], "elapsed": r.get("elapsed"), "valid_loss": r["valid_loss"],
                       "valid_ppl": r["valid_ppl"]} for r in curve],
        })
    return rows


def read_config(run_dir: Path) -> dict:
    path = Path(run_dir) / "config.json"
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def compare_table(rows: list[dict], steps: int | None) -> tuple[list[str], list[list]]:
    """Headers and cells of the comparison (no ALC@N column without ``steps``)."""
    cols = [c for c in COMPARE_COLUMNS if steps or c != "ALC@N"]
    headers = [f"ALC@{steps}" if c == "ALC@N" else c for c in cols]
    return headers, [["" if r[c] is None else r[c] for c in cols] for r in rows]


def compare_markdown(rows: list[dict], steps: int | None, metric: str = "loss") -> str:
    from lmlow.tables import markdown

    what = "cross-entropy (nats)" if metric == "loss" else "perplexity"
    return (f"ALC: mean validation {what} over the interval (lower is better)\n\n"
            + markdown(*compare_table(rows, steps), digits=4))


def write_compare(rows: list[dict], out: Path, steps: int | None, metric: str = "loss",
                  force: bool = False) -> list[Path]:
    """OUT/compare.md, .csv, .json, curves.png, and frequency_curves.png when runs have
    frequency.jsonl; nothing is overwritten without ``force``."""
    from lmlow.data.textio import atomic_write_text
    from lmlow.errors import refuse_overwrite
    from lmlow.tables import to_csv

    out = Path(out)
    tracked = {Path(r["run"]).name: read_jsonl(Path(r["run"]) / FREQUENCY_FILE) for r in rows}
    tracked = {k: v for k, v in tracked.items() if v}
    paths = [out / n for n in ("compare.md", "compare.csv", "compare.json", "curves.png")]
    if tracked:
        paths.append(out / "frequency_curves.png")
    refuse_overwrite(paths, force)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(paths[0], compare_markdown(rows, steps, metric) + "\n")
    atomic_write_text(paths[1], to_csv(*compare_table(rows, steps)))
    atomic_write_text(paths[2], to_json(rows, indent=1) + "\n")
    plot_compare(rows, paths[3], steps)
    if tracked:
        plot_frequency_curves(tracked, paths[4])
    return paths


def plot_compare(rows: list[dict], path: Path, steps: int | None = None) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, r in enumerate(rows):
        label = f"{Path(r['run']).name} ({r['init']})"
        c = r["curve"]
        axes[0].plot([p["step"] for p in c], [p["valid_ppl"] for p in c], "o-", ms=3,
                     color=f"C{i}", label=label)
        timed = [p for p in c if p["elapsed"] is not None]
        axes[1].plot([p["elapsed"] / 60 for p in timed], [p["valid_ppl"] for p in timed], "o-",
                     ms=3, color=f"C{i}", label=label)
    if steps:
        axes[0].axvline(steps, color="gray", ls=":", lw=1)
    for ax, xl in zip(axes, ("updates", "training minutes")):
        ax.set_xlabel(xl)
        ax.set_ylabel("validation perplexity")
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = ["FrequencyTracker", "alc", "analyze", "bias_stats", "compare", "distinct_n",
           "distribution_stats", "frequency_record", "kl_divergence", "ngram_diversity",
           "pearson", "spearman", "unigram_distribution", "write_compare"]
