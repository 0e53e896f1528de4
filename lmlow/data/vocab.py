"""Vocabulary and the UNK rule of Kummerfeld et al. (2020), section 3.

The rule, exactly: count each word in the original training set; in every split, replace a
word by ``<unk>`` when its training count is lower than K (a word not in the counts has count
0). K=0 replaces nothing. Words of the training set always form the vocabulary; the words of a
pretrained-embedding vocabulary may be added (they have training count 0, so they survive only
when K=0), which keeps rare words that in-domain vectors cover as real words. Any other word of
valid/test is out of vocabulary and becomes ``<unk>`` when read.

Order is deterministic: count descending, then the word itself.
"""
from __future__ import annotations

import bisect

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from lmlow.data.textio import EOS, UNK, decode_line, numbered_lines, open_binary
from lmlow.errors import LmlowError
from lmlow.files import atomic_write_text, require_regular


@dataclass
class Vocabulary:
    """Words in index order with their (post-UNK-rule) training counts."""

    words: list[str]
    counts: list[int]
    unk_threshold: int = 0
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self):
        self.index = dict(zip(self.words, range(len(self.words))))
        if len(self.index) != len(self.words):
            raise LmlowError("vocabulary has duplicate words")
        for special in (EOS, UNK):
            if special not in self.index:
                raise LmlowError(f"vocabulary lacks the special token {special}")

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    @property
    def unk_id(self) -> int:
        return self.index[UNK]

    @property
    def eos_id(self) -> int:
        return self.index[EOS]

    def ids_with_prefix(self, prefix: str) -> np.ndarray:
        """The ids of the words that begin with ``prefix`` (a keyboard's completions of a word
        being typed), in id order; a binary search in the words sorted once per vocabulary."""
        if "_sorted" not in self.__dict__:
            order = sorted(range(len(self.words)), key=self.words.__getitem__)
            self._sorted = ([self.words[i] for i in order], np.array(order, dtype=np.int64))
        words, ids = self._sorted
        lo = bisect.bisect_left(words, prefix)
        hi = bisect.bisect_left(words, prefix + "\U0010ffff", lo)
        return np.sort(ids[lo:hi])

    def id(self, word: str) -> int:
        return self.index.get(word, self.index[UNK])

    def encode(self, tokens: Iterable[str]) -> list[int]:
        get, unk = self.index.get, self.index[UNK]
        return [get(t, unk) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.words[i] for i in ids]

    def count_array(self) -> np.ndarray:
        return np.asarray(self.counts, dtype=np.int64)

    def recount(self, ids: np.ndarray) -> None:
        """Make the counts those of ``ids``, the training stream a run really learns from
        (``--train-fraction``'s first lines), keeping the words, their order and the UNK rule
        of the whole split: what is derived from counts (the log-unigram bias, the unigram
        prior, coverage of training tokens, frequency bins, KenLM's <unk>) then describes the
        text the model saw, not text it never read."""
        self.counts = np.bincount(np.asarray(ids), minlength=len(self.words)).tolist()

    def digest(self) -> str:
        """A short hash of the word list: what a checkpoint or cache must match."""
        h = hashlib.sha256("\n".join(self.words).encode("utf-8"))
        return h.hexdigest()[:16]

    def save(self, path: Path, with_counts: bool = False) -> None:
        """Write one word per line in index order (``word<TAB>count`` with counts)."""
        lines = (f"{w}\t{c}" if with_counts else w for w, c in zip(self.words, self.counts))
        atomic_write_text(path, "\n".join(lines) + "\n")

    @classmethod
    def load(cls, path: Path) -> "Vocabulary":
        """Read a file written by :meth:`save` (with or without counts)."""
        path = Path(path)
        words, counts = [], []
        with open_binary(path) as f:
            for lineno, raw in numbered_lines(path, f):
                line = decode_line(path, lineno, raw).rstrip("\n")
                word, _, count = line.partition("\t")
                if not word or " " in word:
                    raise LmlowError(f"{path}:{lineno}: expected one word per line, got {line!r}")
                try:
                    counts.append(int(count) if count else 0)
                except ValueError:
                    raise LmlowError(f"{path}:{lineno}: count {count!r} is not an integer") from None
                words.append(word)
        if not words:
            raise LmlowError(f"{path}: empty vocabulary file")
        try:
            return cls(words, counts)
        except LmlowError as e:
            raise LmlowError(f"{path}: {e}") from None


def build_vocabulary(train_counts: Counter, n_lines: int, unk_threshold: int = 0,
                     extra_words: Iterable[str] = ()) -> Vocabulary:
    """Apply the UNK rule with threshold K to training counts and order the result.

    ``train_counts`` are raw word counts of the training split (without ``<eos>``);
    ``n_lines`` is the number of ``<eos>`` tokens. A literal ``<unk>`` in the text counts
    towards ``<unk>``, as do all tokens of words replaced by the rule.
    """
    if unk_threshold < 0:
        raise LmlowError(f"UNK threshold must be >= 0, got {unk_threshold}")
    if unk_threshold <= 1 and UNK not in train_counts and EOS not in train_counts:
        kept, replaced = list(train_counts.items()), 0     # every word is kept: no pass in Python
    else:
        kept = [(w, c) for w, c in train_counts.items() if w not in (UNK, EOS) and c >= unk_threshold]
        replaced = sum(c for w, c in train_counts.items() if w not in (UNK, EOS) and c < unk_threshold)
        if not kept and replaced:      # a model of <unk> and <eos> alone: a perplexity near 2
            top = max(((c, w) for w, c in train_counts.items() if w not in (UNK, EOS)))
            raise LmlowError(f"UNK threshold {unk_threshold}: no word of the training split "
                             f"occurs that often (the most frequent, {top[1][:40]!r}, occurs "
                             f"{top[0]:,} times), so every token would be <unk>; lower it")
    extra = []
    if unk_threshold == 0:
        known = set(train_counts)
        extra = [(w, 0) for w in dict.fromkeys(extra_words) if w not in known and w not in (EOS, UNK)]
    if not _in_order(kept):        # cached counts come in this order: no sort needed
        kept.sort(key=_ORDER)
    for item in sorted([(EOS, n_lines), (UNK, train_counts.get(UNK, 0) + replaced), *extra],
                       key=_ORDER):
        bisect.insort(kept, item, key=_ORDER)
    return Vocabulary([w for w, _ in kept], [c for _, c in kept], unk_threshold)


def fixed_vocabulary(train_counts: Counter, n_lines: int, words: Iterable[str]) -> Vocabulary:
    """The vocabulary a word list fixes (``--vocab FILE``: a recogniser's lexicon, or another
    corpus's ``lmlow vocab --out``): its words, ``<eos>`` and ``<unk>``, each with its count in
    the training split (0 for a listed word the split lacks: predicted as a word all the same,
    as ``--extend-vocab``'s words are); every token of a training word the list lacks counts
    towards ``<unk>``, as a replaced word does under the UNK rule. Vocabulary order as
    :func:`build_vocabulary`'s."""
    listed = dict.fromkeys(w for w in words if w not in (EOS, UNK))
    replaced = sum(c for w, c in train_counts.items() if w not in listed and w not in (UNK, EOS))
    pairs = [(w, train_counts.get(w, 0)) for w in listed]
    pairs += [(EOS, n_lines), (UNK, train_counts.get(UNK, 0) + replaced)]
    pairs.sort(key=_ORDER)
    return Vocabulary([w for w, _ in pairs], [c for _, c in pairs])


def read_word_list(path: Path) -> list[str]:
    """The words of a vocabulary file, in file order: the first field of each line, so that a
    plain list, ``lmlow vocab --out [--counts]``, a lexicon (``word phone phone ...``) and a
    symbol table (``word id``) all read as their words; blank lines are skipped, repeats (a
    lexicon's second pronunciation) kept once. One line naming the file when it is not text or
    holds no word."""
    path = Path(path)
    if path.is_dir():
        raise LmlowError(f"{path}: is a folder, expected a vocabulary file (one word per line)")
    if not path.exists():
        raise LmlowError(f"{path}: no such vocabulary file")
    require_regular(path)                  # a FIFO or /dev/zero would never end
    words: dict[str, None] = {}
    with open_binary(path) as f:
        for lineno, raw in numbered_lines(path, f):
            fields = decode_line(path, lineno, raw).split()
            if fields:
                words.setdefault(fields[0])
    if not words:
        raise LmlowError(f"{path}: no word in the vocabulary file (expected one word per line)")
    if not set(words) - {EOS, UNK}:        # a model of line ends and <unk> alone
        raise LmlowError(f"{path}: no word besides <eos> and <unk> in the vocabulary file")
    return list(words)


def _ORDER(wc: tuple[str, int]) -> tuple[int, str]:
    """Vocabulary order: most frequent first, ties by word."""
    return -wc[1], wc[0]


def _in_order(pairs: list[tuple[str, int]]) -> bool:
    """Whether (word, count) pairs are already in vocabulary order."""
    return all(c1 > c2 or (c1 == c2 and w1 < w2)
               for (w1, c1), (w2, c2) in zip(pairs, pairs[1:]))
