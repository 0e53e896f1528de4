"""Pure statistics of the frequency analyses (no model, no files): distributions and
divergences, correlations, the area under a learning curve, text diversity.

Conventions. "Unigram" is the training split's relative frequency after the UNK rule (a word
with count 0 has probability 0, and its terms drop out of KL(unigram || q)).
KL(p || q) = sum_w p(w) ln(p(w)/q(w)), in nats.
"""
from __future__ import annotations

import math

import numpy as np

from lmlow.errors import LmlowError


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


def binned_means(x: np.ndarray, y: np.ndarray, bins: int, weights=None) -> list[dict]:
    """Split the range of x into ``bins`` equal intervals; mean of y (weighted) in each
    (none for an empty x)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if not len(x):
        return []
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
