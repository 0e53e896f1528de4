#!/usr/bin/env python3
"""How often ``lmlow train``'s update makes the host wait for the GPU (issue 25, items 4-5).

A wait (a device-to-host copy, ``.item()``, a stream synchronisation) stalls the Python thread
until the GPU has drained its queue, so the next update's kernels cannot be queued behind the
current ones; with small models that is most of the time. torch reports each synchronising
call when ``torch.cuda.set_sync_debug_mode("warn")`` is on; this script counts them over
``--updates`` updates of the trainer's own update (``Trainer._update``, the batches copied as
in training), with the host reading the loss every ``SYNC_EVERY`` updates as training does,
per precision and optimiser: Adam, SGD, and NT-ASGD (SGD switched to averaging).

Target: 0 waits inside an update; 1 per ``SYNC_EVERY`` updates (the loss read), i.e. 0.05.

Usage: python benchmarks/gpu_waits.py CORPUS [--preset paper] [--updates 100] [--json FILE]
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lmlow.config import build_config  # noqa: E402
from lmlow.errors import LmlowError  # noqa: E402
from lmlow.train import SYNC_EVERY, Trainer, batchify  # noqa: E402

OPTIMISERS = {"adam": dict(optimizer="adam", lr=1e-3), "sgd": dict(optimizer="sgd", lr=30.0),
              "nt-asgd": dict(optimizer="sgd", lr=30.0)}


def count_waits(corpus: Path, preset: str, precision: str, opt: str, updates: int) -> dict:
    """Waits per update and the source lines that waited, for one precision and optimiser."""
    cfg = build_config(preset, None, corpus=str(corpus), device="cuda", precision=precision,
                       **OPTIMISERS[opt])
    with tempfile.TemporaryDirectory() as tmp:
        t = Trainer(cfg, Path(tmp) / "run", quiet=True)
        if opt == "nt-asgd":
            t.start_averaging()   # as NT-ASGD does when validation stalls
        data = batchify(t.train_ids, cfg.batch_size)
        t.n_batches = data.shape[0] - 1
        t.hidden = t.model.init_hidden(data.shape[1])
        t.model.train()
        seq = cfg.bptt

        def update(i: int) -> None:
            start = (i * seq) % (t.n_batches - seq)
            t._update(t._batch(data, start, seq), t._batch(data, start + 1, seq), seq)

        for i in range(3):          # lazy initialisations (cuBLAS handles, optimiser state)
            update(i)
        t._sync()
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                for i in range(updates):
                    update(i)
                    if (i + 1) % SYNC_EVERY == 0:
                        t._sync()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
    waits = [w for w in caught if "synchroniz" in str(w.message)]
    where = collections.Counter(f"{Path(w.filename).name}:{w.lineno}" for w in waits)
    return {"precision": precision, "optimiser": opt, "updates": updates,
            "waits": len(waits), "per_update": len(waits) / updates,
            "where": dict(where.most_common(5))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path, help="a prepared corpus folder (train/valid/test.txt)")
    ap.add_argument("--preset", default="paper", help="model preset (default: paper)")
    ap.add_argument("--updates", type=int, default=100, help="updates counted per cell (>= 1)")
    ap.add_argument("--precision", nargs="+", default=["fp32", "bf16", "fp16"],
                    choices=["fp32", "bf16", "fp16"], help="precisions to count (default: all three)")
    ap.add_argument("--optimiser", nargs="+", default=list(OPTIMISERS), choices=list(OPTIMISERS),
                    help="optimisers to count (default: all three)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    if args.updates < 1:
        ap.error("--updates must be >= 1")
    if not torch.cuda.is_available():
        print("gpu_waits: no CUDA GPU here (torch.cuda.is_available() is False); run it on a "
              "machine with one", file=sys.stderr)
        return 2
    try:
        rows = [count_waits(args.corpus, args.preset, p, o, args.updates)
                for p in args.precision for o in args.optimiser]
    except LmlowError as e:          # a missing corpus, an unknown preset: one line
        print(f"gpu_waits: {e}", file=sys.stderr)
        return 1
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, preset {args.preset}, "
          f"{args.updates} updates per cell, the loss read every {SYNC_EVERY}\n")
    print("| precision | optimiser | waits | per update | where (file:line: count) |")
    print("|---|---|---|---|---|")
    for r in rows:
        where = ", ".join(f"{k}: {v}" for k, v in r["where"].items())
        print(f"| {r['precision']} | {r['optimiser']} | {r['waits']} | {r['per_update']:.2f} | "
              f"{where} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
