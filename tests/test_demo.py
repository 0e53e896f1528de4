"""``make demo`` end to end at a tiny budget: GloVe, two LSTMs, KenLM, table and plot; a second
run reuses everything it built."""
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_end_to_end_and_reuse(tmp_path):
    out = tmp_path / "demo"
    args = [sys.executable, "-m", "lmlow.demo", "--out", str(out), "--minutes-per-model", "0.1",
            "--glove-epochs", "2"]
    first = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr
    assert "1. GloVe" in first.stdout and "KenLM" in first.stdout
    table = (out / "results.md").read_text().splitlines()
    assert len(table) == 5                      # header, rule, KenLM and the two LSTMs
    assert any(l.startswith("| standard") for l in table) and any(l.startswith("| recommended") for l in table)
    for line in table[2:]:
        valid, test = (float(x) for x in line.split("|")[2:4])
        assert 1 < valid < 20000 and 1 < test < 20000
    assert (out / "curves.png").stat().st_size > 1000
    second = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stderr
    assert "1. GloVe" not in second.stdout and "minutes" not in second.stdout   # nothing retrained
    assert (out / "results.md").read_text().splitlines()[2:] == table[2:]
