"""Reading corpus text: the one place that decides what a token, a line and bad input are.

Conventions (the PTB/AWD-LSTM ones): one sentence or paragraph per line, tokens separated by
whitespace (spaces; tabs and other Unicode whitespace also separate tokens). Blank lines,
including lines of only spaces, are skipped. An end-of-sentence token ``<eos>`` is appended to
every line when the text is read, so ``<eos>`` itself may not appear in the text. A literal
``<unk>`` (PTB has them) is an ordinary token that is already unknown. Files may be gzipped
(``.gz``).
"""
from __future__ import annotations

import gzip
import itertools
import os
import stat
import sys
import zlib
from pathlib import Path
from typing import Iterable, Iterator

from lmlow.errors import LmlowError

EOS = "<eos>"
UNK = "<unk>"


def open_binary(path: Path):
    """Open a text file (plain or .gz) for byte reading, with a one-line error if impossible."""
    path = Path(path)
    if not path.exists():
        raise LmlowError(f"{path}: no such file")
    if path.is_dir():
        raise LmlowError(f"{path}: is a folder, expected a text file")
    st = path.stat()                  # a pipe streams text (`<(zcat ...)`), a terminal what is
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode) or _terminal(st)):  # typed
        raise LmlowError(f"{path}: a device or socket, not a text file; refusing to read it")
    try:
        return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    except OSError as e:
        raise LmlowError(f"{path}: cannot open ({e.strerror or e})") from None


def is_stream(path: Path) -> bool:
    """A pipe (``/dev/stdin`` fed by one, ``<(zcat ...)``, a FIFO) or a terminal: text that
    arrives over time, from a writer that may wait for answers before it writes more."""
    try:
        st = Path(path).stat()
    except OSError:
        return False
    return stat.S_ISFIFO(st.st_mode) or _terminal(st)


def blocks(items: Iterable, most: int, stream: bool = False) -> Iterator[list]:
    """Lists of up to ``most`` consecutive items. From a file, every list but the last holds
    ``most``, so a file is always cut the same way. From a ``stream``, each holds what has
    arrived (at least one item): a program that writes a recogniser's n-best list for one
    utterance and waits for its scores gets them, where full lists would wait for lines it
    never sends. A thread reads ahead (at most ``most`` items); an error it meets is raised
    here after the items before it."""
    if not stream:
        it = iter(items)
        while block := list(itertools.islice(it, most)):
            yield block
        return
    import queue
    import threading

    arrived: queue.Queue = queue.Queue(maxsize=most)

    def read() -> None:
        try:
            for item in items:
                arrived.put(item)
            arrived.put(_End())
        except BaseException as e:       # noqa: BLE001 - re-raised by the consumer
            arrived.put(_End(e))

    threading.Thread(target=read, daemon=True, name="lmlow-reader").start()
    while True:
        block = [arrived.get()]
        while len(block) < most and not isinstance(block[-1], _End):
            try:                               # more has arrived: it joins the block
                block.append(arrived.get_nowait())
            except queue.Empty:
                break
        end = block.pop() if isinstance(block[-1], _End) else None
        if block:
            yield block
        if end is not None:
            if end.error is not None:
                raise end.error
            return


class _End:
    """The end of the reader thread's items, with the exception that ended them, if one did:
    raised by the consumer after the items before it."""

    def __init__(self, error: BaseException | None = None):
        self.error = error


def _terminal(st: os.stat_result) -> bool:
    """Whether a file (its ``stat``) is the terminal lmlow's standard input is (`/dev/stdin`
    typed at a prompt, ended by Ctrl-D): the one device read as text. No other device is even
    opened to ask (opening one can act: a watchdog arms, a tape rewinds), and ``/dev/zero`` or
    ``/dev/urandom`` would never end."""
    if not stat.S_ISCHR(st.st_mode):
        return False
    try:
        return os.isatty(0) and os.fstat(0).st_rdev == st.st_rdev
    except OSError:
        return False


MAX_LINE = 1 << 26     # 64 MiB: a longer line is not line-based text
READ_ERRORS = (OSError, EOFError, zlib.error)   # a read that failed: I/O, a truncated or corrupt .gz


def numbered_lines(path: Path, f) -> Iterator[tuple[int, bytes]]:
    """``(line number, raw line)`` of a file opened by :func:`open_binary`, each line read with
    a bound: a file without line breaks (a binary or minified file, a device) is refused at
    MAX_LINE bytes instead of being read whole into memory. A read that fails (a truncated or
    corrupt ``.gz``, an I/O error) is one line naming the file and the line it reached."""
    lineno = 0
    while True:
        try:
            raw = f.readline(MAX_LINE)
        except READ_ERRORS as e:
            raise LmlowError(f"{path}:{lineno + 1}: cannot read ({e})") from None
        if not raw:
            return
        lineno += 1
        if len(raw) == MAX_LINE and not raw.endswith(b"\n"):
            raise LmlowError(f"{path}:{lineno}: a line longer than {MAX_LINE >> 20} MiB; "
                             "expected text with one sentence or paragraph per line")
        yield lineno, raw


def iter_text(path: Path, empty: str = "no text") -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for every non-blank line, validating as it streams: raw
    text (`lmlow score --raw`; ``<eos>`` is allowed, tokenising makes it an ordinary word).

    Raises LmlowError naming the file and line for binary data or non-UTF-8 bytes, and for a
    file with no text at all (``empty`` says what it lacks).
    """
    path = Path(path)
    any_text = False
    with open_binary(path) as f:
        try:
            _refuse_binary(path, f)
            for lineno, raw in numbered_lines(path, f):
                text = decode_line(path, lineno, raw).strip()
                if text:
                    any_text = True
                    yield lineno, text
        except READ_ERRORS as e:          # in _refuse_binary's look at the head
            raise LmlowError(f"{path}: cannot read ({e})") from None
    if not any_text:
        raise LmlowError(f"{path}: empty file ({empty})")


def iter_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line_number, tokens)`` for every non-blank line, with :func:`iter_text`'s
    checks and a literal ``<eos>`` refused (lines end implicitly)."""
    for lineno, text in iter_text(path, empty="no tokens"):
        tokens = text.split()
        if EOS in tokens:
            raise LmlowError(f"{path}:{lineno}: contains the reserved token {EOS}; "
                             "lines end implicitly, remove it")
        yield lineno, tokens


def iter_keyed_lines(path: Path, raw: bool = False,
                     ids: bool = False) -> Iterator[tuple[int, str | None, list[str] | str]]:
    """``(line_number, identifier, content)`` of every non-blank line: its tokens
    (:func:`iter_lines`), or with ``raw`` its text (:func:`iter_text`); with ``ids`` the line's
    first field is its identifier (an n-best list's ``utt7-3``), not content, else None."""
    if raw:
        for lineno, text in iter_text(path):
            if ids:
                key, *rest = text.split(None, 1)
                yield lineno, key, rest[0] if rest else ""
            else:
                yield lineno, None, text
    else:
        for lineno, tokens in iter_lines(path):
            yield (lineno, tokens[0], tokens[1:]) if ids else (lineno, None, tokens)


def _refuse_binary(path: Path, f) -> None:
    """A NUL byte near the start means a binary file: say so before any UTF-8 complaint.
    Peeked, not read and sought back, so that a pipe can be read too."""
    head = f.peek(8192)[:8192]
    nul = head.find(b"\0")
    if nul >= 0:
        line = head.count(b"\n", 0, nul) + 1
        raise LmlowError(f"{path}:{line}: binary file (NUL byte); expected UTF-8 text")


BOM = "\ufeff"
_NOTED: set[tuple[str, str]] = set()


def note_once(path: Path, kind: str, text: str) -> None:
    """A note on stderr, once per file and kind (a file is often read several times)."""
    if (str(path), kind) not in _NOTED:
        _NOTED.add((str(path), kind))
        print(f"lmlow: note: {path}: {text}", file=sys.stderr)


def note_bom(path: Path, lineno: int = 1, at_start: bool = True) -> None:
    """Say once per file that a UTF-8 byte-order mark was dropped (it would have made the first
    word another word: `\ufeffthe`); one inside the file, once more (files joined by `cat`),
    and one inside a line (U+FEFF as a zero-width no-break space, pasted or scraped)."""
    if lineno == 1 and at_start:
        note_once(path, "bom", "starts with a UTF-8 byte-order mark; ignored")
    elif at_start:
        note_once(path, "bom-inside", f"line {lineno} starts with a UTF-8 byte-order mark "
                  "(files joined by cat keep theirs); ignored there and on any other line")
    else:
        note_once(path, "bom-in-line", f"line {lineno} holds U+FEFF (a byte-order mark used "
                  "as a zero-width no-break space) inside it; removed there and on any other "
                  "line, so that no word holds one")


def note_carriage_returns(path: Path, first_line: bytes) -> None:
    """A file whose lines end in carriage returns alone (classic Mac OS text) reads as one line
    (KenLM reads it so too: both end lines at line feeds); say so, since every line-level
    result (sentences scored, documents split) would silently be about one line."""
    if not first_line.endswith(b"\n") and first_line.count(b"\r") > 1:
        note_once(path, "cr", "its lines end in carriage returns alone (classic Mac OS text), "
                   "so it reads as one line; convert it first: tr '\\r' '\\n' < FILE > NEW")


# U+2028 LINE SEPARATOR, U+2029 PARAGRAPH SEPARATOR, U+0085 NEXT LINE, as UTF-8
UNICODE_LINE_ENDS = (b"\xe2\x80\xa8", b"\xe2\x80\xa9", b"\xc2\x85")


def note_unicode_line_ends(path: Path, first_line: bytes) -> None:
    """A file whose lines are separated by Unicode's line separators alone (U+2028, U+2029,
    U+0085: some exports, JSON strings written out) reads as one line, as with carriage
    returns alone: say so, or every line-level result would silently be about one line."""
    if (not first_line.endswith(b"\n")
            and sum(first_line.count(end) for end in UNICODE_LINE_ENDS) > 1):
        note_once(path, "unicode-line-ends", "its lines are separated by Unicode line "
                  "separators alone (U+2028, U+2029 or U+0085), not line feeds, so it reads "
                  "as one line; convert it first: "
                  r"perl -CSD -pe 's/[\x{2028}\x{2029}\x{85}]/\n/g' < FILE > NEW")


def decode_line(path: Path, lineno: int, raw: bytes) -> str:
    """A line's text without any U+FEFF: a byte-order mark at its start on any line (files
    joined by `cat` keep each one's mark), and one inside it (a zero-width no-break space).
    Glued to a word it made another word, one that every word-per-line file (``vocab.txt``,
    vectors, ``--vocab``) read back without it: a run that could not be opened, vectors
    given to the wrong word. Invisible, so dropping it changes no word a reader can see."""
    if b"\0" in raw:
        raise LmlowError(f"{path}:{lineno}: binary file (NUL byte); expected UTF-8 text")
    try:
        text = raw.decode("utf-8")
        if lineno == 1:
            note_carriage_returns(path, raw)
            note_unicode_line_ends(path, raw)
        if BOM in text:
            note_bom(path, lineno, at_start=BOM not in text[1:])
            text = text.replace(BOM, "")
        return text
    except UnicodeDecodeError as e:
        raise LmlowError(f"{path}:{lineno}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at "
                         f"column {e.start + 1})") from None


def iter_sentences(path: Path) -> Iterator[list[str]]:
    """Token lists with ``<eos>`` appended: the stream every model is trained and scored on."""
    for _, tokens in iter_lines(path):
        tokens.append(EOS)
        yield tokens
