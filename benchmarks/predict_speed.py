#!/usr/bin/env python3
"""Next-word lists (`lmlow predict`, ``Scorer.reader``): milliseconds per word typed, for a
keyboard's loop over a line. Builds a real run of the ``--preset``'s size on the bundled
corpus (``lmlow train --max-epochs 0``: the untrained model, whose cost is the trained one's)
and a KenLM 5-gram of it, then over ``--lines`` lines of its valid split measures, per word:
the reader fed that word and asked for its 10 most probable next words, against
``next_words`` re-reading the whole line so far (what the command does for each context).

Usage: python benchmarks/predict_speed.py [--preset small] [--lines 20] [--threads 1]
       [--work DIR]
Measure on a quiet machine and say which CPU.
"""
from __future__ import annotations

import sys
import time

from bundled_runs import CORPUS, arguments, bundled_runs


def per_word(scorer, lines: list[list[str]]) -> tuple[float, float]:
    """(ms per word with a reader fed word by word, ms per word re-reading the line)."""
    t0, words = time.perf_counter(), 0
    for line in lines:
        reader = scorer.reader()
        for w in line:
            reader.feed(w).next_words(10)
            words += 1
    incremental = (time.perf_counter() - t0) * 1000 / words
    t0 = time.perf_counter()
    for line in lines:
        for i in range(1, len(line) + 1):
            scorer.next_words(line[:i], 10)
    return incremental, (time.perf_counter() - t0) * 1000 / words


def main(argv=None) -> int:
    import torch

    import lmlow

    args = arguments(__doc__, lines=20).parse_args(argv)
    with bundled_runs(args.preset, args.work) as (lstm, kn):
        torch.set_num_threads(args.threads)
        lines = [line.split() for line in (CORPUS / "valid.txt").read_text().splitlines()
                 if line.split()][:args.lines]
        words = sum(map(len, lines))
        print(f"{len(lstm.vocab.words):,} words, {args.lines} lines ({words} words), threads "
              f"{torch.get_num_threads()}; ms per word typed: reader, re-reading the line")
        for name, scorer in ((f"LSTM ({args.preset})", lstm), ("KenLM 5-gram", kn),
                             ("mixture", lmlow.interpolate(lstm, kn, weight=0.5))):
            scorer.next_words("the", 10)                             # warm-up
            incremental, again = per_word(scorer, lines)
            print(f"{name:>14}: {incremental:7.2f} {again:7.2f}  ({again / incremental:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
