"""Every model is a scorer: it turns a split into natural-log probabilities, one per token of
the same stream, and everything else (perplexity, UNK handling, frequency bins, per-word scores)
is computed here from those numbers, so that an LSTM and KenLM are measured the same way.

The stream of a split is its tokens with ``<eos>`` ending every line. Scoring starts from an
``<eos>`` before the first token (KenLM's ``<s>``), so every token, the first included, is
scored exactly once.
"""
from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from lmlow.config import Config, path_value
from lmlow.data.corpus import Corpus
from lmlow.data.textio import EOS, blocks, is_stream, iter_keyed_lines
from lmlow.data.vocab import Vocabulary
from lmlow.errors import LmlowError

EVAL_BATCH, EVAL_BPTT = Config.eval_batch_size, Config.bptt   # the defaults, from Config
LN10 = math.log(10)       # KenLM and ARPA files speak log10; lmlow speaks natural logs

# Training-frequency bins of the target word (count in the training split after the UNK rule).
BINS = ((0, 0, "unseen"), (1, 1, "1"), (2, 5, "2-5"), (6, 20, "6-20"), (21, 100, "21-100"),
        (101, None, ">100"))
RARE_BINS = ("1", "2-5")  # the words seen 1-5 times in training: the demo's and claims' rare words


def pooled_perplexity(bins: list[dict], names=RARE_BINS) -> tuple[float | None, int]:
    """The perplexity over the tokens of the named bins together (their token-weighted mean
    cross-entropy, exponentiated) and their token count; None where they hold no token."""
    chosen = [b for b in bins if b["bin"] in names and b["tokens"]]
    n = sum(b["tokens"] for b in chosen)
    if not n:
        return None, 0
    return exp_loss(sum(b["tokens"] * math.log(b["perplexity"]) for b in chosen) / n), n


def perplexity(logprobs: np.ndarray) -> float:
    return exp_loss(-float(np.mean(logprobs))) if len(logprobs) else float("nan")


def exp_loss(loss: float) -> float:
    """A perplexity from a mean cross-entropy in nats: infinite beyond what a float holds (a
    diverged model's loss of 1,000 nats per token was an OverflowError traceback)."""
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf


@dataclass
class Evaluation:
    split: str
    tokens: int
    unk_tokens: int
    oov_tokens: int
    perplexity: float
    perplexity_excluding_unk: float
    cross_entropy: float          # nats per token
    bins: list[dict]
    # the same, by the word read just before the target (<unk> apart): where the input
    # embeddings act, e.g. whether a frozen input helps after rare words
    context_bins: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    def text(self, name: str, lines_independent: bool = False) -> str:
        """What `lmlow eval` prints: the perplexities, then the frequency bins as a table."""
        from lmlow.tables import markdown

        literal = self.unk_tokens - self.oov_tokens
        head = (f"{name} on {self.split}: perplexity {self.perplexity:.2f} "
                f"({self.perplexity_excluding_unk:.2f} excluding <unk>); {self.tokens} tokens, "
                f"{self.unk_tokens} <unk> targets ({self.oov_tokens} words out of the vocabulary"
                + (f", {literal} <unk> in the text)" if literal else ")")
                + ("; lines scored independently" if lines_independent else ""))
        table = markdown(["training frequency", "tokens", "perplexity"],
                         [_bin_row(b) for b in self.bins], digits=4)
        if self.context_bins:
            table += "\n\n" + markdown(
                ["word read before, training frequency", "tokens", "perplexity"],
                [_bin_row(b) for b in self.context_bins], digits=4)
        return head + "\n" + table


def _bin_row(b: dict) -> list:
    """A bin as a table row; a bin without tokens has no perplexity (NaN here, null in the
    JSON: ``files.to_json``), printed as a dash, not ``nan``."""
    return [b["bin"], b["tokens"], b["perplexity"] if b["tokens"] else "-"]


def evaluate_logprobs(split: str, ids: np.ndarray, logprobs: np.ndarray, counts: np.ndarray,
                      unk_id: int, oov_tokens: int = 0, eos_id: int | None = None) -> Evaluation:
    """Perplexity including and excluding ``<unk>`` targets, per frequency bin of the target
    and, given ``eos_id`` (what the first token follows: the stream starts after an
    ``<eos>``), per frequency bin of the word read just before it, ``<unk>`` in a bin of its
    own there (its count says nothing of how often its row was trained on one word)."""
    ids = np.asarray(ids)
    if len(ids) != len(logprobs):
        raise ValueError(f"{len(logprobs)} scores for {len(ids)} tokens")
    is_unk = ids == unk_id
    context = []
    if eos_id is not None and len(ids):
        before = np.concatenate([[eos_id], ids[:-1]])
        after_unk = before == unk_id
        context = ([{"bin": "<unk>", "tokens": int(after_unk.sum()),
                     "perplexity": perplexity(logprobs[after_unk])}]
                   + _binned(counts[before], logprobs, ~after_unk))
    return Evaluation(split=split, tokens=len(ids), unk_tokens=int(is_unk.sum()),
                      oov_tokens=oov_tokens, perplexity=perplexity(logprobs),
                      perplexity_excluding_unk=perplexity(logprobs[~is_unk]),
                      cross_entropy=-float(np.mean(logprobs)),
                      bins=_binned(counts[ids], logprobs), context_bins=context)


def valid_bins(ids: np.ndarray, logprobs: np.ndarray, counts: np.ndarray) -> dict[str, float]:
    """Perplexity per training-frequency bin of the predicted word, the bins that hold tokens
    (what training logs at every validation, as ``valid_bins``)."""
    return {b["bin"]: b["perplexity"] for b in _binned(counts[np.asarray(ids)], logprobs)
            if b["tokens"]}


def _binned(freq: np.ndarray, logprobs: np.ndarray, keep: np.ndarray | None = None) -> list[dict]:
    """Tokens and perplexity per training-frequency bin (BINS) of ``freq``, over ``keep``."""
    bins = []
    for lo, hi, name in BINS:
        sel = (freq >= lo) & (freq <= hi if hi is not None else True)
        if keep is not None:
            sel &= keep
        bins.append({"bin": name, "tokens": int(sel.sum()), "perplexity": perplexity(logprobs[sel])})
    return bins


class Scorer(ABC):
    """A language model over a corpus's vocabulary: the LSTM run, the KenLM run and their
    mixture are subclasses. A subclass sets ``run_dir``, ``vocab``, ``corpus_path`` (the
    corpus it was trained on), ``unk_threshold`` and ``carries_state``, and implements
    :meth:`token_logprobs`; corpus reading, evaluation and sentence scoring are written once
    here, so every model is measured the same way."""

    run_dir: Path
    vocab: Vocabulary
    corpus_path: Path
    unk_threshold: int
    carries_state: bool      # does the state cross line ends when not told to reset?
    mapped_inputs = None     # what --map-unseen-inputs did to the model (lmlow.input_map)
    mapped_outputs = None    # and --map-unseen-outputs

    @abstractmethod
    def token_logprobs(self, ids: np.ndarray, reset_lines: bool = False) -> np.ndarray:
        """Natural-log probability of every token of ``ids`` (a stream ending with
        ``<eos>``), each scored once; ``reset_lines``: every line from a fresh state."""

    def lines_independent(self, reset_lines: bool = False) -> bool:
        """Whether scores of one line ignore the lines before it."""
        return reset_lines or not self.carries_state

    def corpus(self, root: Path | None = None) -> Corpus:
        """The corpus (or another folder read with this model's vocabulary and UNK rule; one
        that records another tokenisation than the model's corpus is refused: its perplexity
        would compare other tokens)."""
        if root is None and not Path(self.corpus_path).is_dir():
            raise LmlowError(f"{self.corpus_path}: no such corpus folder (the one "
                             f"{self.run_dir} was trained on); if it moved, pass --corpus PATH")
        if root is not None:
            root = path_value(root, "evaluate", "corpus")
            self._check_tokenised_alike(root)
        return Corpus(Path(root or self.corpus_path), self.unk_threshold, vocab=self.vocab)

    def encoded(self, split: str, corpus: Path | None = None):
        """A split read with this model's vocabulary: of another folder (``corpus``), or of
        the run's own corpus, which must still hold the split the run was trained on (one
        prepared again in place was scored under the run's name:
        :meth:`lmlow.rundir.RunDir.check_own_split`)."""
        from lmlow.data.corpus import SPLITS

        if not isinstance(split, str) or split not in SPLITS:     # (a list: a TypeError)
            raise LmlowError(f"split = {split!r:.60}: choose one of {', '.join(SPLITS)}")
        folder = self.corpus(corpus)
        if corpus is None:
            from lmlow.rundir import RunDir
            RunDir(self.run_dir).check_own_split(Path(self.corpus_path), split)
        return folder.encode(split)

    def _check_tokenised_alike(self, root: Path) -> None:
        from lmlow.data.corpus import corpus_preparation
        from lmlow.rundir import RunDir

        theirs = corpus_preparation(root)
        mine = RunDir(self.run_dir).recorded_preparation()
        if theirs and mine and theirs != mine:
            differ = "; ".join(f"{k} {theirs[k]} against {mine[k]}" for k in mine
                               if theirs[k] != mine[k])
            raise LmlowError(f"{root}: prepared otherwise than the corpus {self.run_dir} was "
                             f"trained on ({differ}): its perplexity would not compare the same "
                             "tokens; prepare the text as that corpus was")

    def evaluate(self, split: str = "valid", corpus: Path | None = None,
                 reset_lines: bool = False) -> Evaluation:
        """Perplexity on a split of the corpus (or of another folder with the same words)."""
        from lmlow.config import bool_value
        bool_value(reset_lines, "evaluate", "reset_lines")
        enc = self.encoded(split, corpus)
        lp = self.token_logprobs(enc.ids, reset_lines=reset_lines)
        # out of vocabulary: every word read as <unk> (by the UNK rule or in no vocabulary), as
        # `score`'s flag and `stats`'s OOV rate count it; a literal <unk> is not a word's
        oov = enc.stats.unk_tokens - enc.stats.literal_unk
        return evaluate_logprobs(split, enc.ids, lp, self.vocab.count_array(), self.vocab.unk_id,
                                 oov, eos_id=self.vocab.eos_id)

    def score(self, sentence: str | list[str], raw: bool = False) -> list[tuple[str, float, bool]]:
        """(word, natural-log probability, out of vocabulary) for each word and ``<eos>``,
        from a fresh state, like KenLM's ``full_scores``; ``raw``: ``sentence`` is raw text,
        read through :meth:`tokenise`."""
        words = self.words(sentence, raw)
        if EOS in words:          # as in a file: score("a <eos> b") read b as a new line
            raise LmlowError(f"{' '.join(words)!r:.60}: contains the reserved token {EOS}; "
                             "lines end implicitly, remove it")
        words.append(EOS)
        ids = np.array(self.vocab.encode(words), dtype=np.int64)
        lp = self.token_logprobs(ids, reset_lines=True)
        return [(w, float(p), w not in self.vocab) for w, p in zip(words, lp)]

    def reader(self) -> "LineReader":
        """The model reading one line word by word from a fresh state (:class:`LineReader`)."""
        raise LmlowError(f"{self.run_dir}: this model cannot list next-word probabilities")

    def next_logprobs(self, context: str | list[str], raw: bool = False) -> np.ndarray:
        """Natural-log probability of every vocabulary word (by id; ``<eos>``: the line ends)
        as the next token after the words of ``context``, read from a fresh line state as
        :meth:`score` reads a line; a word out of the vocabulary is read as ``<unk>``;
        ``raw``: ``context`` is raw text, read through :meth:`tokenise`."""
        return self.reader().feed(self.words(context, raw)).next_logprobs()

    def words(self, text: str | list[str], raw: bool = False) -> list[str]:
        """A line's words as this model reads them: split on spaces as given, or with ``raw``
        tokenised and normalised as the corpus was (:meth:`tokenise`)."""
        if not raw:
            return line_words(text)
        return next(iter(self.tokenise([text if isinstance(text, str) else " ".join(text)])))

    def typed(self, text: str | list[str], raw: bool = False) -> tuple[list[str], str]:
        """(the context's words, the word being typed) of what has been typed so far: its last
        word is the prefix. Raw text is split at its last space first, the prefix then read
        as the corpus reads a word (lowercased, a number as its class): a tokeniser's rules
        for whole text no longer moved it back onto a finished word (``the function returns
        (`` completed ``returns``, the ``(`` stripped). A raw text ending in a space, or
        whose last piece normalises to nothing, is typing a new word: the prefix is empty."""
        if not raw:
            words = self.words(text)
            return (words[:-1], words[-1]) if words else ([], "")
        text = text if isinstance(text, str) else " ".join(text)
        head, last = text, ""
        if text.strip() and not text[-1].isspace():
            *before, last = text.rsplit(None, 1)
            head = before[0] if before else ""
        pieces = self.words(last, raw=True) if last else []
        return self.words(head, raw=True) + pieces[:-1], (pieces[-1] if pieces else "")

    def context_ids(self, context: str | list[str]) -> list[int]:
        """The ids of a context's words (:func:`context_words`)."""
        return self.vocab.encode(context_words(context))

    def next_words(self, context: str | list[str] = "", top: int = 10,
                   include_unk: bool = False, raw: bool = False,
                   prefix: str = "") -> list[tuple[str, float]]:
        """The ``top`` most probable next words after ``context`` (a keyboard's suggestions, a
        recogniser's next-word list): (word, natural-log probability), most probable first,
        ties in vocabulary order; ``<unk>`` is left out unless ``include_unk``; ``raw``: as
        :meth:`next_logprobs`; ``prefix``: only the words that begin with it (the word being
        typed: ``run.next_words("the stock", prefix="mar")``; with ``raw`` read as the corpus
        reads a word, as ``lmlow predict --raw --partial`` reads it)."""
        if raw and prefix:
            prefix = self.typed(prefix, raw=True)[1]
        return top_words(self.vocab, self.next_logprobs(context, raw), top, include_unk, prefix)

    def preparation(self) -> dict:
        """How the corpus this model read was tokenised and normalised (its `lmlow prepare`
        record, :meth:`lmlow.rundir.RunDir.preparation`)."""
        from lmlow.rundir import RunDir

        return RunDir(self.run_dir).preparation()

    def tokenise(self, lines: Iterable[str]) -> Iterator[list[str]]:
        """Lines of raw text to the words this model reads, one list per line: tokenised and
        normalised as `lmlow prepare` made its corpus (``--raw``; ``run.tokenise(["The
        Stock rose 5%."])`` gives ``[["the", "stock", "rose", "N"]]`` for a ``--ptb``
        corpus)."""
        if "_tokenise" not in self.__dict__:        # a tokenizer model loads once per scorer
            from lmlow.data.tokenize import text_tokenizer

            self._tokenise = text_tokenizer(self.preparation())
        return self._tokenise(lines)

    def score_file(self, path: Path, lines_at_once: int = 1024, raw: bool = False,
                   ids: bool = False):
        """``lmlow score``: one record per line of ``path`` (its words and ``<eos>``, their
        natural-log and log10 probabilities, OOV flags and totals). Each line is scored from a
        fresh state, as :meth:`score` scores it, but ``lines_at_once`` lines go to the model
        together (an LSTM scores them side by side: an n-best list of thousands of lines no
        longer runs the model once per line); from a pipe, the lines that have arrived go
        together, so a writer waiting for its answers gets them (:func:`blocks`). ``raw``: the
        text is tokenised as the corpus was (:meth:`tokenise`); ``ids``: each line's first
        field is its identifier (an n-best list's ``utt7-3``), not a word. A line left with no
        word is scored as its end alone."""
        if raw:
            self.preparation()                    # no record: refused before the file is read
        text = iter_keyed_lines(path, raw, ids)
        for block in blocks(text, lines_at_once, stream=is_stream(path)):
            if raw:
                block = [(n, key, words) for (n, key, _), words in
                         zip(block, self.tokenise(t for _, _, t in block))]
            words = [tokens + [EOS] for _, _, tokens in block]
            token_ids = np.array(self.vocab.encode([w for line in words for w in line]),
                                 dtype=np.int64)
            lp, start = self.token_logprobs(token_ids, reset_lines=True), 0
            for (lineno, key, _), line in zip(block, words):
                ln = [float(p) for p in lp[start:start + len(line)]]
                start += len(line)
                yield ({"line": lineno} | ({"id": key} if ids else {})
                       | {"words": line, "logprob": [round(p, 6) for p in ln],
                          "log10prob": [round(p / LN10, 6) for p in ln],
                          "oov": [w not in self.vocab for w in line],
                          "total_logprob": round(sum(ln), 6),
                          "total_log10prob": round(sum(ln) / LN10, 6)})


def total_line(record: dict) -> str:
    """`lmlow score --totals`: a sentence's record as ``id-or-line<TAB>ln p<TAB>log10 p<TAB>
    tokens<TAB>oov``."""
    return "\t".join(map(str, (record.get("id", record["line"]), record["total_logprob"],
                               record["total_log10prob"], len(record["words"]),
                               sum(record["oov"]))))


@dataclass
class ScoreTotals:
    """What `lmlow score` says on stderr after its records, as KenLM's ``query`` does: the
    file's perplexity over every token (``<eos>`` included), and without the out-of-vocabulary
    words (scored as ``<unk>``), whose probability is a share of ``<unk>``'s, not a word's."""
    lines: int = 0
    tokens: int = 0
    oov: int = 0
    logprob: float = 0.0
    oov_logprob: float = 0.0

    def add(self, record: dict) -> dict:
        self.lines += 1
        self.tokens += len(record["words"])
        self.logprob += sum(record["logprob"])
        oov = [p for p, o in zip(record["logprob"], record["oov"]) if o]
        self.oov += len(oov)
        self.oov_logprob += sum(oov)
        return record

    def text(self) -> str:
        ppl = exp_loss(-self.logprob / self.tokens)
        known = self.tokens - self.oov
        without = (f"{exp_loss(-(self.logprob - self.oov_logprob) / known):.2f}" if known
                   else "none left")
        return (f"{self.lines} lines, {self.tokens} tokens with <eos>, {self.oov} out of the "
                f"vocabulary: perplexity {ppl:.2f} ({without} without them)")


def top_words(vocab: Vocabulary, logprobs: np.ndarray, top: int = 10,
              include_unk: bool = False, prefix: str = "") -> list[tuple[str, float]]:
    """The ``top`` words of a next-word distribution, most probable first (ties in vocabulary
    order), without ``<unk>`` unless ``include_unk``; with ``prefix``, only the words that begin
    with it (completions of a word being typed), each with its probability as the next word."""
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise LmlowError(f"top = {top!r}: expected a whole number >= 1 (how many words)")
    lp = np.asarray(logprobs, dtype=np.float64)
    ids = vocab.ids_with_prefix(prefix) if prefix else np.arange(len(lp))
    if not include_unk:
        ids = ids[ids != vocab.unk_id]
    scores = lp[ids]
    if 0 < top < len(ids):       # sort only the scores from the top-th up (all: 1 ms at 12k)
        kth = np.partition(scores, len(scores) - top)[len(scores) - top]
        if not np.isnan(kth):
            keep = np.flatnonzero(scores >= kth)              # ties kept, in their order
            ids, scores = ids[keep], scores[keep]
    order = ids[np.argsort(-scores, kind="stable")[:top]]
    return [(vocab.words[i], float(lp[i])) for i in order.tolist()]


class LineReader(ABC):
    """A model reading one line word by word, from a fresh state as :meth:`Scorer.score` reads
    a line: ``feed`` the words as they come and ask for the next word after each. A keyboard's
    loop then costs one step of the model per word typed, not a pass over the whole line
    (``Scorer.next_logprobs(context)`` is a fresh reader fed the context)."""

    def __init__(self, scorer: Scorer):
        self.scorer, self.words = scorer, []

    def feed(self, words: str | list[str]) -> "LineReader":
        """Read more of the line (a text split at white space, or a list of words); a word
        out of the vocabulary is read as ``<unk>``, and ``<eos>`` is refused (the line's end
        is what is predicted)."""
        ids = self.scorer.context_ids(words)
        if ids:
            self._read(ids)
            self.words += line_words(words)
        return self

    @abstractmethod
    def _read(self, ids: list[int]) -> None:
        """Advance the model's state over these vocabulary ids."""

    @abstractmethod
    def next_logprobs(self) -> np.ndarray:
        """Natural-log probability of every vocabulary word as the next token."""

    def next_words(self, top: int = 10, include_unk: bool = False,
                   prefix: str = "") -> list[tuple[str, float]]:
        return top_words(self.scorer.vocab, self.next_logprobs(), top, include_unk, prefix)

    def fork(self) -> "LineReader":
        """An independent reader at the same place: keep one per word typed, and a deleted
        word goes back to the one before it without reading the line again. (Each step makes
        new state objects, never changes the old ones, so a shallow copy is safe.)"""
        other = copy.copy(self)
        other.words = list(self.words)
        return other


class ContextReaders:
    """Readers left at the end of each context asked so far, each context a start of the
    next: a keyboard's contexts grow a word at a time (`the`, `the stock`, `the stock market`)
    or back up, and each is read on from the longest of them it begins with, one step per new
    word, instead of from the start of the line (`lmlow predict --file`). A context that
    begins with none of them starts from the line's start; the numbers are those of a fresh
    reader (:meth:`Scorer.next_logprobs`), the reading cut in other places."""

    KEPT = 16     # readers kept along one line (a Transformer's holds its memory): backing up
                  # further re-reads from the longest kept, or the line's start

    def __init__(self, scorer: "Scorer"):
        self.root, self.path = scorer.reader(), []      # [(words, reader)], each a prefix of the next

    def at(self, words: list[str]) -> LineReader:
        """A reader that has read ``words`` (the reader kept for them: do not feed it)."""
        self.path = [(w, r) for w, r in self.path if words[:len(w)] == w]
        known, reader = self.path[-1] if self.path else ([], self.root)
        if len(words) > len(known):
            reader = reader.fork().feed(words[len(known):])
            self.path = (self.path + [(list(words), reader)])[-self.KEPT:]
        return reader


def line_words(text: str | list[str]) -> list[str]:
    """A line's words: a text split at white space, or a list of words as given (anything
    else is refused: a number's digits, a list's non-words, are no words)."""
    if isinstance(text, str):
        return text.split()
    if isinstance(text, (list, tuple)) and all(isinstance(w, str) for w in text):
        return list(text)
    raise LmlowError(f"{text!r:.60}: expected a text or a list of words")


def context_words(context: str | list[str]) -> list[str]:
    """A context's words: the start of one line, so ``<eos>`` is refused (its end is what is
    predicted)."""
    words = line_words(context)
    if EOS in words:
        raise LmlowError(f"the context holds {EOS}: a context is the start of one line "
                         "(its end is what is predicted)")
    return words


def mix_logprobs(lp_a: np.ndarray, lp_b: np.ndarray, weight: float) -> np.ndarray:
    """ln(w p_a + (1 - w) p_b) per token: linear interpolation, computed in log space."""
    if weight >= 1:
        return np.asarray(lp_a, dtype=float)
    if weight <= 0:
        return np.asarray(lp_b, dtype=float)
    return np.logaddexp(math.log(weight) + lp_a, math.log1p(-weight) + lp_b)


def tune_weight(lp_a: np.ndarray, lp_b: np.ndarray, iterations: int = 200, tol: float = 1e-7) -> float:
    """The weight of model a that maximises the likelihood of the mixture (EM: the new weight
    is the mean posterior responsibility of a). Every step raises the likelihood, so the
    result is never worse than either model alone on the data it was tuned on."""
    w = 0.5
    for _ in range(iterations):
        new = float(np.mean(1.0 / (1.0 + np.exp(math.log1p(-w) + lp_b - math.log(w) - lp_a))))
        new = min(max(new, 1e-6), 1 - 1e-6)
        if abs(new - w) < tol:
            return new
        w = new
    return w


def _cpu_fp32(output, weight) -> bool:
    """Whether scoring ``output`` runs on a CPU in fp32 (no autocast): where the scores go into
    the buffers :func:`lmlow.loss.scratch` keeps."""
    import torch

    return (output.device.type == "cpu" and not torch.is_autocast_enabled("cpu")
            and output.dtype == torch.float32 and weight.dtype == torch.float32)


def log_probs(model, output, bias_scale: float = 1.0):
    """Log-probabilities over the vocabulary of each row of ``output`` (rows, d). On a CPU in
    fp32 (no autocast) the scores and their log-softmax go into buffers the process keeps
    (:func:`lmlow.loss.scratch`): a fresh (rows, vocabulary) tensor pays a page fault per
    4 kB, and scoring ran at two thirds of the speed (BENCHMARKS.md, "The loss's buffers").
    The numbers are the same. Call it under ``torch.no_grad()``, as scoring does."""
    import torch

    from lmlow.loss import scratch

    weight = model.decoder.weight
    if not _cpu_fp32(output, weight):
        return torch.log_softmax(model.logits(output, bias_scale).float(), dim=-1)
    shape, dev = (output.size(0), weight.size(0)), output.device
    scores = model.logits(output, bias_scale, out=scratch("scores", shape, torch.float32, dev))
    return torch.log_softmax(scores, dim=-1, out=scratch("score_logp", shape, torch.float32, dev))


def target_log_probs(model, output, targets, bias_scale: float = 1.0):
    """log p(target) of each row of ``output`` (rows, d): what scoring keeps of
    :func:`log_probs`. On a CPU in fp32 the log-softmax goes ``lmlow.loss.CACHED_ELEMENTS``
    values (a few rows) at a time into a buffer that stays in the core's cache, and only the
    targets' values leave it, instead of the whole (rows, vocabulary) log-softmax going to
    memory to be read back for one value a row: the same numbers (each row's log-softmax is
    its own); with fp32's one call on an Intel CPU with AVX-512, `lmlow eval` at 61k words
    1.2x as fast on an Intel Xeon (BENCHMARKS.md, "Scoring row block by row block")."""
    import torch

    from lmlow.loss import CACHED_ELEMENTS, scratch

    weight = model.decoder.weight
    if not _cpu_fp32(output, weight):
        return log_probs(model, output, bias_scale).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    shape, dev = (output.size(0), weight.size(0)), output.device
    scores = model.logits(output, bias_scale, out=scratch("scores", shape, torch.float32, dev))
    step = max(1, CACHED_ELEMENTS // shape[1])
    block = scratch("score_block", (min(step, shape[0]), shape[1]), torch.float32, dev)
    picked = torch.empty(shape[0], dtype=torch.float32, device=dev)
    for j in range(0, shape[0], step):
        part = scores[j:j + step]
        logp = torch.log_softmax(part, dim=-1, out=block[:part.size(0)])
        picked[j:j + step] = logp.gather(1, targets[j:j + step].unsqueeze(1)).squeeze(1)
    return picked


def lstm_logprobs(model, ids: np.ndarray, eos_id: int, batch_size: int = EVAL_BATCH,
                  bptt: int = EVAL_BPTT,
                  reset_lines: bool = False, context: int = 128, bias_scale: float = 1.0,
                  device=None, world=None) -> np.ndarray:
    """Score a token stream with an LSTM language model.

    Default: the state is carried across lines, as in training. The stream is cut into
    ``batch_size`` contiguous pieces scored side by side; each piece after the first is run
    first (unscored) over at least the ``context`` tokens before it, from the start of a line,
    so the numbers agree with one unbroken pass to float rounding (tested per token).
    ``reset_lines``: every line starts from a fresh state after ``<eos>``, as an n-gram model
    sees it. ``world`` (training on several processes, :mod:`lmlow.distributed`): each rank
    scores its share of the pieces and the scores are summed over the ranks, so every rank
    returns what one process computes.
    """
    import torch

    from lmlow.distributed import SINGLE, all_sum

    world = world or SINGLE
    out = np.zeros(len(ids))
    times = np.zeros(len(ids), np.int64)
    with torch.no_grad():
        for output, y, pos in lstm_outputs(model, ids, eos_id, batch_size, bptt, reset_lines,
                                           context, device, shard=(world.rank, world.size)):
            out[pos] = target_log_probs(model, output, y, bias_scale).cpu().numpy()
            np.add.at(times, pos, 1)
    if world.distributed:
        out, times = all_sum(world, out, times)
    if len(ids) and not (times == 1).all():
        bad = int(np.flatnonzero(times != 1)[0])
        raise RuntimeError(f"internal error: token {bad} scored {times[bad]} times, not once")
    return out


def lstm_outputs(model, ids: np.ndarray, eos_id: int, batch_size: int = EVAL_BATCH,
                 bptt: int = EVAL_BPTT,
                 reset_lines: bool = False, context: int = 128, device=None,
                 shard: tuple[int, int] = (0, 1)):
    """The last LSTM layer's output before every scored token of ``ids``, in pieces: yields
    (output (N, d), targets (N,), positions (N,) in ``ids``), each token exactly once, in
    eval mode (the batching of :func:`lstm_logprobs`; the outputs carry no gradient, but
    whatever the caller computes from them should run under ``torch.no_grad()``). The model
    is left in eval mode. ``shard`` (i, n): only the i-th of every n pieces (or groups of
    lines), for n processes that share the work."""
    ids = np.asarray(ids, dtype=np.int64)
    # a Transformer's output depends on its receptive field exactly (layers x window): warm
    # up over all of it, and its numbers equal one unbroken pass's
    context = max(context, getattr(model, "receptive_field", 0))
    full = np.concatenate([[eos_id], ids])
    n = len(ids)
    if reset_lines:
        ends = np.flatnonzero(ids == eos_id) + 1
        starts = np.concatenate([[0], ends[:-1]])
        pieces = [(s, s, e) for s, e in zip(starts, ends)]
        pieces.sort(key=lambda p: p[2] - p[1])          # similar lengths share a batch
        groups = [pieces[i:i + batch_size] for i in range(0, len(pieces), batch_size)]
    else:
        b = max(1, min(batch_size, n // max(1, bptt)))
        bounds = np.linspace(0, n, b + 1).astype(np.int64)
        starts = np.concatenate([[0], np.flatnonzero(ids == eos_id) + 1])   # line starts
        groups = [[(_warm_up_start(starts, s, context), s, e)
                   for s, e in zip(bounds[:-1], bounds[1:])][shard[0]::shard[1]]]
    if reset_lines:
        groups = groups[shard[0]::shard[1]]
    model.eval()
    device = device or next(model.parameters()).device
    for group in groups:
        if group:
            yield from _group_outputs(model, full, group, bptt, device)


def _warm_up_start(line_starts: np.ndarray, start: int, context: int) -> int:
    """Where the unscored warm-up of a piece scored from ``start`` begins: at the start of the
    line holding token ``start - context``, so that, like the whole stream, it starts from a
    fresh state right after an ``<eos>``. (A fresh state in mid-line can put a trained LSTM in
    a state it never leaves; measured: 16 nats per token off for a whole piece.)"""
    if start == 0:
        return 0
    i = np.searchsorted(line_starts, max(0, start - context), side="right") - 1
    return int(line_starts[i])


def _group_outputs(model, full, group, bptt, device):
    """Run side-by-side pieces (warm-up start, first scored, end); yield their scored outputs."""
    import torch

    length = max(e - w for w, _, e in group)
    shape = (length, len(group))
    x, y = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
    pos, scored = np.zeros(shape, np.int64), np.zeros(shape, bool)
    for j, (w, s, e) in enumerate(group):
        k = e - w
        x[:k, j], y[:k, j] = full[w:e], full[w + 1:e + 1]
        pos[:k, j] = np.arange(w, e)
        scored[s - w:k, j] = True
    hidden = model.init_hidden(len(group))
    for t in range(0, length, bptt):
        xt = torch.from_numpy(x[t:t + bptt]).to(device)
        with torch.no_grad():
            output, hidden, _, _ = model(xt, hidden)
        m = scored[t:t + bptt]
        if m.any():
            mt = torch.from_numpy(m).to(device)
            yield (output[mt], torch.from_numpy(y[t:t + bptt][m]).to(device),
                   pos[t:t + bptt][m])
