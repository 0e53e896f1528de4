"""Two configurations compared seed by seed: is one clearly better, clearly worse, or not
clearly different? One rule for `lmlow report --paired` and experiments/claims.py.

Each seed gives one difference between the two configurations (the same data, the same seed
for their random draws), and the rule judges those differences, not the two means and their
separate spreads: does one configuration win on every seed, by more than the differences vary?

- a difference is clear when every seed's difference has one sign and their mean is beyond the
  margin: the half-width of the 95% confidence interval of the mean per-seed difference
  (Student's t with n - 1 degrees of freedom times its standard error: 12.7 standard errors
  with 2 seeds, 4.3 with 3), and at least 0.5% of the perplexity (smaller differences do not
  matter to anyone choosing a configuration). So with no true difference a verdict is "no
  clear difference" 95 times in 100, however few the seeds; twice the standard error, the rule
  before, was a 70% interval with 2 seeds and 82% with 3;
- with one seed there is no spread to measure: the margin is 2% of the perplexity, and the
  difference is one measurement, not a tested one.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

FLOOR = 0.005        # the smallest difference that counts, as a share of the perplexity
ONE_SEED = 0.02      # the margin with one seed, as a share of the perplexity


@dataclass
class Paired:
    """``other`` against ``ref``: seed -> validation perplexity of each, over the seeds both
    have (a seed only one configuration finished, or whose perplexity is missing or not finite
    on either side, a diverged run's, is left out)."""

    ref: dict[int, float]
    other: dict[int, float]

    @classmethod
    def of_rows(cls, ref: dict, other: dict) -> "Paired":
        """From two rows of a report (``results.json``: ``seed list``, ``valid ppls``)."""
        return cls(dict(zip(ref["seed list"], ref["valid ppls"])),
                   dict(zip(other["seed list"], other["valid ppls"])))

    @property
    def seeds(self) -> list[int]:
        return sorted(s for s in set(self.ref) & set(self.other)
                      if _finite(self.ref[s]) and _finite(self.other[s]))

    def diffs(self) -> list[float]:
        """other - ref, seed by seed (positive: ``other`` has the higher perplexity)."""
        return [self.other[s] - self.ref[s] for s in self.seeds]

    def means(self) -> tuple[float, float]:
        """(ref, other) mean perplexity over the shared seeds, so that they differ by the mean
        paired difference; NaN without a shared seed."""
        if not self.seeds:
            return math.nan, math.nan
        return (statistics.mean(self.ref[s] for s in self.seeds),
                statistics.mean(self.other[s] for s in self.seeds))

    def margin(self) -> float:
        """How far the mean difference must be from 0 to count (module docstring)."""
        d, ppl = self.diffs(), min(self.means())
        if len(d) > 1:
            return max(t95(len(d) - 1) * statistics.stdev(d) / math.sqrt(len(d)), FLOOR * ppl)
        return ONE_SEED * ppl

    def sign(self) -> int | None:
        """+1: ``other`` clearly higher (worse); -1: clearly lower (better); 0: no clear
        difference; None: no shared seed."""
        d = self.diffs()
        if not d:
            return None
        m = self.margin()
        if all(x > 0 for x in d) and statistics.mean(d) > m:
            return 1
        if all(x < 0 for x in d) and statistics.mean(d) < -m:
            return -1
        return 0

    def summary(self) -> dict:
        """What a report shows of the comparison (JSON-ready)."""
        d = self.diffs()
        ref, other = self.means()
        words = {1: "worse", -1: "better", 0: "no clear difference", None: "no shared seed"}
        return {"seeds": self.seeds, "diffs": d,
                "mean diff": statistics.mean(d) if d else None,
                "mean diff %": 100 * statistics.mean(d) / ref if d else None,
                "margin": self.margin() if d else None, "verdict": words[self.sign()]}


def t95(df: int) -> float:
    """Student's t quantile at 0.975 (a two-sided 95% interval) with ``df`` degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(0.975, df))


def _finite(x) -> bool:
    """A perplexity that can be compared (results.json has null for lmlow's NaN)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
