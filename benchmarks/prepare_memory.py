#!/usr/bin/env python3
"""``lmlow prepare`` on a folder whose files are documents: peak memory against the size of
its largest document, which should not matter (the second pass copies a document to its split
in blocks of ``COPY_BLOCK`` bytes; it read each one whole before 0b78493).

Two folders hold the same text (the SOURCES, concatenated): ``one-large/`` with the first
source as a single file (one document of its full size) beside the others split into
``--pieces`` files, and ``all-small/`` with every source split into pieces. Each is prepared in
a fresh process (``--documents file``, the folder default), its peak RSS from wait4; the
difference between the two is what the largest document costs.

Usage: python benchmarks/prepare_memory.py --sources data/pylibs.txt data/pydocs/train.txt \\
           --work /tmp/prepmem [--code DIR] [--label NAME]
``--code DIR`` runs the lmlow found in DIR (an export of another commit, to compare); the
result is appended to WORK/prepare_memory.jsonl and printed as a table of every run so far.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from scale import measure  # noqa: E402  (one way to measure a step: wall time and wait4's RSS)


def split_into(src: Path, folder: Path, pieces: int, stem: str) -> None:
    """``src``'s lines in ``pieces`` files of about equal line counts, streamed: this process's
    own peak must stay small, since wait4 reports a child's peak RSS as at least its parent's
    at the exec (Python starts children by vfork; splitting the 52 MB source in memory here
    showed as 495 MB for every prepare)."""
    with open(src, encoding="utf-8") as f:
        total = sum(1 for _ in f)
    step = -(-total // pieces)
    with open(src, encoding="utf-8") as f:
        out = None
        for i, line in enumerate(f):
            if i % step == 0:
                if out:
                    out.close()
                out = open(folder / f"{stem}-{i // step:04d}.txt", "w", encoding="utf-8")
            out.write(line)
        if out:
            out.close()


def build(sources: list[Path], work: Path, pieces: int) -> dict[str, Path]:
    folders = {"one-large": work / "one-large", "all-small": work / "all-small"}
    for name, folder in folders.items():
        if folder.is_dir():
            continue
        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for k, src in enumerate(sources):
            if k == 0 and name == "one-large":
                shutil.copyfile(src, tmp / f"s{k}-whole.txt")
            else:
                split_into(src, tmp, pieces, f"s{k}")
        tmp.rename(folder)
    return folders


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", type=Path, nargs="+", required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--pieces", type=int, default=200, help="files each small source becomes")
    ap.add_argument("--code", type=Path, default=ROOT, help="folder whose lmlow/ runs")
    ap.add_argument("--label", default="this checkout")
    args = ap.parse_args(argv)
    args.sources = [p.resolve() for p in args.sources]
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    os.chdir(args.work)        # `python -m` puts the current folder before PYTHONPATH: from a
    #                            checkout, --code would not be the lmlow that runs
    folders = build(args.sources, args.work, args.pieces)
    parent = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    env = {**os.environ, "PYTHONPATH": str(args.code.resolve())}
    check = subprocess.run([sys.executable, "-c", "import lmlow; print(lmlow.__file__)"],
                           env=env, capture_output=True, text=True).stdout.strip()
    if not check.startswith(str(args.code.resolve())):
        raise SystemExit(f"--code {args.code}: python imports lmlow from {check} instead")
    log = args.work / "prepare_memory.log"
    largest = args.sources[0].stat().st_size
    rows = []
    for name, folder in folders.items():
        out = args.work / f"corpus-{name}"
        cmd = [sys.executable, "-m", "lmlow.cli", "prepare", str(folder), "--out", str(out),
               "--valid", "0.01", "--test", "0.01", "--force"]
        got = measure(cmd, env, log)
        rows.append({"code": args.label, "folder": name, "input_mb": round(sum(
            f.stat().st_size for f in folder.iterdir()) / 1e6, 1),
            "largest_document_mb": round((largest if name == "one-large" else max(
                f.stat().st_size for f in folder.iterdir())) / 1e6, 1), **got,
            "benchmark_process_peak_mb": parent, "cpu": platform.processor() or platform.machine()})
    results = args.work / "prepare_memory.jsonl"
    with open(results, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    every = [json.loads(line) for line in results.read_text().splitlines()]
    print("| code | folder | input MB | largest document MB | seconds | peak RSS MB |")
    print("|---|---|---|---|---|---|")
    for r in every:
        print(f"| {r['code']} | {r['folder']} | {r['input_mb']} | {r['largest_document_mb']} "
              f"| {r['seconds']} | {r['peak_rss_mb']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
