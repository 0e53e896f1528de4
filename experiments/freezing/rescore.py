#!/usr/bin/env python3
"""Add the perplexity by the word read before the target (``context_bins``) to the committed
evaluations of finished runs that were scored before evaluations recorded it, from their kept
``best.pt`` (model files stay out of git, so only a workspace that trained the run has it).

The input embeddings act on the word read, so these bins are what can test the paper's
argument that a frozen input helps after rare words; the runs scored before the bins existed
have them only if scored again. A new evaluation replaces the committed one only if it
reproduces every number the committed one holds (perplexities, token counts, bins), exactly:
then the model scored is the model the tables report. Otherwise the run is named and its file
left as it is, and the command exits 1. Each run is scored with the threads it trained with.
Run from the repo root:

    python experiments/freezing/rescore.py [RUN_DIR ...]    # default: every freezing run
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lmlow.config import Config  # noqa: E402
from lmlow.files import atomic_write_json, read_json, to_json  # noqa: E402

SPLITS = ("valid", "test")


def stale(run: Path) -> list[str]:
    """The splits whose committed evaluation lacks ``context_bins``, for a run whose best.pt
    is here; [] when there is nothing to do or nothing to do it with."""
    if not (run / "best.pt").exists():
        return []
    return [s for s in SPLITS if (run / f"eval_best_{s}.json").exists()
            and "context_bins" not in read_json(run / f"eval_best_{s}.json")]


def rescore(run: Path, splits: list[str]) -> str | None:
    """Score a run again on its stale ``splits`` and write the evaluations that reproduce the
    committed ones; returns None, or why a split's file was left as it was."""
    import torch

    from lmlow.runs import STAMP_KEYS, load

    torch.set_num_threads(Config.load(run / "config.json").threads or 1)
    scorer = load(run, checkpoint="best")
    for split in splits:
        path = run / f"eval_best_{split}.json"
        old = read_json(path)
        new = scorer.evaluate(split).to_dict()
        # compared as the file writes them: exact for floats, an empty bin's NaN as null
        differ = [k for k in old if k not in STAMP_KEYS and to_json(old[k]) != to_json(new.get(k))]
        if differ:
            return f"{path}: scored again, {', '.join(differ)} differ from the committed file"
        stamp = {k: old[k] for k in STAMP_KEYS if k in old}   # the cache's key
        atomic_write_json(path, new | stamp)
    return None


def main(argv: list[str]) -> int:
    runs = ([Path(a) for a in argv] if argv else
            sorted(p.parent for p in Path("experiments/freezing").glob("*/*/*/summary.json")))
    todo = [(r, splits) for r in runs if (splits := stale(r))]
    failed = 0
    for i, (run, splits) in enumerate(todo, 1):
        why = rescore(run, splits)
        print(f"[{i}/{len(todo)}] {run}: " + ("context bins added" if why is None else why),
              flush=True)
        failed += why is not None
    print(f"{len(todo) - failed} of {len(todo)} runs scored again with the same numbers")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
