"""Run folders lmlow did not make are untrusted (issue 26): no write through a symbolic link
planted where lmlow keeps its files, no read that hangs on a FIFO; sweep run names cannot
leave the sweep folder; values in a generated SLURM script cannot run as shell lines."""
import os
import re
import subprocess
import sys

import numpy as np
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


@pytest.mark.parametrize("name", ["../../escape", "/abs/path", "a/b", "$(touch pwned)", "-rf",
                                  ".hidden", "x..y", "semi;colon"])
def test_a_grid_run_name_cannot_leave_the_sweep_folder(name, speech_corpus, tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(f'[runs."{name}"]\ntie = true\n')
    out = tmp_path / "sweep"
    r = lmlow("sweep", speech_corpus, "--grid", grid, "--preset", "tiny", "--max-steps", "1",
              "--out", out)
    assert r.returncode == 1 and f"run name {name!r}" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists() and not (tmp_path / "escape").exists() and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("seeds,message", [("1,1", "listed twice"), ("-1", "outside"),
                                           ("99999999999", "outside")])
def test_sweep_seeds_are_checked_before_anything_is_written(seeds, message, speech_corpus, tmp_path):
    r = lmlow("sweep", speech_corpus, "--grid", "six", "--preset", "tiny", "--seeds", seeds,
              "--out", tmp_path / "s")
    assert r.returncode == 1 and message in r.stderr and not (tmp_path / "s").exists()


def test_hostile_values_never_run_as_shell_lines_in_the_job_script(tmp_path):
    """A newline in --account (or any value) is refused; a sweep folder whose name holds
    spaces and `$(...)` is quoted in the #SBATCH lines and the exec line: the script, run by
    bash as SLURM would, executes nothing of it."""
    from lmlow.errors import LmlowError
    from lmlow.slurm import SlurmOptions, job_script

    runs = tmp_path / "runs.txt"
    runs.write_text("")
    for opts in (SlurmOptions(account="acct\ntouch pwned"), SlurmOptions(partition='p" x'),
                 SlurmOptions(mem="lots of it"), SlurmOptions(setup=["module load x\rtouch y"]),
                 SlurmOptions(sbatch_args=["--comment=a\nb"])):
        with pytest.raises(LmlowError, match="--"):
            job_script(tmp_path / "s", runs, 2, opts)
    out = tmp_path / "sweep $(touch pwned) `touch pwned2`"
    script = job_script(out, runs, 2, SlurmOptions(account="a b", mem="16G"))
    assert f'#SBATCH --output="{out.resolve()}/logs/slurm-%A_%a.out"' in script
    assert '#SBATCH --account="a b"' in script
    path = tmp_path / "job.sh"
    path.write_text(script)
    subprocess.run(["bash", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                   env={**os.environ, "SLURM_ARRAY_TASK_ID": "0"})
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def _children_alive(marker: str) -> list[str]:
    """Command lines of running processes that mention ``marker`` (an output path)."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmd:
                out.append(cmd)
    return out


def _start_and_kill(args, ready, sig, timeout=120):
    """Start ``lmlow ARGS``, wait until ``ready()`` says it is in the middle, send ``sig``."""
    import signal
    import time
    proc = subprocess.Popen([sys.executable, "-m", "lmlow.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.time() + timeout
    while not ready() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "finished before it could be killed: " + proc.stderr.read()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    time.sleep(0.5)                          # a child's death signal is delivered by now
    return proc.returncode, err


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_a_killed_ngram_leaves_no_model_and_no_orphan(sig, tmp_path):
    """SIGTERM or kill -9 in the middle of `lmlow ngram`: no model.arpa/model.bin/summary.json
    under their final names, no lmplz or build_binary left running, and the same command
    then works without --force."""
    import signal
    from pathlib import Path
    corpus = Path(__file__).resolve().parents[1] / "corpora" / "pydocs-mini"
    out = tmp_path / "kn"
    args = ["ngram", corpus, "--order", "5", "--out", out, "--quiet"]
    ready = lambda: out.is_dir() and any(".tmp" in p.name or p.name.startswith("lmplz-tmp-")
                                         for p in out.iterdir())
    code, err = _start_and_kill(args, ready, getattr(signal, sig))
    assert code == (143 if sig == "SIGTERM" else -9), err
    if sig == "SIGTERM":
        assert "Traceback" not in err and "terminated" in err
    names = {p.name for p in out.iterdir()} if out.exists() else set()
    assert not names & {"model.arpa", "model.bin", "summary.json"}
    assert not _children_alive(str(out))
    again = lmlow(*args)
    assert again.returncode == 0, again.stderr
    assert {"model.arpa", "model.bin", "summary.json"} <= {p.name for p in out.iterdir()}
    assert not [p for p in out.iterdir() if ".tmp" in p.name or p.name.startswith("lmplz-tmp-")]
    import json
    recorded = json.loads((out / "config.json").read_text())["lmplz_command"]
    assert ".tmp" not in recorded and "model.lmplz.arpa" in recorded      # the kept names


def test_a_killed_embed_takes_glove_with_it_and_its_work_is_reclaimed(tmp_path):
    """kill -9 of `lmlow embed` while glove-train runs: glove-train dies too (it used to run
    on as an orphan), no vector file is written, and the next embed removes the dead run's
    co-occurrence folder."""
    import signal
    from pathlib import Path
    text = Path(__file__).resolve().parents[1] / "corpora" / "pydocs-mini" / "pretrain.txt.gz"
    work = tmp_path / "work"
    work.mkdir()
    out = tmp_path / "v.txt"
    args = ["embed", text, "--out", out, "--dim", "50", "--epochs", "200", "--threads", "1",
            "--tmp-dir", work]
    ready = lambda: any("glove-train" in c for c in _children_alive(str(work)))
    code, _ = _start_and_kill(args, ready, signal.SIGKILL, timeout=300)
    assert code == -9
    assert not _children_alive(str(work)) and not out.exists()
    left = list(work.iterdir())
    assert len(left) == 1 and left[0].name.startswith("lmlow-glove-")
    from lmlow.glove import remove_stale_work
    remove_stale_work(work)
    assert not list(work.iterdir())


def test_embed_leaves_a_live_work_folder_alone_whatever_its_pid_says(tmp_path):
    """Two embeds sharing a --tmp-dir (a cluster's scratch, a /tmp shared by containers): one
    removed the other's co-occurrence folder because its pid did not run *here*, and the
    other died hours in (glove-train: SIGSEGV). A folder is reclaimed only once no process
    holds its owner lock; a dead run's still is."""
    import fcntl
    import subprocess
    from pathlib import Path
    gone = subprocess.Popen(["true"])
    gone.wait()                                   # a pid that no longer runs here
    work = tmp_path / "work"
    live, dead = (work / f"lmlow-glove-{gone.pid}-{x}" for x in ("live", "dead"))
    for folder in (live, dead):
        folder.mkdir(parents=True)
        (folder / ".owner").touch()
        (folder / "cooc.bin").write_bytes(b"\0" * 16)
    held = os.open(live / ".owner", os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)              # its owner, as if in another namespace
    text = Path(__file__).resolve().parents[1] / "corpora" / "pydocs-mini" / "pretrain.txt.gz"
    try:
        r = lmlow("embed", text, "--out", tmp_path / "v.txt", "--dim", "4", "--epochs", "1",
                  "--threads", "1", "--tmp-dir", work)
    finally:
        os.close(held)
    assert r.returncode == 0, r.stderr
    assert (live / "cooc.bin").exists() and not dead.exists()


def test_a_vector_line_with_fewer_numbers_is_refused_with_its_line(tmp_path):
    """`was 0.5` among 3-d vectors used to load, gensim filling every dimension with 0.5."""
    from lmlow.embeddings import load_vectors
    from lmlow.errors import LmlowError
    vec = tmp_path / "v.txt"
    vec.write_text("the 0.1 0.2 0.3\nwas 0.5\nis 0.3 0.2 0.1\n")
    with pytest.raises(LmlowError, match=r"v.txt:2: 1 values for 'was', expected 3"):
        load_vectors(vec)


def test_a_byte_order_mark_does_not_make_a_new_word(tmp_path, capsys):
    """A UTF-8 BOM at the start of a vector file or a corpus split used to make the first
    word `\\ufeffthe`: it lost its vector, and the vocabulary gained a word. Now it is the
    word itself, with a note."""
    from conftest import write_corpus

    from lmlow.data.corpus import Corpus
    from lmlow.embeddings import load_vectors
    vec = tmp_path / "v.txt"
    vec.write_bytes("\ufeffthe 0.1 0.2\nis 0.3 0.4\n".encode("utf-8"))
    kv = load_vectors(vec)
    assert "the" in kv.key_to_index and kv["the"].tolist() == pytest.approx([0.1, 0.2])
    root = write_corpus(tmp_path / "c", "\ufeffthe cat is\nthe dog\n", "the cat\n", "is\n")
    corpus = Corpus(root, show_progress=False)
    assert "\ufeffthe" not in corpus.vocab and corpus.vocab.counts[corpus.vocab.index["the"]] == 2
    assert "byte-order mark" in capsys.readouterr().err


def test_a_zero_width_no_break_space_inside_a_line_makes_no_word(tmp_path):
    """U+FEFF inside a corpus line (`the value \ufeffreturns`, scraped or pasted) stayed on its
    word, which vocab.txt then read back without it: `lmlow eval` of the run said "vocabulary
    has duplicate words", and `lmlow embed`'s text vectors were refused the same way. It is
    removed wherever a line is read, so the run and the vectors open."""
    from conftest import write_corpus

    lines = "".join(f"the value \ufeffreturns a list {i}\nthe value returns\n" for i in range(6))
    root = write_corpus(tmp_path / "c", lines, "the value returns a list\n", "the value\n")
    run = tmp_path / "run"
    r = lmlow("train", root, "--out", run, "--preset", "tiny", "--max-steps", "2",
              "--threads", "1", "--quiet", cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert "U+FEFF" in r.stderr and "\ufeff" not in (run / "vocab.txt").read_text()
    r = lmlow("eval", run, cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    r = lmlow("embed", root / "train.txt", "--out", tmp_path / "v.txt", "--dim", "4",
              "--epochs", "1", "--threads", "1", cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    r = lmlow("neighbours", tmp_path / "v.txt", "returns", cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name, text", [("c.toml", "lr = 2.5\n"), ("c.json", '{"lr": 2.5}'),
                                        ("g.toml", "[runs.a]\nlr = 2.5\n")])
def test_a_settings_file_saved_with_a_byte_order_mark_is_read(name, text, tmp_path, capsys):
    """Notepad saves UTF-8 with a byte-order mark, which TOML and JSON parsers refuse
    ("Invalid statement (at line 1, column 1)"); a config or grid file is read without it,
    with a note."""
    from lmlow.config import load_table
    path = tmp_path / name
    path.write_bytes(("\ufeff" + text).encode("utf-8"))
    table = load_table(path)
    assert (table["runs"]["a"] if "runs" in table else table) == {"lr": 2.5}
    assert f"{name}: starts with a UTF-8 byte-order mark" in capsys.readouterr().err


def test_classic_mac_line_ends_get_a_note_not_a_silent_single_line(stopped_run, tmp_path):
    """Lines ended by carriage returns alone read as one line (for KenLM too), so `score` gave
    one sentence for twenty, silently; now a note says so and how to convert. Windows line ends
    (CR LF) read as lines and get no note."""
    import json

    mac, windows = tmp_path / "mac.txt", tmp_path / "windows.txt"
    mac.write_bytes(b"the cat sat on the mat\r" * 20)
    windows.write_bytes(b"the cat sat on the mat\r\n" * 20)
    r = lmlow("score", stopped_run, mac)
    assert r.returncode == 0 and r.stderr.count("carriage returns alone") == 1, r.stderr
    assert len(r.stdout.splitlines()) == 1
    r = lmlow("score", stopped_run, windows)
    assert r.returncode == 0 and "carriage returns" not in r.stderr, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(rows) == 20 and rows[0]["words"] == ["the", "cat", "sat", "on", "the", "mat", "<eos>"]


def test_resume_refuses_a_checkpoint_from_another_run(stopped_run, speech_corpus, tmp_path):
    other = tmp_path / "other"
    lmlow("train", speech_corpus, "--preset", "tiny", "--hidden-size", "64", "--max-steps", "2",
          "--out", other, check=True)
    run = copy_run(stopped_run, tmp_path / "r")
    (run / "last.pt").write_bytes((other / "last.pt").read_bytes())
    rows = (run / "metrics.jsonl").read_text()
    r = lmlow("train", "--resume", run, "--max-steps", "4")
    assert r.returncode == 1 and "not this run's checkpoint: it has hidden_size = 64" in r.stderr
    assert (run / "metrics.jsonl").read_text() == rows


def test_small_hostile_arguments_get_one_line(speech_corpus, tmp_path):
    r = lmlow("train", speech_corpus, "--config", tmp_path, "--out", tmp_path / "r")
    assert r.returncode != 0 and "is a folder" in r.stderr and "Traceback" not in r.stderr
    r = lmlow("embed", speech_corpus / "train.txt", "--out", tmp_path / "v.txt", "--tmp-dir",
              tmp_path / "nonexistent", "--epochs", "1")
    assert r.returncode != 0 and "--tmp-dir" in r.stderr and "Traceback" not in r.stderr


def test_the_sweep_threads_reach_its_runs_once(speech_corpus, tmp_path):
    """`lmlow sweep --threads 1 --jobs 1` on 2 cores: the run trains with 1 thread (the
    executor used to append its own share, 2, after it, and config.json said 2)."""
    import json
    grid = tmp_path / "g.toml"
    grid.write_text('[runs.one]\ntie = true\n')
    r = lmlow("sweep", speech_corpus, "--grid", grid, "--preset", "tiny", "--threads", "1",
              "--jobs", "1", "--max-steps", "1", "--out", tmp_path / "s")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "s" / "one.seed1" / "config.json").read_text())["threads"] == 1


@pytest.mark.parametrize("args,message", [
    (["generate", "--bias-scale", "1e308"], "--bias-scale 1e308: must be in [-10, 10]"),
    (["generate", "--temperature", "1e-300"], "--temperature 1e-300: must be 0 (greedy) or in"),
    (["bias-sweep", "--lambdas", "0,1e300", "--samples", "1"], "each must be in [-10, 10]"),
])
def test_sampling_values_that_overflow_are_refused(args, message, stopped_run):
    r = lmlow(args[0], stopped_run, *args[1:])
    assert r.returncode != 0 and message in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("flag,value,rule", [
    ("--lr", "1e300", "must be > 0 and at most 1e+30"),       # SGD: torch's float32 overflow
    ("--lr", "3e38", "must be > 0 and at most 1e+30"),        # fits float32, still overflowed
    ("--wdecay", "1e300", "must be >= 0 and at most 1e+30"),
])
def test_a_rate_beyond_float32_is_refused_before_training(flag, value, rule, speech_corpus, tmp_path):
    """A rate or decay that torch turns into a float32 factor of the SGD step stopped the
    first update with a RuntimeError traceback ("value cannot be converted to type float
    without overflow"), after the run folder was made. Refused with the command line now,
    and the same from Python."""
    out = tmp_path / "r"
    r = lmlow("train", speech_corpus, "--out", out, "--preset", "tiny", "--optimizer", "sgd",
              flag, value, "--max-steps", "2", "--threads", "1")
    assert r.returncode == 2 and f"{flag} {value}: {rule}" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
    import lmlow as api
    key = flag[2:]
    with pytest.raises(api.LmlowError, match="^" + re.escape(f"lmlow.fit: {key} = {float(value)!r}: {rule}") + "$"):
        api.fit(speech_corpus, tmp_path / "p", preset="tiny", optimizer="sgd",
                **{key: float(value)})
    assert not (tmp_path / "p").exists()


def test_a_model_larger_than_the_machine_is_refused_before_it_is_made(speech_corpus, tmp_path):
    """A billion small LSTM layers: torch's allocator never refused one of them, so they were
    made one by one (120 s without a word, then stopped), on the way to the kernel's OOM
    killer, which ends a process (this one or a training beside it) silently. The weights
    are counted first now."""
    out = tmp_path / "r"
    r = lmlow("train", speech_corpus, "--out", out, "--preset", "tiny", "--layers", "1000000000",
              "--threads", "1", timeout=120)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "out of memory: the model has" in r.stderr and "--layers" in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("kind", ["file", "read-only"])
def test_an_unusable_cache_is_one_line(kind, speech_corpus, tmp_path):
    if kind == "read-only" and os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    cache = tmp_path / "cache"
    if kind == "file":
        cache.write_text("not a folder")
    else:
        cache.mkdir()
        cache.chmod(0o500)
    r = lmlow("stats", speech_corpus, cache=cache)
    assert r.returncode == 1 and "LMLOW_CACHE_DIR" in r.stderr and "Traceback" not in r.stderr


def test_two_prepares_into_one_folder_cannot_both_write(tmp_path):
    """While one prepare writes a folder (its flock held here, as the first process would
    hold it), a second is refused in one line and writes nothing."""
    import fcntl
    from pathlib import Path
    out = tmp_path / "corpus"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        text = Path(__file__).parent / "data" / "speeches"
        r = lmlow("prepare", text, "--out", out)
    finally:
        os.close(fd)
    assert r.returncode == 1 and "another lmlow command is writing there" in r.stderr
    assert not list(out.iterdir())


@pytest.mark.parametrize("words,vectors,message", [
    (np.arange(3), np.ones((3, 4), np.float32), "expected text"),
    (np.array(["a", "b"]), np.ones((2, 0), np.float32), "0 dimensions"),
])
def test_a_malformed_npz_is_one_line(words, vectors, message, tmp_path):
    """Integer words and a 2x0 matrix used to load (and give NaN neighbours, or a traceback
    in train)."""
    from lmlow.embeddings import load_vectors
    from lmlow.errors import LmlowError
    path = tmp_path / "v.npz"
    np.savez(path, words=words, vectors=vectors)
    with pytest.raises(LmlowError, match=message):
        load_vectors(path)


# ---- every command that writes several files: all of them or none, a lock, a full disk

MINI = __import__("pathlib").Path(__file__).resolve().parents[1] / "corpora" / "pydocs-mini"
STAGE = ".lmlow-stage.tmp"


def _writing_command(name, stopped_run, tmp_path):
    """(arguments, output folder, the output names) of one writing command on real input."""
    out = tmp_path / "out"
    if name == "unk":
        return ["unk", MINI, "--unk-threshold", "3", "--out", out], out, \
            ["train.txt", "valid.txt", "test.txt", "prepare.json"]
    if name == "prepare":
        return ["prepare", MINI / "train.txt", "--tokenizer", "whitespace", "--documents",
                "line", "--out", out], out, \
            ["train.txt", "valid.txt", "test.txt", "prepare.json"]
    run = copy_run(stopped_run, tmp_path / "run")
    if name == "analyze":
        return ["analyze", run, "--out", out], out, ["analysis.json", "bias_vs_frequency.png"]
    return ["bias-sweep", run, "--lambdas", "0,1", "--samples", "3", "--words", "20",
            "--out", out], out, ["bias_sweep.json", "bias_sweep.md", "samples.jsonl"]


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("command", ["unk", "prepare", "analyze", "bias-sweep"])
def test_a_killed_writer_leaves_no_partial_output(command, sig, stopped_run, tmp_path):
    """SIGTERM or kill -9 while the outputs are being made: none of them under its final name
    (SIGTERM: no folder either), and the same command then works without --force and clears
    what the killed one left."""
    import signal
    args, out, names = _writing_command(command, stopped_run, tmp_path)
    ready = lambda: out.is_dir() and any(p.name.startswith(STAGE) for p in out.iterdir())
    code, err = _start_and_kill(args, ready, getattr(signal, sig))
    assert code == (143 if sig == "SIGTERM" else -9), err
    if sig == "SIGTERM":
        assert "Traceback" not in err and "terminated" in err and not out.exists()
    assert not any((out / n).exists() for n in names)
    again = lmlow(*args)
    assert again.returncode == 0, again.stderr
    assert all((out / n).exists() for n in names)
    assert not [p for p in out.iterdir() if STAGE in p.name or ".tmp" in p.name]


@pytest.mark.parametrize("command", ["unk", "prepare", "analyze", "bias-sweep"])
def test_a_second_writer_into_the_same_folder_is_refused(command, stopped_run, tmp_path):
    """While one command holds the output folder (its flock, held here as the first process
    would), a second is refused in one line and writes nothing."""
    import fcntl
    args, out, names = _writing_command(command, stopped_run, tmp_path)
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        r = lmlow(*args)
    finally:
        os.close(fd)
    assert r.returncode == 1 and "another lmlow command is writing there" in r.stderr
    assert not list(out.iterdir())


def test_a_second_report_of_a_sweep_waits_with_wait_and_is_refused_without(tmp_path):
    """Two queues of runs report the same sweep when both find it finished: while one report
    holds the sweep folder (its flock, held here), `lmlow report` is refused in one line and
    writes nothing; with --wait it says it is waiting, writes nothing while the lock is held,
    and writes the whole report once it is released. SIGTERM still stops a waiting report."""
    import fcntl
    import shutil
    import signal
    import time
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "experiments" / "six" / "sweep"
    out = tmp_path / "six"
    shutil.copytree(src, out, ignore=shutil.ignore_patterns("*.pt", "results.*", "curves.png"))
    fd = os.open(out, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    waiting = None
    try:
        r = lmlow("report", out)
        assert r.returncode == 1 and "another lmlow command is writing there" in r.stderr
        assert not (out / "results.md").exists()
        command = [sys.executable, "-m", "lmlow.cli", "report", str(out), "--wait"]
        stopped, waiting = (subprocess.Popen(command, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True) for _ in "ab")
        for proc in (stopped, waiting):           # the line comes just before it blocks
            assert "another lmlow command is writing there now; waiting for it to end" \
                in proc.stderr.readline()
        time.sleep(1)
        assert stopped.poll() is None and waiting.poll() is None        # both blocked
        assert not (out / "results.md").exists()
        stopped.send_signal(signal.SIGTERM)
        _, err = stopped.communicate(timeout=60)
        assert stopped.returncode == 143 and "Traceback" not in err, err
    finally:
        os.close(fd)
    _, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    assert all((out / n).exists()
               for n in ("results.md", "results.csv", "results.json", "curves.png"))
    assert not list(out.glob(".lmlow-stage*"))


def _limited(args, kib, cache):
    """``lmlow ARGS`` under a file-size limit of ``kib`` KiB: what a full disk looks like to
    the writer (EFBIG; Python ignores SIGXFSZ), and it applies to root too."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (kib * 1024, resource.RLIM_INFINITY))
    # no .pyc written under the limit: CPython would rename a short-written one into place
    # (FileIO.write does not retry), and every later import of that module would fail
    env = {"PATH": "/usr/bin:/bin", "LMLOW_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-m", "lmlow.cli", *map(str, args)], env=env,
                          capture_output=True, text=True, preexec_fn=cap, timeout=600)


@pytest.mark.parametrize("command", ["unk", "prepare", "analyze", "bias-sweep", "vocab",
                                     "compare", "embed", "ngram", "report"])
def test_a_full_disk_is_one_line_and_leaves_nothing(command, stopped_run, speech_corpus, tmp_path):
    """Every writing command under a file-size limit: exit 1, one line naming what could not
    be written, no traceback, no output under its final name and no folder it created."""
    cache = tmp_path.parent / "cache-full-disk"
    lmlow("vocab", MINI, cache=cache, check=True)     # the caches, written without a limit
    out = tmp_path / "out"
    if command in ("unk", "prepare", "analyze", "bias-sweep"):
        args, out, names = _writing_command(command, stopped_run, tmp_path)
        kib = 4 if command in ("analyze", "bias-sweep") else 64
    elif command == "vocab":
        args, names, kib = ["vocab", MINI, "--out", out / "vocab.txt"], ["vocab.txt"], 4
    elif command == "compare":
        args, names, kib = ["compare", stopped_run, "--out", out], ["compare.md", "curves.png"], 4
    elif command == "embed":
        args = ["embed", MINI / "valid.txt", "--out", out / "v.txt", "--dim", "50", "--epochs",
                "2", "--threads", "1", "--tmp-dir", tmp_path]
        names, kib = ["v.txt"], 64
    elif command == "report":                      # a finished one-run sweep, then its report
        grid = tmp_path / "g.toml"
        grid.write_text("[runs.one]\ntie = true\n")
        lmlow("sweep", speech_corpus, "--grid", grid, "--preset", "tiny", "--max-steps", "2",
              "--out", out, cache=cache, check=True)
        args, names, kib = ["report", out], ["results.md", "results.csv", "results.json",
                                             "curves.png"], 4
    else:
        args, names, kib = ["ngram", MINI, "--order", "3", "--out", out, "--quiet"], \
            ["model.arpa", "model.bin", "summary.json"], 64
    r = _limited(args, kib, cache)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "cannot" in r.stderr or "too large" in r.stderr or "No space" in r.stderr, r.stderr
    left = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert not set(left) & set(names) and not [n for n in left if ".tmp" in n], left
    if command != "report":        # the folder a failed command made is gone (report's: a sweep's)
        assert not out.exists(), left
    assert not list(tmp_path.glob("lmlow-glove-*"))   # embed's work folder went with it


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
@pytest.mark.parametrize("command", ["analyze", "bias-sweep"])
def test_a_read_only_run_folder_is_one_line(command, stopped_run, tmp_path):
    run = copy_run(stopped_run, tmp_path / "run")
    run.chmod(0o555)
    try:
        extra = ["--samples", "2", "--words", "5"] if command == "bias-sweep" else []
        r = lmlow(command, run, *extra)
    finally:
        run.chmod(0o755)
    assert r.returncode == 1 and "cannot" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("command", ["analyze", "bias-sweep"])
def test_a_linked_default_output_folder_is_refused(command, stopped_run, tmp_path):
    """RUN/analysis -> elsewhere, in a run folder someone else made: refused, nothing written
    where it points."""
    run = copy_run(stopped_run, tmp_path / "run")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, run / ("analysis" if command == "analyze" else "bias-sweep"))
    extra = ["--samples", "2", "--words", "5"] if command == "bias-sweep" else []
    r = lmlow(command, run, *extra)
    assert r.returncode == 1 and "symbolic link" in r.stderr and not list(elsewhere.iterdir())


def test_an_ascii_terminal_gets_escapes_not_a_traceback(stopped_run):
    """PYTHONIOENCODING=ascii and a prompt with a word outside ASCII: the note about unknown
    words and the sample print with backslash escapes."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "ascii",
           "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"]}
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "generate", str(stopped_run),
                        "--prompt", "caf\u00e9 the", "--words", "3"], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "caf\\xe9" in r.stdout and "caf\\xe9" in r.stderr


def fake_slurm(tmp_path, sbatch: str):
    """A folder for PATH with an `sbatch` running the shell lines ``sbatch`` and an empty
    `squeue`: SLURM as a sweep sees it, without one."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "sbatch").write_text(f"#!/bin/sh\n{sbatch}\n")
    (bin_ / "squeue").write_text("#!/bin/sh\nexit 0\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    return bin_


def test_a_rejected_slurm_submission_leaves_the_folder_as_it_was(speech_corpus, tmp_path):
    """sbatch refuses the job (a fake sbatch that exits 1, as for a wrong account): one line
    with SLURM's message, and no sweep.json, slurm/ or logs/ left behind."""
    bin_ = fake_slurm(tmp_path, "echo 'sbatch: error: Invalid account' >&2\nexit 1")
    out = tmp_path / "sweep"
    grid = tmp_path / "g.toml"
    grid.write_text('[runs.one]\ntie = true\n')
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"]}
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "sweep", str(speech_corpus), "--grid",
                        str(grid), "--preset", "tiny", "--out", str(out), "--executor", "slurm"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "Invalid account" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("executor, link", [("local", "logs"), ("slurm", "slurm"),
                                             ("slurm", "slurm/outcomes"), ("local", "logs=file")])
def test_a_sweeps_own_folders_are_checked_before_it_writes(executor, link, speech_corpus,
                                                           tmp_path):
    """A sweep's logs/, slurm/ and slurm/outcomes/ planted as links: the SLURM run lists, job
    script and jobs.json were written where slurm/ pointed (a task's outcome where outcomes/
    did), and a local sweep refused a linked logs/ (or a file there) only after writing
    sweep.json. Now each is refused in one line before anything is written."""
    bin_ = fake_slurm(tmp_path, "echo 4242")
    out, elsewhere = tmp_path / "sweep", tmp_path / "elsewhere"
    elsewhere.mkdir()
    name, _, kind = link.partition("=")
    (out / name).parent.mkdir(parents=True)
    if kind == "file":
        (out / name).write_text("mine\n")
    else:
        (out / name).symlink_to(elsewhere)
    grid = tmp_path / "g.toml"
    grid.write_text('[runs.one]\ntie = true\n')
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"]}
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "sweep", str(speech_corpus), "--grid",
                        str(grid), "--preset", "tiny", "--max-steps", "1", "--out", str(out),
                        "--executor", executor], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert f"{out / name}: " in r.stderr and "Traceback" not in r.stderr
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


def test_a_sweep_path_with_a_percent_sign_keeps_slurms_output_in_it(tmp_path):
    """sbatch expands %-patterns in --output's whole path (%x: the job's name): a sweep folder
    named `runs%x` sent SLURM's task output to another folder; its % is written %%."""
    from lmlow.slurm import SlurmOptions, job_script

    out = tmp_path / "runs%x"
    script = job_script(out, out / "slurm" / "a.runs", 2, SlurmOptions())
    line = next(x for x in script.splitlines() if x.startswith("#SBATCH --output="))
    assert line == f'#SBATCH --output="{tmp_path.resolve()}/runs%%x/logs/slurm-%A_%a.out"'


def test_a_report_refuses_a_linked_run_folder_before_scoring(tiny_sweep, tmp_path):
    """A run folder of the sweep replaced by a link to a run elsewhere: `report` wrote its
    evaluations there and then refused with "edited or damaged?". Refused first now."""
    import shutil

    sweep = tmp_path / "sweep"
    shutil.copytree(tiny_sweep, sweep, ignore=shutil.ignore_patterns(".lock"))
    away = tmp_path / "away"
    (sweep / "standard.seed1").rename(away)
    for f in away.glob("eval_*.json"):
        f.unlink()
    (sweep / "standard.seed1").symlink_to(away)
    r = lmlow("report", sweep)
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "standard.seed1: a symbolic link among the sweep's runs" in r.stderr
    assert not list(away.glob("eval_*.json"))


@pytest.mark.parametrize("command", ["train", "ngram"])
def test_a_folder_of_someone_elses_model_is_not_taken_for_an_unstarted_run(command, tmp_path):
    """A Hugging Face model folder (config.json and vocab.txt) beside a file named like a
    temporary: taken for a run killed while it was set up, its files were replaced or deleted
    without --force. Now it is refused, every file kept; a folder lmlow set up (its .lock and
    config) still starts again without --force, its own temporaries reclaimed; --force
    clears lmlow's files only, a user's `notes.tmp99999` is not taken for a temporary."""
    out = tmp_path / "model"
    out.mkdir()
    mine = {"config.json": '{"model_type": "bert"}\n', "vocab.txt": "[PAD]\n[UNK]\n",
            "model.arpa": "not kenlm\n", "notes.tmp99999": "my notes\n"}
    for name, text in mine.items():
        (out / name).write_text(text)
    args = (["train", MINI, "--out", out, "--preset", "tiny", "--max-epochs", "0", "--threads", "1",
             "--quiet"] if command == "train" else
            ["ngram", MINI, "--order", "3", "--memory", "100M", "--out", out, "--quiet"])
    r = lmlow(*args)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "is not empty" in r.stderr, r.stderr
    assert {p.name: p.read_text() for p in out.iterdir()} == mine
    for name in mine:
        (out / name).unlink()
    (out / ".lock").write_text("pid 99999 on elsewhere since 2026-11-30 00:00:00\n")
    (out / "config.json.tmp99998").write_text("{")          # a setup killed mid-write
    lmlow(*args, check=True)
    assert "config.json.tmp99998" not in {p.name for p in out.iterdir()}
    (out / "notes.tmp99999").write_text("my notes\n")
    lmlow(*args, "--force", check=True)
    assert (out / "notes.tmp99999").read_text() == "my notes\n"


def test_a_second_ngram_on_the_same_folder_is_refused(tmp_path):
    """Two `lmlow ngram --force` at once used to race (a traceback and a partial model): while
    one holds the run's lock (held here as the first estimator would hold it), the second is
    refused in one line and writes nothing."""
    import fcntl
    out = tmp_path / "kn"
    out.mkdir()
    lock = open(out / ".lock", "a+")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        r = lmlow("ngram", MINI, "--order", "3", "--out", out, "--force", "--quiet")
    finally:
        lock.close()
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "wait for it to end" in r.stderr, r.stderr
    assert sorted(p.name for p in out.iterdir()) == [".lock"]


@pytest.mark.parametrize("name, content, command, message", [
    # each was a traceback (AttributeError or TypeError where a reader first indexed the file)
    ("data.json", "[1, 2]", "resume", "data.json: not what lmlow writes there (a JSON object)"),
    ("data.json", '{"fingerprint": "x"}', "resume", "data.json: not a data.json lmlow wrote"),
    ("metrics.jsonl", "[]", "resume", "metrics.jsonl:1: not a JSON object"),
    ("metrics.jsonl", "null", "compare", "metrics.jsonl:1: not a JSON object"),
    ("config.json", '"s"', "compare", None),       # compare shows the run without its settings
])
def test_a_hand_edited_run_file_of_another_shape_is_one_line(name, content, command, message,
                                                            stopped_run, speech_corpus, tmp_path):
    """A run file edited into valid JSON of another shape (a list, a string, null): one line
    naming it, and the run's files as they were; never a traceback."""
    import shutil

    run = copy_run(stopped_run, tmp_path / "r")
    (run / name).write_text(content + "\n")
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    if command == "resume":                       # a moved corpus: data.json is checked
        moved = shutil.copytree(speech_corpus, tmp_path / "moved")
        r = lmlow("train", moved, "--resume", run, "--max-steps", "4")
    else:                                 # beside an unedited copy (the same run twice is refused)
        r = lmlow("compare", run, copy_run(stopped_run, tmp_path / "other"))
    assert "Traceback" not in r.stderr, r.stderr
    if message is None:
        assert r.returncode == 0
    else:
        assert r.returncode == 1 and message in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    after = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and p.name != ".lock"}
    assert after == before                # (the run's lock file stays, as after any command)


@pytest.mark.parametrize("command", ["analyze", "bias-sweep", "compare", "unk"])
@pytest.mark.parametrize("kind", ["corpus", "run", "sweep"])
def test_results_go_to_a_folder_of_their_own_not_a_corpus_run_or_sweep(command, kind,
                                                                      stopped_run, tmp_path):
    """--out naming a corpus, a run or a sweep folder: refused in one line, before any work,
    the folder as it was. analyze, compare and bias-sweep wrote their tables and plots among a
    corpus's splits or a run's checkpoints, and unk its splits into a run folder (which
    then held a corpus that train refused). A corpus is unk's own kind of output."""
    import shutil
    target = tmp_path / kind
    if kind == "corpus":
        shutil.copytree(MINI, target)
    elif kind == "run":
        copy_run(stopped_run, target)
    else:
        target.mkdir()
        (target / "sweep.json").write_text("[]")
    before = sorted(p.name for p in target.iterdir())
    run = copy_run(stopped_run, tmp_path / "r")
    args = {"analyze": ["analyze", run], "bias-sweep": ["bias-sweep", run, "--lambdas", "0,1"],
            "compare": ["compare", run], "unk": ["unk", MINI]}[command]
    r = lmlow(*args, "--out", target, "--force")
    if command == "unk" and kind == "corpus":
        assert r.returncode == 0, r.stderr              # another K's corpus over an old one
        return
    what = {"corpus": "holds a corpus (train.txt)", "run": "is a run folder",
            "sweep": "is a sweep folder"}[kind]
    assert r.returncode == 1 and r.stderr == (f"lmlow: error: --out {target}: {what}; {command} "
                                              "writes into a folder of its own: give another "
                                              "--out\n"), r.stderr
    assert sorted(p.name for p in target.iterdir()) == before


@pytest.fixture(scope="module")
def tiny_sweep(speech_corpus, tmp_path_factory):
    """A finished sweep of one tiny run (standard.seed1)."""
    base = tmp_path_factory.mktemp("sweeps")
    (base / "grid.toml").write_text('[runs.standard]\ntie = true\n')
    out = base / "sweep"
    lmlow("sweep", speech_corpus, "--grid", base / "grid.toml", "--out", out, "--preset", "tiny",
          "--max-steps", "2", check=True, cache=tmp_path_factory.getbasetemp() / "cache")
    return out


@pytest.mark.parametrize("name, content, command, message", [
    ("sweep.json", '[{"x": 1}]', "status", 'sweep.json: {"x": 1} is not a run as lmlow plans one'),
    ("sweep.json", '{"runs": []}', "report", "sweep.json: not what lmlow writes there (a list"),
    ("standard.seed1/summary.json", '{"x": 1}', "report", "summary.json: lacks train_seconds"),
    ("standard.seed1/summary.json", '{"train_seconds": 1, "best_valid_ppl": "x"}', "status",
     "best_valid_ppl = 'x' is not a number"),
])
def test_a_hand_edited_sweep_file_is_one_line(name, content, command, message, tiny_sweep, tmp_path):
    """A sweep's plan or a run's summary edited into JSON of another shape: `sweep --status`
    and `report` said so with a TypeError, KeyError or a format error's traceback."""
    import shutil

    out = shutil.copytree(tiny_sweep, tmp_path / "sweep", ignore=shutil.ignore_patterns(".lock"))
    (out / name).write_text(content + "\n")
    r = lmlow("sweep", out, "--status") if command == "status" else lmlow("report", out)
    assert r.returncode == 1 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_ctrl_c_while_lmlow_starts_is_one_line_not_a_traceback(tmp_path):
    """Reading the command line imports torch, which takes seconds: a Ctrl-C then printed a
    KeyboardInterrupt traceback (and Python's own status). A real SIGINT, sent while torch is
    being imported, now gives the one line and status 130 of a command interrupted later."""
    import subprocess
    import sys

    script = (
        "import os, signal, sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch':\n"
        "            sys.meta_path.remove(self)\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "from lmlow.cli import main\n"
        f"sys.exit(main(['stats', {str(tmp_path / 'nowhere')!r}]))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "LMLOW_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 130 and r.stderr == "lmlow: interrupted\n", (r.returncode, r.stderr)
