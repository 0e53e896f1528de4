#!/usr/bin/env python3
"""Tokens/s of the whole training update as ``lmlow train`` runs it (autocast precision,
optimiser, clipping, AR/TAR, variable BPTT off), on a real corpus, best of several repeats so
that a busy machine disturbs it less; ``--profile`` adds torch.profiler's table of the most
expensive operators.

Usage: python benchmarks/train_step.py CORPUS [--preset small] [--set key=value ...] [--profile]
       (--set device=cuda times it on a GPU)
e.g.   python benchmarks/train_step.py data/ptb --set tie=False --set init=glove,glove-output,unigram \
           --set freeze_input=True --set embeddings=vectors/ptb.200d.txt
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lmlow.config import Config, build_config  # noqa: E402
from lmlow.train import Trainer, batchify  # noqa: E402


def parse_setting(text: str) -> tuple[str, object]:
    key, _, value = text.partition("=")
    default = getattr(Config(), key)
    if isinstance(default, bool):
        return key, value.lower() in ("1", "true", "yes")
    if isinstance(default, (tuple, list)):
        return key, tuple(value.split(","))
    return key, type(default)(value) if default is not None else value


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus")
    ap.add_argument("--preset", default="small")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    cfg = build_config(args.preset, None, corpus=args.corpus, **dict(map(parse_setting, args.set)))
    with tempfile.TemporaryDirectory() as tmp:
        t = Trainer(cfg, Path(tmp), quiet=True)
        data = batchify(t.train_ids, cfg.batch_size)
        t.n_batches = data.shape[0] - 1
        t.model.train()
        t.hidden = t.model.init_hidden(cfg.batch_size)
        pos = 0

        def steps(n: int) -> None:
            nonlocal pos
            for _ in range(n):
                if pos + cfg.bptt + 1 >= data.shape[0]:
                    pos = 0
                x = torch.from_numpy(np.ascontiguousarray(data[pos:pos + cfg.bptt], np.int64))
                y = torch.from_numpy(np.ascontiguousarray(data[pos + 1:pos + 1 + cfg.bptt], np.int64))
                t._update(x.to(t.device), y.to(t.device), cfg.bptt)
                pos += cfg.bptt

        steps(3)
        best = min(_timed(steps, args.steps, t.device) for _ in range(args.repeats))
        tokens = args.steps * cfg.bptt * cfg.batch_size
        print(f"{cfg.describe()}; device {t.device}; precision {t.amp_dtype or torch.float32}; threads "
              f"{torch.get_num_threads()}: {tokens / best:,.0f} tokens/s, {best / args.steps * 1000:.1f} ms/update")
        if args.profile:
            with torch.profiler.profile() as prof:
                steps(args.steps)
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))
    return 0


def _timed(fn, n: int, device: torch.device) -> float:
    """Seconds of ``fn(n)``, on a GPU from an idle queue to an idle queue (its kernels are
    asynchronous: without the waits the time would be the host's, not the GPU's)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda *a: None)
    sync(device)
    t0 = time.perf_counter()
    fn(n)
    sync(device)
    return time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main())
