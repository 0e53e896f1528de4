"""`lmlow sweep --executor slurm` against a real SLURM: a single-node cluster started on this
machine by tools/slurm_local.sh (root; Debian's slurmctld, slurmd and munge). Skipped, with
the reason, where that cluster cannot start."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("tools/slurm_local.sh needs root to start slurmd")
    env = {**os.environ, "LMLOW_SLURM_DIR": str(tmp_path_factory.mktemp("slurm")),
           "LMLOW_SLURM_PORT": "16917"}
    r = subprocess.run(["sh", str(ROOT / "tools" / "slurm_local.sh"), "start"], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"the local SLURM cluster did not start: {r.stderr.strip()[-300:]}")
    env["SLURM_CONF"] = r.stdout.strip().split("=", 1)[1]
    yield env
    subprocess.run(["sh", str(ROOT / "tools" / "slurm_local.sh"), "stop"], env=env)


def lmlow(env, *args, check=True):
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", *map(str, args)], env=env,
                       capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def metrics(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def wait(condition, seconds, what, env=None):
    """Poll ``condition`` for up to ``seconds``; on a timeout, say what SLURM's queue held."""
    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline, f"timed out waiting for {what}" + (
            f"; squeue: {squeue(env)}; scontrol: {jobs_detail(env)}" if env else "")
        time.sleep(0.5)


def jobs_detail(env):
    r = subprocess.run(["scontrol", "show", "job", "-o"], env=env, capture_output=True, text=True)
    return r.stdout[-1500:]


def squeue(env):
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T"], env=env, capture_output=True,
                         text=True).stdout
    return dict(line.split() for line in out.splitlines())


def test_a_slurm_sweep_with_a_requeued_task_ends_as_the_local_one(cluster, speech_corpus, tmp_path):
    env = {**cluster, "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"]}
    grid = tmp_path / "grid.toml"
    # the untied runs (the victim's) train 12 epochs, so that the requeue below, sent after
    # the first, finds the run still training on a fast machine (when it landed after the run
    # had finished, SLURM held the needless second attempt for its 2-minute requeue delay)
    grid.write_text("[runs.tied]\ntie = true\n[runs.untied]\ntie = false\nmax_epochs = 12\n")
    common = [speech_corpus, "--grid", grid, "--preset", "tiny", "--seeds", "1,2",
              "--max-epochs", "4"]
    local, sl = tmp_path / "local", tmp_path / "slurm"
    lmlow(env, "sweep", *common, "--out", local, "--jobs", "2")

    submitted = lmlow(env, "sweep", *common, "--out", sl, "--executor", "slurm",
                      "--cpus-per-run", "1", "--time", "20")
    assert "submitted job array" in submitted.stdout
    script = next((sl / "slurm").glob("array-*.sh")).read_text()
    assert "#SBATCH --array=0-3" in script and "#SBATCH --cpus-per-task=\"1\"" in script

    # preempt one task once it has saved an epoch: SLURM sends SIGTERM and queues it again
    victim = sl / "untied.seed1"
    wait(lambda: (victim / "metrics.jsonl").exists() and metrics(victim), 240, "a first epoch")
    job = json.loads((sl / "slurm" / "jobs.json").read_text())[0]["job"]
    task = (sl / "slurm" / json.loads((sl / "slurm" / "jobs.json").read_text())[0]["runs"]) \
        .read_text().split().index("untied.seed1")
    assert not (victim / "summary.json").exists(), "the victim finished before it was preempted"
    subprocess.run(["scontrol", "requeue", f"{job}_{task}"], env=env, check=True)

    # while it waits: the same command submits nothing, and the report says what is missing
    again = lmlow(env, "sweep", *common, "--out", sl, "--executor", "slurm", "--cpus-per-run", "1")
    assert "0 to submit" in again.stdout
    others = [sl / f for f in ("tied.seed1", "tied.seed2", "untied.seed2")]
    wait(lambda: all((r / "summary.json").exists() for r in others), 240, "the other runs")
    if not (victim / "summary.json").exists():
        status = lmlow(env, "sweep", sl, "--status").stdout
        assert status.count("| finished") == 3 and "untied.seed1" in status
        lmlow(env, "report", sl)
        assert "3 of 4 planned runs finished" in (sl / "results.md").read_text()

    wait(lambda: (victim / "summary.json").exists(), 400, "the requeued run")
    wait(lambda: not squeue(env), 60, "an empty queue", env)
    status = lmlow(env, "sweep", sl, "--status").stdout
    assert status.count("| finished") == 4 and "4 finished" in status

    for name in ("tied.seed1", "tied.seed2", "untied.seed1", "untied.seed2"):
        a, b = metrics(local / name), metrics(sl / name)
        assert [m["valid_ppl"] for m in b] == [m["valid_ppl"] for m in a], name
        steps = [m["step"] for m in b]
        assert steps == sorted(set(steps)), f"{name}: a metrics row twice"
    attempts = (sl / "logs" / "untied.seed1.log").read_text().count("== slurm task")
    assert attempts == 2
    assert "--resume" in (sl / "logs" / "untied.seed1.log").read_text().split("== slurm task")[2]
    lmlow(env, "report", sl)
    assert "Partial" not in (sl / "results.md").read_text()


def test_cancel_stops_the_tasks_and_the_runs_can_be_resumed(cluster, speech_corpus, tmp_path):
    env = {**cluster, "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"]}
    out = tmp_path / "sweep"
    r = lmlow(env, "sweep", speech_corpus, "--grid", "table1", "--preset", "tiny", "--out", out,
              "--executor", "slurm", check=False)
    assert r.returncode == 1 and "needs --embeddings" in r.stderr and not out.exists()
    grid = tmp_path / "two.toml"
    grid.write_text("[runs.a]\ntie = true\n[runs.b]\ntie = false\n")
    lmlow(env, "sweep", speech_corpus, "--grid", grid, "--preset", "tiny", "--max-epochs", "50",
          "--out", out, "--executor", "slurm", "--cpus-per-run", "1")
    wait(lambda: "running" in lmlow(env, "sweep", out, "--status").stdout, 120, "a running task")
    assert "cancelled 2 tasks" in lmlow(env, "sweep", out, "--cancel").stdout
    wait(lambda: not squeue(env), 120, "an empty queue")
    status = lmlow(env, "sweep", out, "--status").stdout
    assert "finished" not in status and "running" not in status and "pending" not in status


def test_the_python_api_submits_follows_and_cancels_a_slurm_sweep(cluster, speech_corpus,
                                                                  tmp_path, monkeypatch):
    """lmlow.fit_sweep(executor="slurm") submits the job array the command submits and returns
    at once; lmlow.sweep_status follows it; lmlow.cancel_sweep stops it."""
    import lmlow

    for key, value in cluster.items():
        monkeypatch.setenv(key, value)
    grid = tmp_path / "grid.toml"
    grid.write_text("[runs.short]\ntie = true\nmax_epochs = 2\n"
                    "[runs.long]\ntie = false\nmax_epochs = 50\n")
    out = tmp_path / "api"
    states = lmlow.fit_sweep(speech_corpus, out, grid, preset="tiny", executor="slurm",
                             slurm={"cpus_per_run": 1, "time": "20", "setup": ["echo ready"]},
                             quiet=True)
    assert [s["run"] for s in states] == ["short.seed1", "long.seed1"]
    assert all(s["state"] in ("pending", "running", "finished") and s["job"]
               for s in states), states
    script = next((out / "slurm").glob("array-*.sh")).read_text()
    assert "#SBATCH --array=0-1" in script and '#SBATCH --time="20"' in script
    assert "\necho ready\n" in script

    state = lambda run: {s["run"]: s["state"] for s in lmlow.sweep_status(out)}[run]  # noqa: E731
    wait(lambda: state("short.seed1") == "finished", 240, "the short run", cluster)
    wait(lambda: state("long.seed1") == "running", 120, "the long run", cluster)
    lmlow.cancel_sweep(out, quiet=True)
    wait(lambda: not squeue(cluster), 120, "an empty queue", cluster)
    assert state("long.seed1") in ("stopped", "not submitted")
    assert state("short.seed1") == "finished"
    with pytest.raises(lmlow.LmlowError, match=r"^lmlow.fit_sweep: slurm: mem = '1X': expected"):
        lmlow.fit_sweep(speech_corpus, tmp_path / "bad", grid, preset="tiny", executor="slurm",
                        slurm={"mem": "1X"})
    assert not (tmp_path / "bad").exists()
