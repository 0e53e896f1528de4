"""Opening a run folder as a scorer: ``lmlow.load(RUN_DIR)`` gives an LSTM run (vocabulary
checked against the checkpoint) or a KenLM n-gram run (``lmlow.ngram.NgramRun``), with the same
methods, so that evaluation and scoring treat both alike."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from lmlow.config import Config
from lmlow.data.corpus import Corpus
from lmlow.data.textio import EOS
from lmlow.data.vocab import Vocabulary
from lmlow.errors import LmlowError
from lmlow.evaluate import Evaluation, evaluate_split, lstm_logprobs, mix_logprobs, tune_weight

LN10 = math.log(10)


class LSTMRun:
    """A trained (or initialised) AWD-LSTM run, as a scorer."""

    def __init__(self, run_dir: Path, checkpoint: str = "best", device: str = "auto"):
        from lmlow.train import build_model, checkpoint_config, load_checkpoint, pick_device

        self.run_dir = Path(run_dir)
        ck = load_checkpoint(self.run_dir / f"{checkpoint}.pt")
        self.config = Config.from_dict(ck["config"], str(self.run_dir / f"{checkpoint}.pt"))
        self.vocab = Vocabulary(ck["vocab"], ck["counts"], self.config.unk_threshold)
        vocab_file = self.run_dir / "vocab.txt"
        if vocab_file.exists() and Vocabulary.load(vocab_file).words != self.vocab.words:
            raise LmlowError(f"{vocab_file} does not match the vocabulary of {checkpoint}.pt")
        self.device = pick_device(device)
        self.model, _ = build_model(checkpoint_config(self.config, ck["model"]), self.vocab)
        try:
            self.model.load_state_dict(ck["model"])
        except RuntimeError as e:
            raise LmlowError(f"{self.run_dir}/{checkpoint}.pt does not fit its configuration "
                             f"({str(e).splitlines()[0]})") from None
        self.model.to(self.device).eval()

    def corpus(self, root: Path | None = None) -> Corpus:
        return Corpus(Path(root or self.config.corpus), self.config.unk_threshold, vocab=self.vocab)

    def token_logprobs(self, ids: np.ndarray, reset_lines: bool = False, bias_scale: float = 1.0,
                       batch_size: int | None = None) -> np.ndarray:
        return lstm_logprobs(self.model, ids, self.vocab.eos_id,
                             batch_size or self.config.eval_batch_size, self.config.bptt,
                             reset_lines=reset_lines, bias_scale=bias_scale, device=self.device)

    def evaluate(self, split: str = "valid", corpus: Path | None = None, reset_lines: bool = False,
                 bias_scale: float = 1.0, batch_size: int | None = None) -> Evaluation:
        return evaluate_split(self, split, corpus, reset_lines=reset_lines, bias_scale=bias_scale,
                              batch_size=batch_size)

    def score(self, sentence: str | list[str]) -> list[tuple[str, float, bool]]:
        """(word, natural-log probability, out of vocabulary) for each word and ``<eos>``,
        from a fresh state, like KenLM's ``full_scores``."""
        words = sentence.split() if isinstance(sentence, str) else list(sentence)
        ids = np.array(self.vocab.encode(words + [EOS]), dtype=np.int64)
        lp = self.token_logprobs(ids, reset_lines=True)
        return [(w, float(p), w not in self.vocab) for w, p in zip(words + [EOS], lp)]


class InterpolatedRun:
    """Two runs over the same vocabulary mixed word by word: p = w p_a + (1 - w) p_b (the
    classic LSTM + n-gram interpolation). Without ``weight``, w is tuned by EM on the
    validation split. A scorer like its parts."""

    def __init__(self, a, b, weight: float | None = None, reset_lines: bool = False):
        if a.vocab.words != b.vocab.words:
            i = next((i for i, (x, y) in enumerate(zip(a.vocab.words, b.vocab.words)) if x != y),
                     min(len(a.vocab.words), len(b.vocab.words)))
            raise LmlowError(f"{a.run_dir} and {b.run_dir} have different vocabularies (from word "
                             f"{i + 1}); interpolation needs the same tokens: train both on the "
                             "same corpus with the same --unk-threshold")
        if weight is not None and not 0 <= weight <= 1:
            raise LmlowError(f"--weight {weight:g}: must be between 0 and 1")
        self.a, self.b, self.vocab, self.config = a, b, a.vocab, a.config
        self.run_dir = a.run_dir
        self.weight = weight if weight is not None else self.tune("valid", reset_lines=reset_lines)

    def tune(self, split: str, **kw) -> float:
        ids = self.a.corpus().encode(split).ids
        return tune_weight(self.a.token_logprobs(ids, **kw), self.b.token_logprobs(ids, **kw))

    def corpus(self, root: Path | None = None) -> Corpus:
        return self.a.corpus(root)

    def token_logprobs(self, ids: np.ndarray, **kw) -> np.ndarray:
        return mix_logprobs(self.a.token_logprobs(ids, **kw), self.b.token_logprobs(ids, **kw),
                            self.weight)

    def evaluate(self, split: str = "valid", corpus: Path | None = None, **kw) -> Evaluation:
        return evaluate_split(self, split, corpus, **kw)

    def score(self, sentence: str | list[str]) -> list[tuple[str, float, bool]]:
        sa, sb = self.a.score(sentence), self.b.score(sentence)
        mixed = mix_logprobs(np.array([p for _, p, _ in sa]), np.array([p for _, p, _ in sb]), self.weight)
        return [(w, float(p), o) for (w, _, o), p in zip(sa, mixed)]


def default_checkpoint(run_dir: Path) -> str:
    """``best``, or ``last`` for a run stopped by --max-steps before its first validation."""
    run_dir = Path(run_dir)
    return "last" if not (run_dir / "best.pt").exists() and (run_dir / "last.pt").exists() else "best"


def load(run_dir: Path, **kw):
    """Open a run folder as a scorer: an n-gram run says so in config.json, an LSTM run has
    best.pt. ``kw`` (checkpoint, device) apply to LSTM runs only."""
    from lmlow.ngram import NgramRun, is_ngram_run

    run_dir = Path(run_dir)
    if is_ngram_run(run_dir):
        return NgramRun(run_dir)
    kw.setdefault("checkpoint", default_checkpoint(run_dir))
    if (run_dir / f"{kw['checkpoint']}.pt").exists():
        return LSTMRun(run_dir, **kw)
    if not run_dir.is_dir():
        raise LmlowError(f"{run_dir}: no such run folder")
    raise LmlowError(f"{run_dir}: not a run folder (no best.pt, and config.json is not an "
                     "n-gram run's)")
