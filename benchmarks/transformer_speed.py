#!/usr/bin/env python3
"""Training throughput of lmlow's Transformer (transformer-small, its banded attention over a
carried memory, lmlow's fused softmax cross-entropy) against a plain ``nn.TransformerEncoder``
causal LM of the same width, depth and vocabulary (full causal mask, no memory, plain cross-
entropy), and against the `small` preset's AWD-LSTM at about the same parameter count, in one
process: tokens per second of a forward + backward + AdamW step, median of ``--repeats``.

On a GPU a fourth row times lmlow's Transformer with its attention through the band as a
boolean mask (the path CPUs and a failed kernel check take) instead of the windowed fused
kernel, so the kernel's share of the difference is measured in the same run. ``--profile DIR``
writes each model's top operators (torch.profiler, self time on the device, or on the CPU
there) to DIR/PRECISION-MODEL.txt.

Usage: python benchmarks/transformer_speed.py [--vocab 10000] [--steps 5] [--device cpu]
       [--precision fp32 bf16] [--profile DIR]
Results go to stdout as a Markdown table (and JSON with --json) for BENCHMARKS.md; measure on a
quiet machine and say which CPU or GPU.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lmlow.checkpoint import backbone  # noqa: E402
from lmlow.config import build_config  # noqa: E402
from lmlow.loss import lm_loss  # noqa: E402
from lmlow.model import detach_hidden  # noqa: E402


class PlainTransformer(nn.Module):
    """What a user would write first: nn.TransformerEncoder (pre-norm, GELU) with a causal
    mask over the whole chunk, learned positions, embedding -> width -> embedding."""

    def __init__(self, vocab, emb, width, layers, heads, bptt):
        super().__init__()
        self.enc = nn.Embedding(vocab, emb)
        self.inp = nn.Linear(emb, width, bias=False)
        self.pos = nn.Parameter(torch.zeros(bptt, 1, width))
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, 0.1, "gelu", norm_first=True)
        self.body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.out = nn.Linear(width, emb, bias=False)
        self.dec = nn.Linear(emb, vocab)

    def loss(self, x, y):
        T = x.shape[0]
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=x.device)
        h = self.body(self.inp(self.enc(x)) + self.pos[:T], mask=mask, is_causal=True)
        return F.cross_entropy(self.dec(self.out(h)).reshape(-1, self.dec.out_features), y.reshape(-1))


def lmlow_loss(model):
    """The training loss as lmlow computes it: the state carried (and detached) between
    chunks, the fused chunked softmax cross-entropy."""
    state = {}

    def loss(x, y):
        hidden = state.get("h") or model.init_hidden(x.shape[1])
        out, hidden, _, _ = model(x, hidden)
        state["h"] = detach_hidden(hidden)
        return lm_loss(model, out, y)
    return loss


def masked(fn):
    """``fn`` with lmlow's attention forced through the masked SDPA call (the kernel's check
    answered no), for the GPU's fourth row."""
    import lmlow.transformer as tr

    def call(*a):
        kept, tr.window_kernel_agrees = tr.window_kernel_agrees, lambda *_: False
        try:
            return fn(*a)
        finally:
            tr.window_kernel_agrees = kept
    return call


def profile(loss, params, x, y, steps, device, dtype, path: Path) -> None:
    """The top operators of ``steps`` training steps by self time on ``device``."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    step = training_step(loss, params, x, y, device, dtype)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with torch_profile(activities=acts) as prof:
        for _ in range(steps):
            step()
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    path.write_text(prof.key_averages().table(sort_by=key, row_limit=30) + "\n")


def training_step(loss, params, x, y, device, dtype):
    """One forward + backward + AdamW step of ``loss`` on (x, y), waiting for the GPU."""
    opt = torch.optim.AdamW(params, lr=1e-4)

    def step():
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            value = loss(x, y)
        opt.zero_grad(set_to_none=True)
        value.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
    return step


def throughput(loss, params, x, y, steps, repeats, device, dtype) -> float:
    step = training_step(loss, params, x, y, device, dtype)
    step()                                              # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - t0) / steps)
    return x.numel() / statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--bptt", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    ap.add_argument("--preset", default="transformer-small")
    ap.add_argument("--lstm-preset", default="small")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--profile", type=Path, help="folder for each model's operator profile")
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("transformer_speed: no CUDA device here", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    tcfg = build_config(args.preset, None, tie=False)
    lcfg = build_config(args.lstm_preset, None, tie=False)
    torch.manual_seed(0)
    x = torch.randint(0, args.vocab, (args.bptt, args.batch), device=device)
    y = torch.randint(0, args.vocab, (args.bptt, args.batch), device=device)
    models = {
        "lmlow Transformer": backbone("transformer").from_config(tcfg, args.vocab, tcfg.emb_size,
                                                                 tcfg.emb_size),
        "nn.TransformerEncoder": PlainTransformer(args.vocab, tcfg.emb_size, tcfg.hidden_size,
                                                  tcfg.layers, tcfg.heads, args.bptt),
        f"lmlow LSTM ({args.lstm_preset})": backbone("lstm").from_config(lcfg, args.vocab,
                                                                         lcfg.emb_size,
                                                                         lcfg.out_size or lcfg.emb_size),
    }
    runs = [(name, model, False) for name, model in models.items()]
    if device.type == "cuda":
        runs.append(("lmlow Transformer (masked attention)", runs[0][1], True))
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    rows = []
    for precision in args.precision:
        dtype = None if precision == "fp32" else torch.bfloat16
        base = None
        for name, model, mask in runs:
            model.to(device).train()
            loss = model.loss if isinstance(model, PlainTransformer) else lmlow_loss(model)
            loss = masked(loss) if mask else loss
            tps = throughput(loss, model.parameters(), x, y, args.steps, args.repeats, device, dtype)
            if args.profile:
                slug = name.replace(" ", "-").replace("(", "").replace(")", "").replace(".", "")
                profile(loss, model.parameters(), x, y, args.steps, device, dtype,
                        args.profile / f"{precision}-{slug}.txt")
            base = base or tps
            params = sum(p.numel() for n, p in model.named_parameters()
                         if not n.startswith(("enc", "dec", "encoder", "decoder")))
            rows.append({"precision": precision, "model": name, "tokens_per_s": round(tps),
                         "ratio": round(tps / base, 2), "params_without_embeddings": params})
    print("| precision | model | tokens/s | vs lmlow Transformer | parameters (no embeddings) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['precision']} | {r['model']} | {r['tokens_per_s']:,} | {r['ratio']:.2f} | "
              f"{r['params_without_embeddings']:,} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
