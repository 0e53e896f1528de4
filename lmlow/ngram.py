"""The KenLM baseline: modified Kneser-Ney n-grams estimated by KenLM's own ``lmplz``, scored on
exactly the tokens the LSTM sees.

Same tokens as the LSTM: the training split is written from the corpus's encoding, so the
vocabulary and the UNK rule (K) are the LSTM's, and every ``<unk>`` (literal in the text, made
by the rule, or out of vocabulary) is one word. ``lmplz`` refuses a literal ``<unk>`` (its
``--skip_symbols`` would delete the tokens), so ``<unk>`` is written as a placeholder word,
estimated like any other. When every vocabulary word is in the training text, the placeholder is
renamed ``<unk>`` in the ARPA file and KenLM's own ``<unk>`` (the unigram mass kept for unseen
words, which here are all ``<unk>``) is merged into it, after every context where the
placeholder has an entry as well as in the unigrams: any KenLM tool then maps an
unknown word to this trained ``<unk>``, as the LSTM does. When some vocabulary words are not
(``--train-fraction``, ``--vocab``, ``--extend-vocab``), the placeholder keeps its name: the
scorer reads lmlow's ``<unk>`` as it, with its trained probability, and only the unseen words
share KenLM's ``<unk>`` (:class:`lmlow.ngram_run.NgramRun`).

This module estimates; :mod:`lmlow.ngram_run` opens a finished run as a scorer.
"""
from __future__ import annotations

import math
import os
import re
import shlex
import sys
import time
import typing
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from lmlow.config import UNK_HELP, VOCAB_HELP, Config, check_values, check_vocabulary_source, setting
from lmlow.cpus import machine_memory_gb
from lmlow.data.corpus import Corpus, corpus_preparation, training_ids, write_ids_as_text
from lmlow.data.textio import UNK
from lmlow.data.vocab import Vocabulary
from lmlow.errors import LmlowError
from lmlow.external import find_program, run_program
from lmlow.files import atomic_path, atomic_write_json, make_fresh, temporary_path
from lmlow.ngram_run import PLACEHOLDER, RESERVED, NgramConfig, unseen_words
from lmlow.rundir import NGRAM, RunDir

MIN_MEMORY = 25 * 2**20           # lmplz -S below 24M failed on every corpus, order 2 to 6
MAX_ORDER = 6                      # KENLM_MAX_ORDER of build_binary and the kenlm module
BUILD_HINT = "build it with `make install` (or `python tools/build_kenlm.py`)"


@dataclass
class NgramOptions:
    """The settings of ``lmlow ngram`` (flags are generated from these fields)."""

    order: int = setting(5, "n-gram order")
    unk_threshold: int = setting(Config.unk_threshold, UNK_HELP, metavar="K")
    memory: str = setting("1G", "lmplz's sorting memory (-S), like GNU sort: 1G, 500M, 20%% of "
                          "RAM (a bare number is K), from 25M (lmplz's least) to this machine's "
                          "memory; lmplz uses "
                          "disk beyond it, so more only makes large corpora faster")
    prune: str | list | None = setting(None, "drop n-grams seen at most this often, one count per "
                                "order from the unigrams on, non-decreasing, the last repeated "
                                "for higher orders: 0,0,1 drops singleton trigrams and above "
                                "(default: no pruning)", metavar="COUNTS")
    embeddings: str | None = setting(None, "pretrained vectors whose words --extend-vocab adds "
                                     "(the LSTM's --embeddings)", metavar="FILE")
    allow_pickle: bool = setting(False, "allow gensim .kv/.model vector files: they are "
                                 "pickles, which can run code when loaded (only for files you "
                                 "trust)", switch=True)
    extend_vocab: bool = setting(False, "add the words of --embeddings to the vocabulary, as the "
                                 "LSTM's --extend-vocab does (K=0 only): the n-gram never saw "
                                 "them, so they share KenLM's <unk> probability equally with "
                                 "<unk>")
    vocab: str | None = setting(None, VOCAB_HELP + "; the LSTM's --vocab, so that both score "
                                "the same tokens", metavar="FILE")
    train_fraction: float = setting(1.0, "estimate on the first fraction of the training lines, "
                                    "the LSTM's --train-fraction cut (the vocabulary and UNK rule "
                                    "still come from the whole split, so the tokens scored are "
                                    "the same at every fraction; the counts in vocab.txt and the "
                                    "frequency bins are the fraction's)")

    RANGES: typing.ClassVar[dict[str, str]] = {"order": f"[2, {MAX_ORDER}]", "unk_threshold": "[0, inf)",
                                               "train_fraction": "(0, 1]"}


def parse_prune(text: str | None, order: int) -> list[int] | None:
    """``0,0,1`` -> [0, 0, 1]: lmplz's count thresholds per order, non-decreasing."""
    if text is None or not str(text).strip():
        return None
    try:
        # one comma (or blank) between counts: `0,,1` was read as 0,1, another order pruned
        values = [int(v) for v in re.split(r"\s*,\s*|\s+", str(text).strip())]
    except ValueError:
        raise LmlowError(f"--prune {text!r}: expected counts per order, e.g. 0,0,1") from None
    if len(values) > order or any(v < 0 for v in values) or values != sorted(values) or values[0]:
        raise LmlowError(f"--prune {text!r}: give at most {order} non-negative, non-decreasing "
                         "counts starting with 0 (unigrams are never pruned), e.g. 0,0,1")
    if values[-1] > 2**64 - 1:     # lmplz's 64-bit count: refused only after the corpus was read
        raise LmlowError(f"--prune {text!r}: a count is at most 2**64 - 1 "
                         f"({2**64 - 1}, which drops every n-gram of its order)")
    return values


def train_ngram(corpus_dir: Path, out_dir: Path, force: bool = False, quiet: bool = False,
                **options) -> NgramConfig:
    """Estimate a KenLM model on the corpus's training split into a run folder (``options``:
    the fields of :class:`NgramOptions`); its ``summary.json``, written last, marks it
    finished."""
    opts = NgramOptions(**options)
    check_values(opts)                     # the order's range: KenLM's query code needs bigrams
    check_vocabulary_source(opts.vocab, opts.unk_threshold, opts.extend_vocab, opts.embeddings)
    if opts.embeddings and not opts.extend_vocab:     # the LSTM's flag copied: it did nothing
        raise LmlowError(f"--embeddings {opts.embeddings}: an n-gram reads only the vectors' "
                         "words, with --extend-vocab (as the LSTM run it is compared with); "
                         "give both, or neither")
    order, unk_threshold, memory, embeddings = opts.order, opts.unk_threshold, opts.memory, opts.embeddings
    extend_vocab, train_fraction = opts.extend_vocab, opts.train_fraction
    prune = opts.prune
    if isinstance(prune, (list, tuple)):        # the Python API's counts: checked as the flag's
        prune = ",".join(map(str, prune))
    prune = parse_prune(prune, order)
    check_memory(memory)
    lmplz, build_binary = find_program("lmplz", BUILD_HINT), find_program("build_binary", BUILD_HINT)
    run = RunDir(out_dir).check_new(force)
    out_dir = run.path
    extra = ()
    if extend_vocab:
        from lmlow.embeddings import vector_words
        extra = vector_words(Path(embeddings), opts.allow_pickle)
    corpus = Corpus(corpus_dir, unk_threshold, extra, show_progress=not quiet,
                    vocab_file=opts.vocab)
    vocab = corpus.vocab
    for word in RESERVED:       # lmplz refuses <s> and </s> as words; the LSTM has no such limit
        # in the training text; a word the vectors or a list add (count 0) is scored as unseen
        if word in vocab and vocab.counts[vocab.index[word]]:
            where, fix = ((opts.vocab, "remove it from the list") if opts.vocab
                          else (corpus.path('train'), "replace it in the corpus"))
            raise LmlowError(f"{where}: contains the word {word}, which the n-gram training "
                             f"reserves (KenLM's sentence boundaries and lmlow's <unk> "
                             f"stand-in); {fix}")
    train_ids = training_ids(corpus, train_fraction)     # checked first; counts: this part's
    corpus.encode("valid")          # the perplexity `lmlow ngram` reports: an empty split now
    prepared = corpus_preparation(corpus_dir)
    with run.lock():                       # one estimator per folder; checked again under it
        run.check_new(force)
        run.remove_stale_temporaries()     # an earlier run stays until this one is made
        return _estimate(run, corpus_dir, vocab, train_ids, lmplz, build_binary, order,
                         unk_threshold, memory, prune, quiet, extend_vocab, embeddings,
                         train_fraction, prepared, opts.vocab)


def check_memory(memory: str) -> None:
    """``--memory`` as lmplz reads it (util::ParseSize, like GNU sort: a whole number, K
    without a suffix, ``b`` bytes, K..Y powers of 1024, or a share of RAM), from ``MIN_MEMORY``
    to this machine's memory: lmplz's 64-bit size overflowed past it (99999999999999999999G
    ended in "Sort block size 0", naming no flag), and below 24M it fails on any corpus (its
    vocabulary table alone is sized for a million words: "Vocab hash size estimate 25165824
    exceeds total memory"; 1b: "Sort block size 0 is below the minimum block size 8192")."""
    whole = re.fullmatch(r"([1-9]\d*)([bKMGTPEZY%]?)", memory)
    if not whole or memory.endswith("%") and int(memory[:-1]) > 100:
        raise LmlowError(f"--memory {memory!r}: expected a whole size above 0 like GNU sort's "
                         "(lmplz takes no fraction): 1G, 500M, 20%")
    number, unit = int(whole.group(1)), whole.group(2)
    machine = machine_memory_gb() * 2**30
    size = (number / 100 * machine if unit == "%"
            else number * 1024 ** "bKMGTPEZY".index(unit or "K"))      # b: 1024 ** 0
    if size > machine:
        raise LmlowError(f"--memory {memory}: more than this machine's memory "
                         f"({machine / 2**30:.1f} GB); lmplz sorts on disk beyond --memory, so "
                         "a share of RAM is enough: 1G, 20%")
    if size < MIN_MEMORY:
        raise LmlowError(f"--memory {memory}: below lmplz's least, 25M (its vocabulary table "
                         "alone takes 24M); lmplz sorts on disk beyond --memory, so a small "
                         "value is slower, not wrong: 25M ran 1M words at order 6")


def _estimate(run: RunDir, corpus_dir, vocab, train_ids, lmplz, build_binary, order,
              unk_threshold, memory, prune, quiet, extend_vocab, embeddings,
              train_fraction, prepared, vocab_file=None) -> NgramConfig:
    """lmplz and build_binary into temporary names, renamed into place only when both have
    finished (summary.json last): a run killed at any point leaves no half model under a final
    name, an earlier run (--force) is removed only once both have worked, and its
    temporaries (``*.tmpPID``, lmplz's ``lmplz-tmp-*``) are cleared by the next run, which
    needs no --force (an unfinished n-gram run has nothing to resume)."""
    out_dir = run.path
    text = temporary_path(run.lmplz_text)
    raw_arpa = temporary_path(run.lmplz_arpa)   # before <unk> is renamed
    arpa, binary_file = temporary_path(run.arpa), temporary_path(run.binary)
    start = time.time()
    try:
        write_training_text(vocab, train_ids, text)
        make_fresh(raw_arpa)            # --force on a folder lmlow did not make: no planted
        make_fresh(binary_file)         # link under these names is written through
        cmd = [lmplz, "-o", str(order), "-S", memory, "-T", str(run.lmplz_work),
               "--text", str(text), "--arpa", str(raw_arpa)]
        if prune:
            cmd += ["--prune", *map(str, prune)]
        t0 = time.time()
        stderr, fallback = run_lmplz(cmd, quiet)
        lmplz_seconds = time.time() - t0
        if fallback:
            cmd.append("--discount_fallback")
        rename_unk(raw_arpa, arpa, has_unk=vocab.counts[vocab.unk_id] > 0,
                   keep_placeholder=bool(unseen_words(vocab)))
        text.unlink(missing_ok=True)
        raw_arpa.unlink(missing_ok=True)
        binary = [build_binary, str(arpa), str(binary_file)]
        run_program(binary, "build_binary", kenlm_message)
        # recorded with the names the temporaries stand for (the .tmpPID files are gone)
        kept = {str(text): str(run.lmplz_text), str(raw_arpa): str(run.lmplz_arpa)}
        cmd = [kept.get(c, c) for c in cmd]
        binary = [build_binary, str(run.arpa), str(run.binary)]
        run.clear(keep=(arpa, binary_file))      # --force: the earlier run goes now, not before
        vocab.save(run.vocab, with_counts=True)
        cfg = NgramConfig(corpus=str(Path(corpus_dir).resolve()), order=order,
                          unk_threshold=unk_threshold, memory=memory, prune=prune,
                          discount_fallback=fallback is not None,
                          discount_fallback_reason=fallback, lmplz_command=shlex.join(cmd),
                          build_binary_command=shlex.join(binary),
                          train_seconds=round(time.time() - start, 2),
                          lmplz_seconds=round(lmplz_seconds, 2),
                          lmplz_peak_rss_mb=peak_rss_mb(stderr), extend_vocab=extend_vocab,
                          embeddings=str(Path(embeddings).resolve()) if extend_vocab else None,
                          train_fraction=train_fraction, prepared=prepared,
                          vocab=str(Path(vocab_file).resolve()) if vocab_file else None)
        atomic_write_json(run.config, asdict(cfg), indent=2)
        os.replace(arpa, run.arpa)
        os.replace(binary_file, run.binary)
        atomic_write_json(run.summary_file, {"run_dir": str(out_dir), "kind": NGRAM,
                                             "train_seconds": cfg.train_seconds,
                                             "vocabulary_digest": vocab.digest()})
    finally:
        for p in (text, raw_arpa, arpa, binary_file, *out_dir.glob(run.LMPLZ_TMP + "*")):
            p.unlink(missing_ok=True)
    return cfg


def write_training_text(vocab: Vocabulary, ids: np.ndarray, path: Path) -> None:
    """The training tokens as lmplz reads them (the LSTM's, cut by ``--train-fraction`` where
    the LSTM's are), ``<unk>`` as the placeholder."""
    words = list(vocab.words)
    words[vocab.unk_id] = PLACEHOLDER
    write_ids_as_text(ids, SimpleNamespace(words=words, eos_id=vocab.eos_id), path)


def run_lmplz(cmd: list[str], quiet: bool) -> tuple[str, str | None]:
    """Run lmplz; when the closed-form discounts fail (no singletons, e.g. small or UNK-replaced
    data), run again with ``--discount_fallback``. Returns stderr and why the fallback was used."""
    done = run_program(cmd, "lmplz", kenlm_message, check=False)
    if done.returncode == 0:
        return done.stderr, None
    if "BadDiscountException" not in done.stderr:
        run_program(cmd, "lmplz", kenlm_message)     # fails again, with lmplz's own message
    reason = discount_reason(kenlm_message(done.stderr))
    if not quiet:
        print(f"lmplz: {reason}; using --discount_fallback (fixed discounts 0.5, 1, 1.5 for the "
              "orders where the estimate fails)", file=sys.stderr)
    return run_program(cmd + ["--discount_fallback"], "lmplz", kenlm_message).stderr, reason


def discount_reason(message: str) -> str:
    """KenLM's explanation of a failed discount, as a reason for the fallback on a run that
    goes on to succeed: without its "ERROR: " and its advice to rerun with
    --discount_fallback, which lmlow has just taken (both made a finished run read as a
    failed one)."""
    message = re.sub(r"^ERROR:\s*", "", message)
    message = re.split(r"\s*To override this error\b", message)[0]
    return " ".join(message.split()).rstrip(".")


def kenlm_message(stderr: str) -> str:
    """The explanatory line of a KenLM error (the line after 'threw ...Exception'), else its
    last line of words: not its progress bar's ('----5---10...', '****'), which was all a
    killed lmplz's message showed ("its last words: ****")."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip(" *-|0123456789\t")]
    for i, line in enumerate(lines):
        if " threw " in line and i + 1 < len(lines):
            return lines[i + 1]
    return lines[-1] if lines else ""


def peak_rss_mb(stderr: str) -> float | None:
    """lmplz reports its peak resident memory (RSSMax, kB) on its last line."""
    m = re.search(r"RSSMax:(\d+) kB", stderr)
    return round(int(m.group(1)) / 1024, 1) if m else None


def rename_unk(src: Path, dst: Path, has_unk: bool, keep_placeholder: bool = False) -> None:
    """Copy lmplz's ARPA file, turning the placeholder into ``<unk>`` (see the module
    docstring); as it is when the text had no ``<unk>``, or when unseen vocabulary words
    need KenLM's ``<unk>`` apart from the trained one (``keep_placeholder``)."""
    if not has_unk or keep_placeholder:
        os.replace(src, dst)
        return
    with atomic_path(dst) as tmp, open(src, encoding="utf-8") as f, \
            open(tmp, "w", encoding="utf-8") as out:
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
        model = None
        for line in f:
            if PLACEHOLDER in line:
                if model is None:        # only where <unk> follows a context
                    model = load_arpa_quietly(src)
                line = _rename(_merge_unk_after(line, model))
            out.write(line)


def _merge_unk_after(line: str, model) -> str:
    """An n-gram ending in the placeholder, also holding the mass KenLM's ``<unk>`` gets after
    that context (its unigram times the context's backoffs: KenLM never saw it after any
    context). Merging the unigram alone lost that mass wherever the placeholder has an entry
    of its own after a context, and the n-gram summed to 0.9995 there."""
    parts = line.rstrip("\n").split("\t")
    *context, last = parts[1].split(" ")
    if last != PLACEHOLDER:
        return line
    p = math.log10(10 ** float(parts[0]) + 10 ** kenlm_logprob(model, context, UNK))
    return "\t".join([f"{p:.7g}", *parts[1:]]) + "\n"


def load_arpa_quietly(path: Path):
    """The kenlm module's model of an ARPA file, without KenLM's progress bar and its advice
    to build a binary file (written to file descriptor 2 whatever the config says)."""
    import kenlm

    config = kenlm.Config()
    config.show_progress = False
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        return kenlm.Model(str(path), config)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def kenlm_logprob(model, context: list[str], word: str) -> float:
    """KenLM's log10 probability of ``word`` after ``context`` (from ``<s>`` when the context
    starts with it, else from no context), as its query program reads an n-gram."""
    import kenlm

    state = kenlm.State()
    if context and context[0] == "<s>":
        model.BeginSentenceWrite(state)
        context = context[1:]
    else:
        model.NullContextWrite(state)
    for w in context:
        after = kenlm.State()
        model.BaseScore(state, w, after)
        state = after
    return model.BaseScore(state, word, kenlm.State())


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
