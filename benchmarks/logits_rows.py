#!/usr/bin/env python3
"""When the scores' matmul should take the vocabulary in blocks: ``lmlow.loss.logits_into``
(``bias + h W^T``) on a CPU in fp32, for a few rows (a keyboard's one word, a short line) up to
an update's, in blocks of ``lmlow.loss.VOCAB_BLOCK`` words against one call, with whether the
two give the same bits and which one ``lmlow.loss.vocab_blocks`` picks. Blocks keep W's slice
in cache while many rows pass over it; for a few rows they only add a call's overhead per block.

Usage: python benchmarks/logits_rows.py [--vocab 12000 61115] [--dim 400]
           [--rows 1 2 4 8 16 32 64 128 256] [--repeats 5]
Measure on a quiet machine and say which CPU.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lmlow import loss as L  # noqa: E402


def ms_per_call(fn, repeats: int) -> float:
    """The best of ``repeats`` timings of a loop of calls (about 0.1 s a loop)."""
    t0 = time.perf_counter()
    fn()
    n, best = max(3, int(0.1 / max(time.perf_counter() - t0, 1e-6))), float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1000


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, nargs="+", default=[12000, 61115])
    ap.add_argument("--dim", type=int, default=400)
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    cpu = torch.device("cpu")
    print(f"threads {torch.get_num_threads()}, d {args.dim}, blocks of {L.VOCAB_BLOCK} words; "
          f"lmlow takes blocks from {L.BLOCK_ROWS} rows"
          + ("" if L.FP32_BLOCKS else " on an AMD or AVX2 CPU, and one call on this one"))
    print("| vocabulary | rows | blocks, ms | one call, ms | blocks / one call | same bits | lmlow |")
    print("|---|---|---|---|---|---|---|")
    for V in args.vocab:
        w, b = torch.randn(V, args.dim) * 0.05, torch.randn(V)
        for rows in args.rows:
            h = torch.randn(rows, args.dim)
            blocked, one = torch.empty(rows, V), torch.empty(rows, V)
            t_blocks = ms_per_call(lambda: L.logits_into(blocked, h, w, L.VOCAB_BLOCK, bias=b),
                                   args.repeats)
            t_one = ms_per_call(lambda: L.logits_into(one, h, w, None, bias=b), args.repeats)
            picks = "blocks" if L.vocab_blocks(V, torch.float32, cpu, rows) else "one call"
            print(f"| {V:,} | {rows} | {t_blocks:.3f} | {t_one:.3f} | {t_blocks / t_one:.2f} | "
                  f"{torch.equal(blocked, one)} | {picks} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
