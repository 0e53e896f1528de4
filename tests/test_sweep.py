"""Sweeps run ordinary train commands, skip finished runs, and report a table and a plot."""
import csv
import json

import pytest
from conftest import lmlow

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


def test_bad_grid_file_is_one_line(tmp_path, speech_corpus):
    (tmp_path / "g.toml").write_text("[runs.a]\nbogus = 1\n")
    r = lmlow("sweep", speech_corpus, "--grid", tmp_path / "g.toml", "--out", tmp_path / "s", "--dry-run")
    assert r.returncode == 1 and "unknown setting 'bogus'" in r.stderr and "Traceback" not in r.stderr
