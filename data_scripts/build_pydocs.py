#!/usr/bin/env python3
"""Build the technical-domain corpora from Debian documentation packages.

- ``OUT/pydocs/``: the Python 3.11 documentation (Debian ``python3.11-doc``) as the language
  model's train/valid/test, split by page (seeded);
- ``OUT/pylibs.txt``: the in-domain pretraining text for GloVe, the documentation of the Python
  libraries in ``debian_docs.LIBRARY_DOC_PACKAGES``, with duplicate paragraphs removed and with
  every paragraph of pydocs' valid/test removed (the library docs quote the Python docs).

Both are tokenised with spaCy's English rules and PTB-normalised (lowercase, numbers -> N,
punctuation dropped), as in Kummerfeld et al. (2020). A report with sizes and removal counts goes
to ``OUT/pydocs/BUILD.json``. Idempotent: downloads, extracted pages and finished outputs are
reused.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
import debian_docs  # noqa: E402
from lmlow.data.prepare import prepare  # noqa: E402
from lmlow.data.tokenize import Normalisation  # noqa: E402
from lmlow.errors import LmlowError  # noqa: E402

PYDOC_PACKAGE = "python3.11-doc"
PYDOC_HTML = "usr/share/doc/python3.11/html"
OPTIONS = dict(tokenizer="spacy", norm=Normalisation.ptb())


def extract(cache: Path, raw: Path) -> dict:
    """Download the packages and turn their HTML into one text file per page."""
    roots = debian_docs.download([PYDOC_PACKAGE, *debian_docs.LIBRARY_DOC_PACKAGES], cache)
    if PYDOC_PACKAGE not in roots:
        raise LmlowError(f"could not download {PYDOC_PACKAGE} (run apt-get update first?)")
    sizes = {}
    for pkg, root in roots.items():
        src = root / PYDOC_HTML if pkg == PYDOC_PACKAGE else root
        dst = raw / "python311" if pkg == PYDOC_PACKAGE else raw / "pylibs" / pkg
        pages, paragraphs, words = debian_docs.extract_tree(src, dst)
        sizes[pkg] = {"pages": pages, "paragraphs": paragraphs, "words": words}
        print(f"{pkg}: {pages} pages, {paragraphs} paragraphs, {words} words", flush=True)
    return sizes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("data"),
                    help="writes OUT/pydocs/ and OUT/pylibs.txt (default: data)")
    ap.add_argument("--cache", type=Path, default=Path("data/.cache"),
                    help="CACHE/debdocs holds the packages, CACHE/raw their pages as text "
                    "(default: data/.cache)")
    ap.add_argument("--force", action="store_true", help="rebuild the corpora even if present")
    args = ap.parse_args(argv)
    corpus, pretrain = args.out / "pydocs", args.out / "pylibs.txt"
    if (corpus / "BUILD.json").exists() and pretrain.exists() and not args.force:
        print(f"{corpus} and {pretrain}: already built (use --force to rebuild)")
        return 0
    t0 = time.time()
    try:
        sizes = extract(args.cache / "debdocs", args.cache / "raw")
        lm = prepare([args.cache / "raw" / "python311"], corpus, valid=0.1, test=0.1, seed=1,
                     force=True, **OPTIONS)
        pre = prepare([args.cache / "raw" / "pylibs"], pretrain, no_split=True, dedup=True,
                      exclude=[corpus / "valid.txt", corpus / "test.txt"], force=True, **OPTIONS)
    except LmlowError as e:
        sys.exit(f"build_pydocs.py: {e}")
    report = {"packages": sizes, "lm_corpus": asdict(lm), "pretraining_text": asdict(pre),
              "seconds": round(time.time() - t0)}
    (corpus / "BUILD.json").write_text(json.dumps(report, indent=2) + "\n")
    for split, d in lm.splits.items():
        print(f"{corpus}/{split}.txt: {d['documents']} pages, {d['lines']} lines, {d['tokens']} tokens")
    print(f"{pretrain}: {pre.tokens} tokens, {pre.paragraphs} paragraphs; removed "
          f"{pre.duplicates_removed} duplicate paragraphs and {pre.excluded_removed} paragraphs "
          f"of {corpus.name}'s valid/test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
