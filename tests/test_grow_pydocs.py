"""data_scripts/grow_pydocs.py: the paper regime's grown LM text (Table 6's 2x/4x/8x columns)
keeps valid/test, adds pretraining lines in order from every block, nests, and writes nothing
when it refuses or fails."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "data_scripts" / "grow_pydocs.py"
_spec = importlib.util.spec_from_file_location("grow_pydocs", SCRIPT)
grow_pydocs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(grow_pydocs)


@pytest.fixture
def data(tmp_path):
    """A 1x corpus of 1,000 words and a pretraining text of 9,000 in 600 lines whose lengths
    vary, each line naming its number (so the test can tell which lines were taken)."""
    d = tmp_path / "data"
    (d / "pydocs").mkdir(parents=True)
    (d / "pydocs" / "train.txt").write_text("".join(f"doc w{i} a b c d e f g h\n" for i in range(100)))
    (d / "pydocs" / "valid.txt").write_text("valid words here\n")
    (d / "pydocs" / "test.txt").write_text("test words there\n")
    lines = [" ".join([f"L{i}"] + ["x"] * (5 + 20 * (i % 2) - 1)) for i in range(600)]
    # 300 lines of 5 words and 300 of 25: 9,000 words
    (d / "pylibs.txt").write_text("\n".join(lines) + "\n")
    return d


def run(data, times):
    return subprocess.run([sys.executable, str(SCRIPT), "--times", str(times), "--data", str(data)],
                          capture_output=True, text=True)


def added_lines(folder):
    base = 100
    return folder.joinpath("train.txt").read_text().splitlines()[base:]


def test_grown_text_keeps_the_splits_and_takes_whole_lines_from_every_block(data):
    r = run(data, 4)
    assert r.returncode == 0, r.stderr
    out = data / "pydocs-x4"
    assert (out / "valid.txt").read_text() == "valid words here\n"
    assert (out / "test.txt").read_text() == "test words there\n"
    train = (out / "train.txt").read_text().splitlines()
    assert train[:100] == (data / "pydocs" / "train.txt").read_text().splitlines()
    pre = (data / "pylibs.txt").read_text().splitlines()
    added = added_lines(out)
    numbers = [int(line.split()[0][1:]) for line in added]
    assert added == [pre[n] for n in numbers]           # whole lines, verbatim
    assert numbers == sorted(numbers)                   # in the file's order
    # 3,000 words wanted; each block's share is met by its first lines (at most a line over)
    words = sum(len(line.split()) for line in added)
    assert 3000 <= words <= 3000 + 100 * 25
    # every block of 6 lines gives its first line (a block's share is 30 of its 90 words)
    assert {n // 6 for n in numbers} == set(range(100))
    assert all(n % 6 < 3 for n in numbers)
    build = json.loads((out / "BUILD.json").read_text())
    assert build["train_words"] == 1000 + words and build["lines_added"] == len(added)


def test_a_smaller_column_is_inside_a_larger_one(data):
    assert run(data, 2).returncode == 0 and run(data, 8).returncode == 0
    small, large = set(added_lines(data / "pydocs-x2")), set(added_lines(data / "pydocs-x8"))
    assert small < large


def test_too_large_a_multiple_is_refused_in_one_line_and_writes_nothing(data):
    r = run(data, 11)
    assert r.returncode != 0
    assert r.stderr.strip().count("\n") == 0
    assert "needs 10,000 words" in r.stderr and "at most --times 10" in r.stderr
    assert sorted(p.name for p in data.iterdir()) == ["pydocs", "pylibs.txt"]
    r = run(data, 1)
    assert r.returncode != 0 and "at least 2" in r.stderr


def test_an_existing_output_is_kept_if_ours_and_refused_if_not(data):
    assert run(data, 2).returncode == 0
    before = (data / "pydocs-x2" / "train.txt").read_text()
    r = run(data, 2)
    assert r.returncode == 0 and (data / "pydocs-x2" / "train.txt").read_text() == before
    (data / "pydocs-x3").mkdir()
    (data / "pydocs-x3" / "mine.txt").write_text("a user's file\n")
    r = run(data, 3)
    assert r.returncode != 0 and "not made by this script" in r.stderr
    assert [p.name for p in (data / "pydocs-x3").iterdir()] == ["mine.txt"]


def test_a_link_in_place_of_the_output_is_not_written_through(data, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (data / "pydocs-x2").symlink_to(elsewhere)
    r = run(data, 2)
    assert r.returncode != 0 and "symbolic link" in r.stderr
    assert list(elsewhere.iterdir()) == []


def test_a_failed_build_leaves_no_folder(data, monkeypatch):
    def broken(folder, *args):
        (folder / "train.txt").write_text("half")
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(grow_pydocs, "write_corpus", broken)
    with pytest.raises(OSError):
        grow_pydocs.grow(2, data / "pydocs", data / "pylibs.txt", data / "pydocs-x2")
    assert sorted(p.name for p in data.iterdir()) == ["pydocs", "pylibs.txt"]


def test_a_folder_left_by_a_killed_build_is_cleared(data):
    dead = data / "pydocs-x2.tmp999999999"
    dead.mkdir()
    (dead / "train.txt").write_text("half")
    assert run(data, 2).returncode == 0
    assert sorted(p.name for p in data.iterdir()) == ["pydocs", "pydocs-x2", "pylibs.txt"]
