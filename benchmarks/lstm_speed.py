#!/usr/bin/env python3
"""Training throughput of lmlow's AWD-LSTM (weight drop and all dropouts on) against a plain
fused ``nn.LSTM`` + ``Linear`` of the same sizes, in the same process, and peak memory.

Usage: python benchmarks/lstm_speed.py [--vocab 10000 100000] [--steps 8] [--batch 80 --bptt 70]
Results go to stdout as a Markdown table (copy them to BENCHMARKS.md).
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lmlow.config import build_config  # noqa: E402
from lmlow.model import AWDLSTM  # noqa: E402
from lmlow.loss import lm_loss  # noqa: E402


class Plain(nn.Module):
    def __init__(self, vocab, emb, hidden, layers, out):
        super().__init__()
        self.enc = nn.Embedding(vocab, emb)
        self.rnns = nn.ModuleList(nn.LSTM(a, b) for a, b in zip([emb] + [hidden] * (layers - 1),
                                                                [hidden] * (layers - 1) + [out]))
        self.dec = nn.Linear(out, vocab)

    def loss(self, x, y):
        h = self.enc(x)
        for r in self.rnns:
            h, _ = r(h)
        return F.cross_entropy(self.dec(h).reshape(-1, self.dec.out_features), y.reshape(-1))


def timed(step, steps: int) -> float:
    step()  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--batch", type=int, default=80)
    ap.add_argument("--bptt", type=int, default=70)
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args(argv)
    cfg = build_config(args.preset, None, tie=False)
    print("| vocabulary | model | tokens/s | ratio | peak RSS (GB) |")
    print("|---|---|---|---|---|")
    for v in args.vocab:
        torch.manual_seed(0)
        x = torch.randint(0, v, (args.bptt, args.batch))
        y = torch.randint(0, v, (args.bptt, args.batch))
        plain = Plain(v, cfg.emb_size, cfg.hidden_size, cfg.layers, cfg.emb_size)
        awd = AWDLSTM(v, cfg.emb_size, cfg.hidden_size, cfg.layers, cfg.emb_size, False,
                      cfg.dropout, cfg.dropouth, cfg.dropouti, cfg.dropoute, cfg.wdrop).train()
        opt_p = torch.optim.SGD(plain.parameters(), lr=0.1)
        opt_a = torch.optim.SGD(awd.parameters(), lr=0.1)

        def step_plain():
            opt_p.zero_grad()
            plain.loss(x, y).backward()
            opt_p.step()

        def step_awd():
            opt_a.zero_grad()
            out, _, raw, dropped = awd(x, awd.init_hidden(args.batch))
            loss = lm_loss(awd, out, y, cfg.label_smoothing) + cfg.alpha * dropped.pow(2).mean() \
                + cfg.beta * (raw[1:] - raw[:-1]).pow(2).mean()
            loss.backward()
            opt_a.step()

        tokens = args.batch * args.bptt
        tp = tokens / timed(step_plain, args.steps)
        ta = tokens / timed(step_awd, args.steps)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(f"| {v:,} | plain fused nn.LSTM + Linear | {tp:,.0f} | 1.00 | {rss:.1f} |")
        print(f"| {v:,} | lmlow AWD-LSTM (weight drop {cfg.wdrop}) | {ta:,.0f} | {ta / tp:.2f} | {rss:.1f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
