"""``lmlow embed``: train GloVe vectors on in-domain text (Pennington et al. 2014).

The estimator is Stanford's own C code (built by ``tools/build_glove.py``): ``glove-cooccur``
counts co-occurrences in a symmetric window with 1/distance weighting, ``glove-shuffle``
shuffles them, and ``glove-train`` fits separate word and context vectors by weighted least
squares, f(x) = min(1, (x / x_max)^alpha), with per-pair AdaGrad (lock-free threads). The
written vector of a word is word + context vector, as in the GloVe paper. lmlow streams the
text into the tools, chooses the vocabulary and reads the result back.

Conventions:
- the text is read exactly as corpora are (whitespace tokens, one paragraph per line, blank
  lines skipped), so vectors line up with the LM vocabulary when the text went through the same
  ``lmlow prepare`` options; windows do not cross line ends;
- words seen fewer than ``min_count`` times get no vector and are skipped by the window (the
  GloVe tool's behaviour);
- ``<unk>``: GloVe's convention, the mean of the vectors of the 100 rarest kept words. If the
  text itself contains the token ``<unk>`` (PTB does), it is an ordinary word with its own
  trained vector instead;
- ``<eos>``: every line ends with it (``eos``, on by default), as every corpus line does when
  the LM reads it, so the LM's line-end row gets a trained vector instead of a random one. Its
  window is its line's last words (windows stop at line ends). Kummerfeld et al. train their
  vectors on all in-domain text; give ``lmlow embed`` the pretraining text and the LM
  corpus's ``train.txt`` and every LM row with enough occurrences has a vector.
"""
from __future__ import annotations

import contextlib
import math
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import typing
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from lmlow.config import SEED_RANGE, THREADS_RANGE, check_values, setting, yes_no
from lmlow.cpus import available_cpus, machine_memory_gb
from lmlow.data.corpus import count_words
from lmlow.data.textio import EOS, UNK, iter_lines
from lmlow.errors import CommitGroup, LmlowError
from lmlow.external import die_with_parent, ended, find_program, last_line, run_program
from lmlow.files import (atomic_path, pid_alive, refuse_compressed, refuse_input_as_output,
                         refuse_overwrite)
from lmlow.progress import epochs_bar, progress

RAW_UNK = "<lmlow-text-unk>"   # a literal <unk> of the text, renamed: the tool reserves <unk>
# Stanford GloVe reads a word into a buffer of 1000 bytes (MAX_STRING_LENGTH) and keeps at most
# 998 of them (get_word: `if (i >= MAX_STRING_LENGTH - 1) i--`): a longer word (a base64 blob,
# a minified line) is cut, and the cut word is in no vocabulary (999 bytes: its vector stays
# random; far longer ones made the tools diverge, reported as a learning rate problem). Such
# words get no vector and are left out of the text the tools read.
GLOVE_MAX_BYTES = 998
# glove-cooccur (Stanford's cooccur.c) takes --memory and --window as they come: its buffer of
# rare pairs is sized from --memory, a buffer under 128 kB sits on the heap (--memory 5e-4 died
# of a double free on a 6k-token text at window 10; 8e-4 passed), a window past the tool's int
# (3,000,000,000) was SIGSEGV, and a --memory above the machine's crashed (200 on 23 GB) or
# hung (1,000,000, whose size estimate never converges). Stanford's tool flushed that buffer
# when fewer than `window` places were left though a word adds up to 2 x window pairs, so a
# word wrote up to a window of records past its end once a text filled it (SIGSEGV at
# --memory 0.01 and window 10,000, and 0.1 and 1000, on texts of rare words):
# tools/build_glove.py now keeps 2 x window places, and the bounds keep the buffer at 950,000
# records or more and the window at 1000 words (10-100 are the usual ones).
MIN_MEMORY_GB = 0.1
MAX_WINDOW = 1000
# glove-train reads --dim and --epochs into C ints (atoi): --epochs 3000000000 wrapped to a
# negative count, trained nothing and wrote the random starting vectors as if trained
C_INT_MAX = 2**31 - 1


def _memory_range() -> str:
    """``--memory``'s range: MIN_MEMORY_GB up to this machine's memory (rounded down to 0.1)."""
    total = machine_memory_gb()
    return (f"[{MIN_MEMORY_GB:g}, {math.floor(total * 10) / 10:g}]" if math.isfinite(total)
            else f"[{MIN_MEMORY_GB:g}, inf)")


@dataclass
class GloveConfig:
    """The settings of ``lmlow embed`` (flags are generated from these fields)."""

    dim: int = setting(400, "vector size (400: the AWD-LSTM embedding size)")
    window: int = setting(10, "symmetric context window (the GloVe paper's 10; at most "
                          f"{MAX_WINDOW}: longer ones overran glove-cooccur's buffer)")
    min_count: int = setting(5, "words seen fewer times get no vector (GloVe's default 5)")
    epochs: int | None = setting(None, "AdaGrad passes (default: the GloVe paper's 50 below 300 "
                                 "dimensions, 100 otherwise; 15-25 give usable vectors in a "
                                 "fraction of the time)")
    x_max: float = setting(100.0, "weighting cut-off x_max of f(x)")
    alpha: float = setting(0.75, "weighting exponent")
    learning_rate: float = setting(0.05, "AdaGrad rate")
    threads: int = setting(0, "CPU threads (0: the cores this process may use: its CPU "
                          "affinity and CPU quota)")
    seed: int = setting(1, "random seed (with more than one thread, updates race as in GloVe, "
                        "so runs differ slightly)")
    memory: float = setting(min(4.0, math.floor(machine_memory_gb() * 5) / 10),
                            "soft memory limit in GB for counting and shuffling (default: 4, or "
                            "half this machine's memory if less; at most all of it, at least "
                            f"{MIN_MEMORY_GB:g}: outside, glove-cooccur crashed)")
    eos: bool = setting(True, "end every line with <eos>, the LM's line-end token, so that it "
                        "gets a vector (yes or no)", parse=yes_no, metavar="{yes,no}")

    RANGES: typing.ClassVar[dict[str, str]] = {
        "dim": f"[1, {C_INT_MAX}]", "window": f"[1, {MAX_WINDOW}]", "min_count": "[1, inf)",
        "epochs": f"[1, {C_INT_MAX}]", "x_max": "(0, inf)", "alpha": "(0, inf)", "learning_rate": "(0, inf)",
        "threads": THREADS_RANGE, "seed": SEED_RANGE, "memory": _memory_range()}

    def validate(self) -> "GloveConfig":
        check_values(self)
        return self

    def resolved_epochs(self) -> int:
        return self.epochs if self.epochs is not None else (50 if self.dim < 300 else 100)


@dataclass
class GloveReport:
    vocabulary: int
    tokens: int                # the tokens GloVe read (with <eos>; the too-long words left out)
    cooccurrences: int
    seconds_counting: float
    seconds_training: float
    peak_memory_mb: float     # the largest of lmlow and the GloVe tools
    config: dict
    costs: list[float] = field(default_factory=list)   # weighted squared error per epoch
    too_long: int = 0          # words over GLOVE_MAX_BYTES left out (no vector)
    too_long_first: str = ""   # FILE:LINE of the first of them

    def text(self) -> str:
        """What `lmlow embed` prints: size, time of each stage, final cost, peak memory, and
        the words too long for GloVe if there were any."""
        cost = self.costs[-1] if self.costs else float("nan")
        skipped = (f"\n{self.too_long} words longer than {GLOVE_MAX_BYTES} bytes (GloVe's limit) "
                   f"have no vector; the first at {self.too_long_first}") if self.too_long else ""
        return (f"{self.vocabulary} words x {self.config['dim']} dims from {self.tokens} tokens "
                f"({self.cooccurrences} co-occurring pairs); counting {self.seconds_counting:.0f}s, "
                f"{self.config['epochs']} epochs {self.seconds_training:.0f}s (final cost "
                f"{cost:.4f}); peak memory {self.peak_memory_mb:.0f} MB{skipped}")


# GloVe's tools are compiled with -march=native (tools/build_glove.py): for the CPU that built them
REBUILD = "rebuild GloVe's tools on this machine: `python tools/build_glove.py --force` (the venv's python)"


def tool(name: str) -> str:
    """A Stanford GloVe executable: the venv's ``bin`` first, then PATH."""
    return find_program(name, "build it with `make install` (or `python tools/build_glove.py`)")


def glove_vocabulary(counts: Counter, min_count: int) -> dict[str, int]:
    """Words kept by the minimum count, in count order then alphabetical (as GloVe's
    vocab_count sorts them), without those GloVe cannot hold (:func:`too_long`); a literal
    ``<unk>`` of the text is a word like any other."""
    kept = sorted((w for w, c in counts.items() if c >= min_count and not too_long(w)),
                  key=lambda w: (-counts[w], w))
    return {w: i for i, w in enumerate(kept)}


def too_long(word: str) -> bool:
    """Longer than GloVe's word buffer (``GLOVE_MAX_BYTES`` bytes of UTF-8)."""
    return len(word) > GLOVE_MAX_BYTES // 4 and len(word.encode("utf-8")) > GLOVE_MAX_BYTES


def train_glove(texts: list[Path], cfg: GloveConfig = GloveConfig(), show_progress: bool = True,
                work_dir: Path | None = None):
    """Train vectors on ``texts``; return (gensim KeyedVectors, GloveReport). Temporary files
    (the text, about 16 bytes per co-occurring pair, twice) go to ``work_dir``."""
    cfg.validate()
    if work_dir is not None and not Path(work_dir).is_dir():
        raise LmlowError(f"--tmp-dir {work_dir}: " + ("not a folder" if Path(work_dir).exists()
                                                       else "no such folder"))
    texts = [Path(t) for t in texts]
    t0 = time.time()
    counts = Counter()
    for t in texts:
        wc = count_words(t, show_progress)
        counts.update(wc.counts)
        if cfg.eos:
            counts[EOS] += wc.lines
    if RAW_UNK in counts:
        _refuse_reserved(texts)
    vocab = glove_vocabulary(counts, cfg.min_count)
    if len(vocab) < 2:
        raise LmlowError(f"no two words occur {cfg.min_count} times or more; lower --min-count")
    threads = cfg.threads or available_cpus()
    remove_stale_work(work_dir)
    with tempfile.TemporaryDirectory(prefix=f"{WORK_PREFIX}{os.getpid()}-", dir=work_dir) as tmp, \
            _owning(Path(tmp)):
        tmp = Path(tmp)
        _write_vocab(vocab, counts, tmp / "glove-vocab.txt")
        drop = {w for w in counts if too_long(w)}
        given = sum(counts.values()) - sum(counts[w] for w in drop)   # what GloVe reads
        first = _write_text(texts, tmp / "text.txt", given, show_progress, cfg.eos, drop)
        _run([tool("glove-cooccur"), tmp / "text.txt", tmp / "glove-vocab.txt", tmp / "cooc.bin",
              cfg.window, tmp / "overflow", cfg.memory], "counting co-occurrences", show_progress)
        (tmp / "text.txt").unlink()
        pairs = (tmp / "cooc.bin").stat().st_size // 16
        _run([tool("glove-shuffle"), tmp / "cooc.bin", tmp / "shuf.bin", tmp / "shuffle",
              min(cfg.memory, 2.0)], "shuffling", show_progress)
        (tmp / "cooc.bin").unlink()
        t1 = time.time()
        costs = _fit(tmp, cfg, threads, unk_vector=UNK not in vocab, show_progress=show_progress)
        t2 = time.time()
        kv = _read_vectors(tmp / "vectors.txt", cfg.dim)
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    report = GloveReport(len(kv), given, pairs, round(t1 - t0, 1), round(t2 - t1, 1),
                         round(peak), asdict(cfg) | {"epochs": cfg.resolved_epochs(),
                                                     "threads": threads}, costs,
                         len(drop), first)
    return kv, report


WORK_PREFIX = "lmlow-glove-"     # + the owner's pid: a folder whose owner died can be reclaimed
OWNER = ".owner"                 # locked (flock) by the live embed that works in the folder
UNOWNED_GRACE = 3600             # seconds a folder without an owner file is left alone


@contextlib.contextmanager
def _owning(work: Path):
    """Hold a lock on ``work``'s owner file while the folder is in use: the kernel drops it
    when the process ends, however it ends, so :func:`remove_stale_work` can tell a dead
    run's folder from a live one's wherever that one runs (another PID namespace, a
    container, a job on another node of a shared --tmp-dir), which its pid cannot."""
    import fcntl
    fd = os.open(work / OWNER, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def remove_stale_work(work_dir: Path | None) -> None:
    """Delete the co-occurrence folders of `lmlow embed` runs that were killed: a killed run
    cannot clean up after itself, the next one does. A folder is its owner's while the owner
    holds its lock (:func:`_owning`); one without an owner file (being made, or made by an
    older lmlow) only once its pid no longer runs here and it is an hour old."""
    root = Path(work_dir or tempfile.gettempdir())
    for p in root.glob(f"{WORK_PREFIX}*"):
        m = re.match(re.escape(WORK_PREFIX) + r"(\d+)-", p.name)
        if m and p.is_dir() and not p.is_symlink() and _abandoned(p, int(m.group(1))):
            shutil.rmtree(p, ignore_errors=True)


def _abandoned(work: Path, pid: int) -> bool:
    """Whether no live process owns the work folder ``work`` (named after ``pid``)."""
    import fcntl
    try:
        fd = os.open(work / OWNER, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return (not pid_alive(pid)
                and time.time() - work.stat().st_mtime > UNOWNED_GRACE)
    except OSError:
        return False                               # a link or unreadable: not ours to judge
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False                               # its owner is alive, wherever it runs
    finally:
        os.close(fd)


def _refuse_reserved(texts: list[Path]) -> None:
    """The text has the word the tools read a literal ``<unk>`` as: its vectors would hold
    ``<unk>`` twice (a file lmlow then refuses) and the word none. Named at its first line."""
    for path in texts:
        for lineno, tokens in iter_lines(path):
            if RAW_UNK in tokens:
                raise LmlowError(f"{path}:{lineno}: the word {RAW_UNK} is lmlow embed's own name "
                                 "for <unk> inside GloVe's tools; rename it in the text")


def _write_vocab(vocab: dict[str, int], counts: Counter, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for w in vocab:
            f.write(f"{RAW_UNK if w == UNK else w} {counts[w]}\n")


def _write_text(texts: list[Path], out: Path, total: int, show_progress: bool,
                eos: bool = True, drop: set[str] = frozenset()) -> str:
    """One plain text for the tools: decompressed, blank lines gone, ``<unk>`` renamed, the
    words in ``drop`` left out, each line ended by ``<eos>`` if ``eos``. Returns FILE:LINE of
    the first word dropped ("" if none)."""
    end = f" {EOS}\n" if eos else "\n"
    first = ""
    with open(out, "w", encoding="utf-8") as f, progress("GloVe text", show_progress, total) as bar:
        for path in texts:
            for lineno, tokens in iter_lines(path):
                if drop and not drop.isdisjoint(tokens):
                    first = first or f"{path}:{lineno}"
                    tokens = [t for t in tokens if t not in drop]
                f.write(" ".join(RAW_UNK if t == UNK else t for t in tokens) + end)
                bar.tokens(len(tokens) + eos)
    return first


def _run(cmd: list, what: str, show_progress: bool) -> str:
    """Run one GloVe tool; its log becomes a one-line error if it fails."""
    if show_progress:
        print(f"GloVe: {what}...", file=sys.stderr, flush=True)
    return run_program(cmd, f"{Path(str(cmd[0])).name} ({what})", last_line,
                       rebuild=REBUILD).stderr


def _fit(tmp: Path, cfg: GloveConfig, threads: int, unk_vector: bool, show_progress: bool) -> list[float]:
    """AdaGrad epochs in ``glove-train``, its per-epoch cost lines driving the progress bar."""
    cmd = [tool("glove-train"), tmp / "shuf.bin", tmp / "glove-vocab.txt", tmp / "vectors", cfg.dim,
           cfg.resolved_epochs(), threads, cfg.x_max, cfg.alpha, cfg.learning_rate,
           int(unk_vector), cfg.seed]
    costs, tail = [], []
    proc = subprocess.Popen([str(c) for c in cmd], stderr=subprocess.PIPE, text=True,
                            errors="replace", preexec_fn=die_with_parent)
    bar = epochs_bar(range(cfg.resolved_epochs()), "GloVe epochs", show_progress)
    try:
        with bar:
            for line in proc.stderr:
                tail = (tail + [line.strip()])[-3:]
                m = re.match(r"iter: *(\d+), cost: *([-+0-9.eEnaif]+)", line)
                if m:
                    costs.append(float(m.group(2)))
                    bar.update(1)
    except BaseException:            # Ctrl-C or SIGTERM: the trainer goes with lmlow
        proc.kill()
        proc.wait()
        raise
    if proc.wait() != 0:
        said = ' / '.join(tail)
        raise LmlowError(f"glove-train failed ({ended(proc.returncode, REBUILD)})"
                         + (f": {said}" if said else ""))
    if costs and not np.isfinite(costs[-1]):
        raise LmlowError("GloVe diverged (non-finite cost); lower --learning-rate")
    return costs


def _read_vectors(path: Path, dim: int):
    from gensim.models import KeyedVectors

    words, rows = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split(" ")
            words.append(UNK if parts[0] == RAW_UNK else parts[0])
            rows.append(np.asarray(parts[1:], dtype=np.float32))
    vectors = np.stack(rows)
    if vectors.shape[1] != dim or not np.isfinite(vectors).all():
        raise LmlowError("GloVe diverged (non-finite vectors); lower --learning-rate")
    kv = KeyedVectors(dim)
    kv.add_vectors(words, vectors)
    return kv


def embed(texts: list[Path], out: Path, cfg: GloveConfig = GloveConfig(),
          work_dir: Path | None = None, force: bool = False,
          show_progress: bool = True) -> tuple[GloveReport, list[Path]]:
    """``lmlow embed``: train vectors on ``texts`` and write them to ``out`` (GloVe text) and
    the ``.npz`` beside it. The outputs are checked and their temporaries made and held before
    hours of work: a folder that takes no files, a name too long, a second ``embed`` to the
    same ``--out``, or an output that is one of ``texts`` (which it would replace) is refused
    at the start, not at the end."""
    cfg.validate()
    for text in map(Path, texts):
        if text.is_dir():        # prepare reads folders of documents; GloVe reads one text
            raise LmlowError(f"{text}: is a folder, expected a text file (a folder of documents "
                             f"becomes one with `lmlow prepare {shlex.quote(str(text))} --out "
                             "FILE --no-split`, tokenised as the LM corpus)")
    out = Path(out)
    npz = npz_beside(out)
    refuse_input_as_output(texts, [out, npz])
    refuse_overwrite([out, npz], force)
    with CommitGroup() as commit, atomic_path(out, exclusive=True) as tmp, \
            atomic_path(npz, exclusive=True) as tmp_npz:
        kv, report = train_glove(texts, cfg, show_progress, work_dir)
        _write_pair(kv, tmp, tmp_npz)              # renamed npz, then text
        commit.begin()
    return report, [out, npz]


def npz_beside(out: Path) -> Path:
    """The ``.npz`` written beside the GloVe text ``out``: ``NAME.npz`` for ``NAME.txt``, else
    ``OUT.npz`` (``v.100d`` and ``v.200d`` both made ``v.npz``). A text output named as
    another format (``--out v.npz`` made the text and the npz one temporary, and failed after
    writing the npz) is refused before any work."""
    out = Path(out)
    if out.suffix in (".npz", ".bin", ".kv", ".model"):
        raise LmlowError(f"--out {out}: the GloVe text file; name it NAME.txt (NAME.npz is "
                         "written beside it)")
    refuse_compressed(out)
    return out.with_suffix(".npz") if out.suffix == ".txt" else out.with_name(out.name + ".npz")


def save_vectors(kv, out: Path, force: bool = False) -> list[Path]:
    """Write GloVe text (``out``) and lmlow's fast, pickle-free ``.npz`` beside it, as a pair:
    both are written under temporary names and renamed only once both are complete, so a
    failure (a full disk) leaves neither, and never a new text file beside an older ``.npz``."""
    out = Path(out)
    npz = npz_beside(out)
    refuse_overwrite([out, npz], force)
    with CommitGroup() as commit, atomic_path(out) as tmp, atomic_path(npz) as tmp_npz:
        _write_pair(kv, tmp, tmp_npz)              # renamed npz, then text
        commit.begin()
    return [out, npz]


def _write_pair(kv, text: Path, npz: Path) -> None:
    from lmlow.embeddings import write_npz
    kv.save_word2vec_format(str(text), write_header=False)
    write_npz(kv, npz)
