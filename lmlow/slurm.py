"""``lmlow sweep --executor slurm``: a sweep as SLURM job arrays, one task per run folder.

SLURM's own commands (``sbatch``, ``squeue``, ``scancel``, ``scontrol``) are called directly,
not through a library such as submitit: the job script is a plain shell script in the sweep
folder that the user can read, edit and submit again, a task is an ordinary ``lmlow train``
(so ``--dry-run`` and the local executor run the very same commands), and nothing is pickled.

The run folders stay the single source of truth: a task trains one run folder (new, or
resumed from its ``last.pt``), a finished run is skipped, and the run folder's lock keeps two
tasks from training one run. What SLURM adds is kept in ``SWEEP/slurm/``:

- ``array-STAMP.sh`` and ``array-STAMP.runs``: each submission's job script and its task list
  (task i trains the i-th run folder of the list);
- ``jobs.json``: the submitted array jobs (job id, list, time);
- ``outcomes/RUN.json``: how each run's last task ended (job, node, exit status);
- and ``SWEEP/logs/``: ``RUN.log`` (the training's output, every attempt appended) and
  ``slurm-JOB_TASK.out`` (the task's own).

Preemption and time limits: SIGTERM (a preemption, ``scontrol requeue``, ``scancel``) is passed
to the training, which finishes its update, saves ``last.pt`` and exits; a requeued task then
resumes it. The job asks for SIGUSR1 ``--grace`` seconds before its time limit; on it the task
saves the same way and requeues itself, so a run longer than the partition's limit continues in
the next allocation.
"""
from __future__ import annotations

import getpass
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import typing
from dataclasses import dataclass
from pathlib import Path

from lmlow.config import OutOfRange, build_config, check_values, setting
from lmlow.errors import LmlowError
from lmlow.external import find_program, run_program
from lmlow.files import (append_jsonl, atomic_write_bytes, atomic_write_json, atomic_write_text,
                         missing_parents, read_json, remove_if_empty)
from lmlow.rundir import RunDir
from lmlow.sweepdir import SweepDir

LMLOW = [sys.executable, "-m", "lmlow.cli"]


@dataclass
class SlurmOptions:
    """What a cluster user sets for every task of the array (each task trains one run); the
    `lmlow sweep` flags of its SLURM group are generated from these fields."""
    partition: str | None = setting(None, "partition (sbatch --partition)")
    time: str | None = setting(None, "time limit per task, SLURM's format (MM, HH:MM:SS, "
                               "D-HH:MM:SS; e.g. 4:00:00); a run that needs longer saves and "
                               "requeues itself before it")
    gpus_per_run: int = setting(0, "GPUs per task (--gres=gpu:N); more than 1 trains with "
                                "--nproc N (DDP); at most the GPUs of a node", metavar="N")
    cpus_per_run: int | None = setting(None, "CPU cores per task (--cpus-per-task; also the "
                                       "run's --threads, split between its --nproc "
                                       "processes); at most the cores of a node (none: the "
                                       "partition's)", metavar="N")
    mem: str | None = setting(None, "memory per task, a number with K, M, G or T (e.g. 16G)")
    array_parallelism: int | None = setting(None, "at most N tasks at once (the array's %%N "
                                            "throttle; none: no limit)", metavar="N")
    account: str | None = setting(None, "account to charge (sbatch --account)")
    qos: str | None = setting(None, "quality of service (sbatch --qos)")
    sbatch_args: list[str] = setting((), "an extra sbatch option for the job script, e.g. "
                                     "--sbatch-arg=--constraint=a100 (repeatable)",
                                     flag="--sbatch-arg", metavar="ARG", append=True)
    setup: list[str] = setting((), "a shell line run before each task, e.g. 'module load cuda' "
                               "or 'source venv/bin/activate' (repeatable)",
                               flag="--slurm-setup", metavar="LINE", append=True)
    grace: int = setting(180, "seconds of warning before the time limit (SIGUSR1: the run "
                         "saves and requeues); at most a quarter of --time", metavar="S")
    RANGES: typing.ClassVar[dict[str, str]] = {
        "gpus_per_run": "[0, inf)", "cpus_per_run": "[1, inf)", "array_parallelism": "[1, inf)",
        "grace": "[0, inf)"}

    def validate(self) -> "SlurmOptions":
        """Every value in its range and safe in a job script: one line naming the flag."""
        check_values(self)
        if self.time:
            minutes(self.time)
        if self.mem and not re.fullmatch(r"[1-9][0-9]*[KMGT]?", str(self.mem)):
            raise OutOfRange("mem", self.mem, repr(self.mem), "expected a number with an "
                             "optional unit K, M, G or T (SLURM's format, e.g. 16G)")
        for arg in self.sbatch_args:
            _safe("--sbatch-arg", arg, key="sbatch_args")
        for line in self.setup:                  # the user's own shell lines: one line each
            _safe("--slurm-setup", line, quotes_ok=True, key="setup")
        return self


_HINT = ("--executor slurm needs SLURM's client commands (on a login node of the cluster, or "
         "`sh tools/slurm_local.sh start` for a local test cluster)")


def _program(name: str) -> str:
    return find_program(name, _HINT)


def _run(cmd: list[str]) -> str:
    return run_program(cmd, Path(cmd[0]).name).stdout


# --------------------------------------------------------------------------- the queue

def jobs(out: Path) -> list[dict]:
    """The job arrays submitted (``slurm/jobs.json``); one line naming the file if a row is
    not what lmlow writes (a KeyError or TypeError in --status, a new submission, --cancel)."""
    f = SweepDir(out).jobs_file
    rows = read_json(f, rows=True) if f.exists() else []
    for row in rows:
        if not (isinstance(row.get("job"), (str, int)) and not isinstance(row["job"], bool)
                and isinstance(row.get("runs"), str) and "/" not in row["runs"]
                and row["runs"] not in ("", ".", "..")):
            raise LmlowError(f"{f}: {str(row)[:60]} is not a submitted job as lmlow records one "
                             "(job, runs file); damaged or edited?")
    return rows


def queued(out: Path) -> dict[str, dict]:
    """The sweep's tasks that SLURM still holds: run folder -> {job, state, node, reason}."""
    submitted = jobs(out)
    if not submitted:
        return {}
    lists = {str(j["job"]): (SweepDir(out).slurm / j["runs"]).read_text().split() for j in submitted}
    text = _run([_program("squeue"), "-h", "-r", "-u", getpass.getuser(),
                 "-o", "%F|%K|%T|%N|%r"])
    found = {}
    for line in text.splitlines():
        array, task, state, node, reason = (line.split("|") + [""] * 5)[:5]
        folders = lists.get(array)
        if folders is None or not task.isdigit() or int(task) >= len(folders):
            continue
        found[folders[int(task)]] = {"job": f"{array}_{task}", "state": state.lower(),
                                     "node": node, "reason": reason}
    return found


# --------------------------------------------------------------------------- submitting

TIME_FORMAT = re.compile(r"(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?|(\d+)(?::(\d+)(?::(\d+))?)?")


def minutes(limit: str) -> float | None:
    """A SLURM time limit (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in minutes; None
    for UNLIMITED/INFINITE. Anything else (-5, 1:2:3:4, 1e3, nan) is refused here, not by
    sbatch after the script was written (it was written with them)."""
    text = str(limit).strip()
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    m = TIME_FORMAT.fullmatch(text)
    if not m:
        raise OutOfRange("time", limit, str(limit), "not a SLURM time limit (MM, MM:SS, "
                         "HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED)")
    d, dh, dm, ds, a, b, c = (int(x) if x else 0 for x in m.groups())
    if m.group(1) is not None:
        return d * 1440 + dh * 60 + dm + ds / 60
    if m.group(7) is not None:                          # HH:MM:SS
        return a * 60 + b + c / 60
    return a + b / 60                                   # MM or MM:SS


def grace(opts: SlurmOptions) -> int:
    """Seconds of warning before the time limit: ``opts.grace``, at most a quarter of it."""
    limit = minutes(opts.time) if opts.time else None
    return int(min(opts.grace, limit * 60 / 4)) if limit else opts.grace


def _safe(what: str, value, quotes_ok: bool = False, key: str | None = None) -> str:
    """A value for the job script: no newline or other control character (it would end the
    `#SBATCH` comment, or the setup line, and start a shell line of its own), and in an
    `#SBATCH` value no double quote or backslash (sbatch reads the value in double quotes);
    one line naming the option (``key``: its SlurmOptions field, for the Python API) otherwise."""
    text = str(value)
    bad = [c for c in text if ord(c) < 32 or ord(c) == 127 or (not quotes_ok and c in '"\\')]
    if bad:
        raise OutOfRange(key or what.lstrip("-").replace("-", "_"), value, repr(text),
                         f"contains {bad[0]!r}; a SLURM job script cannot carry it safely",
                         flag=what)
    return text


def _directive(flag: str, value, what: str | None = None) -> str:
    """``#SBATCH --flag="value"``: quoted, so a path with spaces stays one argument."""
    return f'#SBATCH --{flag}="{_safe(what or "--" + flag, value)}"'


def job_script(out: Path, runs_file: Path, n: int, opts: SlurmOptions) -> str:
    out = Path(out).resolve()
    opts.validate()
    throttle = f"%{opts.array_parallelism}" if opts.array_parallelism else ""
    lines = ["#!/bin/bash",
             _directive("job-name", f"lmlow-{out.name}", "--out"),
             f"#SBATCH --array=0-{n - 1}{throttle}",
             # sbatch expands %-patterns in the whole path (%x: the job's name): a % of the
             # folder's own is %% there, or the output went to another folder
             _directive("output", f"{str(SweepDir(out).logs).replace('%', '%%')}/slurm-%A_%a.out",
                        "--out"),
             "#SBATCH --open-mode=append",
             "#SBATCH --requeue",
             f"#SBATCH --signal=B:USR1@{grace(opts)}"]
    for flag, value in (("partition", opts.partition), ("time", opts.time),
                        ("cpus-per-task", opts.cpus_per_run), ("mem", opts.mem),
                        ("account", opts.account), ("qos", opts.qos)):
        if value:
            lines.append(_directive(flag, value))
    if opts.gpus_per_run:
        lines.append(f"#SBATCH --gres=gpu:{opts.gpus_per_run}")
    lines += [f"#SBATCH {a}" for a in opts.sbatch_args]
    lines += ["", "# one task trains one run folder of the list below (lmlow sweep --executor slurm)"]
    lines += opts.setup
    task = [*LMLOW, "sweep-task", str(out), str(runs_file.resolve()), "--gpus", str(opts.gpus_per_run)]
    if opts.cpus_per_run:
        task += ["--threads", str(opts.cpus_per_run)]
    # the plan's corpus and vectors are as given (relative, often): from the folder the sweep
    # was planned in, whichever folder the script is submitted from (--chdir, by hand)
    lines.append(f"cd {shlex.quote(os.getcwd())}")
    lines.append(f'exec {shlex.join(task)} "$SLURM_ARRAY_TASK_ID"')
    return "\n".join(lines) + "\n"


def submit(runs, out: Path, opts: SlurmOptions, log=print) -> str | None:
    """Submit the runs that are neither finished nor held by SLURM or a trainer, as one job
    array; returns its job id (None if nothing needed submitting)."""
    from lmlow.sweep import record_plan

    check(runs, Path(out), opts)
    _program("sbatch")
    out = Path(out)
    before = _Before(out)
    try:
        record_plan(runs, out)
        todo = _to_submit(runs, out, log)
        if not todo:
            return None
        sweep = SweepDir(out)
        sweep.slurm.mkdir(exist_ok=True)
        sweep.logs.mkdir(exist_ok=True)
        runs_file, script = sweep.array_files(time.strftime("%Y%m%d-%H%M%S"))
        atomic_write_text(runs_file, "".join(r.folder + "\n" for r in todo))
        atomic_write_text(script, job_script(out, runs_file, len(todo), opts))
        try:
            job = _run([_program("sbatch"), "--parsable", str(script)]).strip().split(";")[0]
        except BaseException:
            runs_file.unlink()
            script.unlink()
            raise
    except BaseException:
        before.restore()                 # a rejected submission leaves the folder as it was
        raise
    atomic_write_json(SweepDir(out).jobs_file, [*jobs(out), {
        "job": job, "script": script.name, "runs": runs_file.name, "tasks": len(todo),
        "submitted": time.strftime("%Y-%m-%d %H:%M:%S")}])
    log(f"submitted job array {job} ({len(todo)} tasks): {script}")
    return job


def check(runs, out: Path, opts: SlurmOptions) -> None:
    """What a submission (and its --dry-run) refuses before anything is written or queued:
    a value unsafe in the job script, and runs whose tasks would each fail on the cluster
    after queueing (:func:`check_runs`)."""
    job_script(Path(out), SweepDir(out).slurm / "check.runs", 1, opts)   # every value, first
    check_runs(runs, Path(out), opts)


def check_runs(runs, out: Path, opts: SlurmOptions) -> None:
    """--gpus-per-run N trains a run on N processes (one below 2), each with batch_size / N
    columns of its batch, and a started run resumes only on as many processes as began it
    (random streams and hidden states are per process: its last.pt records the count). A run
    whose batch N cannot split, or started on another count than N gives, was refused by
    every one of its tasks, on the cluster, after it had queued. Refused here, before
    anything is written, naming the run and the flags (from Python, the ``gpus_per_run``
    key); a finished run is not submitted, so not checked."""
    gpus = opts.gpus_per_run
    processes = max(gpus, 1)
    for run in runs:
        rundir = RunDir(out / run.folder)
        if rundir.finished:
            continue
        settings = dict(run.settings)
        batch = build_config(settings.pop("preset"), **settings).batch_size
        if batch % processes:
            raise OutOfRange("gpus_per_run", gpus, str(gpus), f"run {run.folder} has "
                             f"--batch-size {batch}, which {gpus} processes cannot split "
                             f"evenly; give a --batch-size that is a multiple of {gpus}, or "
                             "another --gpus-per-run")
        if rundir.last.exists() and (began := _processes(rundir.last)) != processes:
            give = began if began > 1 else "0 or 1"
            raise OutOfRange("gpus_per_run", gpus, str(gpus), f"run {run.folder} was started "
                             f"by {began} training process{'es' * (began != 1)} ({rundir.last}) "
                             f"and resumes only on as many (random streams and hidden states "
                             f"are per process); give --gpus-per-run {give}, or plan the "
                             "sweep into another --out")


def _processes(last: Path) -> int:
    """How many training processes wrote ``last`` (torch, imported only for a started run)."""
    from lmlow.checkpoint import checkpoint_processes

    return checkpoint_processes(last)


def _to_submit(runs, out: Path, log) -> list:
    """The runs neither finished nor held by SLURM or a trainer."""
    split = SweepDir(out).split(runs, queued(out))
    log(split.line("queued or running").replace("to run", "to submit"))
    return split.todo


class _Before:
    """What a submission may change in the sweep folder (its plan, its slurm/ and logs/
    folders, the folder itself), to put back if sbatch refuses the job."""

    def __init__(self, out: Path):
        sweep = SweepDir(out)
        self.plan = sweep.plan_file
        self.plan_text = self.plan.read_bytes() if self.plan.is_file() else None
        self.created = [d for d in (sweep.slurm, sweep.logs) if not d.exists()]
        self.created += missing_parents(out)

    def restore(self) -> None:
        if self.plan_text is None:
            self.plan.unlink(missing_ok=True)
        else:
            atomic_write_bytes(self.plan, self.plan_text)
        remove_if_empty(self.created)


def cancel(out: Path, log=print) -> int:
    """Cancel the sweep's queued and running tasks (their runs keep their last.pt)."""
    ids = sorted({j["job"] for j in queued(out).values()})
    arrays = sorted({i.split("_")[0] for i in ids})
    if arrays:
        _run([_program("scancel"), *arrays])
    log(f"cancelled {len(ids)} tasks" + (f" of job array(s) {', '.join(arrays)}" if arrays else ""))
    return len(ids)


# --------------------------------------------------------------------------- one task

def run_task(out: Path, runs_file: Path, index: int, gpus: int = 0, threads: int | None = None) -> int:
    """Train the ``index``-th run folder of ``runs_file`` (a task of the array); the exit
    status of its ``lmlow train``. SIGTERM is passed on; SIGUSR1 (the time limit is near) too,
    and then the task requeues itself if the run is not finished."""
    from lmlow.sweep import command, load_plan

    out = Path(out)
    try:
        folders = Path(runs_file).read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError) as e:     # (a UnicodeDecodeError traceback)
        raise LmlowError(f"{runs_file}: not a list of run folders "
                         f"({getattr(e, 'strerror', None) or 'not UTF-8 text'})") from None
    if not 0 <= index < len(folders):
        raise LmlowError(f"{runs_file}: no task {index} (it lists {len(folders)} runs)")
    plan = {run.folder: run for run in load_plan(out) or []}
    if folders[index] not in plan:
        raise LmlowError(f"{SweepDir(out).plan_file}: no run {folders[index]} (the sweep was planned "
                         "again without it); nothing to train")
    run = plan[folders[index]]
    rundir = RunDir(out / run.folder)
    cmd = command(run, out, LMLOW)
    job = f"{os.environ.get('SLURM_ARRAY_JOB_ID', '?')}_{os.environ.get('SLURM_ARRAY_TASK_ID', index)}"
    if cmd is None:
        print(f"{run.folder}: {'finished' if rundir.finished else 'being trained elsewhere'}; nothing to do")
        return 0
    # the task's cores, shared by its processes (an explicit --threads is each process's, so
    # N processes of `--threads CORES` ran N times too many threads); on a resume too, so a
    # run submitted again with fewer cores does not keep the old count (--threads may change)
    if threads:
        cmd += ["--threads", str(max(1, threads // gpus) if gpus > 1 else threads)]
    if gpus > 1:
        cmd += ["--nproc", str(gpus)]
    with SweepDir(out).open_log(run.folder) as f:
        f.write(f"== slurm task {job} on {socket.gethostname()} at {time.strftime('%Y-%m-%d %H:%M:%S')}: "
                f"{shlex.join(cmd)}\n")
        f.flush()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        requeue = []

        def forward(signum, _frame):
            if signum == signal.SIGUSR1:
                requeue.append(True)
            proc.send_signal(signal.SIGTERM)

        for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):
            signal.signal(sig, forward)
        code = proc.wait()
    finished = rundir.finished
    sweep = SweepDir(out)
    sweep.record_outcome(sweep.outcome(run.folder), job, code, finished)
    append_jsonl(sweep.history, {"run": run.folder, "job": job, "exit": code,
                                                "finished": finished})
    if requeue and not finished and "SLURM_JOB_ID" in os.environ:
        subprocess.run([_program("scontrol"), "requeue", job])
        print(f"{run.folder}: time limit near; saved and requeued {job}")
    return code


def task(out: Path, runs_file: Path, index: int, gpus: int = 0, threads: int | None = None) -> None:
    """``lmlow sweep-task``: :func:`run_task`, with a failed training as a one-line error
    whose exit status is the training's (128 + N for a signal)."""
    code = run_task(out, runs_file, index, gpus, threads)
    if code:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        e = LmlowError(f"the run's `lmlow train` {how}; its output is in {SweepDir(out).logs}/")
        e.exit_code = code if code > 0 else 128 - code
        raise e


# --------------------------------------------------------------------------- the executor

class Slurm:
    """``--executor slurm``: the runs as one job array; status from the queue and the tasks'
    outcomes; cancel through scancel."""

    def __init__(self, opts: SlurmOptions):
        self.opts = opts

    def dry_run(self, runs, out: Path) -> list[str]:
        """The `lmlow train` commands the tasks would run, after every check a submission
        makes (its script's values, the runs' batches and process counts)."""
        from lmlow.sweep import dry_run

        check(runs, Path(out), self.opts)
        return dry_run(runs, out)

    def run(self, runs, out: Path, log=print) -> str:
        if submit(runs, out, self.opts, log) is None:
            return "nothing to submit"
        return (f"`lmlow sweep {out} --status` shows progress; the same sweep command submits "
                "what is neither finished nor queued")

    @staticmethod
    def status(out: Path) -> list[dict]:
        from lmlow.sweep import status
        return status(out, queued(out) if jobs(out) else {})

    @staticmethod
    def cancel(out: Path, log=print) -> int:
        return cancel(out, log)


def executor_of(out: Path):
    """The executor a sweep folder was run with: SLURM if it has submitted jobs (a folder
    that is no sweep is refused here, so --cancel does not call it a local sweep)."""
    from lmlow.sweep import Local, require_plan
    require_plan(out)
    return Slurm(SlurmOptions()) if SweepDir(out).jobs_file.exists() else Local()

