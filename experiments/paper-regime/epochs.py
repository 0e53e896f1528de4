#!/usr/bin/env python3
"""Validation perplexity of each run of a paper-regime table at chosen epochs, from the
run folders' metrics.jsonl alone: for a table whose runs did not finish (a GPU loan ended
first), where `lmlow report` has no summaries to read. Compares the configurations at equal
training, not at convergence.

Usage: python experiments/paper-regime/epochs.py FOLDER [--epochs 1 10 20 30 40 51] [--seed 1]
       python experiments/paper-regime/epochs.py FOLDER --bins 51   (perplexity per training
           frequency of the predicted word at that epoch, as each metrics row keeps it)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

CONFIGS = ["standard", "standard+pretraining", "ours-unfrozen", "ours", "ours-vecrows"]


def rows(run: Path) -> dict[int, dict]:
    """The metrics rows that end an epoch (they carry a validation), by epoch."""
    out = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        if "valid_ppl" in r:
            out[r["epoch"]] = r
    return out


def table(folder: Path, epochs: list[int], seed: int) -> str:
    lines = ["| configuration | " + " | ".join(f"epoch {e}" for e in epochs)
             + " | optimiser at the last |", "|---|" + "---|" * (len(epochs) + 1)]
    for name in CONFIGS:
        run = folder / f"{name}.seed{seed}"
        if not (run / "metrics.jsonl").is_file():
            continue
        r = rows(run)
        cells = [f"{r[e]['valid_ppl']:.1f}" if e in r else "-" for e in epochs]
        last = r[max(e for e in epochs if e in r)] if any(e in r for e in epochs) else {}
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {last.get('optimizer', '-')} |")
    return "\n".join(lines)


def bins(folder: Path, epoch: int, seed: int) -> str:
    """Validation perplexity by the training count of the predicted word, at ``epoch``."""
    names = [n for n in CONFIGS if (folder / f"{n}.seed{seed}" / "metrics.jsonl").is_file()]
    per = {n: rows(folder / f"{n}.seed{seed}").get(epoch, {}).get("valid_bins", {}) for n in names}
    keys = list(next((b for b in per.values() if b), {}))
    lines = [f"| configuration (epoch {epoch}) | " + " | ".join(keys) + " |",
             "|---|" + "---|" * len(keys)]
    for n in names:
        lines.append(f"| {n} | " + " | ".join(f"{per[n][k]:.1f}" if k in per[n] else "-"
                                             for k in keys) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a sweep folder of the paper regime")
    ap.add_argument("--epochs", type=int, nargs="+", default=[1, 10, 20, 30, 40, 51],
                    help="epochs to show (>= 1)")
    ap.add_argument("--seed", type=int, default=1, help="which seed's runs (default 1)")
    ap.add_argument("--bins", type=int, metavar="EPOCH", help="instead, the perplexity per "
                    "training count of the predicted word at EPOCH")
    a = ap.parse_args(argv)
    if not a.folder.is_dir():
        print(f"epochs.py: {a.folder}: no such folder", file=sys.stderr)
        return 1
    print(bins(a.folder, a.bins, a.seed) if a.bins else table(a.folder, a.epochs, a.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
