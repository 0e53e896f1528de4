#!/usr/bin/env python3
"""Scoring throughput: tokens/s of ``lmlow eval``'s per-token log-probabilities
(``lmlow.evaluate.lstm_logprobs``: the batching, the warm-up, the softmax over the vocabulary)
for a model of the ``--preset``'s size at ``--vocab`` words, on a random stream with a line end
every 20 tokens; best of ``--repeats``. What validation costs each epoch, and what scoring a
large file costs, where the softmax over a large vocabulary is most of the work.

Usage: python benchmarks/score_speed.py [--vocab 61115] [--tokens 14000] [--preset small]
       [--arch lstm] [--repeats 3]
Measure on a quiet machine and say which CPU.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lmlow.checkpoint import backbone  # noqa: E402
from lmlow.config import build_config  # noqa: E402
from lmlow.evaluate import lstm_logprobs  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=61_115)
    ap.add_argument("--tokens", type=int, default=14_000)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--arch", default="lstm", choices=["lstm", "transformer"])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    cfg = build_config(args.preset, None, tie=False)
    out = cfg.out_size or cfg.emb_size
    model = backbone(args.arch).from_config(cfg, args.vocab, cfg.emb_size, out).eval()
    ids = np.random.RandomState(0).randint(1, args.vocab, args.tokens)
    ids[::20] = 0
    lstm_logprobs(model, ids[:1000], 0)                          # warm-up
    best = 0.0
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        lp = lstm_logprobs(model, ids, 0)
        best = max(best, len(ids) / (time.perf_counter() - t0))
    print(f"{args.arch} ({args.preset}), {args.vocab:,} words, threads {torch.get_num_threads()}: "
          f"{best:,.0f} tokens/s scored (best of {args.repeats}; mean log-prob {lp.mean():.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
