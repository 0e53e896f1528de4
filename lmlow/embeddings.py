"""Pretrained word vectors: loading (through gensim), validation, coverage and neighbours.

Formats, told apart by name and first line: GloVe text (no header), word2vec text (a
``COUNT DIM`` header), word2vec binary (``.bin``), lmlow's fast format (``.npz``: the words
and the float32 matrix as plain numpy arrays, loaded without pickle) and gensim
``KeyedVectors`` files (``.kv``, ``.model``). Gensim files are pickles: loading one can run
any code its author put in it, so lmlow refuses them unless ``allow_pickle`` (``--allow-pickle``)
says the file is trusted. Text files may be gzipped.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from lmlow.data.textio import decode_line, numbered_lines, open_binary
from lmlow.errors import LmlowError
from lmlow.files import require_regular

GENSIM_SUFFIXES = (".kv", ".model")


def detect_format(path: Path) -> str:
    """One of ``gensim``, ``word2vec-bin``, ``word2vec-text``, ``glove``."""
    path = Path(path)
    if path.suffix in GENSIM_SUFFIXES:
        return "gensim"
    if path.suffix == ".npz":
        return "npz"
    if path.suffix == ".bin":
        return "word2vec-bin"
    with open_binary(path) as f:
        first = f.readline()
    if not first:
        raise LmlowError(f"{path}: empty file")
    if not first.strip():
        raise LmlowError(f"{path}:1: empty first line; expected a vector or a 'COUNT DIM' header")
    fields = decode_line(path, 1, first).split()
    return "word2vec-text" if len(fields) == 2 and all(x.isdigit() for x in fields) else "glove"


def load_vectors(path: Path, allow_pickle: bool = False):
    """Load a ``gensim.models.KeyedVectors``; bad files give one line naming file and line."""
    from gensim.models import KeyedVectors

    path = Path(path)
    if not path.exists():
        raise LmlowError(f"{path}: no such file")
    require_regular(path)              # read more than once: a pipe would be empty the second time
    fmt = detect_format(path)
    if fmt == "gensim" and not allow_pickle:
        raise LmlowError(f"{path}: a gensim file is a Python pickle, which can run code when "
                         "loaded; pass --allow-pickle if you trust it, or use GloVe text or "
                         "lmlow's .npz (written by `lmlow embed`)")
    try:
        if fmt == "gensim":
            kv = KeyedVectors.load(str(path))
        elif fmt == "npz":
            kv = _load_npz(path)
        else:
            kv = KeyedVectors.load_word2vec_format(
                str(path), binary=fmt == "word2vec-bin", no_header=fmt == "glove",
                unicode_errors="strict")
    except LmlowError:
        raise
    except Exception as e:  # gensim reports bad lines without their number: find it
        if fmt in ("glove", "word2vec-text"):
            check_text_vectors(path, header=fmt == "word2vec-text")
        raise LmlowError(f"{path}: cannot read {fmt} vectors ({type(e).__name__}: {e})") from None
    if fmt in ("glove", "word2vec-text"):
        _check_duplicates(path, kv, header=fmt == "word2vec-text")
        _drop_bom(path, kv)
    bad = np.flatnonzero(~np.isfinite(kv.vectors).all(axis=1))
    if len(bad):
        where = f":{bad[0] + 1 + (fmt == 'word2vec-text')}" if fmt in ("glove", "word2vec-text") else ""
        raise LmlowError(f"{path}{where}: vector of {kv.index_to_key[bad[0]]!r} has NaN or "
                         f"infinite values ({len(bad)} such vectors)")
    if len(kv) == 0:
        raise LmlowError(f"{path}: no vectors")
    if kv.vector_size == 0:        # gensim reads a file of bare words as 0-d vectors
        where = f":{1 + (fmt == 'word2vec-text')}" if fmt in ("glove", "word2vec-text") else ""
        raise LmlowError(f"{path}{where}: {kv.index_to_key[0]!r} has no values; a vector line "
                         "is a word and its numbers")
    return kv


def check_text_vectors(path: Path, header: bool) -> None:
    """Scan a text vector file and raise at the first malformed line."""
    dim = None
    with open_binary(path) as f:
        for lineno, raw in numbered_lines(path, f):
            fields = decode_line(path, lineno, raw).rstrip("\n").split(" ")
            fields = [x for x in fields if x]
            if header and lineno == 1:
                dim = int(fields[1])
                continue
            if not fields:
                raise LmlowError(f"{path}:{lineno}: empty line")
            values = fields[1:]
            if dim is None:
                dim = len(values)
            if len(values) != dim:
                raise LmlowError(f"{path}:{lineno}: {len(values)} values for {fields[0]!r}, "
                                 f"expected {dim} (inconsistent dimensions)")
            for v in values:
                try:
                    x = float(v)
                except ValueError:
                    raise LmlowError(f"{path}:{lineno}: {v!r} is not a number") from None
                if not math.isfinite(x):
                    raise LmlowError(f"{path}:{lineno}: vector of {fields[0]!r} has NaN or infinite values")


def _drop_bom(path: Path, kv) -> None:
    """A byte-order mark at the start of a text vector file is part of gensim's first word:
    give the vector to the word itself."""
    from lmlow.data.textio import BOM, note_bom
    first = kv.index_to_key[0]
    if first.startswith(BOM):
        note_bom(path)
        kv.index_to_key[0] = first[1:]
        kv.key_to_index = {w: i for i, w in enumerate(kv.index_to_key)}


def _check_duplicates(path: Path, kv, header: bool) -> None:
    """gensim keeps the first of duplicate words silently, and fills a line with fewer
    numbers than the others from what it has: a user should hear about both, with the line."""
    seen = set()
    with open_binary(path) as f:
        for lineno, raw in numbered_lines(path, f):
            if header and lineno == 1:
                continue
            fields = raw.split()
            if b"\t" in raw.strip():        # gensim splits at spaces only: a 0-d vector
                raise LmlowError(f"{path}:{lineno}: fields separated by tabs; a vector line is "
                                 "a word and its numbers separated by spaces (`tr '\\t' ' '` "
                                 "converts the file)")
            if len(fields) - 1 != kv.vector_size:
                raise LmlowError(f"{path}:{lineno}: {len(fields) - 1} values for "
                                 f"{decode_line(path, lineno, fields[0]) if fields else ''!r}, "
                                 f"expected {kv.vector_size} (inconsistent dimensions)")
            word = raw.split(b" ", 1)[0]
            if word in seen:
                raise LmlowError(f"{path}:{lineno}: duplicate word {decode_line(path, lineno, word)!r}")
            seen.add(word)
    if len(seen) != len(kv):
        raise LmlowError(f"{path}: read {len(kv)} vectors but the file has {len(seen)} words")


def vector_words(path: Path, allow_pickle: bool = False) -> list[str]:
    """The words of a vector file, in file order."""
    return list(load_vectors(path, allow_pickle).index_to_key)


def save_npz(kv, path: Path) -> None:
    """lmlow's fast, pickle-free vector file: ``words`` (unicode) and ``vectors`` (float32)."""
    from lmlow.files import atomic_path

    with atomic_path(path) as tmp:
        write_npz(kv, tmp)


def write_npz(kv, path: Path) -> None:
    """:func:`save_npz`'s contents, written to ``path`` as it is (a temporary name)."""
    with open(path, "wb") as f:
        np.savez(f, words=np.array(kv.index_to_key, dtype=str),
                 vectors=np.asarray(kv.vectors, dtype=np.float32))


def _load_npz(path: Path):
    from gensim.models import KeyedVectors

    with np.load(path, allow_pickle=False) as data:
        if set(data.files) != {"words", "vectors"}:
            raise LmlowError(f"{path}: not an lmlow vector file (expected arrays words and vectors)")
        if data["words"].dtype.kind != "U":
            raise LmlowError(f"{path}: its words are {data['words'].dtype} values, expected "
                             "text (an lmlow vector file stores words as strings)")
        if data["vectors"].dtype.kind not in "fiu":
            raise LmlowError(f"{path}: its vectors are {data['vectors'].dtype}, expected numbers")
        words, vectors = data["words"].tolist(), data["vectors"].astype(np.float32)
    if vectors.ndim != 2 or len(words) != len(vectors):
        raise LmlowError(f"{path}: {len(words)} words for a {vectors.shape} matrix")
    if vectors.shape[1] == 0:
        raise LmlowError(f"{path}: vectors of 0 dimensions")
    if len(set(words)) != len(words):
        raise LmlowError(f"{path}: duplicate words")
    kv = KeyedVectors(vectors.shape[1])
    kv.add_vectors(words, vectors)
    return kv


NEIGHBOURS = 8                  # how many `lmlow neighbours` shows by default


def neighbours(kv, word: str, top: int = NEIGHBOURS) -> list[tuple[str, float]] | None:
    """Nearest words by cosine similarity, most similar first (ties in the file's order);
    empty if the word has no vector, None if its vector is all zeros. A row of zeros (a
    padding token in many exported files) has no direction: it is no word's neighbour and has
    none (gensim's ``most_similar`` divided by its zero norm: NaN similarities and a warning)."""
    i = kv.key_to_index.get(word)
    if i is None:
        return []
    kv.fill_norms()                         # gensim keeps the norms from one word to the next
    norms = kv.norms
    if norms[i] == 0:
        return None
    pointing = norms > 0
    with np.errstate(divide="ignore", invalid="ignore"):   # no copy of the matrix: one row
        sims = (kv.vectors @ kv.vectors[i]).astype(np.float64) / (norms * norms[i])
    sims[~pointing] = -np.inf
    sims[i] = -np.inf
    top = min(top, int(pointing.sum()) - 1)
    if top <= 0:
        return []
    best = np.argpartition(-sims, top - 1)[:top]
    best = best[np.lexsort((best, -sims[best]))]
    return [(kv.index_to_key[j], float(sims[j])) for j in best]


def format_neighbours(result: dict[str, list[tuple[str, float]] | None]) -> str:
    """One line per word: its neighbours with their cosine similarity."""
    def line(near):
        if near is None:
            return "(a vector of zeros: no direction, so no neighbours)"
        return ", ".join(f"{n} {s:.2f}" for n, s in near) if near else "(no vector)"
    return "\n".join(f"{w}: {line(near)}" for w, near in result.items())
