"""Training on several processes (PyTorch DDP over gloo, on the CPU, also on a machine with a
GPU: --device cpu): the same numbers as one process, exact resume, one set of files; too few
GPUs said before the launch; and the fp16 loss scaler's state across a resume."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from unittest import mock

import pytest
import torch
from conftest import cli, lmlow

from lmlow.checkpoint import load_checkpoint
from lmlow.errors import LmlowError
from lmlow.train import resume, run_command, train
from lmlow.config import build_config

NO_DROPOUT = ["--dropout", "0", "--dropouth", "0", "--dropouti", "0", "--dropoute", "0",
              "--wdrop", "0"]
# the comparisons are to 1e-5: in fp32, whatever `--precision auto` takes on this CPU (bf16 on
# AMX and AMD AVX-512 BF16 CPUs, whose rounding the two processes' sums would meet differently)
FP32 = ["--precision", "fp32"]


def metrics(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def weights(path):
    return load_checkpoint(path)["model"]


def torchrun(*args):
    """``torchrun --standalone --nproc-per-node 2 -m lmlow ARGS``, as a user types it."""
    env = {"PATH": "/usr/bin:/bin", "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"],
           "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc-per-node", "2", "-m", "lmlow", *map(str, args)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return r


@pytest.mark.parametrize("preset", ["tiny", "transformer-tiny"])
def test_two_processes_equal_one_process_with_the_whole_batch(preset, speech_corpus, tmp_path):
    """Dropouts off, so nothing random: 2 ranks x 4 columns must follow 1 process x 8
    columns (same losses at every update, same weights), with sharded validation equal to one
    process's, and one set of files; for both backbones (the Transformer's memories are
    gathered by columns as the LSTM's hidden state is)."""
    # the Transformer for its first 20 updates: the two sums of each gradient differ in
    # rounding (1e-8), which AdamW's normalised steps grow update by update (measured: 2e-8 at
    # update 19, 9e-6 by update 43), where the LSTM stays within 1e-5 for the whole epoch
    budget = [] if preset == "tiny" else ["--max-steps", "20"]
    args = ["train", speech_corpus, "--preset", preset, "--max-epochs", "1", "--eval-every", "1",
            "--seed", "3", "--device", "cpu", *FP32, *NO_DROPOUT, *budget]
    lmlow(*args, "--out", tmp_path / "one", "--threads", "2", check=True)
    r = torchrun(*args, "--out", tmp_path / "two")
    tol = 1e-5
    one, two = metrics(tmp_path / "one"), metrics(tmp_path / "two")
    assert len(two) == len(one) > (40 if preset == "tiny" else 15)   # every validation once
    assert [m["step"] for m in two] == [m["step"] for m in one]
    for a, b in zip(one, two):
        assert b["valid_loss"] == pytest.approx(a["valid_loss"], abs=tol)
    if preset == "tiny":                                # an epoch end: its training loss
        assert two[-1]["train_loss"] == pytest.approx(one[-1]["train_loss"], abs=tol)
    for name in ("last.pt", "best.pt"):
        wa, wb = weights(tmp_path / "one" / name), weights(tmp_path / "two" / name)
        assert all(torch.allclose(wa[k], wb[k], atol=tol, rtol=0) for k in wa)
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == \
        sorted(p.name for p in (tmp_path / "one").iterdir())
    summary = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert summary["tokens"] == json.loads((tmp_path / "one" / "summary.json").read_text())["tokens"]
    assert r.stdout.count("done:") == 1 and "x 2 processes" in r.stdout


def test_a_process_under_torchrun_ends_with_its_output_and_exit_status(speech_corpus):
    """Under torchrun lmlow ends its process without Python's shutdown (gloo's threads can
    abort it there): what it printed to a pipe must still arrive, and its exit status too."""
    def run(*args, world=False):
        env = {"PATH": "/usr/bin:/bin", "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"]}
        if world:
            env |= {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
        return subprocess.run([sys.executable, "-m", "lmlow", *map(str, args)], env=env,
                              capture_output=True, text=True)

    alone, under = run("stats", speech_corpus), run("stats", speech_corpus, world=True)
    assert under.returncode == alone.returncode == 0 and len(alone.stdout) > 1000
    assert under.stdout == alone.stdout
    bad = run("train", speech_corpus / "missing", "--preset", "tiny", world=True)
    assert bad.returncode == 1 and bad.stderr.startswith("lmlow: error:"), bad.stderr


def test_a_process_group_without_its_address_is_one_line(speech_corpus, tmp_path):
    """WORLD_SIZE and RANK set by hand, without torchrun's MASTER_ADDR and MASTER_PORT:
    torch's rendezvous raised a ValueError, printed as a traceback. Now one line naming
    what is missing, and no run folder."""
    env = {"PATH": "/usr/bin:/bin", "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"],
           "WORLD_SIZE": "2", "RANK": "0"}
    r = subprocess.run([sys.executable, "-m", "lmlow", "train", str(speech_corpus), "--preset",
                        "tiny", "--threads", "1", "--device", "cpu", "--out", str(tmp_path / "r")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "MASTER_ADDR and MASTER_PORT are not" in r.stderr and "torchrun" in r.stderr
    assert not (tmp_path / "r").exists()


def sigterm_after_a_validation(args, run, **env):
    """``lmlow ARGS`` in a subprocess, sent SIGTERM once ``run`` has a metrics row: (the
    process, its stderr)."""
    env = {"PATH": "/usr/bin:/bin", "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"], **env}
    proc = subprocess.Popen([sys.executable, "-m", "lmlow.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 120
    while not ((run / "metrics.jsonl").exists() and metrics(run)) and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    return proc, proc.communicate(timeout=120)[1]


@pytest.mark.slow
def test_two_process_run_killed_and_resumed_equals_an_uninterrupted_one(speech_corpus, tmp_path):
    """Dropouts on (per-rank masks): SIGTERM to the launcher stops both ranks at the same
    update with every rank's random state and hidden state saved; the resumed run ends
    bit for bit where an uninterrupted one does."""
    args = ["train", speech_corpus, "--preset", "tiny", "--max-epochs", "2", "--eval-every", "5",
            "--seed", "5", "--device", "cpu", "--nproc", "2"]
    lmlow(*args, "--out", tmp_path / "full", check=True)

    part = tmp_path / "part"
    proc, err = sigterm_after_a_validation([*args, "--out", part], part)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "SIGTERM at update" in err
    stopped = load_checkpoint(part / "last.pt")
    assert stopped["processes"] == 2 and len(stopped["ranks"]) == 2
    assert 0 < stopped["state"]["step"] < metrics(tmp_path / "full")[-1]["step"]
    assert stopped["hidden"][0][0].shape[1] == 8               # the whole batch's state

    with pytest.raises(LmlowError, match="written by 2 training process"):
        resume(part, quiet=True)                               # one process cannot continue it
    with one_gpu():                                            # nor two on one GPU
        with pytest.raises(LmlowError, match="1 GPU visible on this machine"):
            run_command(None, None, part, settings={"device": "cuda"}, nproc=2)
    lmlow("train", "--resume", part, "--nproc", "2", check=True)
    a, b = metrics(tmp_path / "full"), metrics(part)
    assert [m["valid_ppl"] for m in a] == [m["valid_ppl"] for m in b]
    wa, wb = weights(tmp_path / "full" / "best.pt"), weights(part / "best.pt")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_a_stopped_two_process_run_says_the_command_that_continues_it(speech_corpus, tmp_path):
    """Stopped by SIGTERM (or SIGINT), or by its --max-steps, a run of 2 processes said
    "`lmlow train --resume RUN` continues", a command refused (last.pt was written by 2
    processes, and it has 1). Now each says --nproc 2, and that command continues it."""
    run = tmp_path / "r"
    proc, err = sigterm_after_a_validation(
        ["train", speech_corpus, "--preset", "tiny", "--eval-every", "1", "--threads", "1",
         "--device", "cpu", "--nproc", "2", "--out", run], run, OMP_NUM_THREADS="1")
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert f"`lmlow train --resume {run} --nproc 2` continues" in err, err
    step = load_checkpoint(run / "last.pt")["state"]["step"]
    r = lmlow("train", "--resume", run, "--nproc", "2", "--max-steps", step + 1, "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert f"at update {step + 1}; `lmlow train --resume {run} --nproc 2` continues" in r.stdout


@pytest.mark.slow
def test_three_process_run_stopped_and_resumed_equals_an_uninterrupted_one(speech_corpus,
                                                                           tmp_path):
    """Three ranks, where gloo's ring all-reduce adds an element's three values in an order
    that depends on its place in DDP's gradient buckets (two ranks' a + b commutes, so the
    two-process test cannot see it): DDP lays the buckets out anew after its first backward,
    and a resumed run's first update used the first layout where the uninterrupted run had
    the second (weights apart by 3e-8 after a few updates). Now bitwise equal."""
    args = ["train", speech_corpus, "--preset", "tiny", "--batch-size", "6", "--max-epochs", "1",
            "--eval-every", "4", "--seed", "9", "--threads", "1", "--device", "cpu",
            "--nproc", "3", "--quiet"]
    lmlow(*args, "--out", tmp_path / "full", "--max-steps", "8", check=True)
    lmlow(*args, "--out", tmp_path / "part", "--max-steps", "4", check=True)
    lmlow("train", "--resume", tmp_path / "part", "--max-steps", "8", "--nproc", "3",
          "--threads", "1", "--quiet", check=True)
    a, b = metrics(tmp_path / "full"), metrics(tmp_path / "part")
    assert [(m["step"], m["valid_loss"]) for m in a] == [(m["step"], m["valid_loss"]) for m in b]
    assert [m["step"] for m in a] == [4, 8]
    wa, wb = weights(tmp_path / "full" / "last.pt"), weights(tmp_path / "part" / "last.pt")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_sigterm_to_slow_processes_saves_within_the_launchers_grace(speech_corpus, tmp_path):
    """SIGTERM to the launcher just after the validation at update 5, with torchrun's grace
    cut to 5 s (TORCH_ELASTIC_SHUTDOWN_TIMEOUT) and updates of a few tenths of a second: CPU
    processes agreed on a signal every 20 updates only, so torchrun's agent killed them
    before they stopped (nothing saved since update 0, and a line saying "the reason is
    above" with nothing above). Now they stop after the next update and save there."""
    part = tmp_path / "run"
    proc, err = sigterm_after_a_validation(
        ["train", speech_corpus, "--preset", "tiny", "--hidden-size", "1000", "--bptt", "70",
         "--eval-every", "5", "--threads", "1", "--device", "cpu", "--nproc", "2", "--out", part],
        part, TORCH_ELASTIC_SHUTDOWN_TIMEOUT="5")
    assert proc.returncode == 128 + signal.SIGTERM, err
    step = load_checkpoint(part / "last.pt")["state"]["step"]
    assert 5 <= step < 20 and f"SIGTERM at update {step}: saved" in err, err
    # one line, process 0's (process 1 said it too, "saved RUN/last.pt", which it does not
    # write; and torch's log said "Received 15 death signal")
    assert len(err.splitlines()) == 1, err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_processes_stop_and_save_when_their_launcher_is_killed(speech_corpus, tmp_path):
    """kill -9 to `lmlow train --nproc 2` (which cannot pass a SIGKILL on): its processes
    trained on as orphans, holding the run's lock, so that a resume was refused. Now the
    launcher's death is a SIGTERM to them: they stop within seconds, save last.pt where they
    stopped, and the run resumes."""
    run = tmp_path / "run"
    env = {"PATH": "/usr/bin:/bin", "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"]}
    with open(tmp_path / "err", "w") as err:    # not a pipe: the orphans would hold it open
        proc = subprocess.Popen([sys.executable, "-m", "lmlow.cli", "train", str(speech_corpus),
                                 "--preset", "tiny", "--max-epochs", "50", "--eval-every", "5",
                                 "--threads", "1", "--device", "cpu", "--nproc", "2",
                                 "--quiet", "--out", str(run)],
                                stdout=subprocess.DEVNULL, stderr=err, env=env)
    deadline = time.time() + 120
    while not ((run / "metrics.jsonl").exists() and metrics(run)) and time.time() < deadline:
        time.sleep(0.02)
    workers = [int(p) for p in open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()]
    assert len(workers) == 2
    proc.kill()
    proc.wait()

    def alive():
        return [w for w in workers if os.path.exists(f"/proc/{w}")
                and not open(f"/proc/{w}/stat").read().split(") ")[1].startswith("Z")]
    deadline = time.time() + 30
    try:
        while alive() and time.time() < deadline:
            time.sleep(0.1)
        assert not alive(), "the processes trained on without their launcher"
    finally:
        for w in alive():                                      # before the fix: the orphans
            os.kill(w, signal.SIGKILL)
    step = load_checkpoint(run / "last.pt")["state"]["step"]
    assert step >= 5 and f"SIGTERM at update {step}: saved" in (tmp_path / "err").read_text()
    lmlow("train", "--resume", run, "--nproc", "2", "--threads", "1", "--max-steps", str(step + 2),
          "--quiet", check=True)
    assert load_checkpoint(run / "last.pt")["state"]["step"] == step + 2


def test_a_bad_input_found_by_every_process_is_said_once(tmp_path):
    """A training split too short for the batch is found by each process after the launch:
    each said it (process 0, then "process 1: " and the same words), and the launcher added
    a third line. Now process 0's line alone, with its exit status."""
    from conftest import write_corpus

    corpus = write_corpus(tmp_path / "c", "a b c d e\n", "a b c\n", "a b\n")
    r = lmlow("train", corpus, "--preset", "tiny", "--threads", "1", "--device", "cpu",
              "--nproc", "2", "--out", tmp_path / "run")
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines() == [f"lmlow: error: {corpus}: the training split has 6 tokens, "
                                     "too few for --batch-size 8 (at least 24: three a column); "
                                     "lower --batch-size"]


def test_an_abbreviated_nproc_starts_the_processes(speech_corpus, tmp_path):
    """argparse takes `--npro 2` for `--nproc 2`; the launcher removed only `--nproc N` and
    `--nproc=N` from the processes' command line, so each one saw --npro and refused to start
    again under torchrun. Now every spelling argparse accepts is removed."""
    r = lmlow("train", speech_corpus, "--preset", "tiny", "--max-steps", "2", "--threads", "1",
              "--device", "cpu", "--npro", "2", "--out", tmp_path / "run")
    assert r.returncode == 0 and "x 2 processes" in r.stdout, r.stderr
    assert load_checkpoint(tmp_path / "run" / "last.pt")["processes"] == 2


@contextlib.contextmanager
def one_gpu():
    """This process sees one CUDA GPU (torch's own answers, patched): what is checked must
    fail before anything would touch it."""
    with mock.patch.object(torch.cuda, "is_available", return_value=True), \
            mock.patch.object(torch.cuda, "device_count", return_value=1):
        yield


def test_more_processes_than_gpus_is_said_before_the_launch(speech_corpus, tmp_path, capsys):
    """On a machine with one GPU, --device auto picks it: --nproc 2 would start two processes
    of which the second fails on its own; lmlow says so once, before torchrun starts, with the
    ways out, and leaves no run folder."""
    with one_gpu():
        code, _, err = cli("train", speech_corpus, "--preset", "tiny", "--nproc", "2",
                           "--out", tmp_path / "r", capsys=capsys)
    assert code == 1 and err.startswith("lmlow: error: --nproc 2: 1 GPU visible"), err
    assert "--device cpu" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_loss_scaler_state_survives_a_resume(speech_corpus, tmp_path, monkeypatch):
    """The fp16 path's GradScaler, on this CPU (torch.amp.GradScaler("cpu") on fp32 losses):
    a scale so large that the first updates overflow makes it skip steps and lower the scale,
    and a short growth interval raises it again; a run stopped in the middle and resumed must
    skip the same steps and end with the same scale and weights as one that was not."""
    import lmlow.train as training

    monkeypatch.setattr(training, "make_scaler", lambda dtype, device: torch.amp.GradScaler(
        "cpu", init_scale=2.0 ** 126, growth_interval=4))
    cfg = build_config("tiny", None, corpus=str(speech_corpus), max_epochs=1, seed=2, eval_every=10)
    train(cfg, tmp_path / "full", quiet=True)
    train(build_config("tiny", None, corpus=str(speech_corpus), max_epochs=1, seed=2,
                       eval_every=10, max_steps=15), tmp_path / "part", quiet=True)
    mid = load_checkpoint(tmp_path / "part" / "last.pt")
    assert mid["scaler"]["scale"] <= 2.0 ** 126 and mid["state"]["skipped"] > 0
    resume(tmp_path / "part", quiet=True, max_steps=0)

    full, part = (load_checkpoint(tmp_path / r / "last.pt") for r in ("full", "part"))
    assert full["scaler"] == part["scaler"]
    assert full["state"]["skipped"] == part["state"]["skipped"] >= mid["state"]["skipped"]
    assert all(torch.equal(full["model"][k], part["model"][k]) for k in full["model"])
    rows = metrics(tmp_path / "full")
    assert rows[-1]["skipped_steps"] == full["state"]["skipped"] and rows[-1]["loss_scale"] > 0
    other = [r for r in metrics(tmp_path / "part") if r["step"] != 15]   # the stop's validation
    assert [(r["valid_ppl"], r["skipped_steps"]) for r in other] == \
        [(r["valid_ppl"], r["skipped_steps"]) for r in rows]


def test_one_process_failing_is_one_line_from_each_not_a_traceback(speech_corpus, tmp_path):
    """Rank 0 alone fails (its last.pt exceeds a file-size limit at the end of epoch 1):
    rank 1, waiting in the gradients' all-reduce, saw gloo's "Connection closed by peer" and
    printed a traceback from inside autograd. Now each process says one line."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (800 * 1024, resource.RLIM_INFINITY))

    cache = os.environ["LMLOW_CACHE_DIR"]
    lmlow("vocab", speech_corpus, check=True)                  # the cache, written without a cap
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "train", str(speech_corpus), "--out",
                        str(tmp_path / "run"), "--preset", "tiny", "--max-epochs", "3",
                        "--threads", "1", "--device", "cpu", "--nproc", "2", "--quiet"],
                       capture_output=True, text=True, preexec_fn=cap,
                       env={"PATH": "/usr/bin:/bin", "LMLOW_CACHE_DIR": cache,
                            "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "last.pt: cannot write the checkpoint" in r.stderr
    assert "process 1: stopped: another training process failed (its own line says why)" in r.stderr
