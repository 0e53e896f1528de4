"""``lmlow prepare``: raw text files or folders of documents -> a corpus folder.

Two streaming passes keep memory at O(documents), 24 bytes each (measured: 100M tokens in
5M one-line documents, BENCHMARKS.md): the first tokenises every paragraph and appends it to a
scratch file, remembering in three integer arrays where each document starts and ends and how
many tokens it has; the second copies whole documents into train/valid/test. The split is by document, drawn
with a seeded shuffle, so that no document straddles two splits.
"""
from __future__ import annotations

import hashlib
import os
import random
from array import array
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from lmlow.data.corpus import SPLITS
from lmlow.data.textio import decode_line, iter_lines, open_binary
from lmlow.data.tokenize import Normalisation, make_tokenizer
from lmlow.errors import LmlowError
from lmlow.files import atomic_path, refuse_overwrite
from lmlow.progress import progress

DOC_MODES = ("auto", "file", "blank", "line")


@dataclass
class PrepareReport:
    documents: int = 0
    paragraphs: int = 0
    tokens: int = 0
    duplicates_removed: int = 0
    excluded_removed: int = 0
    splits: dict = field(default_factory=dict)   # split -> {"documents", "lines", "tokens"}


def iter_documents(inputs: list[Path], mode: str = "auto") -> Iterator[list[str]]:
    """Yield documents as lists of raw lines (blank lines dropped).

    A folder gives one document per file (recursively, sorted, hidden files skipped). A file
    gives documents separated by blank lines (``blank``, the default), one per line
    (``line``), or the whole file (``file``).
    """
    if mode not in DOC_MODES:
        raise LmlowError(f"unknown document mode {mode!r}; choose one of {', '.join(DOC_MODES)}")
    for inp in map(Path, inputs):
        if inp.is_dir():
            files = sorted(p for p in inp.rglob("*") if p.is_file()
                           and not any(part.startswith(".") for part in p.relative_to(inp).parts))
            if not files:
                raise LmlowError(f"{inp}: folder has no files")
            for f in files:
                doc = list(_raw_lines(f))
                if doc:
                    yield doc
        else:
            yield from _split_file(inp, "blank" if mode == "auto" else mode)


def _raw_lines(path: Path, keep_blank: bool = False) -> Iterator[str]:
    with open_binary(path) as f:
        for lineno, raw in enumerate(f, 1):
            line = decode_line(path, lineno, raw).strip()
            if line or keep_blank:
                yield line


def _split_file(path: Path, mode: str) -> Iterator[list[str]]:
    doc: list[str] = []
    empty = True
    for line in _raw_lines(path, keep_blank=True):
        if line:
            empty = False
            doc.append(line)
        if doc and (mode == "line" or (mode == "blank" and not line)):
            yield doc
            doc = []
    if doc:
        yield doc
    if empty:
        raise LmlowError(f"{path}: empty file (no text)")


def parse_size(value: str) -> float | int:
    """``0.1`` is a fraction of all tokens, ``80000`` a token count."""
    try:
        x = float(value)
    except ValueError:
        raise LmlowError(f"split size {value!r} is neither a fraction nor a token count") from None
    if x < 0 or (x >= 1 and x != int(x)):
        raise LmlowError(f"split size {value!r} must be a fraction in [0, 1) or a whole token count")
    return x if x < 1 else int(x)


def prepare(inputs: list[Path], out: Path, *, tokenizer: str = "whitespace",
            norm: Normalisation = Normalisation(), valid: float | int = 0.1,
            test: float | int = 0.1, seed: int = 1, documents: str = "auto",
            dedup: bool = False, exclude: list[Path] = (), no_split: bool = False,
            force: bool = False, show_progress: bool = True) -> PrepareReport:
    """Tokenise, normalise and split ``inputs`` into ``out`` (a folder, or a file with ``no_split``)."""
    out = Path(out)
    for path in [*inputs, *exclude]:
        if not Path(path).exists():
            raise LmlowError(f"{path}: no such file or folder")
    if no_split and out.is_dir():
        raise LmlowError(f"{out}: is a folder; --no-split writes one file")
    if not no_split and out.exists() and not out.is_dir():
        raise LmlowError(f"{out}: exists and is not a folder")
    targets = [out] if no_split else [out / f"{s}.txt" for s in SPLITS]
    refuse_overwrite(targets, force)
    excluded = _line_hashes(exclude)
    folder = out.parent if no_split else out
    created = _missing_parents(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = _lock_folder(folder, out)
    report = PrepareReport()
    scratch = Path(f"{out}.scratch{os.getpid()}")
    try:
        refuse_overwrite(targets, force)      # again, under the lock: a prepare that got here
        #                                       first has written them meanwhile
        docs = _tokenise_to(scratch, inputs, tokenizer, norm, documents, dedup, excluded,
                            report, show_progress)
        if not docs:
            raise LmlowError("no text left after tokenisation and filtering")
        if no_split:
            os.replace(scratch, out)
            report.splits["all"] = _summary(len(docs.tokens), sum(docs.tokens), out)
        else:
            assignment = assign_splits(docs.tokens, valid, test, seed)
            _copy_splits(scratch, docs, assignment, out, report)
    except BaseException:
        for d in created:                     # a failed command leaves no folder behind
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
        raise
    finally:
        scratch.unlink(missing_ok=True)
        os.close(lock)                        # releases the flock
    return report


def _lock_folder(folder: Path, out: Path) -> int:
    """Hold ``flock`` on the output folder itself (no lock file is left in it): two prepares
    into one place cannot both write; the second is refused in one line."""
    import fcntl
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise LmlowError(f"{out}: another lmlow command is writing there now; wait for it to "
                         "end") from None
    return fd


def _missing_parents(folder: Path) -> list[Path]:
    """The folders ``mkdir(parents=True)`` would create, deepest first."""
    out = []
    while not folder.exists():
        out.append(folder)
        folder = folder.parent
    return out


def _line_hashes(paths) -> set[bytes]:
    hashes = set()
    for p in paths:
        for _, tokens in iter_lines(p):
            hashes.add(_hash(" ".join(tokens)))
    return hashes


def _hash(line: str) -> bytes:
    return hashlib.blake2b(line.encode("utf-8"), digest_size=8).digest()


@dataclass
class Documents:
    """Where each document sits in the scratch file and its tokens: three int64 arrays, not
    a Python object per document."""
    starts: array = field(default_factory=lambda: array("q"))
    ends: array = field(default_factory=lambda: array("q"))
    tokens: array = field(default_factory=lambda: array("q"))

    def __len__(self) -> int:
        return len(self.tokens)


def _tokenise_to(scratch, inputs, tokenizer, norm, documents, dedup, excluded, report,
                 show_progress) -> Documents:
    """Write tokenised documents to ``scratch``; return where each one is."""
    tokenize = make_tokenizer(tokenizer)
    seen: set[bytes] = set()
    docs = Documents()
    with open(scratch, "wb") as f, progress("tokenising", show_progress) as bar:
        for doc in iter_documents(inputs, documents):
            start, ntok = f.tell(), 0
            for tokens in tokenize(doc):
                tokens = norm.apply(tokens)
                if not tokens:
                    continue
                line = " ".join(tokens)
                h = _hash(line)
                if h in excluded:
                    report.excluded_removed += 1
                    continue
                if dedup:
                    if h in seen:
                        report.duplicates_removed += 1
                        continue
                    seen.add(h)
                f.write(line.encode("utf-8") + b"\n")
                ntok += len(tokens)
                report.paragraphs += 1
                bar.tokens(len(tokens))
            if ntok:
                docs.starts.append(start)
                docs.ends.append(f.tell())
                docs.tokens.append(ntok)
                report.tokens += ntok
    report.documents = len(docs)
    return docs


def assign_splits(doc_tokens: list[int], valid, test, seed: int) -> list[str]:
    """Choose a split for each document: test first, then valid, in a seeded random order.

    Documents are drawn until each held-out split reaches its size in tokens (a fraction of
    all tokens or a count); the rest is train. Deterministic for a given seed.
    """
    total = sum(doc_tokens)
    want = {s: (round(v * total) if isinstance(v, float) else v) for s, v in
            (("test", test), ("valid", valid))}
    order = array("q", range(len(doc_tokens)))      # 8 bytes a document, not a Python int
    random.Random(seed).shuffle(order)
    assignment = ["train"] * len(doc_tokens)
    pos = 0
    for split in ("test", "valid"):
        got = 0
        while got < want[split] and pos < len(order):
            assignment[order[pos]] = split
            got += doc_tokens[order[pos]]
            pos += 1
    for split in SPLITS:
        if split not in assignment and (split == "train" or want[split] > 0):
            raise LmlowError(f"not enough documents ({len(doc_tokens)}) to fill train, valid "
                             "and test; give more text, smaller sizes, or --documents line")
    return assignment


def _copy_splits(scratch, docs: Documents, assignment, out: Path, report: PrepareReport) -> None:
    counts = {split: [0, 0] for split in SPLITS}          # documents, tokens
    with ExitStack() as stack:        # the three splits appear together, or none changes
        tmp = {s: stack.enter_context(atomic_path(out / f"{s}.txt")) for s in SPLITS}
        with ExitStack() as files, open(scratch, "rb") as src:
            handles = {s: files.enter_context(open(tmp[s], "wb")) for s in SPLITS}
            for start, end, ntok, split in zip(docs.starts, docs.ends, docs.tokens, assignment):
                src.seek(start)
                handles[split].write(src.read(end - start))
                counts[split][0] += 1
                counts[split][1] += ntok
    for s in SPLITS:
        report.splits[s] = _summary(*counts[s], out / f"{s}.txt")


def _summary(documents: int, tokens: int, path: Path) -> dict:
    with open(path, "rb") as f:
        lines = sum(1 for _ in f)
    return {"documents": documents, "tokens": tokens, "lines": lines}
