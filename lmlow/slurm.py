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
from dataclasses import dataclass, field
from pathlib import Path

from lmlow.errors import LmlowError
from lmlow.external import find_program, run_program
from lmlow.files import append_jsonl, atomic_write_json, atomic_write_text, read_json
from lmlow.rundir import RunDir

DIR = "slurm"
LMLOW = [sys.executable, "-m", "lmlow.cli"]


@dataclass
class SlurmOptions:
    """What a cluster user sets for every task of the array (each task trains one run)."""
    partition: str | None = None
    time: str | None = None              # SLURM's format: MM, HH:MM:SS, D-HH...
    gpus_per_run: int = 0                # >1: the run trains with --nproc (DDP)
    cpus_per_run: int | None = None
    mem: str | None = None               # e.g. 16G
    array_parallelism: int | None = None # the %N throttle: at most N tasks at once
    account: str | None = None
    qos: str | None = None
    sbatch_args: list[str] = field(default_factory=list)   # extra `#SBATCH` options, verbatim
    setup: list[str] = field(default_factory=list)         # shell lines before the task
    grace: int = 180                     # seconds of warning before the time limit (SIGUSR1)


_HINT = ("--executor slurm needs SLURM's client commands (on a login node of the cluster, or "
         "`sh tools/slurm_local.sh start` for a local test cluster)")


def _program(name: str) -> str:
    return find_program(name, _HINT)


def _run(cmd: list[str]) -> str:
    return run_program(cmd, Path(cmd[0]).name).stdout


# --------------------------------------------------------------------------- the queue

def jobs(out: Path) -> list[dict]:
    f = Path(out) / DIR / "jobs.json"
    return read_json(f) if f.exists() else []


def queued(out: Path) -> dict[str, dict]:
    """The sweep's tasks that SLURM still holds: run folder -> {job, state, node, reason}."""
    submitted = jobs(out)
    if not submitted:
        return {}
    lists = {str(j["job"]): (Path(out) / DIR / j["runs"]).read_text().split() for j in submitted}
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

def minutes(limit: str) -> float | None:
    """A SLURM time limit (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in minutes."""
    try:
        days, _, rest = limit.rpartition("-")
        parts = [float(x) for x in rest.split(":")]
        if days:
            h, m, sec = (parts + [0, 0])[:3]
            return float(days) * 1440 + h * 60 + m + sec / 60
        if len(parts) == 3:
            return parts[0] * 60 + parts[1] + parts[2] / 60
        return parts[0] + (parts[1] / 60 if len(parts) == 2 else 0)
    except ValueError:
        raise LmlowError(f"--time {limit}: not a SLURM time limit (MM, HH:MM:SS or "
                         "D-HH:MM:SS)") from None


def grace(opts: SlurmOptions) -> int:
    """Seconds of warning before the time limit: ``opts.grace``, at most a quarter of it."""
    limit = minutes(opts.time) if opts.time else None
    return int(min(opts.grace, limit * 60 / 4)) if limit else opts.grace


def _safe(what: str, value, quotes_ok: bool = False) -> str:
    """A value for the job script: no newline or other control character (it would end the
    `#SBATCH` comment, or the setup line, and start a shell line of its own), and in an
    `#SBATCH` value no double quote or backslash (sbatch reads the value in double quotes);
    one line naming the option otherwise."""
    text = str(value)
    bad = [c for c in text if ord(c) < 32 or ord(c) == 127 or (not quotes_ok and c in '"\\')]
    if bad:
        raise LmlowError(f"{what} {text!r}: contains {bad[0]!r}; a SLURM job script cannot "
                         "carry it safely")
    return text


def _directive(flag: str, value, what: str | None = None) -> str:
    """``#SBATCH --flag="value"``: quoted, so a path with spaces stays one argument."""
    return f'#SBATCH --{flag}="{_safe(what or "--" + flag, value)}"'


def job_script(out: Path, runs_file: Path, n: int, opts: SlurmOptions) -> str:
    out = Path(out).resolve()
    if opts.mem and not re.fullmatch(r"[1-9][0-9]*[KMGT]?", str(opts.mem)):
        raise LmlowError(f"--mem {opts.mem!r}: expected a number with an optional unit K, M, G "
                         "or T (SLURM's format, e.g. 16G)")
    for arg in opts.sbatch_args:
        _safe("--sbatch-arg", arg)
    for line in opts.setup:                  # the user's own shell lines: one line each
        _safe("--slurm-setup", line, quotes_ok=True)
    throttle = f"%{opts.array_parallelism}" if opts.array_parallelism else ""
    lines = ["#!/bin/bash",
             _directive("job-name", f"lmlow-{out.name}", "--out"),
             f"#SBATCH --array=0-{n - 1}{throttle}",
             _directive("output", f"{out}/logs/slurm-%A_%a.out", "--out"),
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
    lines.append(f'exec {shlex.join(task)} "$SLURM_ARRAY_TASK_ID"')
    return "\n".join(lines) + "\n"


def submit(runs, out: Path, opts: SlurmOptions, log=print) -> str | None:
    """Submit the runs that are neither finished nor held by SLURM or a trainer, as one job
    array; returns its job id (None if nothing needed submitting)."""
    from lmlow.sweep import record_plan

    if opts.time:
        minutes(opts.time)       # a bad limit is refused before anything is written
    job_script(Path(out), Path(out) / DIR / "check.runs", 1, opts)   # every value, before writing
    _program("sbatch")
    out = Path(out)
    record_plan(runs, out)
    in_queue = queued(out)
    finished = [r for r in runs if RunDir(out / r.folder).finished]
    busy = [r for r in runs if r.folder in in_queue or RunDir(out / r.folder).locked_by()]
    todo = [r for r in runs if r not in finished and r not in busy]
    log(f"{len(runs)} runs: {len(finished)} finished, {len(busy)} queued or running, "
        f"{len(todo)} to submit")
    if not todo:
        return None
    (out / DIR).mkdir(exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    runs_file, script = out / DIR / f"array-{stamp}.runs", out / DIR / f"array-{stamp}.sh"
    atomic_write_text(runs_file, "".join(r.folder + "\n" for r in todo))
    atomic_write_text(script, job_script(out, runs_file, len(todo), opts))
    try:
        job = _run([_program("sbatch"), "--parsable", str(script)]).strip().split(";")[0]
    except LmlowError:
        runs_file.unlink()
        script.unlink()
        raise
    atomic_write_json(out / DIR / "jobs.json", [*jobs(out), {
        "job": job, "script": script.name, "runs": runs_file.name, "tasks": len(todo),
        "submitted": time.strftime("%Y-%m-%d %H:%M:%S")}])
    log(f"submitted job array {job} ({len(todo)} tasks): {script}")
    return job


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
    folders = Path(runs_file).read_text().split()
    if not 0 <= index < len(folders):
        raise LmlowError(f"{runs_file}: no task {index} (it lists {len(folders)} runs)")
    plan = {run.folder: run for run in load_plan(out) or []}
    if folders[index] not in plan:
        raise LmlowError(f"{out}/sweep.json: no run {folders[index]} (the sweep was planned "
                         "again without it); nothing to train")
    run = plan[folders[index]]
    rundir = RunDir(out / run.folder)
    cmd = command(run, out, LMLOW)
    job = f"{os.environ.get('SLURM_ARRAY_JOB_ID', '?')}_{os.environ.get('SLURM_ARRAY_TASK_ID', index)}"
    if cmd is None:
        print(f"{run.folder}: {'finished' if rundir.finished else 'being trained elsewhere'}; nothing to do")
        return 0
    if threads and "--resume" not in cmd:
        cmd += ["--threads", str(threads)]
    if gpus > 1:
        cmd += ["--nproc", str(gpus)]
    log = out / "logs" / f"{run.folder}.log"
    log.parent.mkdir(exist_ok=True)
    with open(log, "a") as f:
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
    (out / DIR / "outcomes").mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / DIR / "outcomes" / f"{run.folder}.json", {
        "job": job, "node": socket.gethostname(), "exit": code, "finished": finished,
        "time": time.strftime("%Y-%m-%d %H:%M:%S")})
    append_jsonl(out / DIR / "history.jsonl", {"run": run.folder, "job": job, "exit": code,
                                                "finished": finished})
    if requeue and not finished and "SLURM_JOB_ID" in os.environ:
        subprocess.run([_program("scontrol"), "requeue", job])
        print(f"{run.folder}: time limit near; saved and requeued {job}")
    return code


# --------------------------------------------------------------------------- status

def status(out: Path) -> list[dict]:
    """Every run of the sweep: finished, running (job, node), pending, failed (exit status,
    the log's last lines), stopped (resumable) or not submitted; from the run folders and
    the scheduler."""
    from lmlow.sweep import PLAN, load_plan

    out = Path(out)
    plan = load_plan(out)
    if plan is None:
        raise LmlowError(f"{out}: not a sweep folder (no {PLAN})")
    in_queue = queued(out) if jobs(out) else {}
    rows = []
    for run in plan:
        folder = run.folder
        rundir = RunDir(out / folder)
        row = {"run": folder, "state": "not submitted", "job": "", "node": "", "progress": "",
               "detail": ""}
        if rundir.last.exists() or rundir.finished:
            metrics = rundir.metrics()
            if metrics:
                row["progress"] = f"epoch {metrics[-1].get('epoch', 0):g}, step {metrics[-1].get('step', 0)}"
        outcome = out / DIR / "outcomes" / f"{folder}.json"
        ended = read_json(outcome) if outcome.exists() else None
        if rundir.finished:
            s = rundir.summary()
            ppl = s.get("best_valid_ppl")
            row.update(state="finished", detail=f"best valid ppl {ppl:.2f}" if ppl else "")
        elif folder in in_queue:
            q = in_queue[folder]
            row.update(state=q["state"], job=q["job"], node=q["node"],
                       detail=q["reason"] if q["state"] == "pending" else "")
        elif (holder := rundir.locked_by()):
            row.update(state="running", detail=f"outside this sweep's jobs: {holder}")
        elif ended and ended["exit"] > 0 and ended["exit"] not in (130, 143):   # not a signal
            row.update(state="failed", job=ended["job"], node=ended["node"],
                       detail=f"exit {ended['exit']}: " + " | ".join(_log_tail(out, folder)))
        elif rundir.last.exists():
            row.update(state="stopped", detail="resumable: run the sweep command again")
        rows.append(row)
    return rows


def _log_tail(out: Path, folder: str, n: int = 2) -> list[str]:
    log = out / "logs" / f"{folder}.log"
    if not log.exists():
        return []
    lines = [l.strip() for l in log.read_text(errors="replace").replace("\r", "\n").splitlines()]
    return [l for l in lines if l][-n:]
