#!/usr/bin/env python3
"""Data-parallel scaling: tokens/s of ``lmlow train`` with 1, 2, ... processes on this machine
(``--nproc N``: torchrun + DDP; gloo on CPU cores, NCCL on GPUs), the same global batch and
number of updates, read from each run's summary.json.

On CPU every run gets the same cores: one process with all of them, or N processes with an
equal share each (--threads); on GPUs one process per GPU.

Usage: python benchmarks/ddp_scaling.py CORPUS [--preset small] [--nproc 1 2] [--steps 200]
                                        [--device cpu|cuda] [--threads 2]
Prints a Markdown table (copy it to BENCHMARKS.md).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--nproc", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--steps", type=int, default=200, help="updates per run")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=2, help="CPU: cores shared by the processes")
    args = ap.parse_args(argv)
    print("| processes | threads each | global batch | updates | tokens/s | speed-up |")
    print("|---|---|---|---|---|---|")
    base = None
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.nproc:
            out = Path(tmp) / f"run{n}"
            threads = max(1, args.threads // n) if args.device == "cpu" else 0
            cmd = [sys.executable, "-m", "lmlow", "train", str(args.corpus), "--out", str(out),
                   "--preset", args.preset, "--max-steps", str(args.steps), "--device",
                   args.device, "--threads", str(threads), "--nproc", str(n), "--quiet"]
            subprocess.run(cmd, check=True)
            s = json.loads((out / "summary.json").read_text())
            batch = json.loads((out / "config.json").read_text())["batch_size"]
            base = base or s["tokens_per_s"]
            print(f"| {n} | {threads or '-'} | {batch} | {s['steps']} | {s['tokens_per_s']:,} | "
                  f"{s['tokens_per_s'] / base:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
