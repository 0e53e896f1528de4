#!/usr/bin/env python3
"""The training loss of two lmlow trees side by side: whether the loss and its three
gradients (h, W, b) come out the same to the bit, and each tree's time for the fused loss,
forward and backward, interleaved (best of the rounds), at one thread. For a change to
``lmlow/loss.py`` that should change speed and not numbers: check out the commit before it
in another folder and give both.

Usage: python benchmarks/loss_ab.py OLD_TREE NEW_TREE [--vocab 61115] [--dim 100]
           [--tokens 5600] [--precision bf16|fp32] [--rounds 3] [--threads 1] [--frozen-output]
e.g.   git worktree add /tmp/before HEAD~1 && python benchmarks/loss_ab.py /tmp/before .
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch


def load(tree: Path, name: str):
    """``lmlow/loss.py`` of ``tree`` as a module of its own (it imports only torch)."""
    spec = importlib.util.spec_from_file_location(name, tree / "lmlow" / "loss.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--vocab", type=int, default=61115)
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--tokens", type=int, default=5600, help="rows of an update (batch x BPTT)")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--frozen-output", action="store_true",
                    help="the output weights frozen, their bias trained (d/db without d/dW)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    trees = {"old": load(args.old, "loss_old"), "new": load(args.new, "loss_new")}
    V, d, N = args.vocab, args.dim, args.tokens
    gen = torch.Generator().manual_seed(0)
    h, w = torch.randn(N, d, generator=gen) * 0.5, torch.randn(V, d, generator=gen) * 0.3
    b, y = torch.randn(V, generator=gen) * 0.3, torch.randint(0, V, (N,), generator=gen)
    bf16 = args.precision == "bf16"

    def run(loss_module):
        model = torch.nn.Module()
        model.decoder = torch.nn.Linear(d, V)
        with torch.no_grad():
            model.decoder.weight.copy_(w)
            model.decoder.bias.copy_(b)
        model.decoder.weight.requires_grad_(not args.frozen_output)
        x = h.clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_module.lm_loss(model, x, y)
        loss.backward()
        return [loss.detach(), x.grad, model.decoder.weight.grad, model.decoder.bias.grad]

    got = {name: run(module) for name, module in trees.items()}
    same = [a is c is None or (a is not None and c is not None and torch.equal(a, c))
            for a, c in zip(got["old"], got["new"])]   # None: a frozen weight's, no gradient
    times = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, module in trees.items():
            t0 = time.perf_counter()
            run(module)
            times[name].append(time.perf_counter() - t0)
    print(f"{args.threads} thread(s), {args.precision}, V {V:,}, d {d}, {N} rows"
          f"{', output weights frozen' if args.frozen_output else ''}; torch {torch.__version__}")
    print("the same to the bit (loss, d/dh, d/dW, d/db): " + ", ".join(map(str, same)))
    worst = [(a.double() - c.double()).abs().max().item() if a is not None and c is not None else 0.0
             for a, c in zip(got["old"], got["new"])]
    print("largest difference (loss, d/dh, d/dW, d/db): " + ", ".join(f"{x:.3g}" for x in worst))
    for name in trees:
        print(f"{name} ({getattr(args, name)}): best {min(times[name]):.3f} s "
              f"({N / min(times[name]):,.0f} tokens/s); rounds "
              + " ".join(f"{t:.3f}" for t in times[name]))
    print(f"new / old speed: {min(times['old']) / min(times['new']):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
