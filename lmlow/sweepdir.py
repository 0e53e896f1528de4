"""The sweep folder, beside the run folder (:mod:`lmlow.rundir`), and the only module that knows
its file names.

A sweep folder holds one run folder per (configuration, seed), ``sweep.json`` (every run ever
planned into it), ``logs/RUN.log`` (each run's output), the report (``results.md``, ``.csv``,
``.json`` and ``curves.png``) and, for SLURM, ``slurm/`` (job scripts, ``jobs.json``, each
task's outcome and ``history.jsonl``). The local and the SLURM executor ask it the same
question, which runs are finished, busy or still to do, and get the same answer. Knowing
both kinds of folder, it also refuses either (or a corpus) as a command's results folder.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lmlow.errors import LmlowError
from lmlow.rundir import RunDir, corpus_file


@dataclass
class Split:
    """A sweep's runs by state: finished, busy (a live trainer or the scheduler holds them)
    and to do (neither)."""
    finished: list
    busy: list
    todo: list

    def line(self, busy_as: str = "running elsewhere") -> str:
        total = len(self.finished) + len(self.busy) + len(self.todo)
        return (f"{total} runs, {len(self.finished)} finished, {len(self.busy)} {busy_as}, "
                f"{len(self.todo)} to run")


class SweepDir:
    """Paths and state of one sweep folder."""

    PLAN, LOGS, SLURM = "sweep.json", "logs", "slurm"
    JOBS, OUTCOMES, HISTORY = "jobs.json", "outcomes", "history.jsonl"
    RESULTS_MD, RESULTS_CSV, RESULTS_JSON, CURVES = ("results.md", "results.csv", "results.json",
                                                     "curves.png")

    def __init__(self, path: Path):
        self.path = Path(path)

    def __str__(self) -> str:
        return str(self.path)

    # ---- names
    @property
    def plan_file(self) -> Path:
        return self.path / self.PLAN

    @property
    def logs(self) -> Path:
        return self.path / self.LOGS

    def log(self, folder: str) -> Path:
        return self.logs / f"{folder}.log"

    def open_log(self, folder: str):
        """A run's log, opened for appending: made if need be, never through a symbolic
        link (of the log, or of the logs folder: the run's output went where they pointed)."""
        from lmlow.files import open_own, refuse_link_folder

        refuse_link_folder(self.logs)
        self.logs.mkdir(exist_ok=True)
        return open_own(self.log(folder), "a")

    def check_own_folders(self) -> None:
        """Before a sweep writes anything: the folders it keeps its files in (``logs``,
        ``slurm``, ``slurm/outcomes``) are folders or absent, never symbolic links (the run
        lists, job scripts, task outcomes and SLURM's own output went where a link pointed)."""
        from lmlow.files import refuse_link_folder

        for folder in (self.logs, self.slurm, self.slurm / self.OUTCOMES):
            refuse_link_folder(folder)
            if folder.exists() and not folder.is_dir():
                raise LmlowError(f"{folder}: exists and is not a folder, where lmlow keeps the "
                                 "sweep's own files; move it away")

    def run(self, folder: str) -> RunDir:
        return RunDir(self.path / folder)

    @property
    def slurm(self) -> Path:
        return self.path / self.SLURM

    @property
    def jobs_file(self) -> Path:
        return self.slurm / self.JOBS

    def outcome(self, folder: str) -> Path:
        """How a run's last SLURM task ended."""
        return self.slurm / self.OUTCOMES / f"{folder}.json"

    def local_outcome(self, folder: str) -> Path:
        """How a run's last training by the local executor ended, beside its log."""
        return self.logs / f"{folder}.json"

    def record_outcome(self, path: Path, job: str, code: int, finished: bool) -> None:
        """Write how a run's training ended (``path``: :meth:`outcome` or
        :meth:`local_outcome`): what `--status` shows of a failed run with its log's last
        lines. Never through a link made since the sweep began."""
        import socket
        import time

        from lmlow.files import atomic_write_json

        self.check_own_folders()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, {"job": job, "node": socket.gethostname(), "exit": code,
                                 "finished": finished, "time": time.strftime("%Y-%m-%d %H:%M:%S")})

    @property
    def history(self) -> Path:
        return self.slurm / self.HISTORY

    def array_files(self, stamp: str) -> tuple[Path, Path]:
        """The run list and job script of one submitted array."""
        return self.slurm / f"array-{stamp}.runs", self.slurm / f"array-{stamp}.sh"

    @property
    def results(self) -> tuple[Path, Path, Path, Path]:
        """results.md, results.csv, results.json, curves.png: what `lmlow report` writes."""
        return tuple(self.path / n for n in (self.RESULTS_MD, self.RESULTS_CSV,
                                             self.RESULTS_JSON, self.CURVES))

    # ---- state
    def split(self, runs: list, queued: dict | None = None) -> Split:
        """``runs`` (anything with ``.folder``) by state; ``queued``: the scheduler's runs."""
        queued = queued or {}
        finished = [r for r in runs if self.run(r.folder).finished]
        busy = [r for r in runs if r not in finished
                and (r.folder in queued or self.run(r.folder).locked_by())]
        return Split(finished, busy, [r for r in runs if r not in finished and r not in busy])

    def log_tail(self, folder: str, n: int = 2) -> list[str]:
        """The last ``n`` non-empty lines of a run's log (progress bars' carriage returns
        read as line ends)."""
        log = self.log(folder)
        if not log.exists():
            return []
        text = log.read_text(errors="replace").replace("\r", "\n")
        return [line for line in map(str.strip, text.splitlines()) if line][-n:]


def refuse_foreign_output(out: Path, command: str, corpus_ok: bool = False) -> None:
    """``command``'s --out when it is a folder of another kind: a corpus (unless the output
    is one, ``corpus_ok``), a run or a sweep. ``analyze``/``compare``/``bias-sweep`` wrote
    their tables and plots among a corpus's splits or a run's checkpoints, and ``unk`` its
    splits into a run folder, which a later train there then refused as a corpus."""
    path = Path(out)
    if not path.is_dir():
        return
    held = None if corpus_ok else corpus_file(path)
    run = RunDir(path)
    what = (f"holds a corpus ({held})" if held
            else "is a run folder" if run.kind or run.lock_file.exists()
            else "is a sweep folder" if (path / SweepDir.PLAN).exists() else None)
    if what:
        raise LmlowError(f"--out {out}: {what}; {command} writes into a folder of its own: "
                         "give another --out")


__all__ = ["Split", "SweepDir", "refuse_foreign_output"]
