#!/usr/bin/env python3
"""The cost of freezing the pretrained input against the share of training tokens whose
frozen row is random (no vector), over every converged table committed: one point per seed of
every frozen/trained pair (claims.freezing_points). Writes freezing-cost.png and
freezing-points.json (the points, so every dot traces to its runs). Run from the repo root:

    python experiments/freezing/figure.py
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
spec = importlib.util.spec_from_file_location("claims", ROOT / "experiments" / "claims.py")
claims = importlib.util.module_from_spec(spec)
sys.modules["claims"] = claims
spec.loader.exec_module(claims)

from lmlow.files import atomic_write_json  # noqa: E402
from lmlow.plots import pyplot  # noqa: E402


def main() -> int:
    points = claims.freezing_points(ROOT)
    atomic_write_json(HERE / "freezing-points.json", points, indent=1)
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.6))
    tables = sorted({p["table"] for p in points})
    marks = {"Adam": "o", "paper recipe": "s"}
    # one colour a table (more tables than the default cycle's 10): tab20's dark shades first
    palette = plt.get_cmap("tab20")
    colours = [palette(j) for j in (*range(0, 20, 2), *range(1, 20, 2))]
    for i, table in enumerate(tables):
        for opt, marker in marks.items():
            pts = [p for p in points if p["table"] == table and p["optimiser"] == opt
                   and p["frozen_random_pct"] is not None]
            if not pts:
                continue
            for ax, key in zip(axes, ("cost_pct", "cost")):
                ax.scatter([p["frozen_random_pct"] for p in pts], [p[key] for p in pts],
                           marker=marker, s=22, alpha=0.8, color=colours[i % 20],
                           label=f"{claims.TABLE_NAMES.get(table, table)}" if key == "cost" else None)
    for ax, label in zip(axes, ("cost of freezing, % of the trained twin's perplexity",
                                "cost of freezing, perplexity (frozen - trained)")):
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xlabel("training tokens whose frozen input row is random, %")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))   # off the points
    fig.suptitle("Freezing the pretrained input: one point per seed and frozen/trained pair "
                 "(circles Adam, squares paper recipe); above 0 freezing hurts", fontsize=9)
    fig.tight_layout()
    fig.savefig(HERE / "freezing-cost.png", dpi=110)
    print(f"{len(points)} points from {len(tables)} tables: {HERE / 'freezing-cost.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
