#!/usr/bin/env python3
"""The papers' claims, checked against the committed converged experiments.

Reads the ``results.json`` files that ``lmlow report`` wrote for the sweeps of
``experiments/six``, ``experiments/unk``, ``experiments/table1-converged``,
``experiments/sotu`` and ``experiments/pretrain-size`` (and the run folders they list, for learning curves), and prints Markdown:
per claim of Kummerfeld et al. (2020) and Meister et al. (2023), the paired comparison over
seeds and a verdict: **holds**, **does not hold**, **no clear difference** or **not tested**
(its table is not committed yet). Run from the repo root:

    python experiments/claims.py             # print the claims
    python experiments/claims.py --update    # rewrite the generated sections of the READMEs

Paired comparison: the same seed gives two configurations the same data order, so the
difference is taken per seed (worse minus better, in validation perplexity). A claim holds
when every seed's difference is positive and their mean exceeds the half-width of its 95%
t-interval (Student's t with n - 1 degrees of freedom times the standard error of the paired
differences: 12.7 of them with 2 seeds, 4.3 with 3) and 0.5% of the perplexity (with one
seed: 2% of it), does
not hold when the same is true the other way, and otherwise shows no clear difference, which
is reported as such (never counted as holding). A comparison that includes a run
which did not converge (stopped by a cap, not by early stopping) says so. Meister et al.'s
learning efficiency (ALC, the mean validation cross-entropy over the updates both runs of a
pair trained) holds for a configuration when every seed's unigram-init run has the lower ALC;
their final-perplexity claim ("equal or better") is judged as "better" by the paired rule:
"no clear difference" is the "equal" half, reported as what it is.
"""
from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
from lmlow.analysis.stats import alc  # noqa: E402  (the same ALC as `lmlow compare`)
from lmlow.config import EmbeddingRoles  # noqa: E402  (which maps apply to a configuration)
from lmlow.evaluate import pooled_perplexity  # noqa: E402  (the rare words' perplexity, as the demo's)
from lmlow.paired import FLOOR, Paired  # noqa: E402  (the paired rule of `lmlow report --paired`)
from lmlow.rundir import MAP_FLAGS, evaluation_name  # noqa: E402  (the maps' flags and file names)

START, END = "<!-- claims:start -->", "<!-- claims:end -->"
REC_START, REC_END = "<!-- recommendation:start -->", "<!-- recommendation:end -->"
SOURCES = {   # table -> the committed results it is read from
    "six": "experiments/six/sweep/results.json",
    "six+unigram": "experiments/six/sweep-unigram/results.json",
    "unk": "experiments/unk/sweep/results.json",
    "table1": "experiments/table1-converged/sweep/results.json",
    "sotu": "experiments/sotu/sweep/results.json",
    "pretrain-size": "experiments/pretrain-size/sweep/results.json",
    "table1-no-early-stop": "experiments/table1-converged/no-early-stop/results.json",
    "six-fixed-budget": "experiments/six/fixed-budget/results.json",
    "datasize": "experiments/datasize/sweep/results.json",
    # issue 24: the paper's recipe (SGD + NT-ASGD), vectors from all in-domain text, the
    # partial freeze, and the paper's regime (1M words of LM text)
    "six-sgd": "experiments/freezing/technical/sweep-sgd/results.json",
    "sotu-sgd": "experiments/freezing/sotu/sweep-sgd/results.json",
    "rows-old": "experiments/freezing/technical/rows-old/results.json",
    "sotu-rows-old": "experiments/freezing/sotu/rows-old/results.json",
    "six-allvec": "experiments/freezing/technical/sweep-allvec/results.json",
    "sotu-allvec": "experiments/freezing/sotu/sweep-allvec/results.json",
    "rows-allvec": "experiments/freezing/technical/rows-allvec/results.json",
    "sotu-rows-allvec": "experiments/freezing/sotu/rows-allvec/results.json",
    "paper-regime": "experiments/paper-regime/sweep.100d/results.json",
    # the same table trained on a CPU in bf16, session after session (experiments/queue.sh)
    "paper-regime-cpu": "experiments/paper-regime/sweep-cpu.100d/results.json",
    "transformer": "experiments/transformer/sweep/results.json",
    "transformer+unigram": "experiments/transformer/sweep-unigram/results.json",
}
# Which tables the recommendation follows, first tier first: the first tier with a committed
# table decides (the paper's regime is the table the question is about; the paper-recipe
# tables are the protocol; the Adam tables are what came before them).
TIERS = [("the paper's regime (1M words of LM text, paper recipe)", ["paper-regime"]),
         ("the paper's regime trained on a CPU (1M words of LM text, paper recipe, bf16/fp32)",
          ["paper-regime-cpu"]),
         ("the six under the paper's recipe (SGD + NT-ASGD)", ["six-sgd", "sotu-sgd"]),
         ("the six trained with Adam", ["six", "sotu"])]
TABLE_NAMES = {"six": "technical, Adam", "sotu": "State of the Union, Adam",
               "six+unigram": "technical + unigram bias, Adam", "unk": "technical, K=1,2,5, Adam",
               "pretrain-size": "technical, 8.6M-word vectors, Adam",
               "datasize": "technical, 1x-4x LM text, Adam",
               "rows-old": "technical, vector rows frozen, paper recipe",
               "sotu-rows-old": "State of the Union, vector rows frozen, paper recipe",
               "six-allvec": "technical, all-text vectors, paper recipe",
               "sotu-allvec": "State of the Union, all-text vectors, paper recipe",
               "rows-allvec": "technical, all-text vectors, vector rows frozen, paper recipe",
               "sotu-rows-allvec": "State of the Union, all-text vectors, vector rows frozen, paper recipe",
               "six-sgd": "technical, paper recipe", "sotu-sgd": "State of the Union, paper recipe",
               "paper-regime": "1M-word technical, paper recipe",
               "paper-regime-cpu": "1M-word technical, paper recipe, CPU bf16/fp32",
               "transformer": "technical, Transformer (AdamW)",
               "transformer+unigram": "technical + unigram bias, Transformer (AdamW)"}


def load(table: str, root: Path = ROOT) -> dict[str, dict]:
    """Configuration -> row of a committed results.json ({} when the table is not committed)."""
    path = root / SOURCES[table]
    if not path.exists():
        return {}
    return {r["configuration"]: r for r in json.loads(path.read_text())}


@dataclass
class Comparison:
    """``better`` is expected (by the paper) to have lower validation perplexity than ``worse``."""

    better: dict
    worse: dict

    def paired(self) -> Paired:
        """worse against better, seed by seed (lmlow.paired: the rule every verdict uses)."""
        return Paired.of_rows(self.better, self.worse)

    def by_seed(self) -> dict[int, float]:
        """Seed -> worse - better, over the seeds both have (positive: the claim's direction)."""
        p = self.paired()
        return dict(zip(p.seeds, p.diffs()))

    def diffs(self) -> list[float]:
        return self.paired().diffs()

    def paired_ppls(self) -> tuple[float, float]:
        """Each side's mean validation perplexity over the seeds both have, so that the two
        shown differ by the mean paired difference while one table has more seeds than the
        other (a partner table further on)."""
        return self.paired().means()

    def margin(self) -> float:
        """How far the mean paired difference must be from 0 (lmlow.paired: the half-width of
        the 95% t-interval of the per-seed differences, at least 0.5% of the perplexity; one
        seed 2%)."""
        return self.paired().margin()

    def verdict(self) -> str:
        """holds / does not hold when every seed's difference has one sign and their mean is
        beyond the margin; otherwise no clear difference."""
        return {1: "holds", -1: "does not hold", 0: "no clear difference",
                None: "not tested"}[self.paired().sign()]

    def converged(self) -> bool:
        return all(_all_converged(r) for r in (self.better, self.worse))

    def row(self, label: str) -> str:
        d = self.diffs()
        if not d:            # no seed with a finite perplexity on both sides (a diverged run)
            return (f"| {label} | {self.better['configuration']} | {self.worse['configuration']} "
                    f"| | | | **not tested** (no seed with both perplexities) |")
        better, worse = self.paired_ppls()
        note = "" if self.converged() else NOT_CONVERGED
        return (f"| {label} | {self.better['configuration']} {better:.1f} | "
                f"{self.worse['configuration']} {worse:.1f} | "
                f"{', '.join(f'{x:+.1f}' for x in d)} | {statistics.mean(d):+.1f} | "
                f"{self.margin():.1f} | **{self.verdict()}**{note} |")


NOT_CONVERGED = " (not all runs converged)"


def fixed_budget(lines: list[str]) -> list[str]:
    """Comparison rows of runs stopped by a fixed 30-epoch budget on purpose: not "not converged"."""
    return [l.replace(NOT_CONVERGED, " (30 epochs: a cap, by design)") for l in lines]


def _all_converged(row: dict) -> bool:
    done, _, total = str(row.get("converged", "")).partition("/")
    return bool(total) and done == total


HEADER = ("| claim | expected better (valid ppl, mean over the seeds both have) | expected worse "
          "| difference per seed | mean | margin | verdict |\n|---|---|---|---|---|---|---|")


PARTS = {"holds in part": ["holds", "no clear difference"],
         "does not hold in part": ["does not hold", "no clear difference"],
         "mixed": ["holds", "does not hold"]}


def combine(verdicts: list[str]) -> str:
    """One verdict for a claim tested by several comparisons (or by several combined verdicts:
    each "in part" or "mixed" counts as the verdicts it was made of)."""
    tested = [p for v in verdicts if v != "not tested" for p in PARTS.get(v, [v])]
    if not tested:
        return "not tested"
    if all(v == "holds" for v in tested):
        return "holds"
    if all(v == "does not hold" for v in tested):
        return "does not hold"
    if "holds" in tested and "does not hold" not in tested:
        return "holds in part"
    return "mixed" if "holds" in tested else (
        "does not hold in part" if "does not hold" in tested else "no clear difference")


# ---------------------------------------------------------------- Kummerfeld et al. 2020

PAIRS = {   # claim -> (expected better, expected worse) among the six
    "pretrained input beats random input": [("standard+pretraining", "standard")],
    "freezing the pretrained input helps": [("ours", "ours-unfrozen"),
                                            ("ours-random-output", "ours-random-output-unfrozen")],
    "with pretrained input, untied beats tied": [("ours-unfrozen", "standard+pretraining"),
                                                 ("ours", "standard+pretraining")],
}


def six_claims(six: dict, table: str, out: list[str]) -> dict[str, str]:
    verdicts = {}
    for claim, pairs in PAIRS.items():
        vs = []
        for better, worse in pairs:
            if better in six and worse in six:
                c = Comparison(six[better], six[worse])
                out.append(c.row(f"{claim} ({table})"))
                vs.append(c.verdict())
        verdicts[claim] = combine(vs) if vs else "not tested"
    lstm = {n: r for n, r in six.items() if r.get("tie")}
    verdicts["ours is the best"] = "not tested"
    if "ours" in lstm and "standard" in lstm:     # not while a table has only its pair
        verdicts["ours is the best"] = best_claim(
            lstm["ours"], [r for n, r in lstm.items() if n != "ours"],
            "ours is the best of the six", table, out)
    return verdicts


def best_claim(best: dict, rivals: list[dict], label: str, where: str, out: list[str]) -> str:
    """Whether ``best`` is clearly better than every rival, each pair tested on its own (the
    rival with the best mean is not always the one the paired rule cannot separate): holds
    when every rival is clearly worse, does not hold when any is clearly better, otherwise no
    clear difference. The row shown is the comparison that decides it: the best of the rivals
    clearly better, else the closest of those not clearly worse, else the closest rival."""
    cs = [(c, c.verdict()) for c in (Comparison(best, r) for r in rivals)]
    cs = [(c, v) for c, v in cs if v != "not tested"]
    if not cs:
        return "not tested"
    beaten = [c for c, v in cs if v == "does not hold"]
    level = [c for c, v in cs if v == "no clear difference"]
    if beaten:
        shown, verdict = min(beaten, key=lambda c: statistics.mean(c.diffs())), "does not hold"
    elif level:
        shown, verdict = min(level, key=lambda c: abs(statistics.mean(c.diffs()))), "no clear difference"
    else:
        shown, verdict = min((c for c, _ in cs), key=lambda c: statistics.mean(c.diffs())), "holds"
    where = f"{where}; " if where else ""
    out.append(shown.row(f"{label} ({where}tested against each of the {len(cs)} others, shown: "
                         "the deciding one)"))
    return verdict


def domain_agreement(first: dict[str, str], second: dict[str, str]) -> str:
    """Whether two domains' verdicts on the paper's claims (``six_claims``) are the same:
    "the same pattern" read as the same answers, whatever the paper's answers were."""
    both = _both_tested(first, second)
    same = [k for k in both if first[k] == second[k]]
    if not both:
        return "not tested"
    return "holds" if len(same) == len(both) else "holds in part" if same else "does not hold"


def _both_tested(first: dict[str, str], second: dict[str, str]) -> list[str]:
    """The claims both sets of verdicts tested."""
    return [k for k in first if first[k] != "not tested" and second.get(k, "not tested") != "not tested"]


def compared(first: dict[str, str], second: dict[str, str]) -> str:
    """How many of the first's claims :func:`domain_agreement` could compare, when not all."""
    both = _both_tested(first, second)
    return f"; {len(both)} of {len(first)} claims compared" if len(both) < len(first) else ""


def seed_only(rows: dict, seed: int) -> dict:
    """The rows as if only ``seed`` had run (rows without it are left out)."""
    out = {}
    for name, r in rows.items():
        if seed in r.get("seed list", []):
            p = r["valid ppls"][r["seed list"].index(seed)]
            out[name] = {**r, "valid ppl": p, "valid ppls": [p], "seed list": [seed]}
    return out


def rule_agreement(six: dict, fixed: dict, out: list[str]) -> str:
    """The six's claims judged on seed 1 trained to the convergence rule and on seed 1 trained
    for a fixed 30 epochs without early stopping: "holds" when every claim gets the same
    verdict both ways (the verdicts do not depend on the rule)."""
    lstm = {n: r for n, r in fixed.items() if r.get("tie")}
    if len(lstm) < len(SIX_ORDER) or not six:
        return "not tested"
    rule = six_claims(seed_only(six, 1), "technical, seed 1, convergence rule", out)
    lines: list[str] = []
    budget = six_claims(lstm, "technical, seed 1, 30 epochs without early stopping", lines)
    out += fixed_budget(lines)
    return domain_agreement(rule, budget)


def kenlm_claim(six: dict, out: list[str], where: str = "") -> str:
    kenlm = next((r for n, r in six.items() if n.startswith("KenLM")), None)
    if not kenlm or "ours" not in six:
        return "not tested"
    ours = six["ours"]
    better = all(p < kenlm["valid ppl"] for p in ours["valid ppls"])
    worse = all(p > kenlm["valid ppl"] for p in ours["valid ppls"])
    gaps = ", ".join(f"{kenlm['valid ppl'] - p:+.1f}" for p in ours["valid ppls"])
    out.append(f"| the LSTM (ours) beats a KenLM 5-gram on the same tokens{where} | ours "
               f"{ours['valid ppl']:.1f} | {kenlm['configuration']} {kenlm['valid ppl']:.1f} | "
               f"{gaps} | "
               f"{kenlm['valid ppl'] - ours['valid ppl']:+.1f} | | "
               f"**{'holds' if better else 'does not hold' if worse else 'no clear difference'}** |")
    return "holds" if better else "does not hold" if worse else "no clear difference"


def by_suffix(rows: dict, pattern: str, cast) -> dict:
    """``{"ours.K5": row}`` -> ``{5: {"ours": row}}``: a sweep's rows split by the value in the
    name's suffix (``pattern`` captures the configuration and the value)."""
    out: dict = {}
    for name, row in rows.items():
        m = re.fullmatch(pattern, name)
        if m:
            out.setdefault(cast(m.group(2)), {})[m.group(1)] = row
    return out


def gain_trend(by: dict, model: str, base: str, key: str, claim: str, table: str,
               out: list[str]) -> tuple[str, list[str]]:
    """The gain of ``model`` over ``base`` (per seed) at each value of ``key``, and whether it is
    larger at the smallest value than at the largest, by every seed's paired difference (so
    "holds" means the gain shrinks as the value grows); "in part" when the means do not fall
    step by step."""
    gains = {v: Comparison(rows[model], rows[base]) for v, rows in sorted(by.items())
             if model in rows and base in rows}
    lines = [f"| {key} | {base} | {model} | gain per seed | mean gain | gain % | converged |",
             "|---|---|---|---|---|---|---|"]
    for v, c in gains.items():
        d = c.diffs()
        lines.append(f"| {v:g} | {c.worse['valid ppl']:.1f} | {c.better['valid ppl']:.1f} | "
                     f"{', '.join(f'{x:+.1f}' for x in d)} | {statistics.mean(d):+.1f} | "
                     f"{100 * statistics.mean(d) / c.worse['valid ppl']:.1f} | "
                     f"{'yes' if c.converged() else 'no'} |")
    if len(gains) < 2:
        return "not tested", lines
    means = [statistics.mean(c.diffs()) for c in gains.values()]
    vs = list(gains)
    lo, hi = gains[vs[0]], gains[vs[-1]]
    a, b = lo.by_seed(), hi.by_seed()
    paired = [a[s] - b[s] for s in sorted(set(a) & set(b))]     # gain at smallest - largest
    margin = max(lo.margin(), hi.margin())
    monotone = all(x >= y for x, y in zip(means, means[1:]))
    if paired and all(x > margin for x in paired):
        v = "holds" if monotone else "holds in part"      # in part: not step by step
    elif paired and all(x < -margin for x in paired):
        v = "does not hold"
    else:
        v = "no clear difference"
    out.append(f"| {claim} ({table}, {key}={vs[0]:g} vs {key}={vs[-1]:g}) | gain at {key}={vs[0]:g} "
               f"{means[0]:+.1f} | gain at {key}={vs[-1]:g} {means[-1]:+.1f} | "
               f"{', '.join(f'{x:+.1f}' for x in paired)} | "
               f"{statistics.mean(paired) if paired else float('nan'):+.1f} | {margin:.1f} | "
               f"**{v}** (means {'' if monotone else 'not '}monotone in {key}) |")
    return v, lines


def unk_claim(six: dict, unk: dict, out: list[str], model: str = "ours",
              base: str = "standard") -> tuple[str, list[str]]:
    """Table 3: the gain of ``model`` over ``base`` (per seed) at each K; K=0 is the six."""
    by_k = ({0: six} if six else {}) | by_suffix(unk, r"(.+)\.K(\d+)", int)
    return gain_trend(by_k, model, base, "K", f"the gain of {model} over {base} grows as K "
                      "shrinks", "Table 3", out)


def unk_pattern_claims(unk: dict, out: list[str]) -> dict[str, str]:
    """The six's pairwise claims at each K >= 1 (Table 3's rows), one verdict per claim over K."""
    by_k = by_suffix(unk, r"(.+)\.K(\d+)", int)
    per_claim: dict[str, list[str]] = {}
    for k, rows in sorted(by_k.items()):
        if all(n in rows for n in SIX_ORDER):   # only a complete column: "ours is the best" needs all six
            for claim, v in six_claims(rows, f"technical, K={k}", out).items():
                per_claim.setdefault(claim, []).append(v)
    ks = ",".join(str(k) for k, rows in sorted(by_k.items()) if all(n in rows for n in SIX_ORDER))
    return {f"{claim} (Table 3, K={ks})": combine(vs) for claim, vs in per_claim.items()}


BIG_VECTORS = "vectors from 11x more text"


def pretrain_size_claims(six: dict, big: dict, out: list[str]) -> dict[str, str]:
    """Table 5's question asked of our freezing result: the five configurations that read
    vectors, with vectors from 11x more pretraining text but the same words (so the same
    tokens, paired seed by seed with the six); `standard` reads no vectors and is the six's."""
    claims = ["more pretraining text gives better models (Table 5)",
              f"freezing the pretrained input helps ({BIG_VECTORS})"]
    shared = [n for n in SIX_ORDER if n in big and n in six]
    if not shared:
        return {c: "not tested" for c in claims}
    vs = []
    for n in shared:
        c = Comparison({**big[n], "configuration": f"{n}, 8.6M-word vectors"},
                       {**six[n], "configuration": f"{n}, 0.78M-word vectors"})
        out.append(c.row(f"{claims[0]} ({n})"))
        vs.append(c.verdict())
    rows = {**big, **({"standard": six["standard"]} if "standard" in six else {})}
    freeze = six_claims(rows, f"technical, {BIG_VECTORS}", out)["freezing the pretrained input helps"]
    return {claims[0]: combine(vs), claims[1]: freeze}


DATA = r"(.+)\.data([0-9.]+)"      # `lmlow sweep --grid datasize` names: ours.data0.25


def datasize_columns(ds: dict) -> dict[float, dict]:
    """Training fraction -> the six (and the 5-gram) at that size, complete sizes only. The
    5-gram on the whole text has no suffix (``lmlow report`` names only fractions below 1)."""
    by = by_suffix(ds, DATA, float)
    for name, row in ds.items():
        if name.startswith("KenLM") and not re.fullmatch(DATA, name):
            by.setdefault(1.0, {})[name] = row
    return {f: rows for f, rows in sorted(by.items()) if all(n in rows for n in SIX_ORDER)}


def datasize_claims(by: dict[float, dict], out: list[str]) -> dict[str, str]:
    """Kummerfeld et al. Table 6: "as we increase the amount of data our approach and the
    variant with random output embeddings continue to do best, but the margin shrinks between
    them and the standard approach"; and the six's own claims at every size. ``by``: the
    complete sizes (:func:`datasize_columns`)."""
    claims = ["Table 6: ours and ours-random-output stay the best as LM text grows",
              "Table 6: their margin over standard shrinks as LM text grows",
              "Table 6: the LSTM beats the 5-gram at every size",
              "Table 6: the gain of pretraining alone (standard+pretraining over standard) "
              "shrinks as LM text grows"]
    if len(by) < 2:
        return {c: "not tested" for c in claims}
    sizes = ",".join(f"{f:g}" for f in by)
    best, shrink, kenlm, per_claim = [], [], [], {}
    for f, rows in by.items():
        ours = min((rows[n] for n in ("ours", "ours-random-output")), key=lambda r: r["valid ppl"])
        rivals = [r for n, r in rows.items() if n in SIX_ORDER and n not in ("ours", "ours-random-output")]
        best.append(best_claim(ours, rivals, claims[0], f"data={f:g}; the better of the two", out))
        for claim, v in six_claims({n: r for n, r in rows.items() if n in SIX_ORDER},
                                   f"technical, data={f:g}", out).items():
            if claim != "ours is the best":
                per_claim.setdefault(claim, []).append(v)
        kenlm.append(kenlm_claim(rows, out, f" (data={f:g})"))
    for model in ("ours", "ours-random-output", "standard+pretraining"):
        shrink.append(gain_trend(by, model, "standard", "data", f"the margin of {model} over "
                                 "standard shrinks as LM text grows", "Table 6", out)[0])
    return {claims[0] + f" (data={sizes})": combine(best),
            claims[1] + f" (data={sizes})": combine(shrink[:2]),
            claims[3] + f" (data={sizes})": shrink[2],
            **{f"{k} (Table 6, data={sizes})": combine(v) for k, v in per_claim.items()},
            claims[2] + f" (data={sizes})": combine(kenlm)}


def table1_group(row: dict) -> str:
    """The paper's four groups of Table 1 (its text names them; its row icons did not survive)."""
    tied = row["tie"] == "tied"
    out = row["input"] if tied else row["output"]
    if "frozen" in out:
        return "(a) frozen random output" if "random" in out else "(b) frozen pretrained output"
    if not tied and row["input"] == "random, frozen":
        return "(c) frozen random input"
    return "(d) the rest"


def _partner(name: str, old: str, new: str) -> str | None:
    """The configuration that differs from ``name`` only in one role's setting."""
    return name.replace(old, new) if old in name else None


TABLE1_PAIRS = {   # claim -> (pattern in the worse name, its replacement in the better name)
    "Table 1: pretrained input beats random input": ("in-rand", "in-pre"),
    "Table 1: freezing the pretrained input helps": ("in-pre.", "in-pre-frozen."),
}
OURS_T1 = "untied.in-pre-frozen.out-pre"


def table1_claims(t1: dict, out: list[str]) -> dict[str, str]:
    """Table 1 in the rare-word setting: the pairs that differ in one setting, the top five and
    three, ours the best, and the worst group."""
    lstm = {n: r for n, r in t1.items() if r.get("tie")}
    claims = [*TABLE1_PAIRS, "Table 1: the top five use pretrained input, the top three are untied",
              "Table 1: ours is the best of the 20",
              "Table 1: frozen random output embeddings are the worst group"]
    if len(lstm) < 20:
        return {c: "not tested" for c in claims}
    verdicts = {}
    for claim, (old, new) in TABLE1_PAIRS.items():
        vs = []
        for worse in sorted(lstm):
            better = _partner(worse, old, new)
            if better in lstm and better != worse:
                c = Comparison(lstm[better], lstm[worse])
                out.append(c.row(claim))
                vs.append(c.verdict())
        if claim.endswith("random input"):       # tied: tied.rand* vs tied.pre*
            for worse, better in (("tied.rand", "tied.pre"), ("tied.rand-frozen", "tied.pre-frozen")):
                c = Comparison(lstm[better], lstm[worse])
                out.append(c.row(claim))
                vs.append(c.verdict())
        verdicts[claim] = combine(vs)
    ranked = sorted(lstm.values(), key=lambda r: r["valid ppls"][r["seed list"].index(1)])
    top = ranked[:5]
    pretrained = sum("pretrained" in r["input"] for r in top)
    untied = sum(r["tie"] == "untied" for r in top[:3])
    met = (pretrained == 5) + (untied == 3)
    v = ("does not hold", "holds in part", "holds")[met]
    out.append(f"| Table 1: the top five use pretrained input ({pretrained} of 5 here), the top three "
               f"are untied ({untied} of 3) | {'; '.join(r['configuration'] for r in top[:3])} | | | | "
               f"| **{v}** (ranked by seed 1) |")
    verdicts[claims[2]] = v
    verdicts[claims[3]] = best_claim(lstm[OURS_T1], [r for n, r in lstm.items() if n != OURS_T1],
                                     "Table 1: ours is the best of the 20", "", out)
    verdicts[claims[4]] = worst_group(lstm, claims[4], out)
    return verdicts


def worst_group(lstm: dict, claim: str, out: list[str]) -> str:
    """Whether every row of group (a) is worse than every other row (mean valid ppl)."""
    groups = {}
    for r in lstm.values():
        groups.setdefault(table1_group(r), []).append(r["valid ppl"])
    a = groups.get("(a) frozen random output", [])
    others = [p for g, ps in groups.items() if not g.startswith("(a)") for p in ps]
    v = "holds" if a and min(a) > max(others) else "does not hold"
    out.append(f"| {claim} | (a) best {min(a):.1f} | others' worst {max(others):.1f} | | | | **{v}** |")
    return v


NO_EARLY_STOP = "untied.in-rand-frozen.out-rand"    # the row the plateau rule stopped at epoch 4


def table1_no_early_stop(t1: dict, nes: dict, out: list[str]) -> dict[str, str]:
    """The worst row of Table 1 trained again on a fixed budget (30 epochs, cosine schedule, no
    early stopping): did the plateau rule stop it before its best, and does the worst-group
    claim change when that row is given its fixed-budget perplexity?"""
    claims = ["Table 1: the convergence rule trained the worst row to its best",
              "Table 1: frozen random output embeddings are the worst group, the worst row "
              "trained 30 epochs without early stopping"]
    lstm = {n: r for n, r in t1.items() if r.get("tie")}
    if NO_EARLY_STOP not in nes or len(lstm) < 20:
        return {c: "not tested" for c in claims}
    fixed = {**nes[NO_EARLY_STOP], "configuration": f"{NO_EARLY_STOP}, 30 epochs"}
    c = Comparison(fixed, {**lstm[NO_EARLY_STOP], "configuration": f"{NO_EARLY_STOP}, plateau rule"})
    out += fixed_budget([c.row("Table 1, worst row: 30 epochs without early stopping beat the "
                               "plateau rule (so the rule stopped it early)")])
    rule_found_best = {"holds": "does not hold", "does not hold": "holds"}.get(c.verdict(),
                                                                            c.verdict())
    swapped = {**lstm, NO_EARLY_STOP: {**lstm[NO_EARLY_STOP], "valid ppl": fixed["valid ppl"]}}
    return {claims[0]: rule_found_best, claims[1]: worst_group(swapped, claims[1], out)}


# ---------------------------------------------------------------- the paper's regime (issue 24)

def paper_regime_claims(root: Path, out: list[str]) -> dict[str, str]:
    """The six's claims where the paper made them, 1M words of LM text (experiments/
    paper-regime), on each of its tables that has finished runs (on a GPU, and on a CPU in
    bf16), partial ones labelled with their seeds so far and listing only the claims their
    configurations test; and whether they give the 60k-word table's verdicts under the same
    recipe (technical, paper recipe)."""
    verdicts, protocol = {}, None
    for table in ("paper-regime", "paper-regime-cpu"):
        rows = load(table, root)
        if not rows:
            continue
        if protocol is None:          # the 60k-word table's verdicts, once for both
            protocol = six_claims(load("six-sgd", root), "", [])
        label = _table_label(table, rows, root)
        mine = six_claims(rows, label, out)
        # a table still filling in (the pair first) lists only the claims it can test yet
        verdicts |= {f"{k} ({label})": v for k, v in mine.items() if v != "not tested"}
        verdicts[f"1M words of LM text give the 60k-word table's verdicts, claim by claim "
                 f"({label}; technical, paper recipe{compared(protocol, mine)})"] = (
            domain_agreement(protocol, mine))
    return verdicts


# ---------------------------------------------------------------- the Transformer (issue 28)

def _table_label(table: str, rows: dict, root: Path) -> str:
    """The table's name, and how many seeds its configurations have while it is still being
    trained: a range when they differ (the paper regime's pair had 2 seeds while
    `standard+pretraining` had 1, and "1 seed(s)" labelled a row of two differences)."""
    if not rows or complete(table, root):
        return TABLE_NAMES[table]
    counts = {len(r["valid ppls"]) for r in rows.values() if r.get("valid ppls")}
    seeds = (f"{min(counts)} seed(s)" if len(counts) == 1
             else f"{min(counts)}-{max(counts)} seeds a configuration")
    return f"{TABLE_NAMES[table]}, partial: {seeds} so far"


def architecture_claim(tx: dict, lstm: dict, out: list[str]) -> str:
    """The Transformer against the LSTM of about its size, configuration by configuration, on
    the same tokens (pairs by seed number: the seed sets both runs' initialisation and data
    order, so the pairing is nominal across two architectures, and the margin says so by
    growing with the spread of the differences)."""
    vs = []
    for name in SIX_ORDER:
        if name in tx and name in lstm:
            c = Comparison({**tx[name], "configuration": f"Transformer {name}"},
                           {**lstm[name], "configuration": f"LSTM {name}"})
            out.append(c.row(f"the Transformer beats the LSTM of its size ({name})"))
            vs.append(c.verdict())
    return combine(vs)


def transformer_claims(root: Path, out: list[str]) -> dict[str, str]:
    """Kummerfeld et al.'s open question: do their findings hold for a Transformer? The six's
    claims on the Transformer's table, whether they agree with the LSTM's under the paper
    recipe claim by claim, the architectures against each other, and Meister et al.'s
    unigram-bias claims on the Transformer."""
    tx, lstm = load("transformer", root), load("six-sgd", root)
    label = _table_label("transformer", tx, root)
    mine = six_claims(tx, label, out)
    verdicts = {f"{k} ({label})": v for k, v in mine.items()}
    theirs = six_claims(lstm, "", [])
    verdicts["the Transformer gives the LSTM's verdicts, claim by claim (technical; the LSTM "
             f"under the paper recipe{compared(theirs, mine)})"] = (
        domain_agreement(theirs, mine) if tx and lstm else "not tested")
    verdicts["a Transformer of the LSTM's size beats it, configuration by configuration "
             "(technical)"] = architecture_claim(tx, lstm, out)
    meister = meister_claims(tx, load("transformer+unigram", root), out, root, ", Transformer")
    verdicts |= {f"Meister, Transformer: {k}": v for k, v in meister.items()}
    return verdicts


# ---------------------------------------------------------------- Meister et al. 2023

def curve(run: str, root: Path) -> tuple[list[int], list[float]]:
    rows = [json.loads(l) for l in (root / run / "metrics.jsonl").read_text().splitlines() if l]
    rows = [r for r in rows if "valid_loss" in r and not r.get("partial_epoch")]
    return [r["step"] for r in rows], [r["valid_loss"] for r in rows]


def alc_pair(zero_run: str, unigram_run: str, root: Path) -> tuple[float, float]:
    """ALC (mean validation cross-entropy, nats) of both runs over the updates both trained."""
    (zx, zy), (ux, uy) = curve(zero_run, root), curve(unigram_run, root)
    start, end = max(zx[0], ux[0]), min(zx[-1], ux[-1])
    cut = lambda xs, ys: ([x for x in xs if x >= start], [y for x, y in zip(xs, ys) if x >= start])
    return alc(*cut(zx, zy), end=end), alc(*cut(ux, uy), end=end)


def meister_claims(six: dict, uni: dict, out: list[str], root: Path, where: str = "") -> dict[str, str]:
    names = [n for n in six if n in uni and six[n].get("tie")]
    if not names:
        return {"unigram bias init learns faster (lower ALC)": "not tested",
                "unigram bias init ends at a better perplexity": "not tested"}
    faster, final = [], []
    for n in names:
        z = dict(zip(six[n]["seed list"], six[n]["runs"]))
        u = dict(zip(uni[n]["seed list"], uni[n]["runs"]))
        d = [a - b for a, b in (alc_pair(z[s], u[s], root) for s in sorted(set(z) & set(u)))]
        v = ("holds" if all(x > 0 for x in d) else "does not hold" if all(x < 0 for x in d)
             else "no clear difference")
        faster.append(v)
        out.append(f"| unigram bias learns faster: ALC (nats), zero - unigram ({n}{where}) | {n} + unigram | "
                   f"{n} | {', '.join(f'{x:+.3f}' for x in d)} | {statistics.mean(d):+.3f} | | **{v}** |")
        c = Comparison({**uni[n], "configuration": f"{n} + unigram"}, six[n])
        out.append(c.row(f"unigram bias ends at a better perplexity ({n}{where})"))
        final.append(c.verdict())
    return {"unigram bias init learns faster (lower ALC)": combine(faster),
            "unigram bias init ends at a better perplexity": combine(final)}


# ---------------------------------------------------------------- the recommendation

def _lstm_rows(rows: dict) -> dict:
    return {n: r for n, r in rows.items() if r.get("tie") and r.get("valid ppls")}


MIN_SEEDS = {"paper-regime": 2, "paper-regime-cpu": 2}      # the protocol's 3 seeds elsewhere


def complete(table: str, root: Path = ROOT) -> bool:
    """Whether every run the table's sweep planned (its sweep.json) has finished, with the
    protocol's seeds (3; 2 for the paper regime): a table still being trained seed by seed
    (its plan grows a seed at a time) does not move the recommendation."""
    folder = (root / SOURCES[table]).parent
    plan = folder / "sweep.json"
    if not (root / SOURCES[table]).exists() or not plan.exists():
        return False
    runs = json.loads(plan.read_text())
    seeds: dict[str, int] = {}
    for r in runs:
        seeds[r["name"]] = seeds.get(r["name"], 0) + 1
    need = MIN_SEEDS.get(table, 3)
    reported = {n: set(r.get("seed list", [])) for n, r in load(table, root).items()}
    return (all((folder / f"{r['name']}.seed{r['seed']}" / "summary.json").exists() for r in runs)
            # and the report has them all: a results.json older than the runs is not the table
            and all(r["seed"] in reported.get(r["name"], ()) for r in runs)
            and bool(seeds) and min(seeds.values()) >= need)


def recommendation(root: Path = ROOT) -> dict:
    """The configuration the measured tables support: from the first tier of TIERS with a
    committed table, the configurations that are not clearly worse (paired rule) than the
    best of every table of the tier; of those, the one closest to each table's best on
    average. With the freezing evidence of every table for the advice on freezing."""
    for tier, names in TIERS:
        loaded = {n: load(n, root) for n in names}
        if not all(complete(n, root) and "standard" in rows for n, rows in loaded.items()):
            continue                  # a tier counts once every table of it is complete, and
            #                           holds the baseline (not a table of the pair alone)
        tables = {n: _lstm_rows(rows) for n, rows in loaded.items()}
        tables = {n: t for n, t in tables.items() if t}
        if tables:
            break
    else:
        return {}
    shared = set.intersection(*(set(t) for t in tables.values()))
    def ratio(name: str) -> float:       # its perplexity over each table's best, on average
        return statistics.mean(t[name]["valid ppl"] / min(r["valid ppl"] for r in t.values())
                               for t in tables.values())

    ok = [(ratio(name), name) for name in sorted(shared)
          if all(Comparison(min(t.values(), key=lambda r: r["valid ppl"]), t[name]).verdict()
                 != "holds" for t in tables.values())]
    disagree = not ok     # each configuration clearly worse than some table's best
    if disagree:
        ok = [(ratio(name), name) for name in sorted(shared)]
    name = min(ok)[1]
    cfg = json.loads((root / next(iter(tables.values()))[name]["runs"][0] / "config.json").read_text())
    settings = {k: cfg[k] for k in ("tie", "freeze_input", "freeze_input_rows", "init",
                                    "extend_vocab") if k in cfg}
    level = [] if disagree else sorted(n for _, n in ok if n != name)
    def where(tn: str, t: dict) -> str:
        best = min(t.values(), key=lambda r: r["valid ppl"])
        mine = f"{TABLE_NAMES[tn]}: {t[name]['valid ppl']:.1f} valid ppl"
        return mine + (", the best" if best is t[name] else
                       f" (best: {best['configuration']} {best['valid ppl']:.1f})")
    evidence = "; ".join(where(tn, t) for tn, t in tables.items())
    if disagree:
        evidence += ("; the tables disagree (no configuration is level with the best of every "
                     "one): this is the closest to each table's best on average")
    pending = [t for t, _ in TIERS[:[t for t, _ in TIERS].index(tier)]]
    mapping = mapping_claim(root)[1]
    return {"name": name, "settings": settings, "tier": tier, "tables": list(tables),
            "pending": pending,
            "evidence": evidence, "level_with": level, "freezing": freezing_evidence(root),
            "eval_flags": eval_flags(settings, mapping), "mapping": mapping}


def freezing_tables() -> list[str]:
    """The tables freezing's evidence (its costs, the figure's points) is drawn from: the
    LSTM's, trained to the convergence rule. Not the fixed 30-epoch budgets, and not the
    Transformer's, whose freezing verdicts are its own (:func:`transformer_claims`): the
    recommendation is an LSTM's."""
    return [t for t in SOURCES if t not in ("six-fixed-budget", "table1-no-early-stop")
            and not t.startswith("transformer")]


def freezing_evidence(root: Path = ROOT) -> dict:
    """Freezing's cost (frozen minus trained input, per seed) in every committed table of
    :func:`freezing_tables` that has a frozen/trained pair, and the verdict of the coverage
    claim (None until tested)."""
    costs = []
    for table in freezing_tables():
        rows = load(table, root)
        for frozen, trained in PAIRS["freezing the pretrained input helps"]:
            for suffix in {re.sub(r"^[^.]*", "", n) for n in rows if n.startswith(frozen + ".") or n == frozen}:
                f, t = rows.get(frozen + suffix), rows.get(trained + suffix)
                if f and t and f.get("valid ppls") and t.get("valid ppls") and \
                        _all_converged(f) and _all_converged(t):   # "paired converged runs"
                    costs += [-x for x in Comparison(f, t).diffs()]
    verdict, lowest = coverage_claim(root)
    # the partial freeze (--freeze-input-rows pretrained), each against its trained twin
    partial = [p for p in freezing_points(root) if p["frozen"].endswith("-vecrows")]
    seeds = sorted({p["seed"] for p in partial})
    return {"costs": [round(min(costs), 1), round(max(costs), 1)] if costs else None,
            "runs": len(costs), "coverage_rule": round(lowest, 1) if verdict == "holds" else None,
            "coverage_verdict": verdict,
            "partial": {"costs": [round(min(p["cost"] for p in partial), 1),
                                  round(max(p["cost"] for p in partial), 1)],
                        "runs": len(partial),
                        "worse": sum(p["cost_pct"] > 100 * FLOOR for p in partial),
                        "better": sum(p["cost_pct"] < -100 * FLOOR for p in partial),
                        "seeds": seeds} if partial else None}


# the partial-freeze tables pair with the six of the same vectors and recipe
ROWS_PAIRED = {"rows-old": "six-sgd", "sotu-rows-old": "sotu-sgd",
               "rows-allvec": "six-allvec", "sotu-rows-allvec": "sotu-allvec"}
FROZEN_PAIRS = [("ours", "ours-unfrozen"), ("ours-random-output", "ours-random-output-unfrozen"),
                ("ours-vecrows", "ours-unfrozen"),
                ("ours-random-output-vecrows", "ours-random-output-unfrozen")]
OPTIMISER = {"six-sgd": "paper recipe", "sotu-sgd": "paper recipe", "rows-old": "paper recipe",
             "sotu-rows-old": "paper recipe", "six-allvec": "paper recipe",
             "sotu-allvec": "paper recipe", "rows-allvec": "paper recipe",
             "sotu-rows-allvec": "paper recipe", "paper-regime": "paper recipe",
             "paper-regime-cpu": "paper recipe"}


def frozen_random_share(run: str, root: Path = ROOT) -> float | None:
    """The share (%) of a frozen run's training tokens whose input row is frozen and random
    (no vector): from its summary's ``input_rows``, or, for runs made before that was
    recorded (every one a whole freeze), 100 minus its vectors' token coverage."""
    summary = json.loads((root / run / "summary.json").read_text())
    if "input_rows" in summary:
        return summary["input_rows"]["frozen_random_tokens_pct"]
    if "coverage_tokens_pct" in summary:
        return 100.0 - summary["coverage_tokens_pct"]
    return None


def freezing_points(root: Path = ROOT) -> list[dict]:
    """One point per seed of every frozen/trained pair in every converged table: the table,
    the pair, the seed, the frozen run's frozen-random token share, the cost of freezing
    (frozen minus trained validation perplexity, and that in % of the trained one) and the two
    run folders it was measured on."""
    points = []
    for table in freezing_tables():
        rows = load(table, root)
        partner = load(ROWS_PAIRED[table], root) if table in ROWS_PAIRED else rows
        for frozen, trained in FROZEN_PAIRS:
            for name in rows:
                m = re.fullmatch(re.escape(frozen) + r"(\..+)?", name)
                if not m or not rows[name].get("valid ppls"):
                    continue
                t = partner.get(trained + (m.group(1) or ""))
                if not t or not t.get("valid ppls") or not (_all_converged(t) and
                                                            _all_converged(rows[name])):
                    continue
                f = rows[name]
                fb = dict(zip(f["seed list"], zip(f["valid ppls"], f["runs"])))
                tb = dict(zip(t["seed list"], zip(t["valid ppls"], t["runs"])))
                for seed in sorted(set(fb) & set(tb)):
                    (fp, run), (tp, twin) = fb[seed], tb[seed]
                    points.append({"table": table, "frozen": name, "trained": t["configuration"],
                                   "seed": seed, "optimiser": OPTIMISER.get(table, "Adam"),
                                   "frozen_random_pct": frozen_random_share(run, root),
                                   "cost": fp - tp, "cost_pct": 100.0 * (fp - tp) / tp,
                                   "frozen_run": run, "trained_run": twin})
    return points


COVERAGE_CLAIM = "freezing the pretrained input helps when the vectors cover the vocabulary"
FULL_COVERAGE = 1.0    # % of training tokens with a frozen random row, at most, to count as covered


def _coverage(run: str, root: Path) -> float | None:
    summary = json.loads((root / run / "summary.json").read_text())
    return summary.get("coverage_tokens_pct")


def coverage_claim(root: Path = ROOT, out: list[str] | None = None) -> tuple[str, float | None]:
    """The coverage claim (issue 24), decided on the paper-recipe tables where (almost) no
    training token reads a frozen random row: the partial freeze (only the vector rows frozen)
    and whole freezes of vectors that cover the vocabulary. Each such frozen configuration
    against its trained twin, per seed (paired rule); the verdict line gives each table's
    coverage. Returns (verdict, the lowest training-token coverage among the tables where
    freezing clearly helped, or None)."""
    out = out if out is not None else []
    verdicts, helped = [], []
    for table in SOURCES:
        if OPTIMISER.get(table) != "paper recipe":
            continue
        rows = load(table, root)
        partner = load(ROWS_PAIRED[table], root) if table in ROWS_PAIRED else rows
        for frozen, trained in FROZEN_PAIRS:
            f, t = rows.get(frozen), partner.get(trained)
            if not (f and t and f.get("valid ppls") and t.get("valid ppls")):
                continue
            shares = [frozen_random_share(r, root) for r in f["runs"]]
            if any(x is None or x > FULL_COVERAGE for x in shares):
                continue
            cover = min(_coverage(r, root) or 0.0 for r in f["runs"])
            c = Comparison(f, t)
            v = c.verdict()
            out.append(c.row(f"{COVERAGE_CLAIM} ({TABLE_NAMES.get(table, table)}: vectors cover "
                             f"{cover:.1f}% of training tokens, {max(shares):.1f}% read a frozen "
                             f"random row; {len(c.diffs())} seed(s))"))
            verdicts.append(v)
            if v == "holds":
                helped.append(cover)
    return combine(verdicts) if verdicts else "not tested", (min(helped) if helped else None)


MAP_CLAIM = ("mapping the unseen words' input rows lowers the trained-input model's perplexity "
             "(`--map-unseen-inputs`, no training)")
INPUTS, OUTPUTS = MAP_FLAGS
BOTH = f"{INPUTS} {OUTPUTS}"
# the maps `lmlow eval`/`score` can apply, each with its claim and the name of the evaluation a
# run folder keeps with it (eval_<name>_valid.json; lmlow.rundir.evaluation_name), simplest first
MAPS = {INPUTS: (MAP_CLAIM, evaluation_name(True, False)),
        OUTPUTS: ("mapping the never-predicted words' output rows lowers the trained-output "
                  "model's perplexity (`--map-unseen-outputs`, no training)",
                  evaluation_name(False, True)),
        BOTH: ("mapping the unseen words' input rows and the never-predicted words' output rows "
               "lowers the model's perplexity (`--map-unseen-inputs --map-unseen-outputs`, no "
               "training)", evaluation_name(True, True))}
MAP_CHOICE = "a map with more flags lowers the perplexity further than a simpler map that helps"


# the training recipes the maps are judged under: the name of each, how a user gets it
RECIPES = {"sgd": "the paper's recipe (SGD + NT-ASGD: lmlow's defaults, `--preset paper`)",
           "adam": "Adam (`--preset small`)"}


def mapped_runs(root: Path = ROOT) -> list[dict]:
    """Every converged committed run scored as trained (``eval_best_valid.json``) and with at
    least one of the maps (experiments/freezing/mapped_rows.py, experiments/paper-regime/
    run.sh): {"run", "optimiser", "trained": its validation record, "maps": {flags: record}}."""
    found = []
    for best in sorted((root / "experiments").glob("**/eval_best_valid.json")):
        run = best.parent
        maps = {flags: json.loads((run / f"eval_{name}_valid.json").read_text())
                for flags, (_, name) in MAPS.items() if (run / f"eval_{name}_valid.json").exists()}
        summary = run / "summary.json"
        if not (maps and summary.exists()):
            continue
        if json.loads(summary.read_text()).get("stopped_by") != "patience":
            continue                  # converged runs only, as every verdict here
        config = json.loads((run / "config.json").read_text())
        found.append({"run": str(run.relative_to(root)), "optimiser": config["optimizer"],
                      "trained": json.loads(best.read_text()), "maps": maps})
    return found


def _compare(group: list[dict], better: tuple[str, str], worse: tuple[str, str]) -> Comparison:
    """Two ways of scoring the same runs, one paired difference per run (the same model, the
    same tokens): each side is (its name, the flags of its map, or "" as trained)."""
    def side(name: str, flags: str) -> dict:
        ppls = [(r["maps"][flags] if flags else r["trained"])["perplexity"] for r in group]
        return {"configuration": name, "seed list": list(range(1, len(group) + 1)),
                "valid ppls": ppls, "converged": f"{len(group)}/{len(group)}"}
    return Comparison(side(*better), side(*worse))


def rare_perplexity(record: dict) -> float | None:
    """The perplexity over the target tokens of the words seen 1-5 times in training, from an
    evaluation's frequency bins (None without them), as the demo's rare column."""
    return pooled_perplexity(record.get("bins") or [])[0]


def _pct(group: list[dict], flags: str, measure=lambda e: e.get("perplexity")) -> list[float]:
    """The map's change in % of ``measure`` (the whole perplexity by default) as trained,
    lowest and highest over the runs ([] where no run's records give it)."""
    pairs = [(measure(r["maps"][flags]), measure(r["trained"])) for r in group]
    change = [100 * (m / t - 1) for m, t in pairs if m is not None and t is not None]
    return [round(min(change), 1), round(max(change), 1)] if change else []


def mapping_claim(root: Path = ROOT, out: list[str] | None = None) -> tuple[dict, dict | None]:
    """Does each map lower the validation perplexity of the runs it was applied to? One
    paired difference per run (mapped minus as trained), judged by the paired rule for each
    optimiser apart (the maps act on rows the optimiser never updated from data, so the answer
    may differ). Then, per optimiser, which map to use: the simplest that helps, unless one
    with more flags is clearly better than it on the same runs (one more row per such
    comparison). Returns ({each map's claim: its verdicts combined}, {optimiser: {"choice":
    flags or "", flags: {"runs", "verdict", "change_pct", "change_pct_excluding_unk",
    "change_pct_rare"}}} or None when no run was scored with a map)."""
    out = out if out is not None else []
    runs = mapped_runs(root)
    if not runs:
        return {claim: "not tested" for claim, _ in MAPS.values()}, None
    by: dict = {}
    verdicts: dict = {flags: [] for flags in MAPS}
    order = [*RECIPES]
    for opt in sorted({r["optimiser"] for r in runs},
                      key=lambda o: (order.index(o) if o in order else len(order), o)):
        by[opt] = {"choice": ""}
        for flags, (claim, _) in MAPS.items():
            group = [r for r in runs if r["optimiser"] == opt and flags in r["maps"]]
            if not group:
                continue
            c = _compare(group, ("mapped", flags), ("as trained", ""))
            names = ", ".join(r["run"].removeprefix("experiments/") for r in group)
            out.append(c.row(f"{claim} ({opt}: one difference per run, in this order: {names})"))
            verdicts[flags].append(c.verdict())
            by[opt][flags] = {"runs": len(group), "verdict": c.verdict(),
                              "change_pct": _pct(group, flags),
                              "change_pct_excluding_unk": _pct(
                                  group, flags, lambda e: e.get("perplexity_excluding_unk")),
                              "change_pct_rare": _pct(group, flags, rare_perplexity)}
            if c.verdict() != "holds":
                continue
            chosen = by[opt]["choice"]
            if not chosen:
                by[opt]["choice"] = flags
                continue
            both = [r for r in group if chosen in r["maps"]]
            more = _compare(both, (flags, flags), (chosen, chosen))
            out.append(more.row(f"{MAP_CHOICE} ({opt}: `{flags}` against `{chosen}`, one "
                                "difference per run)"))
            if more.verdict() == "holds":
                by[opt]["choice"] = flags
    return {MAPS[flags][0]: combine(v) for flags, v in verdicts.items()}, by


def _applies(flags: str, settings: dict) -> bool:
    """Whether a map applies to a configuration (lmlow.config.EmbeddingRoles.maps: untied,
    and the mapped side initialised from vectors and trained)."""
    inputs, outputs = EmbeddingRoles.of(settings).maps()
    return all({INPUTS: inputs, OUTPUTS: outputs}[f] for f in flags.split())


def eval_flags(settings: dict, mapping: dict | None) -> dict[str, str]:
    """What the recommendation adds to `lmlow eval`/`score`, per optimiser (Config.optimizer)
    under which a map that applies to the recommended model was chosen (``mapping_claim``)."""
    return {opt: g["choice"] for opt, g in (mapping or {}).items()
            if g["choice"] and _applies(g["choice"], settings)}


def rare_clause(change: list[float]) -> str:
    """What a map did on the words seen 1-5 times in training (lowest, highest change in %)."""
    lo, hi = change
    words = "on the words seen 1-5 times in training"
    if lo > 0:
        return f", but raised it {words} by {lo:g}-{hi:g}%"
    if hi < 0:
        return f", and lowered it {words} by {-hi:g}-{-lo:g}%"
    return f", and changed it {words} by {lo:+g} to {hi:+g}%"


def map_sentence(flags: dict[str, str], mapping: dict | None) -> str | None:
    """The recommendation's lines on scoring with the maps, when it recommends one: for which
    training recipe, on how many runs, by how much (and without the ``<unk>`` targets, where
    the output map's gain mostly is), and what they did under each other recipe."""
    if not flags:
        return None
    def pct(lo_hi: list[float]) -> str:
        lo, hi = lo_hi
        return f"{lo:+g} to {hi:+g}%" if lo != hi else f"{lo:+g}%"
    parts = []
    for opt, chosen in flags.items():
        g = mapping[opt][chosen]
        lo, hi = g["change_pct"]
        part = (f"trained with {RECIPES.get(opt, opt)}, `lmlow eval RUN {chosen}` (and `lmlow "
                f"score RUN FILE` with the same flags), which with no training lowered the "
                f"validation perplexity of all {g['runs']} such converged runs by {-hi:g}-{-lo:g}%")
        if OUTPUTS in chosen and g["change_pct_excluding_unk"]:
            part += (f" ({pct(g['change_pct_excluding_unk'])} without the `<unk>` targets"
                     + (", whose output row no training text ever pulls towards a prediction)"
                        if not any(OUTPUTS in p for p in parts) else ")"))
        if g["change_pct_rare"]:
            part += rare_clause(g["change_pct_rare"])
        parts.append(part)
    texts = ["Where its vocabulary holds the vectors' words its training text lacks "
             "(`--extend-vocab`, as in every table here), score it with the maps chosen for "
             "the recipe it was trained with: " + "; ".join(parts)
             + " (`experiments/freezing/mapped-rows.md`)."]
    for opt, g in mapping.items():
        if opt in flags or g["choice"]:
            continue                  # a map helped, but not one that applies to this model
        tried = [f"`{f}` changed it by {pct(g[f]['change_pct'])} ({g[f]['verdict']})"
                 for f in MAPS if f in g]
        texts.append(f"Not with {RECIPES.get(opt, opt)}: on "
                     f"{max(g[f]['runs'] for f in MAPS if f in g)} converged runs, "
                     f"{'; '.join(tried)}.")
    return " ".join(texts)


def recommended_flags(settings: dict) -> str:
    """The embedding flags of ``lmlow train`` for a configuration."""
    flags = [f"--tie {'yes' if settings.get('tie', True) else 'no'}"]
    if settings.get("freeze_input"):
        flags.append("--freeze-input")
        if settings.get("freeze_input_rows", "all") != "all":
            flags.append(f"--freeze-input-rows {settings['freeze_input_rows']}")
    flags.append(f"--init {','.join(settings.get('init', ['random']))}")
    if settings.get("extend_vocab"):     # the vectors' words join the vocabulary, as measured
        flags.append("--extend-vocab")
    return " ".join(flags)


def recommendation_module(root: Path = ROOT) -> str:
    """The text of lmlow/recommendation.py: the recommendation as data for the package (the
    demo, `lmlow train --help`, `lmlow stats`), written whole by --update."""
    rec = recommendation(root)
    f = rec["freezing"]
    return f'''"""What lmlow recommends, generated by ``python experiments/claims.py --update`` from the
committed converged tables (do not edit: a test compares this file with what claims.py makes).
The demo, ``lmlow train --help`` and ``lmlow stats --embeddings`` read it, and README.md's
recommendation is the same text, so no sentence can recommend what the tables reject."""

NAME = {rec["name"]!r}
SETTINGS = {rec["settings"]!r}
FLAGS = {recommended_flags(rec["settings"])!r}
TIER = {rec["tier"]!r}
EVIDENCE = {rec["evidence"]!r}
LEVEL_WITH = {rec["level_with"]!r}
# freezing the input: the lowest and highest cost (perplexity, frozen minus trained, per seed)
# over every converged pair measured, and the coverage rule under which freezing is advised
# (None: no table supports freezing under any measured coverage)
FREEZE_COSTS = {tuple(f["costs"]) if f["costs"] else None!r}
FREEZE_PAIRS = {f["runs"]!r}
FREEZE_MIN_TOKEN_COVERAGE = {f["coverage_rule"]!r}
# what `lmlow eval` and `lmlow score` add for the recommended model, by the optimiser
# (Config.optimizer) it was trained with (none listed: nothing), and the sentence that gives
# the evidence for it (None without a flag)
EVAL_FLAGS = {rec["eval_flags"]!r}
EVAL_ADVICE = {map_sentence(rec["eval_flags"], rec["mapping"])!r}


def command(corpus: str = "CORPUS", vectors: str = "VECTORS", out: str = "RUN") -> str:
    """The recommended ``lmlow train`` command line."""
    return f"lmlow train {{corpus}} --out {{out}} --embeddings {{vectors}} {{FLAGS}}"


def summary() -> str:
    """What is recommended, on what evidence, what freezing costs, and how to score it."""
    level = f" (level with {{', '.join(LEVEL_WITH)}})" if LEVEL_WITH else ""
    freeze = (f" Freezing the pretrained input cost {{FREEZE_COSTS[0]:g}} to {{FREEZE_COSTS[1]:g}} "
              f"perplexity in every one of {{FREEZE_PAIRS}} paired converged runs, so it is not "
              "advised." if FREEZE_COSTS and FREEZE_COSTS[0] > 0 and FREEZE_MIN_TOKEN_COVERAGE is None
              else "")
    scoring = f" {{EVAL_ADVICE}}" if EVAL_ADVICE else ""
    return (f"Recommended: {{NAME}}{{level}}, from {{TIER}}: {{EVIDENCE}}.{{freeze}}{{scoring}}")


def freeze_advice(train_token_coverage_pct: float) -> str | None:
    """What the tables say about freezing for a corpus whose training tokens (``<eos>``
    counted) have vectors at this rate: None unless the evidence makes it depend on coverage."""
    if FREEZE_MIN_TOKEN_COVERAGE is None:
        return None
    if train_token_coverage_pct >= FREEZE_MIN_TOKEN_COVERAGE:
        return (f"freezing advised: the vectors cover {{train_token_coverage_pct:.1f}}% of training "
                f"tokens, at least the {{FREEZE_MIN_TOKEN_COVERAGE:g}}% under which the tables found "
                "it helps: add --freeze-input --freeze-input-rows pretrained")
    return (f"freezing not advised: the vectors cover {{train_token_coverage_pct:.1f}}% of training "
            f"tokens, below the {{FREEZE_MIN_TOKEN_COVERAGE:g}}% the tables needed for it to help")
'''


def partial_freeze_sentence(partial: dict) -> str:
    """What the partial freeze's pairs measured so far, for the recommendation: a pair counts
    as worse or better only beyond the paired rule's floor (0.5% of the perplexity)."""
    seeds = (f"seed {partial['seeds'][0]}" if len(partial["seeds"]) == 1
             else f"seeds {', '.join(map(str, partial['seeds']))}")
    text = (f"Freezing only the rows that have a vector (`--freeze-input-rows pretrained`): "
            f"worse than training them in {partial['worse']} of its {partial['runs']} pairs "
            f"so far ({seeds}), by up to {partial['costs'][1]:.1f} perplexity")
    if partial["better"]:
        text += f"; better in {partial['better']}, by at most {max(0.0, -partial['costs'][0]):.1f}"
    level = partial["runs"] - partial["worse"] - partial["better"]
    if level:
        text += f"; within {100 * FLOOR:g}% of it in {level}"
    return text + "."


def recommendation_section(root: Path = ROOT) -> str:
    """README.md's recommendation, from the same data as lmlow/recommendation.py."""
    rec = recommendation(root)
    f = rec["freezing"]
    level = f" (level with {', '.join(rec['level_with'])})" if rec["level_with"] else ""
    lines = ["```sh", f"lmlow train CORPUS --out RUN --embeddings VECTORS {recommended_flags(rec['settings'])}",
             "```", "",
             f"**{rec['name']}**{level}: the configuration the converged tables support, from "
             f"{rec['tier']}: {rec['evidence']}."]
    if f["costs"] and f["costs"][0] > 0 and f["coverage_rule"] is None:
        lines.append(f"Freezing the pretrained input is not advised: it cost {f['costs'][0]:g} to "
                     f"{f['costs'][1]:g} perplexity in every one of {f['runs']} paired converged "
                     "runs (frozen minus trained, same seed), on every domain and data size measured.")
    if f.get("partial"):
        lines.append(partial_freeze_sentence(f["partial"]))
    if rec["eval_flags"]:
        lines.append(map_sentence(rec["eval_flags"], rec["mapping"]))
    if rec["pending"]:
        lines.append(f"Not yet complete (every seed of every planned run finished), and first "
                     f"in the order of evidence: "
                     f"{'; '.join(rec['pending'])}. The first of these, in this order, that is complete "
                     "will decide this recommendation.")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- output

def report(root: Path = ROOT) -> str:
    six, uni, unk = load("six", root), load("six+unigram", root), load("unk", root)
    t1, sotu = load("table1", root), load("sotu", root)
    rows: list[str] = []
    technical = six_claims(six, "technical, Adam", rows)
    verdicts = {f"{k} (technical, Adam)": v for k, v in technical.items()}
    for table, domain, adam in (("six-sgd", "technical", technical),
                                ("sotu-sgd", "State of the Union", None)):
        sgd_rows = load(table, root)
        if not sgd_rows:
            continue       # the paper-recipe tables (issue 24): as they are committed
        label = _table_label(table, sgd_rows, root)
        sgd = six_claims(sgd_rows, label, rows)
        verdicts |= {f"{k} ({label})": v for k, v in sgd.items()}
        adam = adam if adam is not None else six_claims(sotu, domain, [])
        verdicts[f"the paper recipe gives the Adam tables' verdicts, claim by claim ({domain})"] = (
            domain_agreement(adam, sgd))
    verdicts |= paper_regime_claims(root, rows)
    verdicts |= transformer_claims(root, rows)
    # the tables below were all trained with the `small` preset's Adam: each line says so
    adam: dict[str, str] = {}
    adam["the LSTM beats the 5-gram on the same tokens"] = kenlm_claim(six, rows)
    adam["the six's verdicts do not depend on the stopping rule (seed 1: convergence rule "
         "vs 30 epochs without early stopping)"] = rule_agreement(
             six, load("six-fixed-budget", root), rows)
    unk_verdict, unk_lines = unk_claim(six, unk, rows)
    pre_verdict, pre_lines = unk_claim(six, unk, rows, "standard+pretraining")
    adam |= unk_pattern_claims(unk, rows)
    adam["the gain grows as more rare words are kept (smaller K)"] = unk_verdict
    adam["the gain grows as more rare words are kept (smaller K), pretraining alone "
         "(standard+pretraining over standard)"] = pre_verdict
    adam |= table1_claims(t1, rows)
    adam |= table1_no_early_stop(t1, load("table1-no-early-stop", root), rows)
    adam |= pretrain_size_claims(six, load("pretrain-size", root), rows)
    sizes = datasize_columns(load("datasize", root))
    adam |= datasize_claims(sizes, rows)
    second = six_claims(sotu, "State of the Union", rows)
    adam["other domains show the same pattern (State of the Union)"] = (
        combine(list(second.values())) if sotu else "not tested")
    adam["the second domain gives the technical domain's verdicts, claim by claim"] = (
        domain_agreement(technical, second) if sotu else "not tested")
    adam |= {f"Meister: {k}": v for k, v in meister_claims(six, uni, rows, root).items()}
    verdicts |= {f"{k} [Adam]": v for k, v in adam.items()}
    verdicts[COVERAGE_CLAIM + " (paper recipe; partial freeze, or vectors from all in-domain "
             "text)"] = coverage_claim(root, rows)[0]
    verdicts |= mapping_claim(root, rows)[0]
    scale = _scale(six)
    if len(sizes) > 1:
        scale += (f"; Table 6 (`experiments/datasize`) from {training_words(min(sizes), root):,} "
                  f"to {training_words(max(sizes), root):,} training words, {_seeds_by_size(sizes)}")
    parts = ["| claim | verdict |", "|---|---|"]
    parts += [f"| {k} | **{v}** |" for k, v in verdicts.items()]
    text = [f"Scale: {scale}.", "", *parts, "", "The comparisons (validation perplexity; "
            "differences per seed, worse minus better):", "", HEADER, *rows]
    if len(unk_lines) > 2:
        text += ["", "Table 3 (the gain of `ours` over `standard` by UNK threshold K):", "", *unk_lines]
    if len(pre_lines) > 2:
        text += ["", "Table 3 (the gain of pretraining alone, `standard+pretraining` over `standard`):",
                 "", *pre_lines]
    return "\n".join(text) + "\n"


def _scale(six: dict) -> str:
    if not six or "ours" not in six:
        return "no converged table is committed yet"
    cfg = json.loads((ROOT / six["ours"]["runs"][0] / "config.json").read_text())
    stats = ROOT / "experiments/unk/stats.json"
    words = json.loads(stats.read_text())["sizes"]["train"]["words"] if stats.exists() else None
    size = f", {words:,} training words" if words else ""
    return (f"technical domain, `data/{Path(cfg['corpus']).name}`{size}; {cfg['emb_size']}-d "
            f"vectors, a 2-layer AWD-LSTM of {cfg['hidden_size']} hidden units, trained until "
            f"{cfg['patience']} epochs bring no new best; {six['ours']['seeds']} seeds "
            f"(protocol: `experiments/README.md`)")


# ---------------------------------------------------------------- the tables' READMEs

SIX_ORDER = ["standard", "ours-random-output-unfrozen", "standard+pretraining", "ours-unfrozen",
             "ours", "ours-random-output"]
PAPER = {   # Kummerfeld et al.: Table 2 (NANC column = Table 3's K=0) and Table 3, valid ppl
    "standard": (106, 106, 70.6, 55.4), "ours-random-output-unfrozen": (103, 104, 72.5, 56.8),
    "standard+pretraining": (97.2, 99.9, 68.1, 54.1), "ours-unfrozen": (95.7, 97.8, 70.2, 56.0),
    "ours": (90.8, 92.1, 66.5, 54.5), "ours-random-output": (90.5, 91.5, 65.8, 54.0)}
PAPER_UNK_VALID_TOKENS = {0: 0, 1: 2.3, 2: 3.4, 5: 5.5}


def _ppl(row: dict | None, key: str = "valid") -> str:
    if not row:
        return "-"
    sd = row.get(f"{key} sd")
    return f"{row[f'{key} ppl']:.1f}" + (f" ({sd:.1f})" if sd else "")


def six_table(table: str = "six", root: Path = ROOT) -> str:
    """The six (and, where run, the six with the unigram bias) beside the paper's NANC column."""
    six = load(table, root)
    uni = load("six+unigram", root) if table == "six" else {}
    if not six:
        return "Not run yet: no `results.json` is committed for this table.\n"
    lines = ["| configuration | tie | input | output | valid ppl (sd) | test ppl (sd) | converged | "
             "best epoch | with unigram bias: valid (sd) | converged | paper, NANC valid |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in SIX_ORDER:
        r = six.get(name)
        if not r:
            lines.append(f"| {name} | not finished | | | | | | | | | {PAPER[name][0]} |")
            continue
        u = uni.get(name)
        lines.append(f"| {name} | {r['tie']} | {r['input']} | {r['output']} | {_ppl(r)} | "
                     f"{_ppl(r, 'test')} | {r['converged']} | {r['best epoch']:.1f} | {_ppl(u)} | "
                     f"{u['converged'] if u else '-'} | {PAPER[name][0]} |")
    for name, r in six.items():
        if name.startswith("KenLM"):
            lines.append(f"| {name}, same tokens | | | | {r['valid ppl']:.1f} | {r['test ppl']:.1f} "
                         f"| | | | | 92.3 (Table 7) |")
    return "\n".join(lines) + "\n"


def unk_table(root: Path = ROOT) -> str:
    """Table 3: valid ppl by K (mean (sd) [paper]), and the share of valid tokens that are <unk>."""
    six, unk = load("six", root), load("unk", root)
    if not six and not unk:
        return "Not run yet: no `results.json` is committed for this table.\n"
    ks = [0, 1, 2, 5]
    by_k = {0: six} | {k: {n.removesuffix(f".K{k}"): r for n, r in unk.items() if n.endswith(f".K{k}")}
                       for k in ks[1:]}
    lines = ["| configuration | " + " | ".join(f"K={k}: valid (sd) [paper] | converged" for k in ks) + " |",
             "|---|" + "---|---|" * len(ks)]
    for name in SIX_ORDER:
        cells = []
        for i, k in enumerate(ks):
            r = by_k[k].get(name)
            cells.append(f"{_ppl(r)} [{PAPER[name][i]}] | {r['converged'] if r else '-'}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    kenlm = [next((r for n, r in by_k[k].items() if n.startswith("KenLM")), None) for k in ks]
    if any(kenlm):
        lines.append("| KenLM 5-gram, same tokens | " + " | ".join(
            f"{r['valid ppl']:.1f} | " if r else "- | " for r in kenlm) + " |")
    stats = root / "experiments/unk/stats.json"
    if stats.exists():
        st = json.loads(stats.read_text())
        share = {k: st["unk_rule"][str(k)]["valid"]["tokens_pct"] for k in ks[1:]}
        share[0] = st["oov"]["valid"]["tokens_pct"]
        lines.append("| valid tokens that are `<unk>`, % [paper] | " + " | ".join(
            f"{share[k]:.2f} [{PAPER_UNK_VALID_TOKENS[k]}] | " for k in ks) + " |")
    return "\n".join(lines) + "\n"


def meister_table(root: Path = ROOT) -> str:
    """Meister et al. at convergence: ALC and final perplexity, zero vs log-unigram bias init,
    per configuration of the six and per seed."""
    six, uni = load("six", root), load("six+unigram", root)
    names = [n for n in SIX_ORDER if n in six and n in uni]
    if not names:
        return "Not run yet: no configuration has finished both with and without the unigram bias.\n"
    lines = ["| configuration | seeds | ALC zero init (nats) | ALC unigram init | zero - unigram, per seed "
             "| valid ppl zero init | valid ppl unigram init | converged (zero / unigram) |",
             "|---|---|---|---|---|---|---|---|"]
    for n in names:
        z = dict(zip(six[n]["seed list"], six[n]["runs"]))
        u = dict(zip(uni[n]["seed list"], uni[n]["runs"]))
        pairs = [alc_pair(z[s], u[s], root) for s in sorted(set(z) & set(u))]
        lines.append(f"| {n} | {len(pairs)} | {statistics.mean(a for a, _ in pairs):.3f} | "
                     f"{statistics.mean(b for _, b in pairs):.3f} | "
                     f"{', '.join(f'{a - b:+.3f}' for a, b in pairs)} | {_ppl(six[n])} | {_ppl(uni[n])} | "
                     f"{six[n]['converged']} / {uni[n]['converged']} |")
    return "\n".join(lines) + "\n"


def table1_table(root: Path = ROOT) -> str:
    """Table 1 at convergence, worst first as in the paper, with the paper's group of each row."""
    t1 = {n: r for n, r in load("table1", root).items() if r.get("tie")}
    if not t1:
        return "Not run yet: no `results.json` is committed for this table.\n"
    seed1 = lambda r: r["valid ppls"][r["seed list"].index(1)] if 1 in r["seed list"] else float("nan")
    lines = ["| paper's group | configuration | valid ppl, seed 1 | valid ppl (sd), all seeds | seeds "
             "| test ppl | converged | best epoch |", "|---|---|---|---|---|---|---|---|"]
    for r in sorted(t1.values(), key=seed1, reverse=True):
        name = r["configuration"] + (" (ours)" if r["configuration"] == OURS_T1 else "")
        lines.append(f"| {table1_group(r)} | {name} | {seed1(r):.1f} | {_ppl(r)} | {r['seeds']} | "
                     f"{_ppl(r, 'test')} | {r['converged']} | {r['best epoch']:.1f} |")
    return "\n".join(lines) + "\n"


def pretrain_size_table(root: Path = ROOT) -> str:
    """Per configuration: valid ppl with the six's vectors and with vectors from 11x more text,
    and the cost of freezing (frozen minus trained input) with each."""
    six, big = load("six", root), load("pretrain-size", root)
    names = [n for n in SIX_ORDER if n in big and n in six]
    if not names:
        return "Not run yet: no `results.json` is committed for this table.\n"
    lines = ["| configuration | 0.78M-word vectors: valid (sd) | 8.6M-word vectors: valid (sd) | "
             "difference per seed (0.78M - 8.6M) | converged (0.78M / 8.6M) |", "|---|---|---|---|---|"]
    for n in names:
        d = Comparison(big[n], six[n]).diffs()
        lines.append(f"| {n} | {_ppl(six[n])} | {_ppl(big[n])} | {', '.join(f'{x:+.1f}' for x in d)} "
                     f"| {six[n]['converged']} / {big[n]['converged']} |")
    lines += ["", "The cost of freezing the pretrained input (frozen minus trained, per seed; "
              "negative: freezing helps):", "", "| pair | 0.78M-word vectors | 8.6M-word vectors |",
              "|---|---|---|"]
    for frozen, trained in PAIRS["freezing the pretrained input helps"]:
        if all(n in t for n in (frozen, trained) for t in (six, big)):
            cost = lambda t: ", ".join(f"{-x:+.1f}" for x in Comparison(t[frozen], t[trained]).diffs())
            lines.append(f"| {frozen} - {trained} | {cost(six)} | {cost(big)} |")
    return "\n".join(lines) + "\n"


PAPER_T6 = {   # Kummerfeld et al. Table 6, NANC 1x, 2x, 4x, valid ppl (its rows in Table 2's order)
    "standard": (106, 81.0, 67.5), "ours-random-output-unfrozen": (103, 83.3, 68.7),
    "standard+pretraining": (97.2, 80.4, 67.8), "ours-unfrozen": (95.7, 80.0, 68.1),
    "ours": (90.8, 73.7, 66.8), "ours-random-output": (90.5, 72.9, 66.1)}
DATASIZE_CORPUS = "corpora/pydocs-mini"


def _seeds_by_size(sizes: dict) -> str:
    """Seeds per Table 6 size, e.g. "seeds: 3 at 1x, 3 at 2x, 1-2 at 4x so far": a size whose
    configurations have different numbers of seeds shows the range, so a partial column is
    never read as complete (nor a complete one as partial)."""
    counts = {f: sorted({len(r["valid ppls"]) for n, r in rows.items() if n in SIX_ORDER})
              for f, rows in sizes.items()}
    low = min(counts)
    parts = [f"{c[0] if len(c) == 1 else f'{c[0]}-{c[-1]}'} at {f / low:g}x"
             for f, c in sorted(counts.items())]
    done = min(c[0] for c in counts.values()) >= 3
    return "seeds: " + ", ".join(parts) + ("" if done else " so far")


@functools.lru_cache(maxsize=None)
def training_words(fraction: float, root: Path = ROOT) -> int:
    """The words the LSTM and the 5-gram train on at ``--train-fraction``, counted from the
    committed corpus with lmlow's own cut (tokens are the words plus one end per line)."""
    import numpy as np

    from lmlow.data.corpus import head_fraction

    lengths = [len(l.split()) for l in (root / DATASIZE_CORPUS / "train.txt").read_text().splitlines()]
    stream = np.concatenate([np.append(np.ones(n, dtype=np.int8), 0) for n in lengths])
    return int(head_fraction(stream, fraction, 0).sum())


def datasize_table(root: Path = ROOT) -> str:
    """Table 6 at convergence: valid ppl (sd) per configuration and LM text size, beside the
    paper's NANC 1x/2x/4x; only sizes at which all six have finished."""
    by = datasize_columns(load("datasize", root))
    if not by:
        return "Not run yet: no size has all six configurations finished.\n"
    sizes = list(by)
    column = {f: {1: 0, 2: 1, 4: 2}.get(round(f / sizes[0], 6)) for f in sizes}   # paper's 1x/2x/4x
    paper = lambda name, f: "-" if column[f] is None else PAPER_T6[name][column[f]]
    lines = ["| configuration | " + " | ".join(
                 f"{f:g} ({training_words(f, root):,} words): valid (sd) [paper "
                 f"{'' if column[f] is None else 2 ** column[f]}x] | converged" for f in sizes) + " |",
             "|---|" + "---|---|" * len(sizes)]
    for name in SIX_ORDER:
        cells = [f"{_ppl(by[f][name])} [{paper(name, f)}] | {by[f][name]['converged']}" for f in sizes]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    kenlm = [next((r for n, r in by[f].items() if n.startswith("KenLM")), None) for f in sizes]
    lines.append("| KenLM 5-gram, same tokens | " + " | ".join(f"{_ppl(r)} |" for r in kenlm) + " |")
    seeds = sorted({len(by[f][n]["valid ppls"]) for f in sizes for n in SIX_ORDER})
    lines += ["", f"Seeds per cell: {', '.join(map(str, seeds))}."]
    return "\n".join(lines) + "\n"


GENERATED = {   # file -> what its generated section holds
    "docs/claims.md": report,
    "experiments/README.md": report,
    "experiments/six/README.md": six_table,
    "experiments/unk/README.md": unk_table,
    "experiments/sotu/README.md": lambda root=ROOT: six_table("sotu", root),
    "experiments/meister/README.md": meister_table,
    "experiments/table1-converged/README.md": table1_table,
    "experiments/pretrain-size/README.md": pretrain_size_table,
    "experiments/datasize/README.md": datasize_table,
}


# sections other than the claims one: file -> (start, end, what it holds); and whole files
SECTIONS = {"README.md": (REC_START, REC_END, recommendation_section)}
WHOLE = {"lmlow/recommendation.py": recommendation_module}


def section(text: str, start: str = START, end: str = END) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def update(path: Path, text: str, start: str = START, end: str = END) -> None:
    old = path.read_text()
    if start not in old or end not in old:
        raise SystemExit(f"{path}: no {start} ... {end} section to update")
    head, _, rest = old.partition(start)
    _, _, tail = rest.partition(end)
    path.write_text(f"{head}{start}\n{text}{end}{tail}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--update", action="store_true",
                    help=f"rewrite the text between {START} and {END} in every file that has "
                    f"a generated section ({', '.join(GENERATED)})")
    args = ap.parse_args(argv)
    if args.update:
        for name, make in GENERATED.items():
            update(ROOT / name, make())
        for name, (start, end, make) in SECTIONS.items():
            update(ROOT / name, make(), start, end)
        for name, make in WHOLE.items():
            (ROOT / name).write_text(make())
        return
    print(report(), end="")


if __name__ == "__main__":
    main()
