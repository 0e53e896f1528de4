#!/usr/bin/env python3
"""Training throughput of lmlow's AWD-LSTM against a plain cuDNN ``nn.LSTM`` stack of the
same sizes, in the same process, on a GPU (or, small, on the CPU so that it cannot rot), per
vocabulary size and precision, with peak memory.

Both sides run the same update: embedding, the LSTM layers, a linear output layer over the
vocabulary with softmax cross-entropy, backward, SGD step; lmlow's side also has weight drop
(DropConnect through the fused kernel), every dropout, AR/TAR, its chunked softmax loss and the
autocast of ``lmlow train``. Token ids are random (speed does not depend on them). Target: at
least 0.9x the plain model.

Each cell is the median of ``--repeats`` timings of ``--steps`` updates; peak GPU memory is
reset per cell. Both sides run what ``lmlow train`` runs in each precision: under bf16 the LSTM
layers leave autocast and run in fp32 (TF32; ``lmlow.model.lstm_in_fp32``), under fp16 they run
in fp16 and the update goes through a GradScaler.

Usage: python benchmarks/gpu_speed.py [--preset paper] [--vocab 10000 100000]
                                      [--precision fp32 bf16 fp16] [--steps 20] [--json FILE]
       python benchmarks/gpu_speed.py --device cpu --preset tiny --vocab 1000 --steps 2
Prints a Markdown table (copy it to BENCHMARKS.md); --json also writes the rows.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lstm_speed import Plain  # noqa: E402  (benchmarks/ is the script's folder)

from lmlow.checkpoint import fast_matmuls, make_scaler, pick_device, pick_precision  # noqa: E402
from lmlow.config import build_config  # noqa: E402
from lmlow.errors import LmlowError  # noqa: E402
from lmlow.loss import lm_loss  # noqa: E402
from lmlow.model import AWDLSTM, lstm_in_fp32  # noqa: E402


def timed(step, steps: int, repeats: int, device: torch.device) -> float:
    """Seconds per call of ``step``: the median over ``repeats`` timings of ``steps`` calls,
    after two warm-up calls, the device drained at both ends of each timing."""
    for _ in range(2):
        step()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        times.append((time.perf_counter() - t0) / steps)
    return statistics.median(times)


def peak_memory_gb(device: torch.device) -> float | None:
    """This cell's peak GPU memory (reset before it); None on a CPU, whose process peak
    cannot be reset between cells."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return None


class PlainAsTrained(Plain):
    """The plain stack with lmlow's dtype rule: under CUDA bf16 autocast its LSTMs run in
    fp32 outside autocast, as lmlow's do, so the ratio measures lmlow's extra work."""

    def loss(self, x, y):
        h = self.enc(x)
        for r in self.rnns:
            if h.is_cuda and lstm_in_fp32("cuda", torch.is_autocast_enabled("cuda"),
                                          torch.get_autocast_dtype("cuda")):
                with torch.autocast("cuda", enabled=False):
                    h, _ = r(h.float())
            else:
                h, _ = r(h)
        return torch.nn.functional.cross_entropy(self.dec(h).reshape(-1, self.dec.out_features).float(),
                                                 y.reshape(-1))


def measure(model_name: str, cfg, vocab: int, batch: int, bptt: int, dtype, device, steps: int,
            repeats: int):
    """(tokens/s, peak memory GB) of one model's training update."""
    torch.manual_seed(0)
    x = torch.randint(0, vocab, (bptt, batch), device=device)
    y = torch.randint(0, vocab, (bptt, batch), device=device)
    out = cfg.out_size or cfg.emb_size
    if model_name == "plain":
        model = PlainAsTrained(vocab, cfg.emb_size, cfg.hidden_size, cfg.layers, out).to(device)
    else:
        model = AWDLSTM(vocab, cfg.emb_size, cfg.hidden_size, cfg.layers, out, cfg.tie,
                        cfg.dropout, cfg.dropouth, cfg.dropouti, cfg.dropoute, cfg.wdrop).to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = make_scaler(dtype, device)             # fp16: a GradScaler, as lmlow train has
    autocast = dict(device_type=device.type, enabled=dtype is not None,
                    dtype=dtype or torch.float32)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(**autocast):
            if model_name == "plain":
                loss = model.loss(x, y)
            else:
                output, _, raw, dropped = model(x, model.init_hidden(batch))
                loss = (lm_loss(model, output, y) + cfg.alpha * dropped.float().pow(2).mean()
                        + cfg.beta * (raw[1:] - raw[:-1]).float().pow(2).mean())
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    seconds = timed(step, steps, repeats, device)
    return batch * bptt / seconds, peak_memory_gb(device)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="paper", help="model sizes and batch (default: paper)")
    ap.add_argument("--vocab", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--precision", nargs="+", default=["fp32", "bf16"],
                    choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--steps", type=int, default=20, help="timed updates per timing")
    ap.add_argument("--repeats", type=int, default=5, help="timings per cell; the median is "
                    "reported (default 5)")
    ap.add_argument("--json", type=Path, help="also write the rows to this file")
    args = ap.parse_args(argv)
    try:
        device = pick_device(args.device)
    except LmlowError as e:
        print(f"gpu_speed: {e} (on a CPU: --device cpu --preset tiny)", file=sys.stderr)
        return 2
    fast_matmuls(device)                      # what lmlow train sets: TF32 on Ampere and later
    cfg = build_config(args.preset, None, tie=False)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"{name}; torch {torch.__version__}; preset {args.preset} ({cfg.layers} layers, "
          f"{cfg.emb_size}-{cfg.hidden_size}, batch {cfg.batch_size} x BPTT {cfg.bptt}, "
          f"weight drop {cfg.wdrop})\n")
    print("| vocabulary | precision | plain fused nn.LSTM tokens/s | lmlow tokens/s | ratio | "
          "plain peak GB | lmlow peak GB |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for vocab in args.vocab:
        for precision in args.precision:
            dtype = pick_precision(precision, device)
            (tp, mp), (ta, ma) = (measure(m, cfg, vocab, cfg.batch_size, cfg.bptt, dtype,
                                          device, args.steps, args.repeats)
                                  for m in ("plain", "lmlow"))
            rows.append({"device": name, "preset": args.preset, "vocab": vocab,
                         "precision": precision, "plain_tokens_per_s": round(tp),
                         "lmlow_tokens_per_s": round(ta), "ratio": round(ta / tp, 3),
                         "plain_peak_gb": mp and round(mp, 2), "lmlow_peak_gb": ma and round(ma, 2)})
            gb = lambda m: "-" if m is None else f"{m:.2f}"
            print(f"| {vocab:,} | {precision} | {tp:,.0f} | {ta:,.0f} | {ta / tp:.2f} | "
                  f"{gb(mp)} | {gb(ma)} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
