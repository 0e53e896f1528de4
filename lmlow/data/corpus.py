"""A corpus folder, its training counts, vocabulary and memory-mapped encoded splits.

Counting and encoding stream the text once and are cached under ``$LMLOW_CACHE_DIR`` (default
``~/.cache/lmlow``), keyed by a hash of the file (path, size, modification and change times,
inode) and of every option that changes the result, so a second run starts at once and 100M
tokens take 400 MB of int32 on disk, not 100M Python objects in memory.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from array import array
from collections import Counter
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterable

import numpy as np

from lmlow.data.textio import iter_lines
from lmlow.data.vocab import Vocabulary, build_vocabulary, fixed_vocabulary, read_word_list
from lmlow.errors import LmlowError
from lmlow.files import (atomic_path, atomic_write_json, atomic_write_text, file_digest,
                         file_fingerprint, read_json, staged_outputs)
from lmlow.progress import progress

SPLITS = ("train", "valid", "test")
CACHE_FORMAT = 4          # 2: entries carry a sha256 checked when opened; 4: counts files
                          # are a header line with the sha256 of the words and counts after it


def cache_root() -> Path:
    return Path(os.environ.get("LMLOW_CACHE_DIR") or Path.home() / ".cache" / "lmlow")


def cache_dir(sub: str) -> Path:
    """A folder of the cache, made if needed; one line naming the cache when it cannot be
    (LMLOW_CACHE_DIR a file, or not writable)."""
    path = cache_root() / sub
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise LmlowError(f"{cache_root()}: the cache (LMLOW_CACHE_DIR or ~/.cache/lmlow) is not "
                         "a folder; point LMLOW_CACHE_DIR at one") from None
    except OSError as e:
        raise LmlowError(f"{path}: cannot create the cache folder ({e.strerror}); point "
                         "LMLOW_CACHE_DIR at a writable folder") from None
    if not os.access(path, os.W_OK):
        raise LmlowError(f"{path}: the cache is not writable; point LMLOW_CACHE_DIR at a "
                         "writable folder")
    return path


def file_key(path: Path, **options) -> str:
    """Hash of a file's identity and the options applied to it. Path, size and mtime alone
    missed a same-size rewrite whose mtime was put back (`cp -p`, `touch -d`, a restore), and
    the stale counts were used: the change time (which no user call sets) and the inode (new
    for a file replaced by rename) are part of it too."""
    path = Path(path)
    if not path.is_file():
        why = ("is a folder, expected a text file" if path.is_dir() else "no such file"
               if not path.exists() else "not a regular file (a pipe or device): a corpus is "
               "read more than once; save it to a file")
        raise LmlowError(f"{path}: {why}")
    st = path.stat()
    ident = {"path": str(Path(path).resolve()), "size": st.st_size, "mtime": st.st_mtime_ns,
             "ctime": st.st_ctime_ns, "inode": st.st_ino,
             "format": CACHE_FORMAT, **options}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]


@dataclass
class WordCounts:
    """Raw word counts of one file (no UNK rule, no ``<eos>``) and its number of lines."""

    counts: Counter
    lines: int

    @property
    def tokens(self) -> int:
        return sum(self.counts.values())


def count_words(path: Path, show_progress: bool = True) -> WordCounts:
    """Count the words of a text file, cached by the file's identity.

    The cache file is a header line (JSON: the sha256 of the rest), then the number of lines,
    the words in vocabulary order (most frequent first, ties by word) on one line and their
    counts on the next, space-separated (tokens never hold whitespace). Checking it
    hashes the bytes as read and reading it is two splits, and the vocabulary's sort then runs
    over presorted data: a corpus of 270k word types re-opens in 0.6 s (BENCHMARKS.md)."""
    cached = cache_root() / "counts" / f"{file_key(path)}.txt"
    if cached.exists():
        try:
            header, _, body = cached.read_bytes().partition(b"\n")
            if json.loads(header).get("sha256") == _digest(body):
                lines, words, numbers = body.decode("utf-8").split("\n")
                words, numbers = words.split(" "), numbers.split(" ")
                if words == [""] == numbers:
                    return WordCounts(Counter(), int(lines))
                if len(words) == len(numbers):
                    counts = Counter()
                    dict.update(counts, zip(words, map(int, numbers)))    # one pass, in C
                    return WordCounts(counts, int(lines))
                reason = "words and counts differ in number"
            else:
                reason = "checksum mismatch"
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as e:
            reason = f"unreadable: {type(e).__name__}"
        _warn_damaged(cached, reason)
    counts, lines = Counter(), 0
    with progress(f"counting {Path(path).name}", show_progress) as bar:
        for _, tokens in iter_lines(path):
            counts.update(tokens)
            lines += 1
            bar.tokens(len(tokens))
    cache_dir("counts")
    ordered = dict(sorted(counts.items(), key=lambda wc: (-wc[1], wc[0])))
    body = f"{lines}\n{' '.join(ordered)}\n{' '.join(map(str, ordered.values()))}".encode("utf-8")
    header = json.dumps({"sha256": _digest(body)})
    with atomic_path(cached) as tmp:
        Path(tmp).write_bytes(header.encode() + b"\n" + body)
    return WordCounts(Counter(ordered), lines)


def _digest(data) -> str:
    return hashlib.sha256(data).hexdigest()




def _warn_damaged(path: Path, reason: str) -> None:
    """A damaged cache entry is never used: say so in one line and rebuild it."""
    print(f"lmlow: warning: {path}: damaged cache entry ({reason}); rebuilding it",
          file=sys.stderr, flush=True)


@dataclass
class SplitStats:
    """What became ``<unk>`` in one split, by cause (token counts exclude nothing: ``<eos>`` is a token)."""

    tokens: int            # including one <eos> per line
    lines: int
    word_types: int        # distinct words, <eos> excluded
    literal_unk: int       # <unk> already in the text
    replaced_tokens: int   # words whose training count < K (K >= 1)
    replaced_types: int
    oov_tokens: int        # words in no vocabulary (K == 0)
    oov_types: int

    @property
    def unk_tokens(self) -> int:
        return self.literal_unk + self.replaced_tokens + self.oov_tokens

    @property
    def words(self) -> int:
        return self.tokens - self.lines


@dataclass
class EncodedSplit:
    ids: np.ndarray        # int32 token ids, memory-mapped; <eos> ends every line
    stats: SplitStats


def encode_file(path: Path, vocab: Vocabulary, show_progress: bool = True) -> EncodedSplit:
    """Encode a text file with a vocabulary into a cached memory-mapped int32 array."""
    key = file_key(path, vocab=vocab.digest(), unk_threshold=vocab.unk_threshold)
    base = cache_root() / "encoded" / key
    meta_path, bin_path = base.with_suffix(".json"), base.with_suffix(".bin")
    if meta_path.exists():
        found = _checked_entry(meta_path, bin_path, len(vocab))
        if found:
            return found
    cache_dir("encoded")
    with atomic_path(bin_path) as tmp_bin:
        stats = _stream_encode(path, vocab, tmp_bin, show_progress)
    ids = np.memmap(bin_path, dtype=np.int32, mode="r")
    if len(ids) and not (0 <= ids.min() and ids.max() < len(vocab)):    # checked once, here
        raise RuntimeError(f"internal error: {path} encoded to ids outside the vocabulary")
    meta = {"stats": asdict(stats), "sha256": file_digest(bin_path), "vocab_size": len(vocab)}
    atomic_write_text(meta_path, json.dumps(meta))  # written last: marks completion
    return EncodedSplit(np.memmap(bin_path, dtype=np.int32, mode="r"), stats)


def _checked_entry(meta_path: Path, bin_path: Path, vocab_size: int) -> EncodedSplit | None:
    """A cached encoding, if its length, checksum and id range are what was written; else
    None (after a one-line warning), and the caller rebuilds it."""
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        stats = SplitStats(**meta["stats"])
        if not bin_path.exists() or bin_path.stat().st_size != 4 * stats.tokens:
            reason = "wrong length"
        elif file_digest(bin_path) != meta["sha256"] or meta.get("vocab_size") != vocab_size:
            reason = "checksum mismatch"
        else:     # the bytes written, for this vocabulary (its digest is in the file's key)
            return EncodedSplit(np.memmap(bin_path, dtype=np.int32, mode="r"), stats)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        reason = f"unreadable: {type(e).__name__}"
    _warn_damaged(meta_path, reason)
    return None


def _stream_encode(path: Path, vocab: Vocabulary, out: Path, show_progress: bool) -> SplitStats:
    index, unk, eos = vocab.index, vocab.unk_id, vocab.eos_id
    missing: Counter = Counter()
    types: set = set()
    buf = array("i")
    lines = tokens = literal_unk = 0
    with open(out, "wb") as f, progress(f"encoding {Path(path).name}", show_progress) as bar:
        for _, words in iter_lines(path):
            types.update(words)
            for w in words:
                i = index.get(w)
                if i is None:
                    missing[w] += 1
                    i = unk
                elif i == unk:
                    literal_unk += 1
                buf.append(i)
            buf.append(eos)
            lines += 1
            tokens += len(words) + 1
            bar.tokens(len(words) + 1)
            if len(buf) >= 1 << 20:
                buf.tofile(f)
                buf = array("i")
        buf.tofile(f)
    by_rule = vocab.unk_threshold > 0  # K >= 1: every missing word has training count < K
    missing_tokens = sum(missing.values())
    return SplitStats(
        tokens=tokens, lines=lines, word_types=len(types), literal_unk=literal_unk,
        replaced_tokens=missing_tokens if by_rule else 0,
        replaced_types=len(missing) if by_rule else 0,
        oov_tokens=0 if by_rule else missing_tokens,
        oov_types=0 if by_rule else len(missing))


def fingerprint(root: Path) -> dict:
    """Each split's file name, size and sha256: tells a moved corpus from a different one."""
    corpus = Corpus(root, show_progress=False)
    return {split: file_fingerprint(corpus.path(split)) for split in SPLITS}




def split_path(root: Path, split: str) -> Path:
    """A split's file: ``SPLIT.txt``, or ``SPLIT.txt.gz`` where only that exists."""
    plain = Path(root) / f"{split}.txt"
    gz = plain.with_suffix(".txt.gz")
    return gz if gz.exists() and not plain.exists() else plain


PREPARATION = "prepare.json"       # how `lmlow prepare` tokenised and normalised the text


def corpus_preparation(root: Path) -> dict | None:
    """The corpus's preparation record (:func:`lmlow.data.tokenize.preparation_record`), or
    None for a corpus lmlow did not prepare (made by hand, or before lmlow recorded it)."""
    from lmlow.data.tokenize import checked_preparation

    path = Path(root) / PREPARATION
    return checked_preparation(read_json(path), path) if path.is_file() else None


def check_corpus_folder(root: Path) -> None:
    """A folder with the three splits (plain or gzipped), or one line naming what is missing."""
    root = Path(root)
    if not root.is_dir():
        what = "a file, not a corpus folder" if root.exists() else "no such corpus folder"
        raise LmlowError(f"{root}: {what} (expected a folder with train.txt, valid.txt, test.txt)")
    for split in SPLITS:
        if not split_path(root, split).exists():
            raise LmlowError(f"{root}: missing {split}.txt")


def vocabulary_rule(unk_threshold: int, vocab_file=None) -> str:
    """How a vocabulary was decided, for reports: ``K=2``, or the word list's name."""
    return f"vocabulary of {vocab_file}" if vocab_file else f"K={unk_threshold}"


class Corpus:
    """A folder with train.txt, valid.txt and test.txt, read under one UNK threshold K.

    ``extra_words`` (e.g. the words of an embedding file) extend the vocabulary as the UNK rule
    allows; ``vocab_file`` (a word list, ``--vocab FILE``) fixes which words it has, counted
    in this training split (:func:`fixed_vocabulary`); ``vocab`` fixes the vocabulary itself
    (e.g. the one saved with a checkpoint).
    """

    def __init__(self, root: Path, unk_threshold: int = 0, extra_words: Iterable[str] = (),
                 vocab: Vocabulary | None = None, show_progress: bool = True,
                 vocab_file: Path | None = None):
        self.root = Path(root)
        check_corpus_folder(self.root)
        if unk_threshold < 0:
            raise LmlowError(f"UNK threshold must be >= 0, got {unk_threshold}")
        self.unk_threshold = unk_threshold
        self.extra_words = extra_words
        self.vocab_file = Path(vocab_file) if vocab_file else None
        self.show_progress = show_progress
        if vocab is not None:
            self.vocab = vocab

    def path(self, split: str) -> Path:
        if split not in SPLITS:
            raise LmlowError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
        return split_path(self.root, split)

    def counts(self, split: str = "train") -> WordCounts:
        return count_words(self.path(split), self.show_progress)

    @cached_property
    def vocab(self) -> Vocabulary:
        train = self.counts("train")
        if self.vocab_file:
            return fixed_vocabulary(train.counts, train.lines, read_word_list(self.vocab_file))
        return build_vocabulary(train.counts, train.lines, self.unk_threshold, self.extra_words)

    def rule(self) -> str:
        return vocabulary_rule(self.unk_threshold, self.vocab_file)

    def encode(self, split: str) -> EncodedSplit:
        return encode_file(self.path(split), self.vocab, self.show_progress)

    def write_unk_replaced(self, out_dir: Path) -> dict[str, SplitStats]:
        """Write each split with the UNK rule applied (for tools that read text, e.g. KenLM)."""
        out_dir = Path(out_dir)
        _ = self.vocab                            # a K no word reaches is refused before mkdir
        out_dir.mkdir(parents=True, exist_ok=True)
        stats = {}
        for split in SPLITS:
            enc = self.encode(split)
            stats[split] = enc.stats
            write_ids_as_text(enc.ids, self.vocab, out_dir / f"{split}.txt")
        return stats


def read_corpus(path: Path, unk_threshold: int = 0, embeddings: Path | None = None,
                extend_vocab: bool = False, allow_pickle: bool = False,
                show_progress: bool = True, vocab: Path | None = None) -> tuple["Corpus", list[str] | None]:
    """A corpus as the data commands read it, and the words of ``embeddings`` (None without):
    ``extend_vocab`` adds those words to the vocabulary; ``vocab``, a word list, fixes it."""
    from lmlow.config import check_vocabulary_source
    from lmlow.embeddings import vector_words

    check_vocabulary_source(vocab, unk_threshold, extend_vocab, embeddings)
    words = vector_words(embeddings, allow_pickle) if embeddings else None
    corpus = Corpus(path, unk_threshold, words if extend_vocab else (), show_progress=show_progress,
                    vocab_file=vocab)
    return corpus, words


def write_unk_corpus(path: Path, out: Path, force: bool = False, **reading) -> dict[str, SplitStats]:
    """``lmlow unk``: OUT/train.txt, valid.txt, test.txt with the UNK rule applied (for tools
    that read text), all three or none; ``reading``: :func:`read_corpus`'s options."""
    out = Path(out)
    if out.resolve() == Path(path).resolve():
        raise LmlowError(f"{out}: --out must differ from the corpus folder")
    preparation = corpus_preparation(path)       # the text is the same text, read with <unk>
    # the record only where the corpus has one, and no gzipped split (plain ones win): an old
    # OUT of another corpus keeps neither beside the new splits
    with staged_outputs(out, [f"{s}.txt" for s in SPLITS], force,
                        optional=[PREPARATION] + [f"{s}.txt.gz" for s in SPLITS]) as stage:
        corpus, _ = read_corpus(path, **reading)
        stats = corpus.write_unk_replaced(stage)
        if preparation:
            atomic_write_json(stage / PREPARATION, preparation, indent=2)
        return stats


def write_ids_as_text(ids: np.ndarray, vocab: Vocabulary, path: Path) -> None:
    """Write encoded ids back as text, one line per ``<eos>``, atomically."""
    words, eos = vocab.words, vocab.eos_id
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        line: list[str] = []
        for start in range(0, len(ids), 1 << 20):
            for i in ids[start:start + (1 << 20)].tolist():
                if i == eos:
                    f.write(" ".join(line) + "\n")
                    line = []
                else:
                    line.append(words[i])


def training_ids(corpus: "Corpus", fraction: float) -> np.ndarray:
    """The training stream a run learns from: the first ``fraction`` of the lines
    (:func:`head_fraction`). Below 1 the vocabulary keeps the whole split's words but takes
    that part's counts (:meth:`Vocabulary.recount`), for the LSTM and the n-gram alike."""
    ids = head_fraction(corpus.encode("train").ids, fraction, corpus.vocab.eos_id)
    if fraction < 1:
        corpus.vocab.recount(ids)
    return ids


def check_fraction(root: Path, fraction: float) -> None:
    """:func:`head_fraction`'s refusal, from the training split's word counts (cached) and its
    first line, before any ids exist (one id a token, one ``<eos>`` a line, whatever the
    vocabulary): a sweep checks it before it writes its plan, as `train` does before its run
    folder."""
    if fraction >= 1:
        return
    path = split_path(root, "train")
    counts = count_words(path, show_progress=False)
    first = next(iter_lines(path), (0, []))[1]
    if int((counts.tokens + counts.lines) * fraction) < len(first) + 1:
        raise LmlowError(f"--train-fraction {fraction:g} leaves no complete training line "
                         f"of {root}")


def head_fraction(ids: np.ndarray, fraction: float, eos_id: int) -> np.ndarray:
    """The first ``fraction`` of a token stream, cut at a line end: ``--train-fraction``, the same
    cut for the LSTM and the n-gram, so both learn from exactly the same lines."""
    if fraction >= 1:
        return ids
    cut = int(len(ids) * fraction)
    ends = np.flatnonzero(ids[:cut] == eos_id)
    if not len(ends):
        raise LmlowError(f"--train-fraction {fraction:g} leaves no complete training line")
    return ids[:ends[-1] + 1]
