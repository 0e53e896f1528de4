"""Sweeps run ordinary train commands, skip finished runs, and report a table and a plot."""
import csv
import json
import re

import pytest
from conftest import lmlow, write_corpus

from lmlow.errors import LmlowError
from lmlow.sweep import SIX, config_name, grid, plan

GRID = """
[runs.standard]
tie = true
init = ["random"]

[runs.untied-unigram]
tie = false
init = ["unigram"]
"""




def test_grids_have_the_papers_configurations():
    table1 = grid("table1", [])
    assert len(table1) == 20 and len({n for n, _, _ in table1}) == 20
    assert [n for n, _, _ in grid("six", [])] == [n for n, _ in SIX]
    assert len(grid("unk", [], ["0", "1", "2", "5"])) == 24
    assert config_name(dict(tie=False, freeze_input=True, init=("glove",))) == "untied.in-pre-frozen.out-rand"
    with pytest.raises(LmlowError, match="needs --embeddings"):
        plan("c", "o", "six", [1], "tiny", [], None, {})
    with pytest.raises(LmlowError, match="unknown grid"):
        grid("nope", [])


def test_tiny_sweep_end_to_end(speech_corpus, tmp_path):
    (tmp_path / "grid.toml").write_text(GRID)
    out = tmp_path / "sweep"
    args = ("sweep", speech_corpus, "--grid", tmp_path / "grid.toml", "--out", out,
            "--preset", "tiny", "--max-epochs", "1")
    r = lmlow(*args, "--dry-run")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 2 and all(l.startswith("lmlow train ") for l in lines)
    assert "--tie no --init unigram" in lines[1]
    r = lmlow(*args, "--jobs", "2")
    assert r.returncode == 0, r.stderr
    assert all((out / f"{n}.seed1" / "summary.json").exists() for n in ("standard", "untied-unigram"))
    for n in ("standard", "untied-unigram"):            # scored as each run finished
        for split in ("valid", "test"):
            cached = json.loads((out / f"{n}.seed1" / f"eval_best_{split}.json").read_text())
            assert 1 < cached["perplexity"] < 5000, cached
    assert lmlow(*args, "--dry-run").stdout.strip() == ""      # finished runs are skipped
    r = lmlow("report", out)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert {row["configuration"] for row in rows} == {"standard", "untied-unigram"}
    assert all(1 < float(row["valid ppl"]) < 5000 and int(row["trainable params"]) > 0 for row in rows)
    assert all(float(row["tokens/s"]) > 0 for row in rows)
    assert rows[0]["tie"] == "tied" or rows[1]["tie"] == "tied"
    assert (out / "curves.png").stat().st_size > 1000
    data = json.loads((out / "results.json").read_text())
    assert data[0]["valid ppl"] >= data[1]["valid ppl"]          # worst first, as Table 1
    # paired, bin by bin: new runs record the bins of the word read before, so both tables
    assert lmlow("report", out, "--paired", "standard").returncode == 0
    md = (out / "results.md").read_text()
    assert "of the predicted word" in md and "of the word read before it" in md
    row = next(r for r in json.loads((out / "results.json").read_text())
               if r["configuration"] == "untied-unigram")
    ev = {n: json.loads((out / f"{n}.seed1" / "eval_best_valid.json").read_text())
          for n in ("standard", "untied-unigram")}
    for key in ("bins", "context_bins"):
        got = row["paired"][key.replace("_", " ")]
        want = {a["bin"]: b["perplexity"] - a["perplexity"]
                for a, b in zip(ev["standard"][key], ev["untied-unigram"][key]) if a["tokens"]}
        assert set(got) == set(want) and len(want) >= 4
        for k, v in want.items():
            assert got[k]["diffs"] == pytest.approx([v]), (key, k)


def test_interrupted_run_is_resumed(speech_corpus, tmp_path):
    (tmp_path / "grid.toml").write_text(GRID)
    out = tmp_path / "sweep"
    r = lmlow("sweep", speech_corpus, "--grid", tmp_path / "grid.toml", "--out", out,
              "--preset", "tiny", "--max-steps", "5", "--max-epochs", "1", "--dry-run")
    first = r.stdout.splitlines()[0].split()[1:]
    assert lmlow(*first).returncode == 0
    (out / "standard.seed1" / "summary.json").unlink()       # as if killed after a checkpoint
    r = lmlow("sweep", speech_corpus, "--grid", tmp_path / "grid.toml", "--out", out,
              "--preset", "tiny", "--max-epochs", "1", "--dry-run")
    assert f"lmlow train --resume {out / 'standard.seed1'} --quiet" in r.stdout


def test_a_grid_file_takes_init_as_text_and_names_the_run_a_refused_combination_is_in(
        speech_corpus, vectors, tmp_path):
    """``init = "glove,unigram"`` (the flag's text form) in a grid file: the plan read the
    text's letters, so the run was not given --embeddings and the sweep refused it. A
    combination the grid's run makes is refused naming the file and the run (it named only
    flags), a named grid's by its configuration."""
    grid = tmp_path / "grid.toml"
    grid.write_text('[runs.pre]\ninit = "glove,unigram"\n')
    r = lmlow("sweep", speech_corpus, "--grid", grid, "--out", tmp_path / "s", "--preset",
              "tiny", "--embeddings", vectors, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert f"--init glove,unigram --embeddings {vectors}" in r.stdout
    grid.write_text('[runs.rows]\nfreeze_input_rows = "pretrained"\ntie = false\n')
    r = lmlow("sweep", speech_corpus, "--grid", grid, "--out", tmp_path / "s", "--preset", "tiny")
    assert r.stderr == (f"lmlow: error: {grid} [runs.rows]: --freeze-input-rows pretrained says "
                        "which rows --freeze-input keeps fixed: add --freeze-input\n")
    r = lmlow("sweep", speech_corpus, "--grid", "six", "--out", tmp_path / "s", "--preset", "tiny",
              "--embeddings", vectors, "--freeze-input-rows", "pretrained")
    assert r.stderr.startswith("lmlow: error: configuration standard: --freeze-input-rows")
    assert not (tmp_path / "s").exists()


def test_an_empty_init_in_a_grid_file_is_refused_when_planned(speech_corpus, tmp_path):
    """`init = ""` or `init = []` passed planning, then every run failed at `lmlow train`
    (whose --init refuses an empty list): refused once, naming the file and the run."""
    grid = tmp_path / "grid.toml"
    for value in ('""', "[]"):
        grid.write_text(f"[runs.a]\ninit = {value}\ntie = false\n")
        r = lmlow("sweep", speech_corpus, "--grid", grid, "--out", tmp_path / "s", "--dry-run")
        assert r.returncode == 1 and r.stderr.startswith(
            f"lmlow: error: {grid} [runs.a]: --init: expected comma-separated names, got "
            "nothing") and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "s").exists()


def test_a_dry_run_checks_the_corpus_and_vectors_as_the_sweep_does(speech_corpus, tmp_path):
    """`--dry-run` printed the commands of a sweep whose corpus or vectors do not exist (each
    would fail): refused in the same line the sweep gives, nothing written."""
    args = ("--grid", "six", "--out", tmp_path / "s", "--dry-run")
    r = lmlow("sweep", tmp_path / "nocorpus", *args, "--embeddings", tmp_path / "v.txt")
    assert r.returncode == 1 and r.stderr == (f"lmlow: error: {tmp_path / 'nocorpus'}: no such "
                                              "corpus folder (expected a folder with train.txt, "
                                              "valid.txt, test.txt)\n"), r.stderr
    r = lmlow("sweep", speech_corpus, *args, "--embeddings", tmp_path / "v.txt")
    assert r.returncode == 1 and r.stderr == (f"lmlow: error: --embeddings {tmp_path / 'v.txt'}: "
                                              "no such file\n"), r.stderr
    assert not (tmp_path / "s").exists()


def test_values_and_several_vectors_files_are_refused_by_grids_that_do_not_read_them(
        speech_corpus, vectors, tmp_path):
    """`--grid six --values 0.5` and `--grid six --embeddings a.txt,b.txt` planned the six
    with no K, no fraction and the first file only, silently."""
    args = ("sweep", speech_corpus, "--out", tmp_path / "s", "--dry-run")
    r = lmlow(*args, "--grid", "six", "--embeddings", vectors, "--values", "0.5")
    assert r.returncode == 1 and r.stderr == (
        "lmlow: error: --values 0.5: only --grid unk and datasize take values (K, training "
        "fractions); grid six has none\n"), r.stderr
    r = lmlow(*args, "--grid", "six", "--embeddings", f"{vectors},{vectors}")
    assert r.returncode == 1 and r.stderr == (
        f"lmlow: error: --embeddings {vectors},{vectors}: several vectors files are for --grid "
        "pretrain (the six for each); grid six reads one\n"), r.stderr
    r = lmlow(*args, "--grid", "datasize", "--embeddings", vectors, "--values", "0.5")
    assert r.returncode == 0 and "--train-fraction 0.5" in r.stdout, r.stderr
    assert not (tmp_path / "s").exists()


def test_a_flag_a_named_grid_sets_itself_is_refused_and_a_bad_one_always(speech_corpus, vectors,
                                                                         tmp_path):
    """`--grid six --tie no` (or --init, --freeze-input) was dropped, or made two of the six
    one run (`--freeze-input`: ours-unfrozen trained as ours): refused naming the flag and the
    grid, as are unk's --unk-threshold and datasize's --train-fraction. An invalid value is
    refused as `lmlow train` refuses it even where a grid file's run sets the key (it was
    dropped unchecked). unk's documented --extend-vocab (its K=0 runs) stays."""
    args = ("sweep", speech_corpus, "--out", tmp_path / "s", "--embeddings", vectors, "--dry-run")
    for grid, flags, key in (("six", ["--init", "glvoe,unigarm"], "init"),
                             ("six", ["--tie", "no"], "tie"),
                             ("six", ["--freeze-input"], "freeze_input"),
                             ("table1", ["--no-freeze-output"], "freeze_output"),
                             ("unk", ["--values", "1", "--unk-threshold", "3"], "unk_threshold"),
                             ("datasize", ["--train-fraction", "0.5"], "train_fraction")):
        r = lmlow(*args, "--grid", grid, *flags)
        assert r.returncode == 1 and r.stderr.startswith(
            f"lmlow: error: --{key.replace('_', '-')}: grid {grid} sets {key} for its runs; use "
            "a grid file to change it") and r.stderr.count("\n") == 1, r.stderr
    assert lmlow(*args, "--grid", "unk", "--values", "0,1", "--extend-vocab").returncode == 0
    grid = tmp_path / "grid.toml"
    grid.write_text('[runs.a]\ninit = ["random"]\noptimizer = "adam"\n')
    for flags, said in ((["--init", "glvoe"], "--init: unknown 'glvoe'; choose from "),
                        (["--optimizer", "sgdd"], "--optimizer 'sgdd': choose one of ")):
        r = lmlow(*args, "--grid", grid, *flags)
        assert r.returncode == 1 and r.stderr.startswith(f"lmlow: error: {said}"), r.stderr
    assert not (tmp_path / "s").exists()


def test_a_grid_files_run_may_name_its_own_preset(speech_corpus, tmp_path):
    """``preset = "transformer-tiny"`` in a grid file's run table was dropped for the sweep's
    --preset (the run trained as an LSTM of the other preset, its table said nothing); it now
    wins, as the run's other keys win over the sweep's flags, and an unknown one names the
    run. A run's seed (replaced by --seeds) or corpus (each table compares one corpus) is
    refused."""
    grid = tmp_path / "grid.toml"
    grid.write_text('[runs.tf]\npreset = "transformer-tiny"\n[runs.plain]\nmax_epochs = 1\n')
    r = lmlow("sweep", speech_corpus, "--grid", grid, "--out", tmp_path / "s", "--preset",
              "tiny", "--dry-run")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any("tf.seed1 --preset transformer-tiny " in ln for ln in lines), r.stdout
    assert any("plain.seed1 --preset tiny " in ln for ln in lines), r.stdout
    for key, value, owner in (("seed", "5", "--seeds"), ("corpus", '"/tmp"', "its CORPUS argument")):
        grid.write_text(f'[runs.a]\n{key} = {value}\n')       # was replaced, or honoured
        r = lmlow("sweep", speech_corpus, "--grid", grid, "--out", tmp_path / "s", "--dry-run")
        assert r.stderr == (f"lmlow: error: {grid} [runs.a]: {key} is the sweep's ({owner}), "
                            "the same for every run; leave it out of the run's table\n")
    grid.write_text('[runs.odd]\npreset = "huge"\n')
    r = lmlow("sweep", speech_corpus, "--grid", grid, "--out", tmp_path / "s", "--dry-run")
    assert r.stderr == (f"lmlow: error: {grid} [runs.odd]: preset = 'huge': choose one of "
                        "paper, small, transformer-small, transformer-tiny, tiny\n")
    assert not (tmp_path / "s").exists()


def test_status_progress_reads_what_a_run_logged():
    """The progress column: last and best validation perplexity, minutes per epoch (the
    median of the last five epochs, so that one epoch that held a pause does not set it); a
    resumed run's clock, or a hand-edited row, drops only what it cannot say."""
    from lmlow.sweep import progress

    rows = [{"epoch": 1, "step": 10, "valid_ppl": 300.0, "elapsed": 60.0},
            {"epoch": 2, "step": 20, "valid_ppl": 250.0, "elapsed": 180.0},
            {"epoch": 3, "step": 30, "valid_ppl": 260.0, "elapsed": 420.0}]
    assert progress(rows) == ("epoch 3, step 30; valid ppl 260.0, best 250.0 (epoch 2); "
                              "3.0 min/epoch")
    assert progress(rows[:1]) == "epoch 1, step 10; valid ppl 300.0, best 300.0 (epoch 1)"
    restarted = [*rows[:2], {**rows[2], "elapsed": 30.0}]
    assert progress(restarted).endswith("(epoch 2); 2.0 min/epoch")
    # six minutes an epoch, one of them paused for 30: still six; only the last five count
    steady = [{"epoch": e, "step": e, "valid_ppl": 200.0, "elapsed": 360.0 * e + 1800 * (e > 7)}
              for e in range(1, 10)]
    assert progress(steady).endswith("; 6.0 min/epoch")
    assert progress(steady[:8]).endswith("; 6.0 min/epoch")
    slower = [*steady, *({"epoch": e, "step": e, "valid_ppl": 200.0,
                          "elapsed": 360.0 * 9 + 1800 + 600.0 * (e - 9)} for e in range(10, 13))]
    assert progress(slower).endswith("; 10.0 min/epoch")
    assert progress([{"epoch": "x", "valid_ppl": "y"}]) == "epoch 0, step 0"



def test_a_later_command_resumes_a_started_run_with_its_precision_threads_and_budget(
        speech_corpus, tmp_path):
    """What `lmlow train --resume` may change, a later sweep command changes for the runs it
    resumes (a table started in fp32 on a CPU without bf16 units must go on in bf16 on one that
    has them, not stay three times slower), and sweep.json says so; a finished run is not
    touched and its plan keeps the values it trained with."""
    (tmp_path / "grid.toml").write_text(GRID)
    out = tmp_path / "sweep"
    args = ("sweep", speech_corpus, "--grid", tmp_path / "grid.toml", "--out", out,
            "--preset", "tiny", "--max-epochs", "1", "--seeds", "1")
    assert lmlow(*args, "--max-steps", "5", "--threads", "1").returncode == 0
    started = out / "standard.seed1"
    (started / "summary.json").unlink()              # as if killed after its last checkpoint
    r = lmlow(*args, "--max-steps", "8", "--threads", "2", "--dry-run")
    assert r.stdout.splitlines() == [
        f"lmlow train --resume {started} --quiet --max-steps 8 --threads 2"], r.stdout
    r = lmlow(*args, "--max-steps", "8", "--threads", "2")
    assert r.returncode == 0, r.stderr
    config = json.loads((started / "config.json").read_text())
    assert json.loads((started / "summary.json").read_text())["steps"] == 8
    assert (config["max_steps"], config["threads"]) == (8, 2)
    finished = out / "untied-unigram.seed1"
    assert json.loads((finished / "summary.json").read_text())["steps"] == 5
    planned = {p["name"]: p["settings"] for p in json.loads((out / "sweep.json").read_text())}
    assert (planned["standard"]["max_steps"], planned["standard"]["threads"]) == (8, 2)
    assert (planned["untied-unigram"]["max_steps"], planned["untied-unigram"]["threads"]) == (5, 1)

@pytest.mark.slow
def test_sigterm_to_a_sweep_stops_its_trainings_and_the_same_command_resumes(speech_corpus,
                                                                          tmp_path):
    """`kill SWEEP`: the running training gets SIGTERM and saves, no other run starts, the
    sweep exits 143 in one line once the training stopped (none left running unwatched), and
    the same command finishes the table. (Mutation-checked: without the forwarding the sweep
    died at once, exit -15, and its training went on alone.)"""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "grid.toml").write_text(GRID)
    out = tmp_path / "sweep"
    args = ["sweep", str(speech_corpus), "--grid", str(tmp_path / "grid.toml"), "--out", str(out),
            "--preset", "tiny", "--max-epochs", "3", "--jobs", "1", "--threads", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    sweep = subprocess.Popen([sys.executable, "-m", "lmlow.cli", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    first = out / "standard.seed1"
    deadline = time.time() + 120
    while not (first / "last.pt").exists() and time.time() < deadline:   # training has begun
        time.sleep(0.05)
    assert (first / "last.pt").exists(), sweep.stderr.read() if sweep.poll() else "slow"
    sweep.send_signal(signal.SIGTERM)
    _, err = sweep.communicate(timeout=120)
    assert sweep.returncode == 143, err
    assert err.strip().count("\n") == 0 and "SIGTERM" in err and "resumes" in err
    assert (first / "last.pt").exists() and not (first / "summary.json").exists()
    assert not _held(first)                        # the training has ended, not left running
    assert not (out / "untied-unigram.seed1").exists()                 # nothing new started
    status = lmlow("sweep", out, "--status").stdout     # where the run stands, from its metrics
    row = next(line for line in status.splitlines() if "standard.seed1" in line)
    assert "| stopped" in row and "not started" in status, status
    if (first / "metrics.jsonl").exists():      # stopped after its first validation (or before)
        assert re.search(r"\| epoch [0-9]+, step [0-9]+; valid ppl [0-9.]+, best [0-9.]+ "
                         r"\(epoch [0-9]+\)", row), row
    else:
        assert re.search(r"\| stopped +\| +\| +\| +\| resumable", row), row
    r = lmlow(*args)
    assert r.returncode == 0, r.stderr
    assert all((out / f"{n}.seed1" / "summary.json").exists() for n in ("standard", "untied-unigram"))


def _held(run_dir) -> bool:
    from lmlow.rundir import RunDir

    return RunDir(run_dir).locked_by() is not None


def test_bad_grid_file_is_one_line(tmp_path, speech_corpus):
    (tmp_path / "g.toml").write_text("[runs.a]\nbogus = 1\n")
    r = lmlow("sweep", speech_corpus, "--grid", tmp_path / "g.toml", "--out", tmp_path / "s", "--dry-run")
    assert r.returncode == 1 and "unknown setting 'bogus'" in r.stderr and "Traceback" not in r.stderr


def test_a_grid_files_keys_outside_its_runs_tables_are_refused(tmp_path, speech_corpus):
    """A top-level `preset = ...` or `seeds = [...]`, or a misspelled `[run.b]`, was dropped
    and the sweep planned what the file does not say (here one run of three)."""
    for key, text in (("preset", 'preset = "tiny"\n'), ("run", "[run.b]\ntie = false\n"),
                      ("Runs", "[Runs.c]\nlr = 0.1\n")):
        (tmp_path / "g.toml").write_text(text + "[runs.a]\ntie = true\n")
        r = lmlow("sweep", speech_corpus, "--grid", tmp_path / "g.toml", "--out", tmp_path / "s",
                  "--dry-run")
        assert r.returncode == 1 and r.stderr == (
            f"lmlow: error: {tmp_path / 'g.toml'}: {key!r} is not a grid file's key: it holds "
            "only [runs.NAME] tables (a setting for every run is a flag of the sweep)\n"), r.stderr
    assert not (tmp_path / "s").exists()


def test_extend_vocab_gives_every_configuration_the_same_words():
    """K=0 in the paper's sense: with --extend-vocab even the random `standard` run reads the
    vectors' words, so the six are scored on the same tokens; the unk grid extends only K=0
    (K >= 1 is the paper's construction from training counts)."""
    runs = plan("c", "o", "six", [1], "tiny", ["v.txt"], None, {"extend_vocab": True})
    assert all(r.settings["embeddings"] == "v.txt" and r.settings["extend_vocab"] for r in runs)
    runs = plan("c", "o", "unk", [1], "tiny", ["v.txt"], ["0", "1", "5"], {"extend_vocab": True})
    assert {r.settings["unk_threshold"] for r in runs if r.settings["extend_vocab"]} == {0}
    assert len([r for r in runs if not r.settings["extend_vocab"]]) == 12


def test_report_scores_the_configurations_the_maps_apply_to_with_them(speech_corpus, vectors,
                                                                      tmp_path):
    """`report --map-unseen-inputs --map-unseen-outputs` scores the untied configuration whose
    rows trained from vectors as `lmlow eval` with the same flags does, the tied one as
    trained, says which in a column, and pairs bin by bin on the same evaluations; a plain
    report afterwards is the plain table again."""
    (tmp_path / "grid.toml").write_text(GRID.split("[runs.untied-unigram]")[0] + """
[runs.ours-unfrozen]
tie = false
init = ["glove", "glove-output"]
""")
    out = tmp_path / "sweep"
    r = lmlow("sweep", speech_corpus, "--grid", tmp_path / "grid.toml", "--out", out,
              "--preset", "tiny", "--max-epochs", "1", "--embeddings", vectors,
              "--extend-vocab")
    assert r.returncode == 0, r.stderr
    assert lmlow("report", out).returncode == 0
    plain = {row["configuration"]: row for row in json.loads((out / "results.json").read_text())}
    both = ("--map-unseen-inputs", "--map-unseen-outputs")
    r = lmlow("report", out, *both, "--paired", "standard")
    assert r.returncode == 0, r.stderr
    rows = {row["configuration"]: row for row in csv.DictReader((out / "results.csv").open())}
    assert rows["standard"]["scored with"] == "as trained"
    assert rows["ours-unfrozen"]["scored with"] == " ".join(both)
    assert float(rows["standard"]["valid ppl"]) == pytest.approx(plain["standard"]["valid ppl"])
    run = out / "ours-unfrozen.seed1"
    want = {split: json.loads(lmlow("eval", run, "--split", split, "--json", *both,
                                    check=True).stdout) for split in ("valid", "test")}
    data = {row["configuration"]: row for row in json.loads((out / "results.json").read_text())}
    for split in ("valid", "test"):
        assert data["ours-unfrozen"][f"{split} ppl"] == pytest.approx(
            want[split]["perplexity"], rel=1e-6)
        assert want[split]["perplexity"] != pytest.approx(plain["ours-unfrozen"][f"{split} ppl"],
                                                          rel=1e-6)
    # the paired bins compare the mapped model's bins with the standard one's
    ref = json.loads((out / "standard.seed1" / "eval_best_valid.json").read_text())["bins"]
    diffs = {a["bin"]: b["perplexity"] - a["perplexity"]
             for a, b in zip(ref, want["valid"]["bins"]) if a["tokens"]}
    got = data["ours-unfrozen"]["paired"]["bins"]
    assert set(got) == set(diffs)
    for k, v in diffs.items():
        assert got[k]["diffs"] == pytest.approx([v], rel=1e-6), k
    assert "*scored with*" in (out / "results.md").read_text()
    assert lmlow("report", out).returncode == 0
    again = json.loads((out / "results.json").read_text())
    assert {r["configuration"]: r["valid ppl"] for r in again} == {
        n: r["valid ppl"] for n, r in plain.items()}
    assert "scored with" not in (out / "results.csv").read_text().splitlines()[0]
    assert not any("scored with" in r or "maps" in r for r in again)
    # with a baseline, its tokens are checked against the evaluations the rows read (mapped),
    # not against plain ones scored again (here none could be: no checkpoint, no plain cache)
    import shutil
    prior = tmp_path / "prior"
    shutil.copytree(out / "standard.seed1", prior, ignore=shutil.ignore_patterns(".lock"))
    for f in [run / "eval_best_valid.json", *run.glob("*.pt")]:
        f.unlink()
    r = lmlow("report", out, *both, "--baseline", prior)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr


def test_report_says_whether_runs_converged_and_survives_without_checkpoints(speech_corpus, tmp_path):
    """A run ended by early stopping is converged, one ended by a cap is not; a committed sweep
    (checkpoints left out of git) still reports from its cached evaluations."""
    from lmlow.report import _stopped_by, convergence
    from lmlow.rundir import RunDir

    rows = [{"epoch": e, "valid_ppl": p} for e, p in enumerate([9, 8, 8.5, 8.2], 1)]
    assert _stopped_by({"patience": 2, "max_epochs": 10}, {"epochs": 4}, rows) == "patience"
    assert _stopped_by({"patience": 3, "max_epochs": 4}, {"epochs": 4}, rows) == "epochs"
    out = tmp_path / "sweep"
    (tmp_path / "grid.toml").write_text(GRID)
    args = ("sweep", speech_corpus, "--grid", tmp_path / "grid.toml", "--out", out,
            "--preset", "tiny", "--max-epochs", "1")
    assert lmlow(*args).returncode == 0
    conv = convergence(RunDir(out / "standard.seed1"))
    assert conv == {"converged": False, "stopped_by": "epochs", "best_epoch": 1,
                    "best_minutes": conv["best_minutes"]} and conv["best_minutes"] > 0
    assert lmlow("report", out).returncode == 0
    before = json.loads((out / "results.json").read_text())
    assert {row["converged"] for row in before} == {"0/1"}
    assert all(len(row["valid ppls"]) == 1 and row["seed list"] == [1] for row in before)
    for pt in out.glob("*/*.pt"):
        pt.unlink()
    assert lmlow("report", out).returncode == 0
    after = json.loads((out / "results.json").read_text())
    assert [r["valid ppl"] for r in after] == [r["valid ppl"] for r in before]
    for cache in out.glob("*/eval_best_*.json"):
        cache.unlink()
    r = lmlow("report", out)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "best.pt" in r.stderr


def test_a_sweep_refuses_a_plan_its_finished_runs_did_not_train_and_records_what_they_did(
        speech_corpus, tmp_path):
    """A finished or started run is skipped or resumed, never retrained: a later command that
    plans other settings for it would make a table of two experiments (refused, one line, the
    plan untouched), and one that differs only in what --resume may change (precision, the
    budget) must not make sweep.json misdescribe the run (seen: a CPU without AVX-512 planned
    fp32 over finished bf16 runs)."""
    (tmp_path / "grid.toml").write_text(GRID)
    out = tmp_path / "sweep"
    args = ("sweep", speech_corpus, "--grid", tmp_path / "grid.toml", "--out", out,
            "--preset", "tiny", "--max-steps", "5")
    r = lmlow(*args, "--max-epochs", "1", "--precision", "fp32", "--seeds", "1")
    assert r.returncode == 0, r.stderr
    plan_file = out / "sweep.json"
    before = plan_file.read_bytes()
    for flags in (["--lr", "0.5"], ["--lr", "0.5", "--dry-run"]):
        r = lmlow(*args, "--max-epochs", "1", "--precision", "fp32", "--seeds", "1,2", *flags)
        assert r.returncode != 0 and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "standard.seed1" in r.stderr and "lr = " in r.stderr, r.stderr
        assert plan_file.read_bytes() == before
        assert not (out / "standard.seed2").exists()
    r = lmlow(*args, "--max-epochs", "3", "--precision", "bf16", "--seeds", "1")
    assert r.returncode == 0, r.stderr
    planned = json.loads(plan_file.read_text())
    trained = {p["name"]: json.loads((out / f"{p['name']}.seed1" / "config.json").read_text())
               for p in planned}
    assert len(planned) == 2
    for p in planned:
        assert (p["settings"]["precision"], p["settings"]["max_epochs"]) == ("fp32", 1)
        assert trained[p["name"]]["precision"] == "fp32" and trained[p["name"]]["max_epochs"] == 1


def test_a_sweep_with_vectors_of_another_size_than_the_presets_runs_again(speech_corpus, vectors,
                                                                        tmp_path):
    """24-d vectors under the tiny preset's 32: a pretrained run records the vectors' size,
    and the same sweep command again (to add a seed, or to resume an interrupted run) was
    refused, 'trained with emb_size = 24, the sweep plans emb_size = 32'."""
    (tmp_path / "grid.toml").write_text('[runs.pretrained]\ntie = false\ninit = ["glove", "glove-output"]\n'
                                        '[runs.random]\ntie = false\ninit = ["random"]\n')
    args = ("sweep", speech_corpus, "--grid", tmp_path / "grid.toml", "--out", tmp_path / "s",
            "--embeddings", vectors, "--preset", "tiny", "--max-steps", "3", "--max-epochs", "1")
    assert lmlow(*args, "--seeds", "1").returncode == 0
    assert json.loads((tmp_path / "s" / "pretrained.seed1" / "config.json").read_text())["emb_size"] == 24
    r = lmlow(*args, "--seeds", "1,2")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "s" / "pretrained.seed2" / "summary.json").exists()
    r = lmlow(*args, "--seeds", "1,2", "--emb-size", "40")   # the random run's size: another run
    assert r.returncode != 0 and "random.seed1" in r.stderr and "emb_size = 32" in r.stderr, r.stderr


def test_a_sweep_folders_plan_is_every_run_ever_planned_into_it(tmp_path):
    """Seeds or configurations added by a later command join the plan; a run planned again is
    replaced where it was, not repeated: the report's 'Partial: N of M' counts them all."""
    from lmlow.sweep import load_plan, record_plan

    c, v = write_corpus(tmp_path / "c", "a b\n", "a\n", "b\n"), tmp_path / "v.txt"
    v.write_text("a 0.1 0.2\n")        # (what the runs read is checked before a plan is written)
    first = plan(c, tmp_path, "six", [1], "tiny", [str(v)], None, {})
    record_plan(first, tmp_path)
    record_plan(plan(c, tmp_path, "six", [1, 2], "tiny", [str(v)], None, {"lr": 0.01})[:3], tmp_path)
    planned = load_plan(tmp_path)
    assert len(planned) == 7 and len({r.folder for r in planned}) == 7   # 6 + standard.seed2
    assert [r.settings.get("lr") for r in planned if r.folder == "standard.seed1"] == [0.01]
    # in place: the file changes only where the plan does
    assert [r.folder for r in planned] == [r.folder for r in first] + ["standard.seed2"]


def test_a_flag_of_one_backbone_goes_to_that_backbones_runs(tmp_path, speech_corpus):
    """A grid may mix the LSTM and the Transformer: the sweep's --heads and --context reach
    the Transformer's runs only, its --wdrop the LSTM's only (`lmlow train` refuses each for
    the other backbone, where it would do nothing)."""
    (tmp_path / "g.toml").write_text('[runs.lstm]\ntie = true\n\n'
                                     '[runs.tx]\narch = "transformer"\nhidden_size = 32\n')
    r = lmlow("sweep", speech_corpus, "--grid", tmp_path / "g.toml", "--out", tmp_path / "s",
              "--preset", "tiny", "--heads", "2", "--context", "8", "--wdrop", "0.3", "--dry-run")
    assert r.returncode == 0, r.stderr
    lines = {line.split("--out ")[1].split()[0].rsplit("/", 1)[1]: line for line in r.stdout.splitlines()}
    assert "--heads 2" in lines["tx.seed1"] and "--context 8" in lines["tx.seed1"]
    assert "--wdrop" not in lines["tx.seed1"]
    assert "--heads" not in lines["lstm.seed1"] and "--context" not in lines["lstm.seed1"]
    assert "--wdrop 0.3" in lines["lstm.seed1"]


def test_report_paired_compares_every_configuration_with_one_seed_by_seed(tmp_path):
    """`lmlow report --paired standard` on the committed six (3 seeds): each configuration's
    differences from standard, seed by seed, read here from the run folders' own cached
    evaluations, and the verdict by the rule written out again (the 95% t-interval of the
    differences, at least 0.5% of the perplexity). A name the sweep lacks is refused in one
    line and leaves the report as it was. In a grid of groups (K, data size) each row is
    compared with the reference of its own group."""
    import shutil
    import statistics
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "experiments" / "six" / "sweep"
    out = tmp_path / "six"
    shutil.copytree(src, out, ignore=shutil.ignore_patterns("*.pt"))
    r = lmlow("report", out, "--paired", "standard")
    assert r.returncode == 0, r.stderr
    assert "## Against standard, seed by seed" in (out / "results.md").read_text()

    def ppls(name):
        return {json.loads((out / f"{name}.seed{s}" / "config.json").read_text())["seed"]:
                json.loads((out / f"{name}.seed{s}" / "eval_best_valid.json").read_text())["perplexity"]
                for s in (1, 2, 3)}

    ref = ppls("standard")
    rows = {row["configuration"]: row for row in json.loads((out / "results.json").read_text())}
    assert "paired" not in rows["standard"] and len(rows) == 6
    verdicts = set()
    for name, row in rows.items():
        if name == "standard":
            continue
        mine = ppls(name)
        d = [mine[s] - ref[s] for s in (1, 2, 3)]
        assert row["paired"]["against"] == "standard" and row["paired"]["seeds"] == [1, 2, 3]
        assert row["paired"]["diffs"] == pytest.approx(d)
        margin = max(4.3026527 * statistics.stdev(d) / 3 ** 0.5,     # t(0.975, 2), from a table
                     0.005 * min(statistics.mean(ref.values()), statistics.mean(mine.values())))
        assert row["paired"]["margin"] == pytest.approx(margin)
        want = ("better" if all(x < 0 for x in d) and statistics.mean(d) < -margin else
                "worse" if all(x > 0 for x in d) and statistics.mean(d) > margin else
                "no clear difference")
        assert row["paired"]["verdict"] == want
        verdicts.add(want)
    assert "better" in verdicts         # pretraining helps on this table: the test can tell
    # bin by bin (these runs predate the bins of the word read before: only the target's)
    md = (out / "results.md").read_text()
    assert "of the predicted word" in md and "of the word read before" not in md
    def bin_ppl(run, name):
        bins = json.loads((out / run / "eval_best_valid.json").read_text())["bins"]
        return next(b["perplexity"] for b in bins if b["bin"] == name)

    for name in ("ours", "ours-unfrozen"):
        d = [bin_ppl(f"{name}.seed{s}", "2-5") - bin_ppl(f"standard.seed{s}", "2-5") for s in (1, 2, 3)]
        assert rows[name]["paired"]["bins"]["2-5"]["diffs"] == pytest.approx(d)
        assert "context bins" not in rows[name]["paired"]
    before = {p.name: p.read_bytes() for p in out.glob("results.*")}
    r = lmlow("report", out, "--paired", "ours-frozen")
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "--paired ours-frozen" in r.stderr and "standard+pretraining" in r.stderr
    assert {p.name: p.read_bytes() for p in out.glob("results.*")} == before
    # a grid of groups (Table 3's K): each configuration against standard at its own K
    unk = tmp_path / "unk"
    shutil.copytree(src.parents[1] / "unk" / "sweep", unk, ignore=shutil.ignore_patterns("*.pt"))
    assert lmlow("report", unk, "--paired", "standard").returncode == 0
    rows = json.loads((unk / "results.json").read_text())
    assert len(rows) == 18 and sum("paired" in r for r in rows) == 15
    for row in rows:
        name, k = row["configuration"].rsplit(".", 1)
        if name != "standard":
            assert row["paired"]["against"] == f"standard.{k}"
            d = [json.loads((unk / f"{row['configuration']}.seed{s}" / "eval_best_valid.json")
                            .read_text())["perplexity"]
                 - json.loads((unk / f"standard.{k}.seed{s}" / "eval_best_valid.json")
                              .read_text())["perplexity"] for s in (1, 2, 3)]
            assert row["paired"]["diffs"] == pytest.approx(d)


def test_a_finished_run_is_scored_with_the_threads_it_trained_with(speech_corpus, tmp_path, monkeypatch):
    """A table trained at one thread a run beside others (experiments/queue.sh) must not score
    each finished run on every core: the sweep scores with the run's own --threads when its
    settings name them, and with its share of the cores otherwise."""
    import torch

    from lmlow import sweep
    from lmlow.config import build_config
    from lmlow.rundir import RunDir
    from lmlow.train import train

    asked = []
    real = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (asked.append(n), real(1)))
    for threads in (1, 0):
        run = tmp_path / f"t{threads}"
        train(build_config("tiny", corpus=str(speech_corpus), max_epochs=1, threads=threads),
              run, quiet=True)
        asked.clear()
        assert sweep._score_now(RunDir(run), 2, print) == 0
        assert asked == [1 if threads else 2]
        assert (run / "eval_best_test.json").exists()


def test_a_run_that_lost_its_checkpoint_is_refused_not_trained_over(speech_corpus, tmp_path):
    """A workspace restored without its ignored files keeps a run's metrics.jsonl but not its
    last.pt: the sweep used to start such a run over with --force, deleting the record of every
    epoch it trained. It is refused (one line naming the folder, nothing written) until the user
    moves the folder away; a run killed before its first validation still starts over."""
    (tmp_path / "grid.toml").write_text(GRID)
    out = tmp_path / "sweep"
    args = ("sweep", speech_corpus, "--grid", tmp_path / "grid.toml", "--out", out,
            "--preset", "tiny", "--max-steps", "5", "--max-epochs", "1", "--seeds", "1")
    assert lmlow(*args).returncode == 0
    run = out / "standard.seed1"
    for name in ("summary.json", "last.pt"):
        (run / name).unlink()                      # trained, then lost its checkpoint
    record = (run / "metrics.jsonl").read_bytes()
    plan = (out / "sweep.json").read_bytes()
    for flags in ([], ["--dry-run"]):
        r = lmlow(*args, *flags)
        assert r.returncode != 0 and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert str(run) in r.stderr and "no last.pt" in r.stderr and "1 validation (" in r.stderr
        assert (run / "metrics.jsonl").read_bytes() == record and (run / "best.pt").exists()
        assert (out / "sweep.json").read_bytes() == plan
    r = lmlow("sweep", out, "--status")
    line = next(l for l in r.stdout.splitlines() if "standard.seed1" in l)
    assert r.returncode == 0 and "checkpoint lost" in line and "1 validation" in line, r.stdout
    r = lmlow("train", "--resume", run)          # said "a run that has not started"
    assert r.returncode == 1 and "lost its last.pt" in r.stderr and "eval" in r.stderr, r.stderr
    finished = out / "untied-unigram.seed1"
    (finished / "last.pt").unlink()               # as a committed run folder keeps it
    r = lmlow("train", "--resume", finished, "--max-epochs", "2")
    assert r.returncode == 1 and "finished (summary.json)" in r.stderr, r.stderr
    (run / "best.pt").unlink()
    (run / "metrics.jsonl").write_text("")         # killed before its first validation
    r = lmlow(*args, "--dry-run")
    assert r.returncode == 0 and "--force" in r.stdout, r.stderr


def test_runs_record_the_vectors_they_read_and_a_report_warns_when_a_table_mixes_them(
        speech_corpus, vectors, tmp_path):
    """data.json records the vectors file a run read (path, size, sha256: GloVe rebuilt on
    another CPU need not give the same bits, and a table whose seeds read different files of one
    name compares more than its configurations); the report warns in results.md and on
    stderr, and says so too where a run's record predates it. An n-gram baseline, which reads
    only the vectors' words, is no such run."""
    import hashlib
    import shutil

    rebuilt = tmp_path / "other" / vectors.name
    rebuilt.parent.mkdir()
    lines = vectors.read_text().splitlines(keepends=True)
    rebuilt.write_text("".join(lines[:-1]))                 # the same name, other bits
    sweep = tmp_path / "sweep"

    def train(seed, vec, *flags):
        r = lmlow("train", speech_corpus, "--out", sweep / f"pre.seed{seed}", "--preset", "tiny",
                  "--init", "glove", "--embeddings", vec, "--max-steps", "2", "--seed", seed,
                  "--quiet", *flags)
        assert r.returncode == 0, r.stderr

    train(1, vectors)
    train(2, vectors)
    data = json.loads((sweep / "pre.seed1" / "data.json").read_text())
    assert data["vectors"] == {"path": str(vectors.resolve()), "file": vectors.name,
                               "bytes": vectors.stat().st_size,
                               "sha256": hashlib.sha256(vectors.read_bytes()).hexdigest()}
    r = lmlow("ngram", speech_corpus, "--order", "3", "--embeddings", vectors, "--extend-vocab",
              "--out", tmp_path / "kn", "--quiet")
    assert r.returncode == 0, r.stderr
    r = lmlow("report", sweep, "--baseline", tmp_path / "kn")
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr      # one file
    train(2, rebuilt, "--force")
    r = lmlow("report", sweep)
    assert r.returncode == 0, r.stderr
    assert f"2 different files named {vectors.name}" in r.stderr
    assert "mix vectors" in (sweep / "results.md").read_text()
    second = sweep / "pre.seed2" / "data.json"
    old = json.loads(second.read_text())
    del old["vectors"]                                        # as a run trained before
    second.write_text(json.dumps(old))
    r = lmlow("report", sweep)
    assert r.returncode == 0 and "1 run(s) of this table read" in r.stderr, r.stderr
    moved = shutil.copytree(speech_corpus, tmp_path / "moved")
    r = lmlow("train", moved, "--resume", sweep / "pre.seed1", "--max-steps", "3", "--quiet")
    assert r.returncode == 0, r.stderr         # a resume rewrites data.json, keeps the record
    after = json.loads((sweep / "pre.seed1" / "data.json").read_text())
    assert after["corpus"] == str(moved.resolve()) and after["vectors"] == data["vectors"]


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="needs 2 cores")
def test_a_local_sweep_shares_the_cores_this_process_may_use_not_the_machines(speech_corpus,
                                                                               tmp_path):
    """A sweep in a process allowed one core (a SLURM job's or a container's share) gives its
    training one thread: it split the machine's core count, so each of its trainings took
    more threads than the job had cores."""
    import os
    import subprocess
    import sys

    (tmp_path / "grid.toml").write_text('[runs.standard]\ntie = true\ninit = ["random"]\n')
    out = tmp_path / "sweep"
    env = {"PATH": "/usr/bin:/bin", "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"]}
    one_core = {min(os.sched_getaffinity(0))}
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "sweep", str(speech_corpus), "--grid",
                        str(tmp_path / "grid.toml"), "--out", str(out), "--preset", "tiny",
                        "--max-steps", "2", "--jobs", "1"], capture_output=True, text=True,
                       env=env, preexec_fn=lambda: os.sched_setaffinity(0, one_core))
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "standard.seed1" / "config.json").read_text())["threads"] == 1


def test_vectors_nothing_reads_are_refused_for_a_new_run_not_for_a_saved_one(speech_corpus,
                                                                            vectors, tmp_path):
    """`train --embeddings V` without --init glove* or --extend-vocab loaded the vectors,
    recorded them as the run's and used nothing of them (ngram, vocab and unk refuse
    it): refused by build_config, so by train, fit and a grid file's run alike. A saved
    run's config.json that holds such vectors still opens; the pretrain grid's random
    configuration reads no vectors without --extend-vocab, and is planned without them."""
    import lmlow as api
    from lmlow.config import Config, build_config

    message = f"--embeddings {vectors}: nothing in this run reads the vectors"
    with pytest.raises(LmlowError, match=re.escape(message)):
        build_config("tiny", corpus=str(speech_corpus), embeddings=str(vectors))
    with pytest.raises(LmlowError, match=re.escape(message)):
        api.fit(speech_corpus, tmp_path / "r", preset="tiny", embeddings=vectors)
    assert not (tmp_path / "r").exists()
    saved = Config(corpus=str(speech_corpus), embeddings=str(vectors)).to_dict()
    assert Config.from_dict(saved).embeddings == str(vectors)
    for reads in ({"init": "glove", "tie": False}, {"extend_vocab": True}):
        build_config("tiny", corpus=str(speech_corpus), embeddings=str(vectors), **reads)
    grid_file = tmp_path / "grid.toml"
    grid_file.write_text(f'[runs.plain]\nembeddings = "{vectors}"\n')
    with pytest.raises(LmlowError, match=re.escape(f"{grid_file} [runs.plain]: {message}")):
        plan(speech_corpus, tmp_path / "s", str(grid_file), [1], "tiny", [], None, {})
    runs = plan(speech_corpus, tmp_path / "s", "pretrain", [1], "tiny", [str(vectors)], None, {})
    assert {r.name: r.settings.get("embeddings") for r in runs
            if r.name.startswith("standard.")} == {f"standard.{vectors.stem}": None}
    runs = plan(speech_corpus, tmp_path / "s", "pretrain", [1], "tiny", [str(vectors)], None,
                {"extend_vocab": True})
    assert all(r.settings["embeddings"] == str(vectors) for r in runs)
