#!/usr/bin/env python3
"""Grow the language model's text N times, as Kummerfeld et al. (2020, Table 6) grow theirs.

``OUT/pydocs-xN/``: ``data/pydocs``'s training split followed by text from the pretraining
text ``data/pylibs.txt`` until the training split has N times its words; valid and test are
``data/pydocs``'s own, unchanged, so every column of the table is scored on the same text.
The added text is taken in equal shares from the start of each of 100 contiguous blocks of the
pretraining text: every library's docs contribute (the file runs package by package), lines
stay in their order (the LSTM reads across line ends), and a smaller N's added text is part of
a larger N's (2x within 4x within 8x, as the paper's slices grow). The vectors need not change:
they were trained on the pretraining text and ``data/pydocs``'s training split, which already
hold every added line (experiments/paper-regime/README.md).

Written to a fresh folder beside the output and renamed into place when complete; an existing
output is kept (``already built``) if this script made it (its ``BUILD.json``), refused if not.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from lmlow.errors import LmlowError  # noqa: E402
from lmlow.files import remove_if_owner_gone, require_regular  # noqa: E402

BLOCKS = 100


def words_per_line(path: Path) -> list[int]:
    """Each line's number of tokens (the corpora are whitespace-tokenised, one line a paragraph)."""
    require_regular(path)
    try:
        with open(path, encoding="utf-8") as f:
            return [len(line.split()) for line in f]
    except FileNotFoundError:
        raise LmlowError(f"{path}: no such file (run make data-pydocs first)") from None
    except UnicodeDecodeError as e:
        raise LmlowError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def chosen_lines(counts: list[int], extra: int, blocks: int = BLOCKS) -> list[tuple[int, int]]:
    """The (start, stop) line ranges that give at least ``extra`` words: in each of ``blocks``
    contiguous blocks of lines, its first lines up to its share (its words / all words) of
    ``extra``. Shares grow with ``extra``, so the ranges for a smaller ``extra`` lie within
    those for a larger."""
    total = sum(counts)
    n = len(counts)
    ranges = []
    for b in range(blocks):
        start, stop = b * n // blocks, (b + 1) * n // blocks
        share = extra * sum(counts[start:stop]) / total
        taken, end = 0, start
        while end < stop and taken < share:
            taken += counts[end]
            end += 1
        if end > start:
            ranges.append((start, end))
    return ranges


def write_corpus(folder: Path, corpus: Path, pretrain: Path, ranges) -> int:
    """Write train/valid/test into ``folder``; return the number of added lines."""
    added = 0
    with open(folder / "train.txt", "w", encoding="utf-8") as out:
        with open(corpus / "train.txt", encoding="utf-8") as f:
            shutil.copyfileobj(f, out)
        want = iter(ranges)
        start, stop = next(want, (None, None))
        with open(pretrain, encoding="utf-8") as f:
            for i, line in enumerate(f):
                while stop is not None and i >= stop:
                    start, stop = next(want, (None, None))
                if stop is None:
                    break
                if i >= start:
                    out.write(line if line.endswith("\n") else line + "\n")
                    added += 1
    for split in ("valid", "test"):
        shutil.copyfile(corpus / f"{split}.txt", folder / f"{split}.txt")
    return added


def grow(times: int, corpus: Path, pretrain: Path, out: Path) -> dict:
    """Build ``out`` (see the module's docstring); return its BUILD.json."""
    if os.path.islink(out):
        raise LmlowError(f"{out}: a symbolic link; this script does not write through links")
    if out.exists():
        if (out / "BUILD.json").is_file():
            return json.loads((out / "BUILD.json").read_text(encoding="utf-8"))
        raise LmlowError(f"{out}: exists and was not made by this script (no BUILD.json); "
                         "remove it or choose another --out")
    for split in ("valid", "test"):
        require_regular(corpus / f"{split}.txt")
        if not (corpus / f"{split}.txt").is_file():
            raise LmlowError(f"{corpus / split}.txt: no such file (run make data-pydocs first)")
    base = sum(words_per_line(corpus / "train.txt"))
    counts = words_per_line(pretrain)
    extra = (times - 1) * base
    if extra > sum(counts):
        raise LmlowError(f"--times {times}: needs {extra:,} words of {pretrain}, which has "
                         f"{sum(counts):,} (at most --times {1 + sum(counts) // base})")
    ranges = chosen_lines(counts, extra)
    remove_if_owner_gone(out.parent.glob(f"{out.name}.tmp[0-9]*"))   # a killed build's
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
    tmp.mkdir(parents=False)
    try:
        lines = write_corpus(tmp, corpus, pretrain, ranges)
        added = sum(sum(counts[a:b]) for a, b in ranges)
        with open(pretrain, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        build = {"times": times, "corpus": str(corpus), "pretraining_text": str(pretrain),
                 "pretraining_sha256": digest, "train_words_base": base,
                 "train_words_added": added, "train_words": base + added,
                 "lines_added": lines, "blocks": BLOCKS,
                 "ranges": [list(r) for r in ranges]}
        (tmp / "BUILD.json").write_text(json.dumps(build, indent=1) + "\n", encoding="utf-8")
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return build


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--times", type=int, required=True,
                    help="the training split's size as a multiple of data/pydocs's (2-8: "
                         "the pretraining text holds about 9x)")
    ap.add_argument("--data", type=Path, default=Path("data"),
                    help="reads DATA/pydocs and DATA/pylibs.txt (make data-pydocs) and writes "
                         "DATA/pydocs-xTIMES (default: data)")
    args = ap.parse_args(argv)
    if args.times < 2:
        ap.error(f"--times {args.times}: must be at least 2 (1 is data/pydocs itself)")
    out = args.data / f"pydocs-x{args.times}"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # a killed build removes its folder
    try:
        build = grow(args.times, args.data / "pydocs", args.data / "pylibs.txt", out)
    except LmlowError as e:
        sys.exit(f"grow_pydocs.py: {e}")
    except OSError as e:
        sys.exit(f"grow_pydocs.py: {out}: {e.strerror or e}")
    print(f"{out}/train.txt: {build['train_words']:,} words ({build['train_words_base']:,} of "
          f"pydocs + {build['train_words_added']:,} of pylibs in {len(build['ranges'])} blocks)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
