#!/usr/bin/env python3
"""Build the State of the Union as a second domain for the converged tables: a small LM corpus
and a larger in-domain pretraining text, split by speech.

Kummerfeld et al.'s section 3 setting on another domain: the speeches are shuffled (seeded)
and split into two disjoint sets. The first speeches, until about ``--lm-words`` words, make the
LM corpus (``OUT/train.txt``, ``valid.txt``, ``test.txt``, split by speech with ``--valid`` and
``--test`` tokens); every other speech makes the pretraining text (``OUT/pretrain.txt``), with
any paragraph that also occurs in valid/test removed (``lmlow prepare --exclude``). Both are
tokenised with spaCy and PTB-normalised, like the other corpora.
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from build_sotu import speeches_dir  # noqa: E402

from lmlow.data.prepare import prepare  # noqa: E402
from lmlow.data.tokenize import Normalisation  # noqa: E402
from lmlow.errors import LmlowError  # noqa: E402


def split_speeches(files: list[Path], lm_words: int, seed: int) -> tuple[list[Path], list[Path]]:
    """(LM speeches, pretraining speeches): a seeded shuffle, cut where the LM side first
    holds ``lm_words`` whitespace-separated words."""
    files = sorted(files)
    random.Random(seed).shuffle(files)
    total = 0
    for i, f in enumerate(files):
        total += len(f.read_text(encoding="utf-8").split())
        if total >= lm_words:
            return files[:i + 1], files[i + 1:]
    raise LmlowError(f"only {total} words in {len(files)} speeches; lower --lm-words")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("data/sotu-q"), help="output corpus folder")
    ap.add_argument("--lm-words", type=int, default=135_000,
                    help="raw words of the LM side (train + valid + test) (default: 135000)")
    ap.add_argument("--valid", type=int, default=30_000, help="valid tokens (default: 30000)")
    ap.add_argument("--test", type=int, default=30_000, help="test tokens (default: 30000)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the speech split (default: 1)")
    ap.add_argument("--force", action="store_true", help="rebuild even if the corpus exists")
    args = ap.parse_args(argv)
    out = args.out
    if (out / "pretrain.txt").exists() and not args.force:
        print(f"{out}: already built (use --force to rebuild)")
        return 0
    files = [p for p in Path(speeches_dir()).rglob("*") if p.is_file()]
    lm, pre = split_speeches(files, args.lm_words, args.seed)
    norm = Normalisation.ptb()
    try:
        report = prepare(lm, out, tokenizer="spacy", norm=norm, valid=args.valid, test=args.test,
                         seed=args.seed, documents="file", force=True, show_progress=False)
        pretrain = prepare(pre, out / "pretrain.txt", tokenizer="spacy", norm=norm,
                           documents="file", no_split=True, force=True, show_progress=False,
                           exclude=[out / "valid.txt", out / "test.txt"])
    except LmlowError as e:
        sys.exit(f"build_sotu_domain.py: {e}")
    for split, d in report.splits.items():
        print(f"{out}/{split}.txt: {d['documents']} speeches, {d['lines']} lines, {d['tokens']} tokens")
    d = pretrain.splits["all"]
    print(f"{out}/pretrain.txt: {len(pre)} speeches, {d['lines']} lines, {d['tokens']} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
