"""A sweep folder and its runs as lmlow trusts them: no table that mixes corpora or vectors,
no two runs in one folder, no write through a link or outside the sweep, a run trained
further no longer finished, damaged records named, and a failing sweep stops its trainings."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import lmlow

from lmlow.errors import LmlowError

GRID = """
[runs.standard]
tie = true
"""


def one_line_error(r, *words):
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


@pytest.fixture
def swept(speech_corpus, tmp_path):
    """A finished one-run sweep (seed 1) and the command that made it."""
    (tmp_path / "g.toml").write_text(GRID)
    args = ["sweep", speech_corpus, "--grid", tmp_path / "g.toml", "--out", tmp_path / "s",
            "--preset", "tiny", "--max-steps", "5", "--max-epochs", "1", "--threads", "1"]
    r = lmlow(*args)
    assert r.returncode == 0, r.stderr
    return tmp_path / "s", args


def test_a_sweep_that_plans_another_corpus_for_a_run_it_has_is_refused(swept, speech_corpus,
                                                                        tmp_path):
    """The same --out with another corpus (a different train.txt under another path) was
    accepted as 'the corpus moved': the new seeds trained on it and one table mixed both."""
    out, args = swept
    other = tmp_path / "other"
    shutil.copytree(speech_corpus, other)
    with open(other / "train.txt", "a") as f:
        f.write("one more line of text\n")
    plan = (out / "sweep.json").read_bytes()
    r = lmlow(*[other if a == speech_corpus else a for a in args], "--seeds", "1,2")
    one_line_error(r, "standard.seed1", "another corpus", "train.txt differs")
    assert (out / "sweep.json").read_bytes() == plan and not (out / "standard.seed2").exists()
    moved = tmp_path / "moved"                   # the same files elsewhere: the same run
    shutil.copytree(speech_corpus, moved)
    r = lmlow(*[moved if a == speech_corpus else a for a in args], "--dry-run")
    assert r.returncode == 0, r.stderr


def test_two_runs_that_would_share_a_folder_are_refused(tmp_path):
    from lmlow.sweep import plan

    with pytest.raises(LmlowError, match="share the folder standard.K1.seedN"):
        plan(tmp_path, tmp_path / "s", "unk", [1], "tiny", [], ["1", "01"], {})
    a, b = tmp_path / "a" / "v.txt", tmp_path / "b" / "v.txt"
    with pytest.raises(LmlowError, match="share the folder standard.v.seedN"):
        plan(tmp_path, tmp_path / "s", "pretrain", [1], "tiny", [str(a), str(b)], None, {})


def test_no_write_through_a_link_and_no_run_outside_the_sweep(swept, tmp_path):
    """A run's log that is a link took the training's output (appended to the file it
    pointed to); a run folder that is a link was trained through with --force; a plan row
    named ../escape trained a run outside the sweep folder."""
    out, args = swept
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / "logs" / "standard.seed2.log").symlink_to(victim)
    one_line_error(lmlow(*args, "--seeds", "2"), "standard.seed2.log", "symbolic link")
    assert victim.read_text() == "precious\n"
    (out / "logs" / "standard.seed2.log").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("mine\n")
    (out / "standard.seed3").symlink_to(elsewhere)
    one_line_error(lmlow(*args, "--seeds", "3"), "standard.seed3", "symbolic link")
    assert [p.name for p in elsewhere.iterdir()] == ["notes.txt"]
    (out / "standard.seed3").unlink()
    plan = json.loads((out / "sweep.json").read_text())
    (out / "sweep.json").write_text(json.dumps([{**plan[0], "name": "../escape"}]))
    one_line_error(lmlow("sweep", out, "--status"), "sweep.json", "not a run as lmlow plans")


def test_a_finished_run_trained_further_is_not_finished_until_it_ends(swept):
    """Killed while training past its old budget, it kept its summary.json: reports took it
    as finished (its best.pt newer than the numbers), and the sweep planned nothing for it."""
    out, _ = swept
    run = out / "standard.seed1"
    assert (run / "summary.json").exists()
    proc = subprocess.Popen([sys.executable, "-m", "lmlow.cli", "train", "--resume", str(run),
                             "--max-steps", "1000000", "--threads", "1", "--quiet"],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while (run / "summary.json").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 143, proc.stderr.read()
    assert not (run / "summary.json").exists() and (run / "last.pt").exists()
    r = lmlow("sweep", out, "--status")
    assert r.returncode == 0 and "stopped" in r.stdout, r.stdout


def test_resuming_from_a_checkpoint_without_the_training_state_is_one_line(swept):
    """best.pt copied over a lost last.pt: a KeyError traceback."""
    run = swept[0] / "standard.seed1"
    shutil.copy(run / "best.pt", run / "last.pt")
    one_line_error(lmlow("train", "--resume", run, "--max-steps", "50"),
                   "last.pt: a checkpoint without the training state")


def test_damaged_slurm_records_are_named_and_a_killed_task_is_failed(swept):
    """--status on an outcome or jobs.json lmlow did not write was a TypeError/KeyError; a
    task whose training was SIGKILLed (the OOM killer) read as 'stopped, resumable'."""
    from lmlow import slurm
    from lmlow.sweep import status
    from lmlow.sweepdir import SweepDir

    out, _ = swept
    sweep = SweepDir(out)
    (out / "standard.seed1" / "summary.json").unlink()     # a run that is not finished
    sweep.outcome("standard.seed1").parent.mkdir(parents=True)
    sweep.outcome("standard.seed1").write_text(json.dumps(
        {"job": "7_0", "node": "n1", "exit": -9, "finished": False}))
    row = status(out, {})[0]
    assert row["state"] == "failed" and row["detail"].startswith("killed by SIGKILL"), row
    for damaged in ({"exit": "x"}, {"exit": 3}):
        sweep.outcome("standard.seed1").write_text(json.dumps(damaged))
        with pytest.raises(LmlowError, match="not a task outcome as lmlow writes one"):
            status(out, {})
    for rows in ([{"job": "1"}], [{"job": "1", "runs": 5}], [{"job": "1", "runs": "../x"}]):
        sweep.jobs_file.write_text(json.dumps(rows))
        with pytest.raises(LmlowError, match="jobs.json: .* not a submitted job"):
            slurm.jobs(out)


@pytest.mark.parametrize("limit", ["-5", "1:2:3:4", "1e3", "nan", "-1-00:00:00"])
def test_a_malformed_time_limit_is_refused_before_the_script(limit):
    from lmlow.config import OutOfRange
    from lmlow.slurm import minutes

    with pytest.raises(OutOfRange):
        minutes(limit)


def test_the_job_script_runs_where_the_plan_was_made(tmp_path, monkeypatch):
    """The plan keeps the corpus as given (relative, often): a script submitted from another
    folder (--chdir, or by hand) trained no run ("no such corpus folder")."""
    import shlex

    from lmlow.slurm import SlurmOptions, job_script, minutes

    assert minutes("UNLIMITED") is None and minutes("1-02:30") == 1590
    monkeypatch.chdir(tmp_path)
    script = job_script(tmp_path / "s", tmp_path / "s" / "runs.txt", 2, SlurmOptions())
    lines = script.splitlines()
    assert lines[-2] == f"cd {shlex.quote(str(tmp_path))}" and lines[-1].startswith("exec ")


def test_a_sweep_that_fails_on_one_run_stops_the_others_it_started(speech_corpus, tmp_path):
    """An error starting the second run (its log cannot be opened) ended the sweep and left the
    first training running alone, orphaned."""
    (tmp_path / "g.toml").write_text(GRID + "\n[runs.untied]\ntie = false\n")
    out = tmp_path / "s"
    (out / "logs" / "untied.seed1.log").mkdir(parents=True)
    r = lmlow("sweep", speech_corpus, "--grid", tmp_path / "g.toml", "--out", out, "--preset",
              "tiny", "--max-steps", "1000000", "--threads", "1", "--jobs", "2")
    assert r.returncode == 1 and "untied.seed1.log" in r.stderr, r.stderr
    left = subprocess.run(["pgrep", "-f", "--", f"--out {out}/standard.seed1"], capture_output=True,
                          text=True).stdout.split()
    assert not left, "the first training still runs"
    if (out / "standard.seed1" / "last.pt").exists():      # stopped after its setup: saved
        assert not (out / "standard.seed1" / "summary.json").exists()


def test_a_config_files_preset_gives_way_to_the_flag_and_an_unknown_one_names_the_file(
        speech_corpus, tmp_path):
    (tmp_path / "c.toml").write_text('preset = "small"\n')
    run = tmp_path / "r"
    r = lmlow("train", speech_corpus, "--out", run, "--preset", "tiny", "--config",
              tmp_path / "c.toml", "--max-steps", "2", "--threads", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    from lmlow.config import PRESETS

    cfg = json.loads((run / "config.json").read_text())
    assert cfg["preset"] == "tiny" and cfg["emb_size"] == PRESETS["tiny"]["emb_size"]
    assert PRESETS["tiny"]["emb_size"] != PRESETS["small"]["emb_size"]
    (tmp_path / "n.toml").write_text('preset = "nope"\n')
    one_line_error(lmlow("train", speech_corpus, "--out", tmp_path / "n", "--config",
                         tmp_path / "n.toml"), "n.toml: preset = 'nope'")


def test_a_train_fraction_that_leaves_no_line_is_refused_before_the_sweep_writes(
        speech_corpus, tmp_path):
    """It made sweep.json and logs/, then failed its run; `lmlow train` refuses it before
    writing. The check from the counts agrees with the cut of the ids at the boundary."""
    from lmlow.data.corpus import Corpus, check_fraction, head_fraction

    corpus = Corpus(speech_corpus, show_progress=False)
    ids, eos = corpus.encode("train").ids, corpus.vocab.eos_id
    first_end = int((ids == eos).argmax())
    for cut in (first_end, first_end + 1):         # just short of the first line end, and at it
        fraction = (cut + 0.5) / len(ids)
        try:
            head_fraction(ids, fraction, eos)
            cut_ok = True
        except LmlowError:
            cut_ok = False
        try:
            check_fraction(speech_corpus, fraction)
            check_ok = True
        except LmlowError:
            check_ok = False
        assert check_ok == cut_ok == (cut > first_end)
    (tmp_path / "g.toml").write_text(GRID)
    r = lmlow("sweep", speech_corpus, "--grid", tmp_path / "g.toml", "--out", tmp_path / "s",
              "--preset", "tiny", "--train-fraction", "1e-9")
    one_line_error(r, "--train-fraction 1e-09 leaves no complete training line")
    assert not (tmp_path / "s").exists()


def test_a_flag_of_the_other_executor_is_refused_not_ignored(speech_corpus, tmp_path):
    """`--partition gpu --time 4:00:00 ...` without `--executor slurm` trained here, and
    `--jobs 4` with it did nothing: each is refused in one line naming the flags, nothing
    written."""
    (tmp_path / "g.toml").write_text(GRID)
    args = ("sweep", speech_corpus, "--grid", tmp_path / "g.toml", "--out", tmp_path / "s",
            "--preset", "tiny", "--max-steps", "1")
    one_line_error(lmlow(*args, "--partition", "gpu", "--time", "4:00:00", "--mem", "32G",
                         "--sbatch-arg=--constraint=a100"),
                   "--partition, --time, --mem, --sbatch-arg: SLURM settings need --executor "
                   "slurm")
    one_line_error(lmlow(*args, "--executor", "slurm", "--jobs", "4"),
                   "--jobs: runs at a time here, for --executor local", "--array-parallelism")
    assert not (tmp_path / "s").exists()


def fake_slurm(tmp_path):
    """(PATH, sbatch's record): an `sbatch` that notes its call and says job 4242, an empty
    `squeue`: SLURM as a submission sees it, without one."""
    bin_, calls = tmp_path / "bin", tmp_path / "sbatch.calls"
    bin_.mkdir()
    (bin_ / "sbatch").write_text(f"#!/bin/sh\necho \"$@\" >> '{calls}'\necho 4242\n")
    (bin_ / "squeue").write_text("#!/bin/sh\nexit 0\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    return f"{bin_}:/usr/bin:/bin", calls


def test_a_batch_that_gpus_per_run_cannot_split_is_refused_at_submission(speech_corpus,
                                                                        tmp_path):
    """--gpus-per-run 3 with the tiny preset's batch of 8: submitted, and every task failed on
    the cluster after it queued ("--batch-size 8 cannot be split evenly over --nproc 3").
    Refused now in one line naming the run and both flags: nothing written, sbatch not called."""
    path, calls = fake_slurm(tmp_path)
    (tmp_path / "g.toml").write_text(GRID)
    out = tmp_path / "s"
    args = ["sweep", speech_corpus, "--grid", tmp_path / "g.toml", "--preset", "tiny",
            "--out", out, "--executor", "slurm", "--gpus-per-run", "3"]
    env = {"PATH": path, "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"]}
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", *map(str, args)], env=env,
                       capture_output=True, text=True)
    one_line_error(r, "--gpus-per-run 3", "standard.seed1", "--batch-size 8")
    assert not out.exists() and not calls.exists()
    # its --dry-run printed the commands, as if the tasks would train (it made no check)
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", *map(str, args), "--dry-run"],
                       env=env, capture_output=True, text=True)
    one_line_error(r, "--gpus-per-run 3", "standard.seed1", "--batch-size 8")
    assert not out.exists() and not calls.exists()
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", *map(str, args), "--batch-size", "6"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "submitted job array 4242" in r.stdout, r.stderr


def test_a_started_run_submitted_again_on_another_process_count_is_refused(swept, tmp_path):
    """A run started by one process (here, killed after its checkpoint), submitted again with
    --gpus-per-run 2: queued, and its task failed on the cluster ("was written by 1 training
    process(es), and this resume has 2"); its --dry-run printed the command. Both refused
    now in one line naming the run, its count and the flag to give, nothing written, sbatch
    not called; --gpus-per-run 1 submits it."""
    out, args = swept
    (out / "standard.seed1" / "summary.json").unlink()      # as if killed after a checkpoint
    path, calls = fake_slurm(tmp_path)
    env = {"PATH": path, "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"]}
    args = [*map(str, args[:-2]), "--executor", "slurm"]     # (--threads: a local flag)
    plan = (out / "sweep.json").read_bytes()
    for extra in ([], ["--dry-run"]):
        r = subprocess.run([sys.executable, "-m", "lmlow.cli", *args, "--gpus-per-run", "2",
                            *extra], env=env, capture_output=True, text=True)
        one_line_error(r, "--gpus-per-run 2", "standard.seed1", "started by 1 training process ",
                       "give --gpus-per-run 0 or 1")
        assert (out / "sweep.json").read_bytes() == plan and not calls.exists()
        assert not (out / "slurm").exists()
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", *args, "--gpus-per-run", "1"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "submitted job array 4242" in r.stdout, r.stderr


def test_a_slurm_tasks_cores_are_shared_by_its_processes_new_or_resumed(speech_corpus,
                                                                        tmp_path):
    """--gpus-per-run 2 --cpus-per-run 8: each task trained with `--threads 8 --nproc 2`, two
    processes of 8 threads on 8 cores; and a resumed run was given no --threads, so one
    submitted again with fewer cores kept its old count. Now `--threads 4 --nproc 2`, both.
    (The corpus is gone when the tasks run, so each training stops at once: its command is
    what the run's log records.)"""
    path, _ = fake_slurm(tmp_path)
    corpus = tmp_path / "corpus"
    shutil.copytree(speech_corpus, corpus)
    (tmp_path / "g.toml").write_text(GRID + "\n[runs.untied]\ntie = false\n")
    out = tmp_path / "s"
    env = {"PATH": path, "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"]}
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "sweep", str(corpus), "--grid",
                        str(tmp_path / "g.toml"), "--preset", "tiny", "--out", str(out),
                        "--executor", "slurm", "--gpus-per-run", "2", "--cpus-per-run", "8"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (out / "untied.seed1").mkdir()
    (out / "untied.seed1" / "last.pt").write_bytes(b"started")     # a run to resume
    shutil.rmtree(corpus)
    script = next((out / "slurm").glob("array-*.sh"))
    for task in ("0", "1"):
        subprocess.run(["bash", str(script)], env={**env, "SLURM_ARRAY_TASK_ID": task},
                       capture_output=True, text=True)
    for run in ("standard.seed1", "untied.seed1"):
        line = (out / "logs" / f"{run}.log").read_text().split("\n")[0]
        assert line.endswith(" --threads 4 --nproc 2"), line
    assert "--resume" in (out / "logs" / "untied.seed1.log").read_text()


def test_new_seeds_planned_with_other_settings_are_refused_not_mixed_into_a_row(speech_corpus,
                                                                              tmp_path):
    """Seed 2 planned with another --lr and --hidden-size into a folder whose seed 1 has the
    first settings: both sweeps succeeded and the report averaged two experiments in one row.
    Refused (the sweep and its --dry-run) naming the run and the setting, nothing written; a
    new seed with the same settings and another budget (what --resume may change) joins."""
    (tmp_path / "g.toml").write_text(GRID)
    out = tmp_path / "s"
    args = ("sweep", speech_corpus, "--grid", tmp_path / "g.toml", "--out", out, "--preset",
            "tiny", "--max-steps", "3", "--threads", "1", "--lr", "0.003")
    assert lmlow(*args, "--seeds", "1").returncode == 0
    plan = (out / "sweep.json").read_bytes()
    for flags in ([], ["--dry-run"]):
        one_line_error(lmlow(*args, "--seeds", "2", "--lr", "0.5", "--hidden-size", "64", *flags),
                       f"{out / 'standard.seed2'}: the sweep plans hidden_size = 64, but "
                       "standard.seed1 of configuration standard in this folder's plan has "
                       "hidden_size = 48")
        assert (out / "sweep.json").read_bytes() == plan and not (out / "standard.seed2").exists()
    r = lmlow(*args, "--seeds", "2", "--max-steps", "4", "--dry-run")
    assert r.returncode == 0 and "standard.seed2" in r.stdout, r.stderr


def test_a_local_runs_failure_is_its_status_and_a_run_never_started_says_so(speech_corpus,
                                                                            tmp_path):
    """`sweep --status` of a local sweep read a failed run as 'not submitted' (only a SLURM
    task recorded how a run ended); the local executor records it too, so the row says
    failed, the exit status and the log's last lines, and a run it never started is 'not
    started'."""
    (tmp_path / "bad.txt").write_text("these are not vectors\n")
    (tmp_path / "g.toml").write_text(GRID + '[runs.pre]\ntie = false\ninit = ["glove"]\n')
    out = tmp_path / "s"
    r = lmlow("sweep", speech_corpus, "--grid", tmp_path / "g.toml", "--out", out, "--preset",
              "tiny", "--max-steps", "2", "--threads", "1", "--embeddings", tmp_path / "bad.txt")
    assert r.returncode == 1 and "1 runs failed (pre.seed1" in r.stderr, r.stderr
    status = lmlow("sweep", out, "--status")
    assert status.returncode == 0, status.stderr
    line = next(l for l in status.stdout.splitlines() if "pre.seed1" in l)
    error = (out / "logs" / "pre.seed1.log").read_text().strip().splitlines()[-1]
    assert "| failed" in line and "exit 1: " in line and error.strip() in line, (line, error)
    assert "| finished" in next(l for l in status.stdout.splitlines() if "standard.seed1" in l)
    shutil.rmtree(out / "standard.seed1")                 # as if never started
    (out / "logs" / "standard.seed1.log").unlink()
    (out / "logs" / "standard.seed1.json").unlink()
    line = next(l for l in lmlow("sweep", out, "--status").stdout.splitlines()
                if "standard.seed1" in l)
    assert "| not started" in line, line


def test_sweep_help_shows_the_defaults_its_runs_start_from():
    """A sweep's runs start from the small preset (its --dry-run prints --preset small), but
    its --help showed the paper preset's values: --lr 30.0, sgd, 750 epochs. It shows the
    small preset's now, and train's help the paper's as before."""
    from lmlow.config import PRESETS

    small = PRESETS["small"]
    sweep, train = (" ".join(lmlow(c, "--help").stdout.split()) for c in ("sweep", "train"))
    assert f"--lr LR learning rate (default: {small['lr']};" in sweep
    assert f"(default: {small['optimizer']};" in sweep and "(default: 30.0;" not in sweep
    assert "settings of every run (default: the small preset's values" in sweep
    assert "--lr LR learning rate (default: 30.0;" in train
