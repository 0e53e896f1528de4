#!/usr/bin/env python3
"""Sentences scored per second (`lmlow score`, ``Scorer.score_file``): a reranker's n-best list,
as given (tokenised like the corpus) and as raw text (``--raw``: each line tokenised and
normalised as the corpus's prepare.json says, spaCy and --ptb for the bundled corpus). Builds a
real run of the ``--preset``'s size on the bundled corpus (``lmlow train --max-epochs 0``: the
untrained model, whose cost is the trained one's) and a KenLM 5-gram of it, then scores the
first ``--lines`` lines of its valid split, each from a fresh state, best of ``--repeats``.

Usage: python benchmarks/rerank_speed.py [--preset small] [--lines 2000] [--threads 1]
       [--repeats 3] [--work DIR]
Measure on a quiet machine and say which CPU.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from bundled_runs import CORPUS, arguments, bundled_runs


def lines_per_second(scorer, path: Path, raw: bool, repeats: int) -> float:
    """The best of ``repeats`` passes over the file: lines scored per second."""
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = sum(1 for _ in scorer.score_file(path, raw=raw))
        best = max(best, n / (time.perf_counter() - t0))
    return best


def main(argv=None) -> int:
    import torch

    import lmlow

    ap = arguments(__doc__, lines=2000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    with bundled_runs(args.preset, args.work) as (lstm, kn):
        torch.set_num_threads(args.threads)
        lines = [line for line in (CORPUS / "valid.txt").read_text().splitlines()
                 if line.split()][:args.lines]
        nbest = Path(lstm.run_dir).parent / "nbest.txt"
        nbest.write_text("\n".join(lines) + "\n")
        words = sum(len(line.split()) for line in lines)
        print(f"{len(lstm.vocab.words):,} words, {len(lines)} lines ({words / len(lines):.1f} "
              f"words a line), threads {torch.get_num_threads()}, best of {args.repeats}; "
              "lines scored per second: as given, --raw")
        for name, scorer in ((f"LSTM ({args.preset})", lstm), ("KenLM 5-gram", kn),
                             ("mixture", lmlow.interpolate(lstm, kn, weight=0.5))):
            list(scorer.tokenise(["warm up"]))                     # the tokenizer's start-up
            given = lines_per_second(scorer, nbest, False, args.repeats)
            raw = lines_per_second(scorer, nbest, True, args.repeats)
            print(f"{name:>14}: {given:8.0f} {raw:8.0f}  (--raw {raw / given:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
