#!/usr/bin/env python3
"""Training tokens/s of candidate CPU-budget configurations on PTB-sized data (10k words),
through lmlow's own training step (dropouts, weight drop, AR/TAR, Adam, clipping).

Usage: python benchmarks/budget_configs.py [--steps 30] [--precision fp32 bf16]
Prints a Markdown table (copy it to BENCHMARKS.md).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lmlow.config import build_config  # noqa: E402
from lmlow.model import AWDLSTM  # noqa: E402
from lmlow.checkpoint import pick_precision  # noqa: E402
from lmlow.loss import lm_loss  # noqa: E402

CANDIDATES = {  # name: (emb, hidden, layers, out, batch)
    "2x400, out 400, batch 20": (200, 400, 2, 400, 20),
    "650->200, batch 20": (200, 650, 2, 200, 20),
    "650->400, batch 20": (200, 650, 2, 400, 20),
    "1000->200, batch 20": (200, 1000, 2, 200, 20),
    "650->200, batch 40": (200, 650, 2, 200, 40),
    "3x650->200, batch 20": (200, 650, 3, 200, 20),
}


def tokens_per_s(emb, hidden, layers, out, batch, precision, steps, vocab=10000, bptt=35) -> float:
    cfg = build_config("small", emb_size=emb, hidden_size=hidden, layers=layers, out_size=out,
                       tie=False, batch_size=batch, bptt=bptt)
    torch.manual_seed(0)
    model = AWDLSTM(vocab, emb, hidden, layers, out, False, cfg.dropout, cfg.dropouth,
                    cfg.dropouti, cfg.dropoute, cfg.wdrop)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    dtype = pick_precision(precision, torch.device("cpu"))
    x = torch.randint(vocab, (bptt, batch))
    y = torch.randint(vocab, (bptt, batch))
    hidden_state = model.init_hidden(batch)

    def step():
        with torch.autocast("cpu", enabled=dtype is not None, dtype=dtype or torch.float32):
            output, _, raw, dropped = model(x, hidden_state)
            loss = lm_loss(model, output, y, cfg.label_smoothing) + dropped.float().pow(2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()

    step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * bptt * batch / (time.perf_counter() - t0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--precision", nargs="+", default=["fp32", "bf16"])
    args = ap.parse_args(argv)
    print(f"| configuration | {' | '.join(args.precision)} |")
    print("|---|" + "---|" * len(args.precision))
    for name, spec in CANDIDATES.items():
        rates = [tokens_per_s(*spec, p, args.steps) for p in args.precision]
        print(f"| {name} | {' | '.join(f'{r:,.0f}' for r in rates)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
