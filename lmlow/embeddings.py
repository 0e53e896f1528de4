"""Pretrained word vectors: loading (text formats by lmlow's own reader, the others through
gensim), validation, coverage and neighbours.

Formats, told apart by name and first line: GloVe text (no header), word2vec text (a
``COUNT DIM`` header), word2vec binary (``.bin``), lmlow's fast format (``.npz``: the words
and the float32 matrix as plain numpy arrays, loaded without pickle) and gensim
``KeyedVectors`` files (``.kv``, ``.model``). Gensim files are pickles: loading one can run
any code its author put in it, so lmlow refuses them unless ``allow_pickle`` (``--allow-pickle``)
says the file is trusted. Text files may be gzipped.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from lmlow.data.textio import decode_line, numbered_lines, open_binary
from lmlow.errors import LmlowError
from lmlow.files import require_regular
from lmlow.progress import progress

GENSIM_SUFFIXES = (".kv", ".model")


def detect_format(path: Path) -> str:
    """One of ``gensim``, ``word2vec-bin``, ``word2vec-text``, ``glove``."""
    path = Path(path)
    if path.suffix in GENSIM_SUFFIXES:
        return "gensim"
    if path.suffix == ".npz":
        return "npz"
    if path.suffix == ".bin" or path.name.endswith(".bin.gz"):
        return "word2vec-bin"
    with open_binary(path) as f:     # read as every text line is: bounded, a bad .gz in one line
        # the first line that is not blank (blank lines are skipped, as corpora skip them)
        lineno, first = next(((n, raw) for n, raw in numbered_lines(path, f) if raw.strip()),
                             (0, b""))
    if not lineno:
        raise LmlowError(f"{path}: empty file")
    fields = decode_line(path, lineno, first).split()
    header = len(fields) == 2 and all(x.isascii() and x.isdigit() for x in fields)
    if header and lineno > 1:        # the readers take line 1 for the header
        raise LmlowError(f"{path}:{lineno}: a 'COUNT DIM' header after {lineno - 1} blank "
                         "line(s); it must be the first line")
    return "word2vec-text" if header else "glove"


TEXT_FORMATS = ("glove", "word2vec-text")


def _checked_format(path: Path, allow_pickle: bool) -> str:
    """The file's format (:func:`detect_format`), once it is known to be a regular file that
    may be loaded: one line otherwise."""
    if not path.exists():
        raise LmlowError(f"{path}: no such file")
    require_regular(path)              # read more than once: a pipe would be empty the second time
    fmt = detect_format(path)
    if fmt == "gensim" and not allow_pickle:
        raise LmlowError(f"{path}: a gensim file is a Python pickle, which can run code when "
                         "loaded; pass --allow-pickle if you trust it, or use GloVe text or "
                         "lmlow's .npz (written by `lmlow embed`)")
    return fmt


def load_vectors(path: Path, allow_pickle: bool = False):
    """Load a ``gensim.models.KeyedVectors``; bad files give one line naming file and line."""
    path = Path(path)
    fmt = _checked_format(path, allow_pickle)
    if fmt in TEXT_FORMATS:
        return read_text_vectors(path, header=fmt == "word2vec-text")
    return _load_binary(path, fmt)


def _load_binary(path: Path, fmt: str):
    """A gensim, ``.npz`` or word2vec binary file (``fmt``, checked by :func:`_checked_format`),
    with the checks lmlow's text reader makes: no NaN or infinity, no empty matrix."""
    from gensim.models import KeyedVectors

    with _readable(path, fmt):
        if fmt == "gensim":
            kv = KeyedVectors.load(str(path))
            kv = getattr(kv, "wv", kv)          # a whole Word2Vec/FastText model: its vectors
            if not isinstance(kv, KeyedVectors):
                raise LmlowError(f"{path}: a gensim {type(kv).__name__}, not word vectors "
                                 "(KeyedVectors, or a model with .wv)")
        elif fmt == "npz":
            kv = _keyed_vectors(*_read_npz(path, values=True))
        else:
            kv = read_binary_vectors(path)
    kv = _without_unusable_words(path, kv)
    bad = _nonfinite_rows(kv.vectors)
    if len(bad):
        raise LmlowError(f"{path}: vector of {kv.index_to_key[bad[0]]!r} has NaN or infinite "
                         f"values ({len(bad)} such vectors)")
    if len(kv) == 0:
        raise LmlowError(f"{path}: no vectors")
    if kv.vector_size == 0:
        raise LmlowError(f"{path}: vectors of 0 dimensions")
    return kv


@contextlib.contextmanager
def _readable(path: Path, fmt: str):
    """Any failure of a binary reader (gensim's, numpy's, a truncated ``.gz``) as one line
    naming the file."""
    try:
        yield
    except LmlowError:
        raise
    except Exception as e:
        raise LmlowError(f"{path}: cannot read {fmt} vectors ({type(e).__name__}: {e})") from None


def _without_unusable_words(path: Path, kv):
    """A binary file's vectors without the words :func:`_usable_rows` leaves out."""
    keep = _usable_rows(path, kv.index_to_key)
    if keep is None:
        return kv
    words = [kv.index_to_key[i] for i in keep]
    return _keyed_vectors({w: i for i, w in enumerate(words)}, kv.vectors[keep])


def _keyed_vectors(index: dict[str, int], vectors: np.ndarray):
    """A ``KeyedVectors`` of ``index`` (word -> row, in row order) holding ``vectors`` itself:
    ``add_vectors`` would copy the matrix, a second one in memory while it does."""
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vectors.shape[1])
    kv.vectors = vectors
    kv.index_to_key, kv.key_to_index, kv.next_index = list(index), index, len(index)
    return kv


def _nonfinite_rows(vectors: np.ndarray) -> np.ndarray:
    """The positions of the rows holding NaN or infinity, a block of rows at a time: no
    boolean matrix of the whole (a quarter of a float32 matrix's size)."""
    return np.concatenate([a + np.flatnonzero(~np.isfinite(vectors[a:a + BLOCK]).all(axis=1))
                           for a in range(0, len(vectors), BLOCK)] or [np.empty(0, np.int64)])


def _usable_rows(path: Path, words: list[str]) -> np.ndarray | None:
    """The positions of a binary file's words that lmlow can use (None: all), with the
    checks the text reader makes of its words: an empty word is refused (it would be a
    vocabulary row no token reads), a word holding a space is left out with a note (no corpus
    token has one, and ``vocab --out`` then ``--vocab`` read it back as two words)."""
    if "" in words:
        raise LmlowError(f"{path}: vector {words.index('') + 1} has an empty word")
    spaced = [i for i, w in enumerate(words) if _has_space(w)]
    if not spaced:
        return None
    from lmlow.data.textio import note_once
    note_once(path, "spaced", f"{len(spaced)} vectors of words with spaces in them skipped "
              f"(no corpus token has a space); the first, {words[spaced[0]]!r}, vector "
              f"{spaced[0] + 1}")
    keep = np.setdiff1d(np.arange(len(words)), spaced)
    if not len(keep):
        raise LmlowError(f"{path}: no vectors")
    return keep


BINARY_CHUNK = 1 << 20
GROW_ROWS = 1 << 16     # a .bin.gz's first rows; the matrix doubles as more vectors are read


def read_binary_vectors(path: Path):
    """word2vec's binary format (``COUNT DIM`` line, then each word, a space and DIM
    little-endian float32 values, a line feed after each vector or not), plain or ``.gz``,
    read by lmlow rather than gensim, which kept the first of a duplicate word and stopped at
    the header's count, both silently: every vector is read, a duplicate word, a count that
    is not the file's, invalid UTF-8 and a text file named ``.bin`` are refused in one line."""
    return _keyed_vectors(*_read_binary(path, values=True))


def read_binary_words(path: Path) -> list[str]:
    """The words of a word2vec binary file, with every check of :func:`read_binary_vectors`,
    without its matrix (GoogleNews's 3M x 300 is 3.6 GB): what the vocabulary and coverage
    need. The values are still read past (the file's bytes), not stored."""
    return list(_read_binary(path, values=False)[0])


def _read_binary(path: Path, values: bool) -> tuple[dict[str, int], np.ndarray | None]:
    """One pass over a word2vec binary file (:func:`read_binary_vectors`'s checks): each
    vector's word -> its position, and with ``values`` the (count, dim) float32 matrix."""
    from lmlow.data.textio import open_binary
    with open_binary(path) as f:
        head = f.readline(256)
        fields = head.split()
        if len(fields) != 2 or not all(x.isdigit() for x in fields) or not head.endswith(b"\n"):
            raise LmlowError(f"{path}:1: expected word2vec's 'COUNT DIM' header line")
        count, dim = map(int, fields)
        if not count or not dim:
            raise LmlowError(f"{path}:1: the header says {count} vectors of {dim} dimensions")
        width = 4 * dim
        if path.suffix == ".bin" and count * (width + 2) > path.stat().st_size:
            raise LmlowError(f"{path}:1: the header says {count} vectors of {dim} dimensions; "
                             f"the file is too short for them ({path.stat().st_size:,} bytes)")
        # a plain file's size bounds its count (above); a .gz's header could claim any count,
        # so its matrix grows with the vectors read
        rows = count if path.suffix == ".bin" else min(count, GROW_ROWS)
        vectors = np.empty((rows, dim), dtype=np.float32) if values else None
        index, buf, pos = {}, b"", 0
        for i in range(count):
            while True:                  # the word: after any line feed, up to its space
                start = pos
                while start < len(buf) and buf[start] in b" \n\r\t":
                    start += 1
                end = buf.find(b" ", start)
                if end >= 0 and len(buf) >= end + 1 + width:
                    break
                more = f.read(BINARY_CHUNK)
                if not more:
                    raise LmlowError(f"{path}: the header says {count} vectors; the file "
                                     f"ends after {i}")
                if end < 0 and len(buf) - start > 4096:
                    raise LmlowError(f"{path}: vector {i + 1}: no word of 4 KiB or less; not "
                                     "word2vec's binary format")
                buf, pos = buf[pos:] + more, 0
            try:
                word = buf[start:end].decode("utf-8")
            except UnicodeDecodeError:
                raise LmlowError(f"{path}: vector {i + 1}: its word is not valid UTF-8") from None
            raw = buf[end + 1:end + 1 + width]
            if i == 0 and not raw.strip(b"0123456789+-.eE \n\r\t"):
                raise LmlowError(f"{path}: its first vector is written as text; word2vec text "
                                 "vectors need a name not ending in .bin (e.g. .txt)")
            if word in index:
                raise LmlowError(f"{path}: vector {i + 1}: duplicate word {word!r} (first at "
                                 f"vector {index[word] + 1})")
            if values:
                if i == len(vectors):
                    vectors = np.resize(vectors, (min(count, 2 * i), dim))
                vectors[i] = np.frombuffer(raw, dtype="<f4")
            index[word] = i
            pos = end + 1 + width
        if buf[pos:].strip() or f.read(BINARY_CHUNK).strip():
            raise LmlowError(f"{path}:1: the header says {count} vectors; the file has more")
    return index, vectors


def read_text_vectors(path: Path, header: bool):
    """GloVe text (``header=False``) or word2vec text (a ``COUNT DIM`` first line), with every
    error naming its line: a line with fewer numbers than the others (gensim filled it from
    what it had), a value that is not a number, NaN or infinity, a duplicate word (gensim kept
    the first silently), invalid UTF-8, a header whose count is wrong. Fields may be separated
    by spaces or tabs; blank lines are skipped (gensim refused a file ending in one). A line
    with *more* fields than a word and ``DIM`` numbers is a word with spaces in it (Stanford's
    glove.840B has ``at name@domain.com``): no corpus token can have one, so it is skipped,
    with a note giving the count and the first line; so is a word holding a space that
    ``bytes.split`` keeps (a no-break space, ASCII's separators \\x1c-\\x1f: corpora split on
    them, so no token has one; :func:`_has_space`). The matrix is allocated once, from a
    first pass that counts the lines (as gensim's reader does); the vectors are gensim's
    reader's to the bit, about 5x faster (BENCHMARKS.md)."""
    from gensim.models import KeyedVectors

    dim, count, lines = _text_shape(path, header)
    kv = KeyedVectors(dim, count=lines)
    index = _read_text_lines(path, header, dim, count, lines, kv.vectors.__setitem__)
    kv.index_to_key, kv.key_to_index, kv.next_index = list(index), index, len(index)
    if len(index) < lines:                         # as gensim's reader trims its own
        kv.vectors = np.ascontiguousarray(kv.vectors[:len(index)])
    return kv


VALUES_CHECKED = 1000   # lines whose values the words alone still parse (:func:`read_text_words`)


def read_text_words(path: Path, header: bool) -> list[str]:
    """The words of a GloVe or word2vec text file, in file order, with every check of
    :func:`read_text_vectors`, and without their matrix: what the vocabulary and coverage
    need. The values (not numbers, NaN, infinity) are checked on the first
    ``VALUES_CHECKED`` lines, beyond them where the vectors are loaded: a text file that is
    not vectors (a corpus given for them: ``hello world`` reads as the word ``hello`` with a
    one-value vector) is refused at its first line, not counted as words that cover nothing,
    and a large file's words are still read without parsing its numbers."""
    dim, count, lines = _text_shape(path, header)
    return list(_read_text_lines(path, header, dim, count, lines))


def _has_space(word: str) -> bool:
    """Whether a corpus would not read ``word`` as one token: its lines are split by
    ``str.split``, on every Unicode space and on ASCII's separators \\x1c-\\x1f, which
    ``bytes.split`` (the text reader's) keeps inside a word; ``vocab --out`` then ``--vocab``
    would read such a word back as other words."""
    return len(word.split()) != 1


def _read_text_lines(path: Path, header: bool, dim: int, count: int | None, lines: int,
                     store=None) -> dict[str, int]:
    """One pass over a text vector file: each vector's word -> its position, in file order,
    with :func:`read_text_vectors`'s checks; ``store(position, values)`` takes each kept
    vector's values, parsed and checked (None: the words alone, the values not parsed)."""
    index, spaced = {}, []
    line_of = np.empty(lines, dtype=np.int64)      # for a duplicate's message
    with open_binary(path) as f, progress(f"reading {path.name}", total=lines,
                                          unit="vec") as bar:
        for lineno, raw in numbered_lines(path, f):
            if header and lineno == 1:
                continue
            bar.tokens(1)
            fields = raw.split()
            if not fields:
                continue                               # a blank line, as corpora skip them
            n = len(fields) - 1
            cut = max(1, n - dim + 1)                  # the word is everything before the numbers
            word = decode_line(path, lineno, b" ".join(fields[:cut]))
            if n < dim:
                raise LmlowError(f"{path}:{lineno}: {n} values for {word!r}, expected {dim} "
                                 "(inconsistent dimensions)")
            row = (_values(path, lineno, word, fields[cut:])
                   if store or lineno <= VALUES_CHECKED else None)
            if cut > 1 and all(map(_is_number, fields[1:cut])):
                raise LmlowError(f"{path}:{lineno}: {n} values for "
                                 f"{decode_line(path, lineno, fields[0])!r}, expected {dim} "
                                 "(inconsistent dimensions)")
            if cut > 1 or _has_space(word):
                spaced.append((lineno, word))
                continue
            if word in index:
                raise LmlowError(f"{path}:{lineno}: duplicate word {word!r} (first at line "
                                 f"{line_of[index[word]]})")
            if store:
                store(len(index), row)
            line_of[len(index)] = lineno
            index[word] = len(index)
    if count is not None and count != len(index) + len(spaced):
        raise LmlowError(f"{path}:1: the header says {count} vectors; the file has "
                         f"{len(index) + len(spaced)}")
    if spaced:
        from lmlow.data.textio import note_once
        note_once(path, "spaced", f"{len(spaced)} vectors of words with spaces in them skipped "
                  f"(no corpus token has a space); the first, {spaced[0][1]!r}, at line "
                  f"{spaced[0][0]}")
    if not index:
        raise LmlowError(f"{path}: no vectors")
    return index


def _values(path: Path, lineno: int, word: str, fields: list[bytes]) -> np.ndarray:
    """A vector line's values as float32; one line naming the first that is not a number,
    the first finite number too large for float32 (it became infinity, with numpy's warning,
    and was called infinite), or the word whose vector holds NaN or infinity. Python's digit
    grouping is no number of a vector file: numpy and float() read ``1_0`` as 10.0."""
    try:
        if b"_" in b"".join(fields):             # one C-speed search, not one per value
            raise ValueError
        with np.errstate(over="ignore"):
            row = np.array(fields, dtype=np.float32)
    except ValueError:
        bad = next((v for v in fields if not _is_number(v)), fields[0])
        raise LmlowError(f"{path}:{lineno}: {decode_line(path, lineno, bad)!r} is not a "
                         "number") from None
    if not np.isfinite(row).all():
        big = next((v for v, x in zip(fields, row) if not np.isfinite(x)
                    and np.isfinite(float(v))), None)
        if big is not None:
            raise LmlowError(f"{path}:{lineno}: value {decode_line(path, lineno, big)!r} of "
                             f"{word!r} is too large for float32 (at most {FLOAT32_MAX:.7g})")
        raise LmlowError(f"{path}:{lineno}: vector of {word!r} has NaN or infinite values")
    return row


FLOAT32_MAX = float(np.finfo(np.float32).max)


def _text_shape(path: Path, header: bool, sample: int = 1000) -> tuple[int, int | None, int]:
    """The number of values per vector (the header's, or the most common among the first
    ``sample`` lines: a first line with a spaced word must not set it), the header's count,
    and the number of vector lines (counted in blocks: one fast pass)."""
    from collections import Counter

    from lmlow.data.textio import READ_ERRORS
    seen, first, dim, count, newlines, last = Counter(), None, None, None, 0, b"\n"
    with open_binary(path) as f:
        for lineno, raw in numbered_lines(path, f):
            fields, last = raw.split(), raw[-1:]
            newlines += last == b"\n"
            if header and lineno == 1:                 # digits, as detect_format found them
                count, dim = map(int, decode_line(path, 1, raw).split())   # (a BOM dropped)
                continue
            if fields:
                seen[len(fields) - 1] += 1
                first = first or (lineno, fields[0])
            if lineno >= sample:
                break
        try:
            for block in iter(lambda: f.read(1 << 24), b""):
                newlines += block.count(b"\n")
                last = block[-1:]
        except READ_ERRORS as e:
            raise LmlowError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    lines = newlines + (last != b"\n") - header   # a last line without its line feed counts
    if first is None:
        raise LmlowError(f"{path}: no vectors")
    common = max(seen, key=lambda n: (seen[n], n))  # a tie (a tiny file): a short line is the error
    if common == 0:
        raise LmlowError(f"{path}:{first[0]}: {decode_line(path, first[0], first[1])!r} has no "
                         "values; a vector line is a word and its numbers")
    if dim is not None and dim != common:          # before a matrix of the header's size exists
        raise LmlowError(f"{path}:1: the header says {dim} dimensions; the vectors have {common}")
    return common, count, lines


def _is_number(text: bytes) -> bool:
    """Whether a vector file's field is a number as such files write them: what float()
    reads, less its digit grouping (``1_0``)."""
    if b"_" in text:
        return False
    try:
        float(text)
        return True
    except ValueError:
        return False


def vector_words(path: Path, allow_pickle: bool = False) -> list[str]:
    """The words of a vector file, in file order: what the vocabulary (``--extend-vocab``) and
    coverage (``stats --embeddings``) need. A text file's words are read alone
    (:func:`read_text_words`): at 400k x 300, 2.9x as fast as loading the vectors and 69 MB
    of memory instead of 1,448 (glove.840B's 2.2M x 300 matrix alone is 2.6 GB; BENCHMARKS.md);
    so are a word2vec binary file's (:func:`read_binary_words`) and an ``.npz``'s (the matrix's
    shape and type from its header, :func:`_read_npz`)."""
    path = Path(path)
    fmt = _checked_format(path, allow_pickle)
    if fmt in TEXT_FORMATS:
        return read_text_words(path, header=fmt == "word2vec-text")
    if fmt == "gensim":
        return list(_load_binary(path, fmt).index_to_key)
    with _readable(path, fmt):
        words = (read_binary_words(path) if fmt == "word2vec-bin"
                 else list(_read_npz(path, values=False)[0]))
    keep = _usable_rows(path, words)
    return words if keep is None else [words[i] for i in keep]


def save_npz(kv, path: Path) -> None:
    """lmlow's fast, pickle-free vector file: ``words_utf8`` (the words) and ``vectors``
    (float32)."""
    from lmlow.files import atomic_path

    with atomic_path(path) as tmp:
        write_npz(kv, tmp)


NPZ_WORDS = "words_utf8"     # since 2026-11-30; files written before hold ``words`` (unicode)
NPZ_LAYOUTS = ({NPZ_WORDS, "vectors"}, {"words", "vectors"})


def write_npz(kv, path: Path) -> None:
    """:func:`save_npz`'s contents, written to ``path`` as it is (a temporary name). The words
    are one uint8 array, their UTF-8 joined by line feeds: a numpy unicode array gives every
    word the longest one's width in 4-byte characters (one 990-character token made 400k
    words 1.6 GB, beside a matrix of 480 MB)."""
    with open(path, "wb") as f:
        np.savez(f, **{NPZ_WORDS: _joined_words(kv.index_to_key)},
                 vectors=np.asarray(kv.vectors, dtype=np.float32))


def _joined_words(words: list[str]) -> np.ndarray:
    """The words' UTF-8 joined by line feeds, as uint8 (no word of a vector file holds one:
    corpora split on them)."""
    bad = next((w for w in words if "\n" in w), None)
    if bad is not None:
        raise LmlowError(f"vector word {bad!r} holds a line feed; no corpus token can, and an "
                         ".npz cannot store it")
    return np.frombuffer("\n".join(words).encode("utf-8"), dtype=np.uint8)


def _read_npz(path: Path, values: bool) -> tuple[dict[str, int], np.ndarray | None]:
    """An ``.npz``'s words (word -> row, in order) and, with ``values``, its matrix as float32:
    each array read from the zip once, the matrix not copied when it is float32 already, and
    not read at all for the words alone (its shape and type are its header's), with pickle
    refused. Not an lmlow file, words that are not text, a matrix that is not numbers, not 2-d,
    of 0 dimensions or of another count than the words, and a duplicate word are one line."""
    with np.load(path, allow_pickle=False) as data:
        if set(data.files) not in NPZ_LAYOUTS:
            raise LmlowError(f"{path}: not an lmlow vector file (expected arrays {NPZ_WORDS} "
                             "(or words) and vectors)")
        shape, dtype = _npy_header(path, data, "vectors")
        if dtype.kind not in "fiu":
            raise LmlowError(f"{path}: its vectors are {dtype}, expected numbers")
        index = _word_index(path, _npz_words(path, data))
        if len(shape) != 2 or len(index) != shape[0]:
            raise LmlowError(f"{path}: {len(index)} words for a {shape} matrix")
        if not index:
            raise LmlowError(f"{path}: no vectors")
        if shape[1] == 0:
            raise LmlowError(f"{path}: vectors of 0 dimensions")
        return index, _float32(path, index, data["vectors"]) if values else None


def _npy_header(path: Path, data, name: str) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and type of array ``name`` of an open ``.npz``, read from its ``.npy`` header
    inside the zip: the array itself is not read."""
    from numpy.lib import format as npy

    with data.zip.open(f"{name}.npy") as f:
        version = npy.read_magic(f)
        read = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}.get(version)
        if read is None:               # 3.0: field names in UTF-8, a structured type: not numbers
            raise LmlowError(f"{path}: its {name} are not a plain array of numbers (.npy "
                             f"format {version[0]}.{version[1]})")
        shape, _, dtype = read(f)
    return shape, dtype


def _npz_words(path: Path, data) -> list[str]:
    """The words of an open ``.npz``: ``words_utf8``, or the unicode array ``words`` of the
    files written before (still read: they are on users' disks)."""
    if "words" in data.files:
        words = data["words"]
        if words.dtype.kind != "U":
            raise LmlowError(f"{path}: its words are {words.dtype} values, expected text (an "
                             "lmlow vector file stores words as strings)")
        if words.ndim != 1:
            raise LmlowError(f"{path}: its words are an array of shape {words.shape}, "
                             "expected one row")
        return words.tolist()
    raw = data[NPZ_WORDS]
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise LmlowError(f"{path}: its {NPZ_WORDS} is a {raw.dtype} array of shape "
                         f"{raw.shape}, expected one row of bytes (uint8)")
    try:
        text = raw.tobytes().decode("utf-8")
    except UnicodeDecodeError:
        raise LmlowError(f"{path}: its words are not valid UTF-8") from None
    return text.split("\n") if text else []


def _word_index(path: Path, words: list[str]) -> dict[str, int]:
    """Each word -> its row; a duplicate word refused, named with both rows."""
    index = {}
    for i, w in enumerate(words):
        if index.setdefault(w, i) != i:
            raise LmlowError(f"{path}: vector {i + 1}: duplicate word {w!r} (first at vector "
                             f"{index[w] + 1})")
    return index


def _float32(path: Path, index: dict[str, int], vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as a C-ordered float32 matrix, not copied when it is one already; a finite
    value that float32 cannot hold (a float64 file's 1e40) is named, not turned into infinity
    with numpy's warning and then called NaN or infinite."""
    with np.errstate(over="ignore"):
        out = np.ascontiguousarray(vectors, dtype=np.float32)
    if out is not vectors:
        big = [i for i in _nonfinite_rows(out) if np.isfinite(vectors[i]).all()]
        if big:
            raise LmlowError(f"{path}: vector {big[0] + 1} ({list(index)[big[0]]!r}) has values too "
                             f"large for float32 (at most {FLOAT32_MAX:.7g})")
    return out


NEIGHBOURS = 8                  # how many `lmlow neighbours` shows by default
BLOCK = 65536                   # rows converted to float64 at a time
NO_OTHER: tuple = ()            # a word with a vector, but no other word's has a direction


def neighbours(kv, word: str, top: int = NEIGHBOURS) -> list[tuple[str, float]] | None:
    """Nearest words by cosine similarity, most similar first (ties in the file's order);
    empty if the word has no vector (``NO_OTHER``, also empty, if it has one but no other
    word's vector has a direction), None if its vector is all zeros. A row of zeros (a
    padding token in many exported files) has no direction: it is no word's neighbour and has
    none (gensim's ``most_similar`` divided by its zero norm: NaN similarities and a warning)."""
    i = kv.key_to_index.get(word)
    if i is None:
        return []
    norms = _norms(kv)
    if norms[i] == 0:
        return None
    pointing = norms > 0
    # in float64 (float32's norms and products overflow at 1e19 and vanish at 1e-23), a block
    # of rows at a time: no float64 copy of the matrix
    row, sims = kv.vectors[i].astype(np.float64), np.empty(len(kv))
    for a in range(0, len(kv), BLOCK):
        sims[a:a + BLOCK] = kv.vectors[a:a + BLOCK].astype(np.float64) @ row
    with np.errstate(divide="ignore", invalid="ignore"):
        sims /= norms * norms[i]
    sims[~pointing] = -np.inf
    sims[i] = -np.inf
    top = min(top, int(pointing.sum()) - 1)
    if top <= 0:
        return NO_OTHER
    return [(kv.index_to_key[j], float(sims[j])) for j in _top_in_file_order(sims, top)]


def _top_in_file_order(sims: np.ndarray, top: int) -> np.ndarray:
    """The positions of the ``top`` highest ``sims``, highest first, equal scores in file
    order. A partition alone picks freely among the scores equal to the cut-off one (file
    order lost at the boundary): every position that reaches the cut-off is kept, then that
    set, usually little more than ``top``, is sorted stably; the vocabulary never is."""
    cutoff = -np.partition(-sims, top - 1)[top - 1]
    reach = np.flatnonzero(sims >= cutoff)              # ascending: the file's order
    return reach[np.argsort(-sims[reach], kind="stable")[:top]]


def _norms(kv) -> np.ndarray:
    """Each vector's length in float64, kept on ``kv`` from one word to the next (gensim's
    ``fill_norms`` is float32's)."""
    if getattr(kv, "_lmlow_norms", None) is None or len(kv._lmlow_norms) != len(kv):
        norms = np.empty(len(kv))
        for a in range(0, len(kv), BLOCK):          # a block at a time: no float64 matrix
            block = kv.vectors[a:a + BLOCK].astype(np.float64)
            norms[a:a + len(block)] = np.sqrt(np.einsum("ij,ij->i", block, block))
        kv._lmlow_norms = norms
    return kv._lmlow_norms


def format_neighbours(result: dict[str, list[tuple[str, float]] | None]) -> str:
    """One line per word: its neighbours with their cosine similarity."""
    def line(near):
        if near is None:
            return "(a vector of zeros: no direction, so no neighbours)"
        if near == NO_OTHER:
            return "(no other word's vector has a direction: no neighbours)"
        return ", ".join(f"{n} {s:.2f}" for n, s in near) if near else "(no vector)"
    return "\n".join(f"{w}: {line(near)}" for w, near in result.items())
