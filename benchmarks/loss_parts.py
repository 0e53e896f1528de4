#!/usr/bin/env python3
"""Where the training loss's time goes at a large vocabulary: each part of one chunk of
``lmlow.loss.ChunkedSoftmaxCE`` timed alone (the logits' matmul, the bias, the softmax, the
two gradient matmuls), with the matmuls' GFLOP/s, and on a CPU the matmuls the loss takes in
blocks of words (``lmlow.loss.vocab_blocks``: in fp32 two, in bf16 the logits'), then the whole
fused loss, forward and backward, on the rows of an update, and the BLAS's speed on a large
square product in the same dtype (``--square``), about the most a matmul gets on this core.
At the paper regime's 61,115 words the loss is about 95% of an update (BENCHMARKS.md), so this
says what a CPU's BLAS allows the update to reach.

With ``--blocks`` the blocks are taken even on a CPU where lmlow takes one call (to measure
them on a new kind of CPU), and the fused loss is timed both ways.

Usage: python benchmarks/loss_parts.py [--vocab 61115] [--dim 100] [--tokens 5600]
           [--precision fp32|bf16] [--repeats 3] [--square 1024] [--blocks]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lmlow import loss as L  # noqa: E402


def best_of(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def same(one, blocks, out) -> bool:
    """Whether two ways of writing ``out`` (a part's lambda, from zero) give the same bits."""
    results = []
    for _, fn, _ in (one, blocks):
        out.zero_()
        fn()
        results.append(out.clone())
    return torch.equal(*results)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=61115)
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--tokens", type=int, default=5600, help="rows of an update (batch x BPTT)")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--square", type=int, default=1024,
                    help="side n of the n x n x n product timed as the BLAS's ceiling (0: none)")
    ap.add_argument("--blocks", action="store_true",
                    help="take the blocks of words even where lmlow would not, and time the "
                         "fused loss with and without them")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    mm = torch.bfloat16 if args.precision == "bf16" else torch.float32
    if args.blocks:
        setattr(L, "FP32_BLOCKS" if mm == torch.float32 else "BF16_BLOCKS", True)
    V, d, N = args.vocab, args.dim, args.tokens
    rows = min(N, max(1, L.LOGIT_CHUNK_ELEMENTS // V))    # one chunk, as the loss takes it
    h, w, b = torch.randn(rows, d).to(mm), torch.randn(V, d).to(mm), torch.randn(V)
    logits, probs = torch.empty(rows, V), torch.empty(rows, V)
    low = torch.empty(rows, V, dtype=mm)
    ht, gwt, gh = torch.cat([h.t(), torch.ones(1, rows, dtype=mm)]), torch.zeros(d + 1, V), torch.empty(rows, d)
    gflop = 2 * rows * d * V / 1e9
    block = L.vocab_blocks(V, mm, torch.device("cpu"), rows)
    step = min(rows, max(1, L.CACHED_ELEMENTS // V))
    lg, pb = torch.empty(step, V), torch.empty(step, V)

    def by_rows():    # as the loss runs them: a block of rows at a time, in the core's cache
        for j in range(0, rows, step):
            part = low[j:j + step]
            n = part.size(0)
            x = part.add_(b) if mm == torch.float32 else lg[:n].copy_(part).add_(b)
            torch.softmax(x, -1, out=pb[:n])
            part.copy_(pb[:n])
    parts = [("logits = h W^T", lambda: torch.mm(h, w.t(), out=low), gflop),
             ("+ bias", lambda: logits.add_(b), None),
             ("softmax", lambda: torch.softmax(logits, -1, out=probs), None),
             ("dh = G W", lambda: torch.mm(low, w), gflop),
             ("dW^T += [h;1]^T G", lambda: gwt.add_(torch.mm(ht, low)) if mm != torch.float32
              else gwt.addmm_(ht, low), gflop),
             (f"bias, softmax, rounding back: {step} rows at a time", by_rows, None)]
    blocked = []
    if block:   # what the loss runs in place of the one-call matmuls: fp32 both, bf16 the logits
        blocked.append((f"logits = h W^T, {block} words a call",
                        lambda: L.logits_into(low, h, w, block), gflop))
        if mm == torch.float32:
            blocked.append((f"dW^T += [h;1]^T G, {block} words a call",
                            lambda: L.add_product(gwt, ht, low, block), gflop))
    print(f"{torch.get_num_threads()} threads, {args.precision}, V {V:,}, d {d}, a chunk of "
          f"{rows} rows (of {N}); torch {torch.__version__}")
    print("| part | ms a chunk | GFLOP/s |\n|---|---|---|")
    times = []
    for name, fn, work in parts + blocked:
        t = best_of(fn, args.repeats)
        times.append(t)
        print(f"| {name} | {t * 1000:.1f} | {work / t:.1f} |" if work else f"| {name} | {t * 1000:.1f} | |")
    # the parts as the loss runs them: the row blocks in place of the whole chunk's bias and
    # softmax, the blocked matmuls in place of the one-call ones
    total = times[0] + times[5] + times[3] + times[4]
    if blocked:
        total += times[6] - times[0]
        if len(blocked) == 2:
            total += times[7] - times[4]
        print("\nblocks against one call, the same to the bit: logits "
              f"{same(parts[0], blocked[0], low)}"
              + (f", d loss / d W {same(parts[4], blocked[1], gwt)}" if len(blocked) == 2 else ""))

    class Decoder:    # what lm_loss reads of a model
        decoder = torch.nn.Linear(d, V)
    x, y = torch.randn(N, d, requires_grad=True), torch.randint(0, V, (N,))

    def fused():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mm != torch.float32):
            loss = L.lm_loss(Decoder, x, y)
        loss.backward()
        return loss.detach()
    t = best_of(fused, args.repeats)
    if blocked:   # the whole loss and its gradients, blocks against one call
        params, runs, took = (x, Decoder.decoder.weight, Decoder.decoder.bias), [], []
        setting = "VOCAB_BLOCK" if mm == torch.float32 else "BF16_VOCAB_BLOCK"
        for words in (block, V):                        # V words: fewer than two blocks, one call
            setattr(L, setting, words)
            for p in params:
                p.grad = None
            runs.append([fused()] + [p.grad for p in params])
        print("the fused loss and its three gradients, blocks against one call, the same to the "
              f"bit: {all(torch.equal(a, b) for a, b in zip(*runs))}")
        for words in (block, V) if args.blocks else ():  # (their gradients only accumulate)
            setattr(L, setting, words)
            took.append(best_of(fused, args.repeats))
        setattr(L, setting, block)
        if took:
            print(f"the fused loss, forward and backward: blocks {took[0]:.3g} s, one call "
                  f"{took[1]:.3g} s (one call / blocks {took[1] / took[0]:.2f})")
    if args.square:
        n = args.square
        a, c = torch.randn(n, n).to(mm), torch.randn(n, n).to(mm)
        t_sq = best_of(lambda: torch.mm(a, c), args.repeats)
        print(f"a square product, {n} x {n} x {n}, in {args.precision}: "
              f"{2 * n ** 3 / t_sq / 1e9:.1f} GFLOP/s (about the most a matmul gets on this core)")
    print(f"\nthe parts as the loss runs them, scaled to {N} rows: {total * N / rows:.2f} s; "
          f"the fused loss, forward and backward: {t:.2f} s ({N / t:,.0f} tokens/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
