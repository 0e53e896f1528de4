"""The KenLM baseline: modified Kneser-Ney n-grams estimated by KenLM's own ``lmplz``, scored on
exactly the tokens the LSTM sees.

Same tokens as the LSTM: the training split is written from the corpus's encoding, so the
vocabulary and the UNK rule (K) are the LSTM's, and every ``<unk>`` (literal in the text, made
by the rule, or out of vocabulary) is one word. ``lmplz`` refuses a literal ``<unk>`` (its
``--skip_symbols`` would delete the tokens), so ``<unk>`` is written as a placeholder word,
estimated like any other, and renamed ``<unk>`` in the ARPA file; KenLM's own ``<unk>`` entry
(the unigram mass kept for unseen words, which here are all ``<unk>``) is merged into it. Any
KenLM tool then maps an unknown word to this trained ``<unk>``, as the LSTM does.

Scoring follows ``lmlow.evaluate``'s stream convention: each line's words, then ``<eos>``,
whose score is KenLM's ``</s>``; the first word is predicted from ``<s>``. KenLM restarts at
every line, while the LSTM by default carries its state across lines: compare with
``lmlow eval LSTM_RUN --reset-lines`` for the same condition on both sides.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from lmlow.data.corpus import Corpus, write_ids_as_text
from lmlow.data.textio import EOS, UNK, atomic_write_text
from lmlow.data.vocab import Vocabulary
from lmlow.errors import LmlowError, refuse_overwrite
from lmlow.evaluate import Evaluation, evaluate_split
from lmlow.runs import LN10

MAX_ORDER = 6                      # KENLM_MAX_ORDER of build_binary and the kenlm module
KENLM_RESERVED = ("<s>", "</s>")   # lmplz refuses them as words; the LSTM has no such limit
PLACEHOLDER = "<lmlow-unk>"
RUN_FILES = ("model.arpa", "model.bin", "vocab.txt", "config.json")


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
    kind: str = "ngram"

    @classmethod
    def load(cls, path: Path) -> "NgramConfig":
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        names = {f.name for f in fields(cls)}
        missing = names - set(data) - {"kind"}
        if missing:
            raise LmlowError(f"{path}: not an n-gram run configuration (lacks {', '.join(sorted(missing))})")
        return cls(**{k: v for k, v in data.items() if k in names})


def find_program(name: str) -> str:
    """A KenLM program from the venv's bin/ (where tools/build_kenlm.py puts it), else PATH."""
    local = Path(sys.prefix) / "bin" / name
    found = str(local) if os.access(local, os.X_OK) else shutil.which(name)
    if not found:
        raise LmlowError(f"KenLM's {name} not found in {local.parent} or on PATH; build it with "
                         "`make install` (or `python tools/build_kenlm.py`)")
    return found


def parse_prune(text: str | None, order: int) -> list[int] | None:
    """``0,0,1`` -> [0, 0, 1]: lmplz's count thresholds per order, non-decreasing."""
    if text is None or not str(text).strip():
        return None
    try:
        values = [int(v) for v in re.split(r"[,\s]+", str(text).strip())]
    except ValueError:
        raise LmlowError(f"--prune {text!r}: expected counts per order, e.g. 0,0,1") from None
    if len(values) > order or any(v < 0 for v in values) or values != sorted(values) or values[0]:
        raise LmlowError(f"--prune {text!r}: give at most {order} non-negative, non-decreasing "
                         "counts starting with 0 (unigrams are never pruned), e.g. 0,0,1")
    return values


def train_ngram(corpus_dir: Path, out_dir: Path, order: int = 5, unk_threshold: int = 0,
                memory: str = "1G", prune: list[int] | None = None, force: bool = False,
                quiet: bool = False) -> NgramConfig:
    """Estimate a KenLM model on the corpus's training split into a run folder."""
    if not 2 <= order <= MAX_ORDER:
        raise LmlowError(f"--order must be 2 to {MAX_ORDER} (KenLM's query code needs bigrams and "
                         f"was compiled for at most {MAX_ORDER}), got {order}")
    if not re.fullmatch(r"\d+(\.\d+)?[bKMGTPEZY%]?", memory):
        raise LmlowError(f"--memory {memory!r}: expected a size like GNU sort's: 1G, 500M, 20%")
    lmplz, build_binary = find_program("lmplz"), find_program("build_binary")
    out_dir = Path(out_dir)
    refuse_overwrite([out_dir / f for f in RUN_FILES], force)
    corpus = Corpus(corpus_dir, unk_threshold, show_progress=not quiet)
    vocab = corpus.vocab
    for word in (*KENLM_RESERVED, PLACEHOLDER):
        if word in vocab:
            raise LmlowError(f"{corpus.path('train')}: contains the word {word}, which the n-gram "
                             "training reserves (KenLM's sentence boundaries and lmlow's <unk> "
                             "stand-in); replace it in the corpus")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").unlink(missing_ok=True)  # written last: marks a complete run
    text = out_dir / "train.lmplz.txt"
    raw_arpa = out_dir / "model.lmplz.arpa"
    start = time.time()
    try:
        write_training_text(corpus, text)
        cmd = [lmplz, "-o", str(order), "-S", memory, "-T", str(out_dir / "lmplz-tmp-"),
               "--text", str(text), "--arpa", str(raw_arpa)]
        if prune:
            cmd += ["--prune", *map(str, prune)]
        t0 = time.time()
        stderr, fallback = run_lmplz(cmd, quiet)
        lmplz_seconds = time.time() - t0
        if fallback:
            cmd.append("--discount_fallback")
        rename_unk(raw_arpa, out_dir / "model.arpa", has_unk=vocab.counts[vocab.unk_id] > 0)
    finally:
        text.unlink(missing_ok=True)
        raw_arpa.unlink(missing_ok=True)
    binary = [build_binary, str(out_dir / "model.arpa"), str(out_dir / "model.bin")]
    run_program(binary, "build_binary")
    vocab.save(out_dir / "vocab.txt", with_counts=True)
    cfg = NgramConfig(corpus=str(corpus_dir), order=order, unk_threshold=unk_threshold,
                      memory=memory, prune=prune, discount_fallback=fallback is not None,
                      discount_fallback_reason=fallback, lmplz_command=shlex.join(cmd),
                      build_binary_command=shlex.join(binary),
                      train_seconds=round(time.time() - start, 2),
                      lmplz_seconds=round(lmplz_seconds, 2),
                      lmplz_peak_rss_mb=peak_rss_mb(stderr))
    atomic_write_text(out_dir / "config.json", json.dumps(asdict(cfg), indent=2) + "\n")
    return cfg


def write_training_text(corpus: Corpus, path: Path) -> None:
    """The train split as lmplz reads it: the LSTM's tokens, ``<unk>`` as the placeholder."""
    vocab = corpus.vocab
    words = list(vocab.words)
    words[vocab.unk_id] = PLACEHOLDER
    write_ids_as_text(corpus.encode("train").ids, SimpleNamespace(words=words, eos_id=vocab.eos_id),
                      path)


def run_program(cmd: list[str], name: str) -> str:
    """Run a KenLM program; its own last message becomes the one-line error. Returns stderr."""
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          errors="replace")
    if done.returncode != 0:
        raise LmlowError(f"{name} failed: {kenlm_message(done.stderr) or f'exit status {done.returncode}'}")
    return done.stderr


def run_lmplz(cmd: list[str], quiet: bool) -> tuple[str, str | None]:
    """Run lmplz; when the closed-form discounts fail (no singletons, e.g. small or UNK-replaced
    data), run again with ``--discount_fallback``. Returns stderr and why the fallback was used."""
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          errors="replace")
    if done.returncode == 0:
        return done.stderr, None
    if "BadDiscountException" not in done.stderr:
        raise LmlowError(f"lmplz failed: {kenlm_message(done.stderr) or f'exit status {done.returncode}'}")
    reason = kenlm_message(done.stderr)
    if not quiet:
        print(f"lmplz: {reason}; using --discount_fallback (fixed discounts 0.5, 1, 1.5 for the "
              "orders where the estimate fails)", file=sys.stderr)
    return run_program(cmd + ["--discount_fallback"], "lmplz"), reason


def kenlm_message(stderr: str) -> str:
    """The explanatory line of a KenLM error (the line after 'threw ...Exception')."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    for i, line in enumerate(lines):
        if " threw " in line and i + 1 < len(lines):
            return lines[i + 1]
    return lines[-1] if lines else ""


def peak_rss_mb(stderr: str) -> float | None:
    """lmplz reports its peak resident memory (RSSMax, kB) on its last line."""
    m = re.search(r"RSSMax:(\d+) kB", stderr)
    return round(int(m.group(1)) / 1024, 1) if m else None


def rename_unk(src: Path, dst: Path, has_unk: bool) -> None:
    """Copy lmplz's ARPA file, turning the placeholder into ``<unk>`` (see the module docstring)."""
    if not has_unk:                      # no <unk> in train: KenLM's own <unk> stays as it is
        os.replace(src, dst)
        return
    tmp = Path(f"{dst}.tmp{os.getpid()}")
    with open(src, encoding="utf-8") as f, open(tmp, "w", encoding="utf-8") as out:
        for line in f:                   # header: one unigram fewer
            m = re.match(r"ngram 1=(\d+)$", line.strip())
            out.write(f"ngram 1={int(m.group(1)) - 1}\n" if m else line)
            if line.strip() == "\\1-grams:":
                break
        unigrams = []
        for line in f:
            if not line.strip():
                break
            unigrams.append(line)
        # the highest order has no backoff column: "prob<TAB>word" then
        kenlm_unk = next((l for l in unigrams if l.rstrip("\n").split("\t")[1] == UNK), None)
        if kenlm_unk is None:
            raise LmlowError(f"{src}: lmplz wrote no <unk> unigram; unexpected ARPA file")
        unigrams.remove(kenlm_unk)
        unk_log10 = float(kenlm_unk.split("\t")[0])
        out.write("".join(_merge_unk(l, unk_log10) for l in unigrams) + "\n")
        for line in f:
            out.write(_rename(line) if PLACEHOLDER in line else line)
    os.replace(tmp, dst)


def _merge_unk(line: str, kenlm_unk_log10: float) -> str:
    """The placeholder's unigram, also holding the mass KenLM set aside for unseen words."""
    parts = line.rstrip("\n").split("\t")
    if parts[1] != PLACEHOLDER:
        return line
    p = math.log10(10 ** float(parts[0]) + 10 ** kenlm_unk_log10)
    return "\t".join([f"{p:.7g}", UNK, *parts[2:]]) + "\n"


def _rename(line: str) -> str:
    parts = line.rstrip("\n").split("\t")
    parts[1] = " ".join(UNK if w == PLACEHOLDER else w for w in parts[1].split(" "))
    return "\t".join(parts) + "\n"


class NgramRun:
    """A KenLM run folder as a scorer, with the same methods as ``lmlow.runs.LSTMRun``."""

    resets_lines = True  # every line is scored from <s>

    def __init__(self, run_dir: Path):
        import kenlm

        self.run_dir = Path(run_dir)
        self.config = NgramConfig.load(self.run_dir / "config.json")
        self.vocab = Vocabulary.load(self.run_dir / "vocab.txt")
        self.vocab.unk_threshold = self.config.unk_threshold
        model = self.run_dir / "model.bin"
        if not model.exists():
            model = self.run_dir / "model.arpa"
        if not model.exists():
            raise LmlowError(f"{self.run_dir}: n-gram run without model.bin or model.arpa")
        try:
            self.model = kenlm.Model(str(model))
        except (OSError, RuntimeError) as e:
            raise LmlowError(f"{model}: cannot load ({str(e).splitlines()[0]})") from None

    def corpus(self, root: Path | None = None) -> Corpus:
        return Corpus(Path(root or self.config.corpus), self.config.unk_threshold, vocab=self.vocab)

    def token_logprobs(self, ids: np.ndarray, **_ignored) -> np.ndarray:
        """Natural-log probability of every token; each line from ``<s>``, ``<eos>`` = ``</s>``.
        Options of the LSTM scorer (batch size, reset_lines) change nothing here."""
        ids = np.asarray(ids)
        if len(ids) and ids[-1] != self.vocab.eos_id:
            raise ValueError("a token stream must end with <eos>")
        words, out, pos = self.vocab.words, np.empty(len(ids)), 0
        for end in np.flatnonzero(ids == self.vocab.eos_id).tolist():
            sentence = " ".join([words[i] for i in ids[pos:end].tolist()])
            scores = [s[0] for s in self.model.full_scores(sentence, bos=True, eos=True)]
            if len(scores) != end + 1 - pos:
                raise RuntimeError(f"internal error: KenLM split a line into {len(scores) - 1} words, "
                                   f"not {end - pos}")
            out[pos:end + 1] = scores
            pos = end + 1
        return out * LN10

    def evaluate(self, split: str = "valid", corpus: Path | None = None, **_ignored) -> Evaluation:
        return evaluate_split(self, split, corpus)

    def score(self, sentence: str | list[str]) -> list[tuple[str, float, bool]]:
        """(word, natural-log probability, out of vocabulary) for each word and ``<eos>``."""
        words = sentence.split() if isinstance(sentence, str) else list(sentence)
        ids = np.array(self.vocab.encode(words + [EOS]), dtype=np.int64)
        lp = self.token_logprobs(ids)
        return [(w, float(p), w not in self.vocab) for w, p in zip(words + [EOS], lp)]


def is_ngram_run(run_dir: Path) -> bool:
    cfg = Path(run_dir) / "config.json"
    try:
        return cfg.exists() and json.loads(cfg.read_text(encoding="utf-8")).get("kind") == "ngram"
    except (ValueError, OSError):
        return False
