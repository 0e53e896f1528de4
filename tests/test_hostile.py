"""Run folders lmlow did not make are untrusted (issue 26): no write through a symbolic link
planted where lmlow keeps its files, no read that hangs on a FIFO; sweep run names cannot
leave the sweep folder; values in a generated SLURM script cannot run as shell lines."""
import os
import subprocess
import sys

import pytest
from conftest import lmlow


@pytest.fixture(scope="module")
def stopped_run(speech_corpus, tmp_path_factory):
    """A run stopped after 2 updates (its last.pt resumes it)."""
    run = tmp_path_factory.mktemp("runs") / "r"
    lmlow("train", speech_corpus, "--preset", "tiny", "--max-steps", "2", "--out", run, check=True,
          cache=tmp_path_factory.getbasetemp() / "cache")
    return run


def copy_run(run, dest):
    import shutil
    shutil.copytree(run, dest, ignore=shutil.ignore_patterns(".lock"))
    return dest


@pytest.mark.parametrize("name", [".lock", "metrics.jsonl", "config.json", "last.pt"])
def test_resume_never_writes_through_a_planted_link(name, stopped_run, tmp_path):
    """`.lock -> victim` used to truncate the victim (the lock was opened with a+ and
    truncated); `metrics.jsonl -> victim` got rows appended. Now: one line, victim intact."""
    run = copy_run(stopped_run, tmp_path / "r")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    if name == "last.pt":                    # a link to the run's own checkpoint, elsewhere
        real = tmp_path / "elsewhere.pt"
        (run / "last.pt").rename(real)
        victim = real
    else:
        (run / name).unlink(missing_ok=True)
    before = victim.read_bytes()
    os.symlink(victim, run / name)
    r = lmlow("train", "--resume", run, "--max-steps", "4")
    assert r.returncode == 1 and "symbolic link" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert victim.read_bytes() == before and os.path.islink(run / name)


def test_a_fifo_checkpoint_is_refused_not_read(stopped_run, tmp_path):
    """`best.pt` as a FIFO used to hang `lmlow eval` forever."""
    run = copy_run(stopped_run, tmp_path / "r")
    for name in ("best.pt", "last.pt"):
        (run / name).unlink(missing_ok=True)
        os.mkfifo(run / name)
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "eval", str(run)], capture_output=True,
                       text=True, timeout=120, env={**os.environ})
    assert r.returncode == 1 and "not a regular file" in r.stderr and "Traceback" not in r.stderr
