#!/usr/bin/env python3
"""Build the small corpus bundled in the repo (``corpora/pydocs-mini``), so that ``make demo``
and the tests run without the large downloads.

- LM corpus: a seeded sample of pages of the Python 3.11 documentation (PSF licence), about
  300k words, split by page into train/valid/test;
- pretraining companion (``pretrain.txt.gz``): the documentation of Django, Flask, Jinja,
  Werkzeug and pytest (BSD-3/MIT), deduplicated, with the paragraphs of the mini corpus's
  valid/test removed.
Same tokenisation as the full corpora (spaCy + PTB normalisation). Needs the extracted pages of
``build_pydocs.py`` (its ``--cache``).
"""
from __future__ import annotations

import argparse
import gzip
import random
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]
from lmlow.data.prepare import prepare  # noqa: E402
from lmlow.data.tokenize import Normalisation  # noqa: E402

PRETRAIN_PACKAGES = ["python-django-doc", "python-flask-doc", "python-jinja2-doc",
                     "python-werkzeug-doc", "python-pytest-doc"]
OPTIONS = dict(tokenizer="spacy", norm=Normalisation.ptb())


def sample_pages(root: Path, words: int, seed: int) -> list[Path]:
    pages = sorted(root.rglob("*.txt"))
    random.Random(seed).shuffle(pages)
    out, total = [], 0
    for p in pages:
        n = len(p.read_text(encoding="utf-8").split())
        if n > words // 10:          # no single page dominates the sample
            continue
        out.append(p)
        total += n
        if total >= words:
            break
    return sorted(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path("data/.cache"),
                    help="build_pydocs.py's cache (pages under CACHE/raw)")
    ap.add_argument("--out", type=Path, default=Path("corpora/pydocs-mini"))
    ap.add_argument("--words", type=int, default=300_000, help="size of the LM sample in words")
    args = ap.parse_args(argv)
    raw = args.cache / "raw"
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp) / "pages"
        for p in sample_pages(raw / "python311", args.words, seed=1):
            dst = sample / p.relative_to(raw / "python311")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(p, dst)
        lm = prepare([sample], args.out, valid=0.1, test=0.1, seed=1, force=True, **OPTIONS)
        pre_txt = Path(tmp) / "pretrain.txt"
        pre = prepare([raw / "pylibs" / p for p in PRETRAIN_PACKAGES], pre_txt, no_split=True,
                      dedup=True, exclude=[args.out / "valid.txt", args.out / "test.txt"],
                      force=True, **OPTIONS)
        with open(pre_txt, "rb") as src, gzip.GzipFile(args.out / "pretrain.txt.gz", "wb",
                                                      mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    for split, d in lm.splits.items():
        print(f"{args.out}/{split}.txt: {d['documents']} pages, {d['tokens']} tokens")
    print(f"{args.out}/pretrain.txt.gz: {pre.tokens} tokens ({pre.duplicates_removed} duplicate "
          f"and {pre.excluded_removed} valid/test paragraphs removed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
