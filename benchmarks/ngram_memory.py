#!/usr/bin/env python3
"""Time and memory of the KenLM baseline (`lmlow ngram`) as the vocabulary grows: lmplz's
wall time and peak RSS (as lmplz reports it), the whole `train_ngram`, file sizes, and the
time and memory of scoring the valid split through the kenlm module.

Usage: python benchmarks/ngram_memory.py CORPUS[:K] ... [--order 5] [--memory 1G]
CORPUS is a corpus folder, or TEXT,VALID_DIR to train on a single text file (e.g.
data/pylibs.txt,data/pydocs) with another corpus's valid/test. Prints a Markdown table (copy it
to BENCHMARKS.md). Each measurement runs in a fresh process so that peak RSS is its own.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measure(corpus: str, k: int, order: int, memory: str) -> dict:
    """Train and evaluate one setting in this process (called through --one)."""
    from lmlow.ngram import train_ngram
    from lmlow.ngram_run import NgramRun

    with tempfile.TemporaryDirectory() as tmp:
        root = as_corpus(corpus, Path(tmp))
        run = Path(tmp) / "run"
        cfg = train_ngram(root, run, order=order, unk_threshold=k, memory=memory, quiet=True)
        t0 = time.time()
        ngram = NgramRun(run)
        ev = ngram.evaluate("valid")
        train = ngram.corpus().encode("train").stats
        return {"corpus": corpus, "K": k, "order": order, "train_tokens": train.tokens,
                "vocabulary": len(ngram.vocab), "lmplz_s": cfg.lmplz_seconds,
                "lmplz_peak_mb": cfg.lmplz_peak_rss_mb, "total_s": cfg.train_seconds,
                "arpa_mb": (run / "model.arpa").stat().st_size / 2**20,
                "binary_mb": (run / "model.bin").stat().st_size / 2**20,
                "load_eval_s": time.time() - t0, "valid_tokens": ev.tokens,
                "valid_ppl": ev.perplexity,
                "python_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def as_corpus(spec: str, tmp: Path) -> Path:
    """A corpus folder, or TEXT,DIR: TEXT as train.txt with DIR's valid/test (symlinks)."""
    if "," not in spec:
        return Path(spec)
    text, other = spec.split(",")
    root = tmp / "corpus"
    root.mkdir()
    os.symlink(Path(text).resolve(), root / "train.txt")
    for split in ("valid", "test"):
        os.symlink((Path(other) / f"{split}.txt").resolve(), root / f"{split}.txt")
    return root


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("settings", nargs="+", metavar="CORPUS[:K]")
    ap.add_argument("--order", type=int, default=5)
    ap.add_argument("--memory", default="1G", help="lmplz -S (default: 1G)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        corpus, _, k = args.settings[0].partition(":")
        print(json.dumps(measure(corpus, int(k or 0), args.order, args.memory)))
        return 0
    rows = []
    for s in args.settings:
        out = subprocess.run([sys.executable, __file__, "--one", s, "--order", str(args.order),
                              "--memory", args.memory], capture_output=True, text=True)
        if out.returncode:
            sys.exit(out.stderr)
        rows.append(json.loads(out.stdout.splitlines()[-1]))
        print(rows[-1], file=sys.stderr)
    print("| corpus | K | train tokens | vocabulary | lmplz s | lmplz peak MB | lmlow ngram s "
          "| ARPA MB | binary MB | load + valid s | valid ppl | lmlow peak MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['corpus']} | {r['K']} | {r['train_tokens']:,} | {r['vocabulary']:,} "
              f"| {r['lmplz_s']:.1f} | {r['lmplz_peak_mb']:.0f} | {r['total_s']:.1f} "
              f"| {r['arpa_mb']:.0f} | {r['binary_mb']:.0f} | {r['load_eval_s']:.1f} "
              f"| {r['valid_ppl']:.1f} | {r['python_peak_mb']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
