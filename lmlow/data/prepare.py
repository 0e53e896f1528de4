"""``lmlow prepare``: raw text files or folders of documents -> a corpus folder.

Two streaming passes keep memory at O(documents), 24 bytes each (measured: 100M tokens in
5M one-line documents, BENCHMARKS.md): the first tokenises every paragraph and appends it to a
scratch file, remembering in three integer arrays where each document starts and ends and how
many tokens it has; the second copies whole documents into train/valid/test. The split is by document, drawn
with a seeded shuffle, so that no document straddles two splits.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import random
import sys
import typing
from array import array
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from lmlow.data.corpus import PREPARATION, SPLITS, corpus_preparation
from lmlow.data.textio import decode_line, iter_lines, numbered_lines, open_binary
from lmlow.config import SEED_RANGE, check_values, setting
from lmlow.data.tokenize import (TOKENIZERS, Normalisation, make_tokenizer, preparation_record,
                                  recorded_tokenisation)
from lmlow.errors import CommitGroup, LmlowError
from lmlow.files import (STAGE_PREFIX, atomic_path, lock_folder, make_folder, open_fresh,
                         refuse_compressed, refuse_input_as_output, refuse_overwrite,
                         remove_if_empty, remove_stale_stages)
from lmlow.progress import progress

DOC_MODES = ("auto", "file", "blank", "line")
LineCheck = typing.Callable[[Path, int, str], None]


def parse_size(value: str) -> float | int:
    """``0.1`` is a fraction of all tokens, ``80000`` a token count."""
    try:
        x = float(value)
    except ValueError:
        raise LmlowError(f"split size {value!r} is neither a fraction nor a token count") from None
    if not math.isfinite(x) or x < 0 or (x >= 1 and x != int(x)):     # inf: int() overflowed
        raise LmlowError(f"split size {value!r} must be a fraction in [0, 1) or a whole token count")
    if x >= 1 and not value.strip().isdigit():     # 1.0 and 1e3 read as counts: 1.0 took one line
        whole = f" ({int(x)})" if x < 1e15 else ""      # not 1e300's 301 digits
        raise LmlowError(f"split size {value!r}: a token count is written as a whole number"
                         f"{whole}; a fraction is below 1 (0.1)")
    return x if x < 1 else int(x)


@dataclass
class PrepareOptions:
    """How `lmlow prepare` reads, tokenises, filters and splits text; its flags are generated
    from these fields, and :func:`prepare` takes them as keywords."""
    tokenizer: str = setting("whitespace", "whitespace: split on spaces; spacy: spaCy's "
                             "rule-based English tokenizer (no model needed); stanza: "
                             "Stanford's neural tokenizer (needs its English model installed); "
                             "scispacy: biomedical rules where scispacy installs")
    lowercase: bool = setting(False, "lowercase every token", switch=True)
    numbers: bool = setting(False, "replace number tokens by N", switch=True)
    strip_punct: bool = setting(False, "drop tokens made only of Unicode punctuation "
                                "(. , ; \" ( %% & #); symbols such as $ + = > stay", switch=True)
    ptb: bool = setting(False, "PTB-style normalisation: --lowercase --numbers --strip-punct",
                        switch=True)
    valid: float = setting(0.1, "valid size: a fraction of all tokens (0.1) or a token count "
                           "(80000), above 0; reached by whole documents, so a minimum, "
                           "rounded up to a document (a warning says when that is over "
                           "twice the size)", parse=parse_size, metavar="SIZE")
    test: float = setting(0.1, "test size, as --valid", parse=parse_size, metavar="SIZE")
    seed: int = setting(1, "seed of the document split")
    documents: str = setting("auto", "what a document is in an input file: blank = paragraphs "
                             "separated by blank lines (auto's choice for files), line = each "
                             "line, file = the whole file (auto's choice inside folders); the "
                             "same for each file of a folder")
    dedup: bool = setting(False, "drop repeated paragraphs (after tokenisation), keeping the "
                          "first", switch=True)
    exclude: tuple = setting((), "drop paragraphs that appear in FILE (a tokenised text, e.g. "
                             "another corpus's valid.txt and test.txt, to keep pretraining "
                             "text free of them); repeatable", metavar="FILE", append=True,
                             parse=Path)
    no_split: bool = setting(False, "write everything to the single file --out (e.g. a "
                             "pretraining text)", switch=True)
    like: Path | None = setting(None, "tokenise and normalise as CORPUS was (its prepare.json), "
                                "instead of --tokenizer and the normalisation flags: a "
                                "pretraining text read as the LM's corpus reads its words, so "
                                "its vectors cover them", parse=Path, metavar="CORPUS")
    prepared_like: Path | None = setting(None, "the input is text CORPUS's preparation made "
                                         "already (its own splits, re-split or cut): split on "
                                         "spaces and kept as it is, and prepare.json records "
                                         "CORPUS's tokenizer and normalisation, so that "
                                         "`score --raw` reads new text as CORPUS's was; a "
                                         "line that normalisation would change is refused",
                                         parse=Path, metavar="CORPUS")
    CHOICES: typing.ClassVar[dict] = {"tokenizer": TOKENIZERS, "documents": DOC_MODES}
    RANGES: typing.ClassVar[dict] = {"seed": SEED_RANGE}     # as every other --seed of lmlow

    def validate(self, given: typing.Container[str] = ()) -> "PrepareOptions":
        """Check the options; ``given``: the fields the caller set, so that a tokenizer named
        with ``like``, even the default one, is refused rather than silently ignored."""
        check_values(self)
        for flag, size in (("--valid", self.valid), ("--test", self.test)):
            if parse_size(str(size)) == 0 and not self.no_split:
                raise LmlowError(f"{flag} 0: a corpus needs {flag[2:]} text (training stops "
                                 "early on valid, every table reports test, and each refuses "
                                 "an empty split); give a fraction or a token count, or "
                                 "--no-split for one file")
        split_by = [f"--{k}" for k in ("valid", "test", "seed") if k in given]
        if self.no_split and split_by:        # (accepted, and the whole text went to one file)
            raise LmlowError(f"{split_by[0]} sizes a split, and --no-split writes one file: "
                             "give one of them")
        if self.like is not None and self.prepared_like is not None:
            raise LmlowError("--like and --prepared-like: give one (--like tokenises raw text "
                             "as the corpus was; --prepared-like keeps text it prepared)")
        for flag, corpus in (("--like", self.like), ("--prepared-like", self.prepared_like)):
            if corpus is None:
                continue
            clash = [f"--{k.replace('_', '-')}" for k in ("lowercase", "numbers", "strip_punct",
                                                          "ptb") if getattr(self, k)]
            if self.tokenizer != "whitespace" or "tokenizer" in given:
                clash.append("--tokenizer")
            if clash:
                raise LmlowError(f"{flag} {corpus} takes the tokenizer and normalisation from "
                                 f"that corpus; leave out {' '.join(clash)}")
            if not Path(corpus).is_dir():
                raise LmlowError(f"{flag} {corpus}: no such corpus folder")
        return self

    def tokenisation(self) -> tuple[str, Normalisation]:
        """The tokenizer and normalisation: the flags', or with ``like`` that corpus's (with
        ``prepared_like``, none: the text is kept as it is)."""
        if self.like is None:
            return self.tokenizer, (Normalisation.ptb() if self.ptb else
                                    Normalisation(self.lowercase, self.numbers, self.strip_punct))
        return self._recorded("--like", self.like)

    def recorded(self, tokenizer: str, norm: Normalisation) -> tuple[str, Normalisation]:
        """What prepare.json records: the tokenisation used, or ``prepared_like``'s, which
        made the text (checked before any work)."""
        if self.prepared_like is None:
            return tokenizer, norm
        return self._recorded("--prepared-like", self.prepared_like)

    def prepared_check(self) -> LineCheck | None:
        """With ``prepared_like``, a check that each line is text CORPUS's normalisation made
        (raw text with capitals, numbers or punctuation was kept, and prepare.json then claimed
        a preparation the text never had): the first line it would change is refused."""
        if self.prepared_like is None:
            return None
        corpus = self.prepared_like
        _, norm = self._recorded("--prepared-like", corpus)

        def check(path: Path, lineno: int, line: str) -> None:
            for token in line.split():
                if (change := norm.change(token)) is not None:
                    raise LmlowError(f"{path}:{lineno}: {token!r} {change} (the preparation "
                                     f"{corpus} records): not text it made, which "
                                     f"--prepared-like keeps as it is; --like {corpus} "
                                     "prepares raw text as that corpus was")
        return check

    @staticmethod
    def _recorded(flag: str, corpus: Path) -> tuple[str, Normalisation]:
        record = corpus_preparation(corpus)
        if record is None:
            raise LmlowError(f"{flag} {corpus}: no {PREPARATION} (a corpus lmlow prepare "
                             "did not make); give --tokenizer and the normalisation flags")
        return recorded_tokenisation(record)


@dataclass
class PrepareReport:
    documents: int = 0
    paragraphs: int = 0
    tokens: int = 0
    duplicates_removed: int = 0
    excluded_removed: int = 0
    splits: dict = field(default_factory=dict)   # split -> {"documents", "lines", "tokens"}

    def text(self, out: Path, filtered: bool) -> str:
        """What `lmlow prepare` prints: totals, what --dedup/--exclude removed, the splits."""
        from lmlow.tables import markdown

        lines = [f"{self.documents} documents, {self.paragraphs} lines, {self.tokens} tokens "
                 f"-> {out}"]
        if filtered:
            lines.append(f"removed {self.duplicates_removed} duplicate and "
                         f"{self.excluded_removed} excluded paragraphs")
        rows = [[s, d["documents"], d["lines"], d["tokens"]] for s, d in self.splits.items()]
        return "\n".join(lines + [markdown(["split", "documents", "lines", "tokens"], rows)])


def iter_documents(inputs: list[Path], mode: str = "auto",
                   check: LineCheck | None = None) -> Iterator[list[str]]:
    """Yield documents as lists of raw lines (blank lines dropped): :func:`stream_documents`,
    each document read whole."""
    return (list(doc) for doc in stream_documents(inputs, mode, check))


def stream_documents(inputs: list[Path], mode: str = "auto",
                     check: LineCheck | None = None) -> Iterator[Iterator[str]]:
    """Yield documents as iterators of raw lines (blank lines dropped), each to be read to
    its end before the next is asked for: a file that is one document (no blank lines under
    ``auto``, or ``file``) streams, where a list of its lines held it all in memory.

    A file gives documents separated by blank lines (``blank``, auto's choice), one per line
    (``line``), or the whole file (``file``). A folder's files (recursively, sorted, hidden
    files skipped; an empty one skipped) are read the same way, a whole file each under
    ``auto``: a folder of chat logs with ``line`` gives a document per message (``line`` was
    ignored there, and the split then refused "1 document" with advice to pass it).
    ``check(path, lineno, line)`` sees each non-blank line as it is read (and may refuse it).
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
                yield from _split_file(f, "file" if mode == "auto" else mode, empty_ok=True,
                                       check=check)
        else:
            yield from _split_file(inp, "blank" if mode == "auto" else mode, check=check)


def _raw_lines(path: Path, keep_blank: bool = False,
               check: LineCheck | None = None) -> Iterator[str]:
    with open_binary(path) as f:
        for lineno, raw in numbered_lines(path, f):
            line = decode_line(path, lineno, raw).strip()
            if line and check:
                check(path, lineno, line)
            if line or keep_blank:
                yield line


def _split_file(path: Path, mode: str, empty_ok: bool = False,
                check: LineCheck | None = None) -> Iterator[Iterator[str]]:
    """A file's documents, each an iterator over its lines: runs of non-blank lines
    (``blank``), each line (``line``), or all of them (``file``)."""
    lines = _raw_lines(path, keep_blank=True, check=check)
    empty = True
    for text, run in itertools.groupby(lines, key=bool):
        if not text:
            continue
        empty = False
        if mode == "line":
            yield from ([line] for line in run)
        elif mode == "blank":
            yield run
        else:
            yield _rest_of_file(run, lines)
            break
    if empty and not empty_ok:
        raise LmlowError(f"{path}: empty file (no text)")


def _rest_of_file(run: Iterator[str], lines: Iterator[str]) -> Iterator[str]:
    """The non-blank lines of a file from its first (``run``, the lines after it in
    ``lines``): one document, read as it is used."""
    yield from run
    yield from (line for line in lines if line)


def prepare(inputs: list[Path], out: Path, *, norm: Normalisation | None = None,
            force: bool = False, show_progress: bool = True, **options) -> PrepareReport:
    """Tokenise, normalise and split ``inputs`` into ``out`` (a folder, or a file with
    ``no_split``). ``options``: the fields of :class:`PrepareOptions`; ``norm`` replaces its
    normalisation flags."""
    opts = PrepareOptions(**options).validate(given=options)
    if norm is not None and opts.prepared_like is not None:
        raise LmlowError("prepared_like keeps the text as it is: give no norm")
    if norm is not None and opts.like is not None:      # it replaced like's normalisation
        raise LmlowError("like takes the normalisation from that corpus: give no norm")
    tokenizer, flags_norm = opts.tokenisation()
    norm = norm or flags_norm
    record = preparation_record(*opts.recorded(tokenizer, norm))
    valid, test, seed, documents = opts.valid, opts.test, opts.seed, opts.documents
    dedup, exclude, no_split = opts.dedup, opts.exclude, opts.no_split
    out = Path(out)
    for path in [*inputs, *exclude]:
        if not Path(path).exists():
            raise LmlowError(f"{path}: no such file or folder")
    refuse_out_in_input(inputs, out)
    refuse_repeated_inputs(inputs)
    if no_split and out.is_dir():
        raise LmlowError(f"{out}: is a folder; --no-split writes one file")
    if no_split:
        refuse_compressed(out)
    if not no_split and out.exists() and not out.is_dir():
        raise LmlowError(f"{out}: exists and is not a folder")
    targets = [out] if no_split else ([out / f"{s}.txt" for s in SPLITS] + [out / PREPARATION]
                                      + [out / f"{s}.txt.gz" for s in SPLITS])   # a .gz corpus too
    # an input (or --exclude file) that is an output: `--no-split in.txt --out in.txt --force`
    # replaced the raw text with its tokenised copy, `corpus/train.txt --out corpus` with a split
    refuse_input_as_output([*inputs, *exclude], [out, *targets])
    refuse_overwrite(targets, force)
    excluded = _line_hashes(exclude)
    folder = out.parent if no_split else out
    created = make_folder(folder)
    lock = lock_folder(folder, out)
    report = PrepareReport()
    scratch = folder / f"{STAGE_PREFIX}{os.getpid()}"
    try:
        refuse_overwrite(targets, force)      # again, under the lock: a prepare that got here
        #                                       first has written them meanwhile
        remove_stale_stages(folder, [t.name for t in targets])   # what a kill -9 left
        docs = _tokenise_to(scratch, inputs, tokenizer, norm, documents, dedup, excluded,
                            report, show_progress, opts.prepared_check())
        given = _named(inputs)
        if not docs:
            removed = report.duplicates_removed + report.excluded_removed
            raise LmlowError(f"{given}: no text left after tokenisation and filtering" +
                             (f" ({removed} lines removed by --dedup/--exclude)" if removed else
                              " (every line blank, or emptied by the tokeniser and its flags)"))
        if no_split:
            os.replace(scratch, out)
            report.splits["all"] = _summary(len(docs.tokens), sum(docs.tokens), out)
        else:
            assignment = assign_splits(docs.tokens, valid, test, seed,
                                       more_documents=documents != "line", source=given)
            for warning in oversized_splits(docs.tokens, assignment, valid, test):
                print(f"lmlow: warning: {given}: {warning}", file=sys.stderr)
            _copy_splits(scratch, docs, assignment, out, report, record)
    except BaseException:
        scratch.unlink(missing_ok=True)
        remove_if_empty(created)              # a failed command leaves no folder behind
        raise
    finally:
        scratch.unlink(missing_ok=True)
        os.close(lock)                        # releases the flock
    return report


def _named(inputs) -> str:
    """The inputs, as an error names them: the first, and how many more."""
    return f"{inputs[0]}" + (f" (and {len(inputs) - 1} more)" if len(inputs) > 1 else "")


def refuse_out_in_input(inputs, out: Path) -> None:
    """Refuse an ``out`` that is an input folder or lies inside one: a folder's files are all
    read, so a rerun with --force read the last run's splits and prepare.json as documents (and
    a --no-split file there grew with each run). Checked before anything is written."""
    target = Path(out).resolve()
    for inp in inputs:
        folder = Path(inp).resolve()
        if Path(inp).is_dir() and (target == folder or folder in target.parents):
            where = "is" if target == folder else "lies inside"
            raise LmlowError(f"--out {out}: {where} the input folder {inp}, whose files are "
                             "all read: a rerun would read these outputs as input; write "
                             "them outside it")


def refuse_repeated_inputs(inputs) -> None:
    """An input given twice, as two spellings of one file, or inside an input folder, is
    read twice: its documents were split apart independently, so the same text stood in
    train and in test (`prepare S S`: every test line in train.txt). Checked before anything
    is written, in one pass (a shell glob gives thousands of inputs: comparing each pair took
    426 s for 3,000 files)."""
    paths, files, above = {}, {}, {}     # resolved path, (device, inode), every ancestor folder
    for inp in inputs:
        if str(inp) in ("-", "/dev/stdin"):
            continue
        path = Path(inp).resolve()
        st = path.stat()
        key = (st.st_dev, st.st_ino)      # a hard link is the same file too
        inside = next((paths[p] for p in path.parents if p in paths), None)
        for how, given in (("is", paths.get(path) or files.get(key)), ("lies inside", inside),
                           ("holds", above.get(path))):
            if given is not None:
                raise LmlowError(f"{inp}: {how} the input {given} too, and would be read twice "
                                 "(its text in train and in test); give each text once")
        paths[path] = files[key] = inp
        for folder in path.parents:
            above.setdefault(folder, inp)


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


COPY_BLOCK = 1 << 22      # bytes: a document goes to its split in blocks, not whole


def _copy(src, dst, size: int) -> None:
    """``size`` bytes from ``src``'s position to ``dst``, a block at a time: one input file
    can be one document (a folder's files), and it must not need its size in memory."""
    while size > 0:
        block = src.read(min(size, COPY_BLOCK))
        if not block:
            raise LmlowError(f"{src.name}: the scratch file ended {size} bytes early (changed "
                             "by another program?)")
        dst.write(block)
        size -= len(block)


def _tokenise_to(scratch, inputs, tokenizer, norm, documents, dedup, excluded, report,
                 show_progress, check: LineCheck | None = None) -> Documents:
    """Write tokenised documents to ``scratch``; return where each one is."""
    tokenize = make_tokenizer(tokenizer)
    seen: set[bytes] = set()
    docs = Documents()
    with open_fresh(scratch) as f, progress("tokenising", show_progress) as bar:
        for doc in stream_documents(inputs, documents, check):
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


def assign_splits(doc_tokens: list[int], valid, test, seed: int,
                  more_documents: bool = True, source: str = "") -> list[str]:
    """Choose a split for each document: test first, then valid, in a seeded random order.

    Documents are drawn until each held-out split reaches its size in tokens (a fraction of
    all tokens or a count; a fraction above 0 asks for at least one token, so that a text too
    small for it is refused rather than given an empty split); the rest is train.
    Deterministic for a given seed. ``more_documents``: the refusal may suggest
    ``--documents line`` (not when the documents are lines already); ``source`` names the
    input(s) in it.
    """
    total = sum(doc_tokens)
    want = {s: (max(round(v * total), v > 0) if isinstance(v, float) else v) for s, v in
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
            raise LmlowError((f"{source}: " if source else "") +
                             f"not enough documents ({len(doc_tokens)}) to fill train, valid "
                             "and test; give more text, smaller sizes"
                             + (", or --documents line" if more_documents else ""))
    return assignment


def oversized_splits(doc_tokens, assignment: list[str], valid, test) -> list[str]:
    """A line for each held-out split that whole documents made over twice its size (one
    large document drawn for a 10% test split gave 62% of the text, silently). Which document
    goes where stays as it was: the committed corpora rest on it."""
    total = sum(doc_tokens)
    got = {"valid": 0, "test": 0}
    for ntok, split in zip(doc_tokens, assignment):
        if split in got:
            got[split] += ntok
    lines = []
    for split, size in (("valid", valid), ("test", test)):
        fraction = isinstance(size, float)
        if size > 0 and got[split] > 2 * (size * total if fraction else size):
            asked = f"{size:.0%} was asked" if fraction else f"{size} tokens were asked"
            lines.append(f"{split} has {got[split]} tokens, {got[split] / total:.0%} of all, "
                         f"where {asked}: splits take whole documents, and these are large "
                         "for it; smaller documents (--documents blank or line) come nearer")
    return lines


def _copy_splits(scratch, docs: Documents, assignment, out: Path, report: PrepareReport,
                 preparation: dict) -> None:
    """The three splits and the preparation record appear together, or none changes (a stop
    between two renames waits for the rest: :class:`CommitGroup`); old ``SPLIT.txt.gz`` splits
    (refused without --force) go once the new splits are in place, as the splits they were."""
    counts = {split: [0, 0] for split in SPLITS}          # documents, tokens
    with CommitGroup() as commit:
        with ExitStack() as stack:
            tmp = {s: stack.enter_context(atomic_path(out / f"{s}.txt")) for s in SPLITS}
            record = stack.enter_context(atomic_path(out / PREPARATION))
            record.write_text(json.dumps(preparation, indent=2) + "\n", encoding="utf-8")
            with ExitStack() as files, open(scratch, "rb") as src:
                handles = {s: files.enter_context(open(tmp[s], "wb")) for s in SPLITS}
                for start, end, ntok, split in zip(docs.starts, docs.ends, docs.tokens,
                                                   assignment):
                    src.seek(start)
                    _copy(src, handles[split], end - start)
                    counts[split][0] += 1
                    counts[split][1] += ntok
            commit.begin()
        _remove_gz_splits(out)                  # once the new splits are in place
    for s in SPLITS:
        report.splits[s] = _summary(*counts[s], out / f"{s}.txt")


def _remove_gz_splits(out: Path) -> None:
    """The gzipped splits of a corpus replaced with --force (plain splits win where both are,
    so they would stay as unused files beside the new ones)."""
    for s in SPLITS:
        (out / f"{s}.txt.gz").unlink(missing_ok=True)


def _summary(documents: int, tokens: int, path: Path) -> dict:
    with open(path, "rb") as f:
        lines = sum(1 for _ in f)
    return {"documents": documents, "tokens": tokens, "lines": lines}
