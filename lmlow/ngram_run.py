"""A finished KenLM run folder as a scorer (:class:`NgramRun`), and what its ``config.json``
records (:class:`NgramConfig`); :mod:`lmlow.ngram` estimates the model.

Scoring follows ``lmlow.evaluate``'s stream convention: each line's words, then ``<eos>``,
whose score is KenLM's ``</s>``; the first word is predicted from ``<s>``. KenLM restarts at
every line, while the LSTM by default carries its state across lines: compare with
``lmlow eval LSTM_RUN --reset-lines`` for the same condition on both sides.
"""
from __future__ import annotations

import math
import typing
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from lmlow.config import has_type, type_name
from lmlow.data.textio import UNK
from lmlow.data.vocab import Vocabulary
from lmlow.errors import LmlowError
from lmlow.evaluate import LN10, LineReader, Scorer
from lmlow.files import read_json
from lmlow.rundir import NGRAM, RunDir

PLACEHOLDER = "<lmlow-unk>"       # the trained <unk>'s name in lmplz's text (lmlow.ngram)
RESERVED = ("<s>", "</s>", PLACEHOLDER)     # words KenLM reads as its own, not as a vocabulary word


@dataclass
class NgramConfig:
    """What ``config.json`` of an n-gram run records (``kind`` tells it from an LSTM run)."""

    corpus: str
    order: int
    unk_threshold: int
    memory: str
    prune: list[int] | None
    discount_fallback: bool
    discount_fallback_reason: str | None
    lmplz_command: str
    build_binary_command: str
    train_seconds: float           # writing the text, lmplz, the <unk> rename, build_binary
    lmplz_seconds: float
    lmplz_peak_rss_mb: float | None
    extend_vocab: bool = False     # the vocabulary has the words of ``embeddings`` (count 0)
    embeddings: str | None = None
    train_fraction: float = 1.0    # estimated on this first fraction of the training lines
    prepared: dict | None = None   # the corpus's prepare.json: how its text was tokenised
    vocab: str | None = None       # the word list that fixed the vocabulary (--vocab)
    kind: str = NGRAM

    def done_line(self, out: Path) -> str:
        """What `lmlow ngram` prints: the model, its time and memory, its valid perplexity."""
        ev = NgramRun(out).evaluate("valid")
        fallback = " with --discount_fallback" if self.discount_fallback else ""
        return (f"done: {self.order}-gram{fallback} in {self.train_seconds:.0f}s (lmplz peak "
                f"memory {self.lmplz_peak_rss_mb} MB); valid ppl {ev.perplexity:.2f} "
                f"({ev.perplexity_excluding_unk:.2f} excluding <unk>) -> "
                f"{RunDir(out).binary}")

    @classmethod
    def load(cls, path: Path) -> "NgramConfig":
        data = read_json(path)
        names = {f.name for f in fields(cls)}
        missing = names - set(data) - {"kind", "extend_vocab", "embeddings", "train_fraction",
                                       "prepared", "vocab"}
        if missing:
            raise LmlowError(f"{path}: not an n-gram run configuration (lacks {', '.join(sorted(missing))})")
        hints = typing.get_type_hints(cls)
        for key, value in data.items():          # a damaged value was a TypeError far later
            if key in names and not has_type(value, hints[key]):
                raise LmlowError(f"{path}: {key} = {value!r}: expected {type_name(hints[key])}; "
                                 "damaged or edited?")
        return cls(**{k: v for k, v in data.items() if k in names})


def unseen_words(vocab: Vocabulary) -> list[int]:
    """The vocabulary's words (not ``<unk>`` or ``<eos>``) of count 0 in the text lmplz reads
    (its counts are that text's, :func:`lmlow.data.corpus.training_ids`, and the run folder's
    vocab.txt keeps them): the estimate keeps the placeholder apart from KenLM's ``<unk>``
    when there are any, and the scorer shares KenLM's ``<unk>`` among them. lmplz never
    prunes unigrams, so they are exactly the words missing from the model."""
    return [i for i, c in enumerate(vocab.counts) if not c and i not in (vocab.unk_id, vocab.eos_id)]


class NgramRun(Scorer):
    """A KenLM run folder as a scorer. KenLM scores every line from ``<s>``: it never carries
    state across lines, so ``reset_lines`` changes nothing."""

    carries_state = False

    def __init__(self, run_dir: Path):
        import kenlm

        self.run = RunDir(run_dir).require(NGRAM)
        self.run_dir = self.run.path
        self.config = NgramConfig.load(self.run.config)
        self.vocab = Vocabulary.load(self.run.vocab)
        self.vocab.unk_threshold = self.config.unk_threshold
        self.corpus_path = Path(self.config.corpus)
        self.unk_threshold = self.config.unk_threshold
        model = self.run.binary if self.run.binary.exists() else self.run.arpa
        if not model.exists():
            raise LmlowError(f"{self.run_dir}: n-gram run without {self.run.BINARY} or {self.run.ARPA}")
        try:
            self.model = kenlm.Model(str(model))
        except (OSError, RuntimeError) as e:
            raise LmlowError(f"{model}: cannot load ({str(e).splitlines()[0]})") from None
        self.trained_unk = PLACEHOLDER in self.model
        # the words as KenLM knows them: a vectors' </s> (count 0) is a word it never saw
        self.kenlm_words = [f"<lmlow-unseen-{i}>" if w in RESERVED else w
                             for i, w in enumerate(self.vocab.words)]
        self.kenlm_words[self.vocab.unk_id] = PLACEHOLDER if self.trained_unk else UNK
        self.unk_share = self._unk_share()

    def _unk_share(self) -> np.ndarray | None:
        """Natural-log factor per vocabulary id for the n vocabulary words the n-gram never
        saw (count 0 in its training text: an extended vocabulary, a word list, a training
        fraction), 0 for the rest; None when every word was seen (n = 0). KenLM scores them
        as its ``<unk>``; sharing that probability equally keeps the n-gram a distribution
        over the LSTM's vocabulary, so both are scored on the same events. Where training had
        ``<unk>``, it is a word of its own (:mod:`lmlow.ngram`) and the n words share KenLM's
        ``<unk>`` (log(1 / n)); where it had none, ``<unk>`` is one of the n + 1 sharing it."""
        unseen = unseen_words(self.vocab)
        special = (self.vocab.unk_id, self.vocab.eos_id)
        missing = sum(w not in self.model for i, w in enumerate(self.kenlm_words) if i not in special)
        if missing != len(unseen):       # counts of another text (an lmlow of 2026-11-25
            # recorded the whole split's under --train-fraction), or an edited vocab.txt
            raise LmlowError(f"{self.run.vocab}: {len(unseen)} words of count 0, but the model "
                             f"lacks {missing}: estimate it again with the same `lmlow ngram` "
                             "command and --force")
        if not unseen:
            return None
        if not self.trained_unk and self.vocab.counts[self.vocab.unk_id]:
            raise LmlowError(f"{self.run_dir}: estimated by an lmlow that gave its trained <unk> "
                             f"probability a 1/{len(unseen) + 1} share with the {len(unseen)} "
                             "vocabulary words it never saw (a perplexity too high); estimate "
                             "it again with the same `lmlow ngram` command and --force")
        share = np.zeros(len(self.vocab.words))
        shared = unseen if self.trained_unk else unseen + [self.vocab.unk_id]
        share[shared] = -math.log(len(shared))
        return share

    def token_logprobs(self, ids: np.ndarray, reset_lines: bool = False) -> np.ndarray:
        """Natural-log probability of every token; each line from ``<s>``, ``<eos>`` = ``</s>``."""
        ids = np.asarray(ids)
        if len(ids) and ids[-1] != self.vocab.eos_id:
            raise ValueError("a token stream must end with <eos>")
        words, out, pos = self.kenlm_words, np.empty(len(ids)), 0
        for end in np.flatnonzero(ids == self.vocab.eos_id).tolist():
            sentence = " ".join([words[i] for i in ids[pos:end].tolist()])   # no <eos> here
            scores = [s[0] for s in self.model.full_scores(sentence, bos=True, eos=True)]
            if len(scores) != end + 1 - pos:
                raise RuntimeError(f"internal error: KenLM split a line into {len(scores) - 1} words, "
                                   f"not {end - pos}")
            out[pos:end + 1] = scores
            pos = end + 1
        out *= LN10
        return out if self.unk_share is None else out + self.unk_share[ids]

    def reader(self) -> "NgramReader":
        return NgramReader(self)


class NgramReader(LineReader):
    """KenLM reading a line from ``<s>``: its state after the words read so far."""

    def __init__(self, run: NgramRun):
        import kenlm

        super().__init__(run)
        self.state = kenlm.State()
        run.model.BeginSentenceWrite(self.state)

    def _read(self, ids: list[int]) -> None:
        import kenlm

        for i in ids:
            after = kenlm.State()
            self.scorer.model.BaseScore(self.state, self.scorer.kenlm_words[i], after)
            self.state = after

    def next_logprobs(self) -> np.ndarray:
        """KenLM's probability of every vocabulary word next (``<eos>``: ``</s>``), each word's
        ``<unk>`` share added as in :meth:`NgramRun.token_logprobs`, so the numbers are the
        ones a scored line would get."""
        import kenlm

        run, after = self.scorer, kenlm.State()
        eos = run.vocab.eos_id
        out = np.array([run.model.BaseScore(self.state, "</s>" if i == eos else w, after)
                        for i, w in enumerate(run.kenlm_words)]) * LN10
        return out if run.unk_share is None else out + run.unk_share


__all__ = ["NgramConfig", "NgramReader", "NgramRun"]
