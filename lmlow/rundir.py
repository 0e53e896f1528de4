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

import json
import shutil
from pathlib import Path

from lmlow.errors import LmlowError
from lmlow.files import read_json, read_jsonl

LSTM, NGRAM = "lstm", "ngram"
CHECKPOINTS = ("best", "last")


class RunDir:
    """Paths, kind and state of one run folder; creating it and clearing it for --force."""

    CONFIG, VOCAB, METRICS, SUMMARY = "config.json", "vocab.txt", "metrics.jsonl", "summary.json"
    FREQUENCY = "frequency.jsonl"
    ARPA, BINARY = "model.arpa", "model.bin"
    ANALYSIS, BIAS_SWEEP = "analysis", "bias-sweep"
    # everything lmlow itself writes here: what --force clears (other files are left alone)
    OWN_FILES = (CONFIG, VOCAB, METRICS, SUMMARY, FREQUENCY, ARPA, BINARY, "best.pt", "last.pt",
                 "done")
    OWN_GLOBS = ("eval_*.json", "*.tmp[0-9]*", "lmplz-tmp-*", "train.lmplz.txt*", "model.lmplz.arpa*")
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
    def arpa(self) -> Path:
        return self.path / self.ARPA

    @property
    def binary(self) -> Path:
        return self.path / self.BINARY

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

    def summary(self) -> dict:
        return read_json(self.summary_file)

    def default_checkpoint(self) -> str:
        """``best``, or ``last`` for a run stopped before its first validation."""
        return "last" if not self.best.exists() and self.last.exists() else "best"

    def metrics(self) -> list[dict]:
        """The rows of metrics.jsonl (none before the first validation)."""
        return read_jsonl(self.metrics_file)

    def learning_curve(self) -> list[dict]:
        """The validation rows in update order, the last row of each update count."""
        by_step = {r["step"]: r for r in self.metrics() if "valid_loss" in r and "step" in r}
        return [by_step[s] for s in sorted(by_step)]

    def frequency(self) -> list[dict]:
        return read_jsonl(self.frequency_file)

    def require(self, kind: str | None = None) -> "RunDir":
        """This folder, refused in one line unless it holds a run (of ``kind``)."""
        if not self.path.is_dir():
            raise LmlowError(f"{self.path}: no such run folder")
        found = self.kind
        if found is None:
            raise LmlowError(f"{self.path}: not a run folder (no config.json or checkpoint)")
        if kind is not None and found != kind:
            raise LmlowError(f"{self.path}: an {found} run, not an {kind} run")
        return self

    # ---- changes
    def is_empty(self) -> bool:
        return not self.path.exists() or not any(self.path.iterdir())

    def check_new(self, force: bool, hint: str = "") -> "RunDir":
        """Refuse (before any work) an output that is a file, or a folder with files in it
        unless ``force``; ``hint`` goes before "pass --force"."""
        if self.path.exists() and not self.path.is_dir():
            raise LmlowError(f"{self.path}: exists and is not a folder")
        if not force and not self.is_empty():
            raise LmlowError(f"{self.path} is not empty; {hint or 'pass '}--force to start over in it")
        return self

    def create(self) -> "RunDir":
        if self.path.exists() and not self.path.is_dir():
            raise LmlowError(f"{self.path}: exists and is not a folder")
        self.path.mkdir(parents=True, exist_ok=True)
        return self

    def clear(self) -> None:
        """Remove everything lmlow wrote here (for --force), so no file of an earlier run
        (a stale frequency.jsonl, a checkpoint of another kind) survives into the new one."""
        if not self.path.is_dir():
            return
        for name in self.OWN_FILES:
            (self.path / name).unlink(missing_ok=True)
        for pattern in self.OWN_GLOBS:
            for p in self.path.glob(pattern):
                shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
        for name in self.OWN_FOLDERS:
            shutil.rmtree(self.path / name, ignore_errors=True)
