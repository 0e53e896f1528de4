"""The run folder, lmlow's unit of work, and the only module that knows its file names.

An LSTM run holds ``config.json`` (the resolved Config), ``vocab.txt``, ``metrics.jsonl`` (one
row per validation), ``best.pt`` and ``last.pt``; a KenLM run holds ``config.json`` (with
``"kind": "ngram"``), ``vocab.txt``, ``model.arpa`` and ``model.bin``. Every kind of run is
finished when ``summary.json`` exists: it is written last, so sweeps, the demo and reports
all ask the same question the same way. Commands that analyse a run write into folders of
their own inside it (``analysis/``, ``bias-sweep/``) and cache evaluations beside the
checkpoints (``eval_best_valid.json``).
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from lmlow.errors import LmlowError
from lmlow.files import (atomic_write_json, file_fingerprint, make_folder, open_own, pid_alive,
                         read_json, read_jsonl, refuse_link, remove_if_owner_gone)

LSTM, NGRAM = "lstm", "ngram"
KIND_NAMES = {LSTM: "LSTM", NGRAM: "n-gram"}     # a run's kind as a message names it
_HELD: set[Path] = set()       # lock files this process holds (flock: one per open file)
CHECKPOINTS = ("best", "last")


MAP_FLAGS = ("--map-unseen-inputs", "--map-unseen-outputs")


def map_flags(maps: tuple[bool, bool]) -> str:
    """The flags of the maps (inputs, outputs) that are on ('' for none)."""
    return " ".join(f for f, on in zip(MAP_FLAGS, maps) if on)


def maps_of(flags: str) -> tuple[bool, bool]:
    """(inputs, outputs) of a string of flags such as ``recommendation.EVAL_FLAGS``' values."""
    words = flags.split()
    return MAP_FLAGS[0] in words, MAP_FLAGS[1] in words


def evaluation_name(map_unseen_inputs: bool = False, map_unseen_outputs: bool = False) -> str:
    """The name of the cached evaluation of a run's best checkpoint with these maps
    (``eval_<name>_<split>.json``): ``best`` as trained, ``mapped`` with --map-unseen-inputs,
    ``mapped_outputs`` with --map-unseen-outputs, ``mapped_both`` with both."""
    return {(False, False): "best", (True, False): "mapped", (False, True): "mapped_outputs",
            (True, True): "mapped_both"}[bool(map_unseen_inputs), bool(map_unseen_outputs)]


def corpus_file(folder: Path) -> str | None:
    """The name of the file that makes ``folder`` a corpus (its training split, plain or
    gzipped, or the preparation record), or None."""
    from lmlow.data.corpus import PREPARATION, split_path

    held = [p for p in (split_path(folder, "train"), Path(folder) / PREPARATION) if p.exists()]
    return held[0].name if held else None


class RunDir:
    """Paths, kind and state of one run folder; creating it and clearing it for --force."""

    CONFIG, VOCAB, METRICS, SUMMARY = "config.json", "vocab.txt", "metrics.jsonl", "summary.json"
    FREQUENCY = "frequency.jsonl"
    DATA = "data.json"                  # the corpus's absolute path and fingerprint
    LOCK = ".lock"
    STASH = ".replaced"                 # an earlier run, kept until its replacement has started
    ARPA, BINARY = "model.arpa", "model.bin"
    LMPLZ_TEXT, LMPLZ_ARPA, LMPLZ_TMP = "train.lmplz.txt", "model.lmplz.arpa", "lmplz-tmp-"
    ANALYSIS, BIAS_SWEEP = "analysis", "bias-sweep"
    # everything lmlow itself writes here: what --force clears (other files are left alone)
    OWN_FILES = (CONFIG, VOCAB, METRICS, SUMMARY, FREQUENCY, DATA, ARPA, BINARY, "best.pt",
                 "last.pt", "done")
    OWN_GLOBS = ("eval_*.json", LMPLZ_TMP + "*", LMPLZ_TEXT + "*", LMPLZ_ARPA + "*")
    OWN_FOLDERS = (ANALYSIS, BIAS_SWEEP)

    def __init__(self, path: Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __str__(self) -> str:
        return str(self.path)

    @property
    def name(self) -> str:
        return self.path.name

    # ---- paths
    @property
    def config(self) -> Path:
        return self.path / self.CONFIG

    @property
    def vocab(self) -> Path:
        return self.path / self.VOCAB

    @property
    def metrics_file(self) -> Path:
        return self.path / self.METRICS

    @property
    def summary_file(self) -> Path:
        return self.path / self.SUMMARY

    @property
    def frequency_file(self) -> Path:
        return self.path / self.FREQUENCY

    @property
    def data_file(self) -> Path:
        return self.path / self.DATA

    def record_corpus(self, corpus: Path, fingerprint: dict | None = None,
                      vectors: Path | None = None) -> Path:
        """Remember the corpus as an absolute path with its fingerprint (data.json; computed
        unless given), and the vectors the run read (``vectors``: their path and fingerprint,
        so that a report can tell a table whose runs read different files of one name, e.g.
        vectors rebuilt on another machine); return the corpus's absolute path."""
        from lmlow.data.corpus import fingerprint as fingerprint_of

        corpus = Path(corpus).resolve()
        read = {"path": str(Path(vectors).resolve()), **file_fingerprint(vectors)} if vectors else None
        self._write_data(corpus, fingerprint or fingerprint_of(corpus), read)
        return corpus

    def checked_corpus(self, corpus: Path) -> tuple[Path, dict]:
        """The run's corpus is now at ``corpus``: refused in one line unless its files are the
        ones this run was trained on (a run from before fingerprints accepts any). Returns its
        absolute path and fingerprint for :meth:`record_corpus`, which the caller calls only
        once everything else has been checked: nothing is written here."""
        from lmlow.data.corpus import fingerprint

        corpus = Path(corpus).resolve()
        got = fingerprint(corpus)
        if self.data_file.exists():
            want = self.recorded_fingerprint()
            bad = [s for s in want if want[s] != got.get(s)]
            if bad:
                raise LmlowError(f"{corpus}: its {bad[0]}.txt is not the one {self.path} was "
                                 "trained on (size or content differs)")
        return corpus, got

    def check_own_split(self, corpus: Path, split: str) -> None:
        """The run's own corpus read again without being named (an evaluation without
        --corpus): ``split`` must still be the file the run was trained on. A corpus prepared
        again in place was scored under the run's name, its numbers cached as the run's. A
        run from before fingerprints passes."""
        from lmlow.data.corpus import split_path

        want = self.recorded_fingerprint().get(split) if self.data_file.is_file() else None
        path = split_path(Path(corpus), split)
        if not want or not path.is_file():
            return
        if path.stat().st_size != want.get("bytes") or file_fingerprint(path) != want:
            raise LmlowError(f"{path}: not the {split} split {self.path} was trained on (size or "
                             "content differs: prepared again?); to score other text, name its "
                             "folder with --corpus")

    def recorded_fingerprint(self) -> dict:
        """The fingerprint data.json records, split by split ({} for a run from before
        fingerprints); one line naming the file if it is not what lmlow writes (edited by hand,
        say), since a check that cannot read it must not pass. The one reader of it: the
        resume's corpus check and compare's note."""
        want = read_json(self.data_file).get("fingerprint", {})
        if not isinstance(want, dict) or not all(isinstance(v, dict) for v in want.values()):
            raise LmlowError(f"{self.data_file}: not a data.json lmlow wrote (an object with the "
                             "corpus's path and the fingerprint of each split); restore it or "
                             "delete it to accept any corpus")
        return want

    def _write_data(self, corpus: Path, fingerprint: dict, vectors: dict | None = None) -> None:
        """data.json; with the corpus's preparation record (prepare.json) when it has one, or
        the one recorded before (a corpus moved without its prepare.json is the same text),
        and the vectors' record, given or kept from before (a resume reads no vectors)."""
        from lmlow.data.corpus import corpus_preparation

        data = {"corpus": str(corpus), "fingerprint": fingerprint}
        prepared = corpus_preparation(corpus) or self.recorded_preparation()
        vectors = vectors or self.recorded_vectors()
        atomic_write_json(self.data_file, data | ({"prepared": prepared} if prepared else {})
                          | ({"vectors": vectors} if vectors else {}))

    def recorded_vectors(self) -> dict | None:
        """The vectors file this run read, as data.json records it (path, file, bytes,
        sha256); None for a run that read none, or one from before lmlow recorded them."""
        if not self.data_file.is_file():
            return None
        record = read_json(self.data_file).get("vectors")
        if record is not None and not (isinstance(record, dict) and
                                       isinstance(record.get("sha256"), str)):
            raise LmlowError(f"{self.data_file}: its \"vectors\" entry is not what lmlow writes "
                             "(an object with the vectors' path, size and sha256); restore it "
                             "or delete the entry")
        return record

    def recorded_preparation(self) -> dict | None:
        """The preparation record this run copied from its corpus (data.json for an LSTM run,
        config.json for an n-gram run), None where it has none."""
        from lmlow.data.tokenize import checked_preparation

        for source in (self.data_file, self.config):
            if source.is_file() and (record := read_json(source).get("prepared")) is not None:
                return checked_preparation(record, f"{source}: prepared")
        return None

    def preparation(self) -> dict:
        """How this run's corpus was tokenised and normalised, for new text read as that text
        was (`lmlow score --raw`, `predict --raw`); one line if the run has no record."""
        record = self.recorded_preparation() or self._recorded_corpus_preparation()
        if record is None:
            raise LmlowError(f"{self.path}: no record of how its corpus was tokenised (a corpus "
                             "not made by `lmlow prepare`, or a run from before lmlow kept "
                             "it): give the text tokenised as the corpus was, without --raw")
        return record

    def _recorded_corpus_preparation(self) -> dict | None:
        """For a run trained before runs kept the record: its corpus's prepare.json, where the
        corpus is still where data.json says and its splits are the ones the run was trained
        on (their fingerprint); None otherwise."""
        from lmlow.data.corpus import PREPARATION, corpus_preparation

        corpus = read_json(self.data_file).get("corpus") if self.data_file.is_file() else None
        if not corpus or not (Path(corpus) / PREPARATION).is_file() or \
                not self.recorded_fingerprint():          # a run from before fingerprints
            return None
        try:
            self.checked_corpus(Path(corpus))             # its splits, not others
        except LmlowError:
            return None
        return corpus_preparation(Path(corpus))

    @property
    def arpa(self) -> Path:
        return self.path / self.ARPA

    @property
    def binary(self) -> Path:
        return self.path / self.BINARY

    @property
    def lmplz_text(self) -> Path:
        """The training text as lmplz reads it (written under a temporary name)."""
        return self.path / self.LMPLZ_TEXT

    @property
    def lmplz_arpa(self) -> Path:
        """lmplz's model before ``<unk>`` is renamed (under a temporary name)."""
        return self.path / self.LMPLZ_ARPA

    @property
    def lmplz_work(self) -> Path:
        """The prefix of lmplz's own temporary files (``-T``)."""
        return self.path / self.LMPLZ_TMP

    @property
    def analysis_dir(self) -> Path:
        return self.path / self.ANALYSIS

    @property
    def bias_sweep_dir(self) -> Path:
        return self.path / self.BIAS_SWEEP

    def checkpoint(self, name: str) -> Path:
        if name not in CHECKPOINTS:
            raise LmlowError(f"--checkpoint {name!r}: choose {' or '.join(CHECKPOINTS)}")
        return self.path / f"{name}.pt"

    @property
    def best(self) -> Path:
        return self.checkpoint("best")

    @property
    def last(self) -> Path:
        return self.checkpoint("last")

    def evaluation_cache(self, checkpoint: str, split: str) -> Path:
        """Where ``lmlow report`` keeps a checkpoint's evaluation on a split."""
        return self.path / f"eval_{checkpoint}_{split}.json"

    # ---- state
    @property
    def kind(self) -> str | None:
        """``lstm``, ``ngram``, or None for a folder that holds no run (yet)."""
        if self.config.exists():
            try:
                kind = json.loads(self.config.read_text(encoding="utf-8")).get("kind", LSTM)
            except (ValueError, OSError, AttributeError):
                kind = None
            if kind in (LSTM, NGRAM):
                return kind
        if self.best.exists() or self.last.exists():
            return LSTM
        return None

    @property
    def finished(self) -> bool:
        return self.summary_file.exists()

    def vocabulary_digest(self) -> str | None:
        """What this run's perplexities are over: the hash of its word list (:meth:`Vocabulary.
        digest`), from ``vocab.txt``, else from ``summary.json`` (a committed run folder leaves
        ``vocab.txt`` out); None for a run that has neither (one from before lmlow kept it)."""
        from lmlow.data.vocab import Vocabulary

        if self.vocab.is_file():
            return Vocabulary.load(self.vocab).digest()
        digest = read_json(self.summary_file).get("vocabulary_digest") if self.finished else None
        return digest if isinstance(digest, str) else None

    # what the readers of summary.json use as numbers (report, sweep --status, claims.py)
    SUMMARY_NUMBERS = ("train_seconds", "best_valid_ppl", "tokens_per_s", "epochs", "steps",
                       "trainable", "frozen")

    def summary(self) -> dict:
        """summary.json, checked for the numbers its readers format and average: a value
        edited into another type is one line naming the file, not a traceback in a report."""
        data = read_json(self.summary_file)
        if "train_seconds" not in data:
            raise LmlowError(f"{self.summary_file}: lacks train_seconds, which lmlow writes in "
                             "every summary; edited or damaged?")
        for key in self.SUMMARY_NUMBERS:
            v = data.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise LmlowError(f"{self.summary_file}: {key} = {v!r} is not a number; edited "
                                 "or damaged?")
        return data

    def default_checkpoint(self) -> str:
        """``best``, or ``last`` for a run stopped before its first validation (no best yet).
        A run that validated has a best even when ``best.pt`` is gone: its last state, taken
        silently instead, was scored (and cached) under the best's name."""
        if self.best.exists() or not self.last.exists() or self.metrics():
            return "best"
        return "last"

    # what the readers of metrics.jsonl use as numbers (null: a NaN or infinity lmlow wrote)
    METRIC_NUMBERS = ("epoch", "step", "train_loss", "train_ppl", "valid_loss", "valid_ppl",
                      "lr", "base_lr", "elapsed", "tokens_per_s")

    def metrics(self) -> list[dict]:
        """The rows of metrics.jsonl (none before the first validation), each value the
        report, compare and plots read a number or null: a damaged one is refused with its
        line, not a TypeError where a curve is sorted or summed."""
        def wrong(row: dict) -> str | None:
            for key in self.METRIC_NUMBERS:
                value = row.get(key)
                if value is not None and (isinstance(value, bool)
                                          or not isinstance(value, (int, float))):
                    return f"{key} is {value!r}, not a number"
            return None
        return read_jsonl(self.metrics_file, wrong)

    def learning_curve(self) -> list[dict]:
        """The validation rows in update order, the last row of each update count."""
        by_step = {r["step"]: r for r in self.metrics() if "valid_loss" in r and "step" in r}
        return [by_step[s] for s in sorted(by_step)]

    def frequency(self) -> list[dict]:
        return read_jsonl(self.frequency_file)

    def require_folder(self) -> "RunDir":
        """This path as a folder: one line if it is missing, or a file (a run folder's own
        file, say, given in its place), not 'no such' for a file that is there."""
        if not self.path.is_dir():
            if self.path.exists():
                raise LmlowError(f"{self.path}: a file, not a run folder")
            raise LmlowError(f"{self.path}: no such run folder")
        return self

    def require(self, kind: str | None = None) -> "RunDir":
        """This folder, refused in one line unless it holds a run (of ``kind``)."""
        self.require_folder()
        found = self.kind
        if found is None:
            raise LmlowError(f"{self.path}: not a run folder (no config.json or checkpoint)")
        if kind is not None and found != kind:
            raise LmlowError(f"{self.path}: an {KIND_NAMES.get(found, found)} run, not an "
                             f"{KIND_NAMES.get(kind, kind)} run")
        return self

    # ---- changes
    def is_empty(self) -> bool:
        """No file but (perhaps) the lock: nothing the user or a run made."""
        return not self.path.exists() or all(p.name == self.LOCK for p in self.path.iterdir())

    def check_new(self, force: bool, hint: str = "") -> "RunDir":
        """Refuse (before any work) an output that is a file, or a folder with files in it
        unless ``force``; ``hint`` goes before "pass --force"."""
        if self.path.exists() and not self.path.is_dir():
            raise LmlowError(f"{self.path}: exists and is not a folder")
        self.refuse_corpus()
        self.check_unlocked()
        self.recover()
        if not force and not self.is_empty() and not self.never_started():
            raise LmlowError(f"{self.path} is not empty; {hint or 'pass '}--force to start over in it")
        return self

    def refuse_corpus(self) -> None:
        """A folder that holds a corpus (its training split, or the preparation record) is
        no run folder, even with --force: `lmlow train CORPUS --out CORPUS --force` wrote a
        run's files among the splits, and a later --force clears what it takes for its own."""
        held = corpus_file(self.path)
        if held:
            raise LmlowError(f"{self.path}: holds a corpus ({held}); a run needs a "
                             "folder of its own: give another --out")

    def lost_checkpoint(self) -> str | None:
        """What a run that validated (``metrics.jsonl``, ``best.pt``) but has no ``last.pt``
        holds, as words for a message: it cannot resume (e.g. a workspace restored without its
        ignored checkpoints, as 204 epochs of a paper-regime run were), and starting it over
        would delete that record. None for any other run, one killed before its first
        validation among them (nothing to lose)."""
        if self.finished or self.last.exists() or not self.path.is_dir() \
                or not (self.best.exists() or self.metrics_file.exists()):
            return None
        rows = [r for r in self.metrics() if "epoch" in r]
        if not rows:
            return "a best.pt" if self.best.exists() else None
        return f"{len(rows)} validation{'s' * (len(rows) != 1)} (to epoch {rows[-1]['epoch']})"

    def never_started(self) -> bool:
        """Only files lmlow writes before a run's first checkpoint (a run killed while it was
        being set up), or the pieces of an n-gram estimate that never finished (an n-gram run
        has nothing to resume): starting it again needs no --force. The folder must be
        lmlow's: its ``.lock`` (taken before anything is written) and, if there is one, a
        ``config.json`` of lmlow's; a folder of someone else's ``config.json`` and
        ``vocab.txt`` (a Hugging Face model's) was taken for one and its files replaced."""
        if self.best.exists() or self.last.exists() or self.finished or self.metrics_file.exists():
            return False
        if not self.lock_file.is_file() or self.config.exists() and not self._lmlow_config():
            return False
        early = {self.CONFIG, self.VOCAB, self.DATA, self.LOCK, self.ARPA, self.BINARY}
        return all(p.name in early or p.name.startswith((self.STASH, self.DISCARD))
                   or self.own_temporary(p.name)
                   or p.name.startswith(self.LMPLZ_TMP) for p in self.path.iterdir())

    def _lmlow_config(self) -> bool:
        """Whether config.json is one lmlow wrote (a training's or an n-gram's settings)."""
        try:
            data = json.loads(self.config.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(data, dict) and "corpus" in data and "unk_threshold" in data

    @classmethod
    def own_temporary(cls, name: str) -> bool:
        """``NAME.tmpPID`` of a file lmlow writes here (:func:`lmlow.files.temporary_path`;
        a temporary written atomically is ``NAME.tmpPID.tmpPID``); another ``*.tmp123`` (the
        user's) is not lmlow's to remove."""
        m = re.fullmatch(r"(.+?)(?:\.tmp\d+)+", name)
        stem = m.group(1) if m else ""
        return bool(m) and (
            stem in cls.OWN_FILES or stem in (cls.LMPLZ_TEXT, cls.LMPLZ_ARPA)
            or stem.startswith("eval_") and stem.endswith(".json"))

    def create(self) -> "RunDir":
        make_folder(self.path)
        return self

    def refuse_links(self) -> None:
        """Before writing into a folder lmlow may not have made: none of the names it writes
        or locks is a symbolic link or anything but a regular file (one line otherwise)."""
        for name in (*self.OWN_FILES, self.LOCK):
            refuse_link(self.path / name)

    # ---- who trains this run
    @property
    def lock_file(self) -> Path:
        return self.path / self.LOCK

    def locked_by(self) -> str | None:
        """``pid P on HOST`` if a live process holds this run's lock, else None."""
        if not self.lock_file.exists() or self.lock_file.resolve() in _HELD:
            return None
        try:                                          # read-only: works in a read-only folder
            f = os.fdopen(os.open(self.lock_file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK),
                          encoding="utf-8", errors="replace")
        except OSError:
            return None
        with f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return f.read().strip() or "another process"
            fcntl.flock(f, fcntl.LOCK_UN)
        return None

    def check_unlocked(self) -> None:
        """Refuse (exit 75, a sweep's "running elsewhere") a run another process trains."""
        owner = self.locked_by()
        if owner:
            raise self._locked(owner)

    def _locked(self, owner: str) -> "RunLocked":
        return RunLocked(f"{self.path}: being trained by {owner} (lock {self.lock_file}); "
                         "wait for it to end or stop it")

    @contextmanager
    def lock(self):
        """Hold the run's lock (``flock`` on ``.lock``) while training it: a second trainer (or
        a sweep task) on the same run is refused in one line. The kernel releases the lock when
        its process dies, so a killed run leaves no stale lock. A folder created only for the
        lock is removed again if nothing else was written into it."""
        created = not self.path.exists()
        self.create()
        self.refuse_links()
        f = open_own(self.lock_file, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            f.seek(0)
            owner = f.read().strip() or "another process"
            f.close()
            if e.errno not in (errno.EACCES, errno.EAGAIN):
                raise LmlowError(f"{self.lock_file}: cannot lock ({e.strerror})") from None
            raise self._locked(owner) from None
        key = self.lock_file.resolve()
        _HELD.add(key)
        try:                   # unbuffered writes: a full disk fails here, in one line, and
            #                    leaves nothing for close() to flush (and fail on) again
            os.ftruncate(f.fileno(), 0)
            try:
                os.write(f.fileno(), f"pid {os.getpid()} on {socket.gethostname()} since "
                         f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            except OSError as e:
                raise LmlowError(f"{self.lock_file}: cannot write ({e.strerror})") from None
            yield self
        finally:
            _HELD.discard(key)
            os.ftruncate(f.fileno(), 0)
            fcntl.flock(f, fcntl.LOCK_UN)
            f.close()
            if created and self.is_empty():
                shutil.rmtree(self.path, ignore_errors=True)

    # ---- replacing a run safely
    @contextmanager
    def replacing(self):
        """Write a new run here: lmlow's files of an earlier run are moved aside first and
        deleted only when the block succeeds; if it fails, the new files are removed and the
        old ones put back, so a failed command leaves the folder as it found it (and removes
        a folder it created)."""
        created = not self.path.exists()
        self.create()
        stash = self.path / f"{self.STASH}-{os.getpid()}"
        own = self._own_paths()
        moved = not own                  # every earlier file aside: the new run may write
        try:
            if own:              # inside the try: a signal halfway through moves them back
                stash.mkdir()
                for p in own:
                    os.replace(p, stash / p.name)
                (stash / self.MOVED).touch()
                moved = True
            yield self
        except BaseException:
            self._put_back(stash, moved)
            if created and self.is_empty():
                shutil.rmtree(self.path, ignore_errors=True)
            raise
        if stash.exists():       # renamed first: a kill while deleting leaves no "stash"
            discard = self.path / f"{self.DISCARD}-{os.getpid()}"
            os.replace(stash, discard)
            shutil.rmtree(discard, ignore_errors=True)

    MOVED = ".moved"     # in a stash: every file of the earlier run is in it
    DISCARD = ".discarded"   # a stash whose replacement succeeded, being deleted

    def _put_back(self, stash: Path, moved: bool) -> None:
        """The new run's files removed and the earlier run's back from ``stash`` (if it has
        one). Until every earlier file was moved aside (``moved``; ``.moved`` in the stash)
        the new run has written nothing, and what lmlow's is in the folder is the earlier
        run's, not yet moved: kept."""
        if moved:
            self.clear()
        if not stash.is_dir():
            return
        for p in stash.iterdir():
            if p.name != self.MOVED and not (self.path / p.name).exists():
                os.replace(p, self.path / p.name)
        shutil.rmtree(stash, ignore_errors=True)

    def recover(self) -> None:
        """:meth:`recover_stash` under the run's lock (taken here unless this process holds
        it), if a killed `train --force` left an earlier run set aside: what every command
        that decides from the folder's files does first."""
        if self._orphaned_stashes():
            if self.lock_file.exists() and self.lock_file.resolve() in _HELD:
                self.recover_stash()
            else:
                with self.lock():
                    self.recover_stash()

    def recover_stash(self) -> bool:
        """Put back an earlier run that ``train --force`` had moved aside (``.replaced-PID``)
        when its process died (SIGKILL, a power cut) before the new run's first checkpoint:
        the new run's first files go and the earlier run's come back, as if the command had
        never run. (Once the new run had its first checkpoint the stash is renamed
        ``.discarded-PID`` before it is deleted: that one is never put back.) Call it under
        the run's lock. Returns whether a run was put back."""
        stashes = self._orphaned_stashes()
        if not stashes:
            return False
        # one, but for a second killed --force over the first: its stash holds the first's
        # unstarted files; the earlier run (with its last.pt) comes back, the others go
        first, *others = sorted(stashes, key=lambda p: not (p / self.last.name).exists())
        self._put_back(first, (first / self.MOVED).exists())
        for stash in others:
            shutil.rmtree(stash, ignore_errors=True)
        return True

    def _orphaned_stashes(self) -> list[Path]:
        """``.replaced-PID`` folders whose process no longer runs."""
        if not self.path.is_dir():
            return []
        return [p for p in self.path.glob(f"{self.STASH}-*") if p.is_dir() and not
                p.is_symlink() and re.fullmatch(re.escape(self.STASH) + r"-\d+", p.name)
                and not pid_alive(int(p.name.rpartition("-")[2]))]

    def remove_stale_temporaries(self) -> list[Path]:
        """Delete ``*.tmpPID`` files and discarded stashes left by processes that no longer
        run (an earlier run set aside, ``.replaced-PID``, is put back instead:
        :meth:`recover_stash`)."""
        return remove_if_owner_gone([*(p for p in self.path.glob("*.tmp[0-9]*")
                                       if self.own_temporary(p.name)),
                                     *self.path.glob(f"{self.DISCARD}-*")])

    def _own_paths(self) -> list[Path]:
        if not self.path.is_dir():
            return []
        own = [self.path / n for n in (*self.OWN_FILES, *self.OWN_FOLDERS)]
        own += [p for g in self.OWN_GLOBS for p in self.path.glob(g)]
        own += [p for p in self.path.glob("*.tmp[0-9]*") if self.own_temporary(p.name)]
        return [p for p in dict.fromkeys(own) if p.exists()]

    def clear(self, keep: tuple = ()) -> None:
        """Remove everything lmlow wrote here (for --force), so no file of an earlier run
        (a stale frequency.jsonl, a checkpoint of another kind) survives into the new one;
        ``keep``: the new run's files already made (temporaries about to be renamed)."""
        kept = {Path(p) for p in keep}
        for p in self._own_paths():
            if p not in kept:
                shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)


class RunLocked(LmlowError):
    """Another live process is training this run (a sweep skips it as running elsewhere)."""

    exit_code = 75          # EX_TEMPFAIL: try again later

