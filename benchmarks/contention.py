#!/usr/bin/env python3
"""Trainings sharing a machine: one `lmlow train` alone, then two at once, for each thread
setting; the tokens/s each keeps (the run's own summary: updates only, start-up excluded).
The target: each of two keeps at least 0.4x of the solo speed.

Usage: python benchmarks/contention.py CORPUS [--steps 80] [--preset small]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

VARIANTS = {
    "lmlow default (all cores, OMP_WAIT_POLICY=PASSIVE)": {},
    "OMP_WAIT_POLICY=ACTIVE (OpenMP's spinning waiters)": {"env": {"OMP_WAIT_POLICY": "ACTIVE"}},
    "--threads 1 each": {"threads": "1"},
}


def train(corpus: str, out: Path, steps: int, preset: str, variant: dict) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    env.update(variant.get("env", {}))
    cmd = [sys.executable, "-m", "lmlow.cli", "train", corpus, "--out", str(out), "--preset",
           preset, "--max-steps", str(steps), "--quiet", "--precision", "fp32"]
    if "threads" in variant:
        cmd += ["--threads", variant["threads"]]
    return subprocess.Popen(cmd, env=env, cwd=ROOT)


def speed(out: Path) -> float:
    return json.loads((out / "summary.json").read_text())["tokens_per_s"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus")
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--preset", default="small")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, variant in VARIANTS.items():
            solo = Path(tmp) / f"{len(rows)}-solo"
            train(args.corpus, solo, args.steps, args.preset, variant).wait()
            pair = [Path(tmp) / f"{len(rows)}-{i}" for i in range(2)]
            procs = [train(args.corpus, p, args.steps, args.preset, variant) for p in pair]
            for p in procs:
                p.wait()
            alone, both = speed(solo), [speed(p) for p in pair]
            rows.append((name, alone, both, min(both) / alone))
    print(f"cores available: {len(os.sched_getaffinity(0))}\n")
    print("| threads | alone tok/s | two at once tok/s (each) | worst ratio |")
    print("|---|---|---|---|")
    for name, alone, both, ratio in rows:
        print(f"| {name} | {alone:,.0f} | {both[0]:,.0f} + {both[1]:,.0f} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
