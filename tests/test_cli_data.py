"""End to end: the data commands run as a user runs them, on real text."""
import json
import os
import subprocess
import sys

import pytest

from conftest import SPEECHES, lmlow




@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def test_prepare_vocab_unk_stats(tmp_path, cache):
    out = tmp_path / "corpus"
    r = lmlow("prepare", SPEECHES, "--out", out, "--tokenizer", "spacy", "--ptb",
              "--documents", "file", "--valid", "0.15", "--test", "0.15", "--json", cache=cache, check=True)
    rep = json.loads(r.stdout)
    assert rep["splits"]["valid"]["tokens"] > 0.1 * rep["tokens"]

    listing = tmp_path / "lists" / "k2" / "v.txt"    # folders vocab makes (once a traceback)
    r = lmlow("vocab", out, "--unk-threshold", "2", "--out", listing, "--counts",
              "--json", cache=cache, check=True)
    summary = json.loads(r.stdout)
    lines = listing.read_text().splitlines()
    counts = [int(l.split("\t")[1]) for l in lines]
    assert len(lines) == summary["vocabulary_size"] and counts == sorted(counts, reverse=True)
    assert all(int(l.split("\t")[1]) >= 2 for l in lines if l.split("\t")[0] not in ("<unk>", "<eos>"))

    r = lmlow("unk", out, "--threshold", "2", "--out", tmp_path / "unk2", "--json", cache=cache, check=True)
    replaced = json.loads(r.stdout)
    words = set((tmp_path / "unk2" / "valid.txt").read_text().split())
    assert words <= {l.split("\t")[0] for l in lines}
    assert replaced["valid"]["replaced_tokens"] > 0

    r = lmlow("stats", out, "--pretrain", out / "train.txt", "--json", cache=cache, check=True)
    stats = json.loads(r.stdout)
    assert stats["table4"]["train_in_pretrain"] == stats["table4"]["train"]
    assert 50 < stats["table4"]["train"]["types_pct"] < 95  # most types are rare in real text
    r = lmlow("stats", out, cache=cache, check=True)
    assert "Table 4" in r.stdout and "| K=5" in r.stdout


@pytest.mark.parametrize("make_bad, message", [
    (lambda d: (d / "valid.txt").unlink(), "missing valid.txt"),
    (lambda d: (d / "test.txt").write_bytes(b"ok\n\xff\xfe bad\n"), "test.txt:2: not valid UTF-8"),
    (lambda d: (d / "train.txt").write_text(""), "train.txt: empty file"),
])
def test_bad_input_is_one_line_without_traceback(tmp_path, cache, make_bad, message):
    d = tmp_path / "c"
    d.mkdir()
    for s in ("train", "valid", "test"):
        (d / f"{s}.txt").write_text("the senate of the union\n")
    make_bad(d)
    r = lmlow("stats", d, cache=cache)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and message in r.stderr


def test_nothing_overwritten_without_force(tmp_path, cache):
    d = tmp_path / "c"
    d.mkdir()
    for s in ("train", "valid", "test"):
        (d / f"{s}.txt").write_text("the senate of the union\n")
    (tmp_path / "v.txt").write_text("mine\n")
    r = lmlow("vocab", d, "--out", tmp_path / "v.txt", cache=cache)
    assert r.returncode == 1 and "--force" in r.stderr
    assert (tmp_path / "v.txt").read_text() == "mine\n"


def test_sotu_domain_split_is_by_speech_seeded_and_disjoint(tmp_path):
    """build_sotu_domain.py: the LM side and the pretraining side share no speech, the cut is
    where the LM side first has enough words, and the seed fixes the split."""
    import importlib.util
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "data_scripts"
    sys.path.insert(0, str(root))
    spec = importlib.util.spec_from_file_location("build_sotu_domain", root / "build_sotu_domain.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    files = []
    for i in range(20):
        files.append(tmp_path / f"s{i:02d}.txt")
        files[-1].write_text(" ".join(["word"] * (10 * (i + 1))))
    lm, pre = mod.split_speeches(files, 300, seed=1)
    assert set(lm).isdisjoint(pre) and set(lm) | set(pre) == set(files)
    sizes = [len(f.read_text().split()) for f in lm]
    assert sum(sizes) >= 300 and sum(sizes[:-1]) < 300
    assert mod.split_speeches(files, 300, seed=1) == (lm, pre)
    assert mod.split_speeches(files, 300, seed=2) != (lm, pre)
    with pytest.raises(Exception, match="lower --lm-words"):
        mod.split_speeches(files, 10**6, seed=1)


def test_a_gz_output_name_is_refused_and_a_gz_corpus_is_an_existing_output(tmp_path, cache):
    """lmlow writes plain text: `prepare --no-split --out x.txt.gz` and `vocab --out v.txt.gz`
    wrote plain text under a name that every reader (lmlow's own) then refused as not gzip.
    A corpus of SPLIT.txt.gz files was replaced by `prepare`/`unk` without --force (the plain
    splits written beside it win), and `unk --force` kept an old OUT's prepare.json beside a
    corpus made without one."""
    import gzip

    d = tmp_path / "c"
    d.mkdir()
    for s in ("train", "valid", "test"):
        (d / f"{s}.txt").write_text("the senate of the union\nthe union\n")
    raw = tmp_path / "raw.txt"
    raw.write_text("The Senate met.\nThe union spoke.\nThe people voted.\n")
    for args in (("prepare", raw, "--out", tmp_path / "x.txt.gz", "--no-split"),
                 ("vocab", d, "--out", tmp_path / "v.txt.gz")):
        r = lmlow(*args, cache=cache)
        assert r.returncode == 1 and "lmlow writes plain text" in r.stderr, r.stderr
    assert not list(tmp_path.glob("*.gz"))

    gz = tmp_path / "gz"
    gz.mkdir()
    for s in ("train", "valid", "test"):
        (gz / f"{s}.txt.gz").write_bytes(gzip.compress((d / f"{s}.txt").read_bytes()))
    before = {p.name: p.read_bytes() for p in gz.iterdir()}
    for args in (("prepare", raw, "--out", gz, "--valid", "1", "--test", "1", "--documents", "line"), ("unk", d, "--out", gz)):
        r = lmlow(*args, cache=cache)
        assert r.returncode == 1 and "--force" in r.stderr, r.stderr
        assert {p.name: p.read_bytes() for p in gz.iterdir()} == before
    r = lmlow("prepare", raw, "--out", gz, "--valid", "1", "--test", "1", "--documents", "line", "--force", cache=cache)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in gz.iterdir()) == ["prepare.json", "test.txt", "train.txt",
                                                    "valid.txt"]
    assert "prepare.json" in {p.name for p in gz.iterdir()}
    r = lmlow("unk", d, "--out", gz, "--force", cache=cache)     # d was made without prepare
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in gz.iterdir()) == ["test.txt", "train.txt", "valid.txt"]
    r = lmlow("prepare", raw, "--out", tmp_path / "inf", "--valid", "inf", cache=cache)
    assert r.returncode == 2 and "--valid" in r.stderr and "Traceback" not in r.stderr


STARTS = """
import json, sys
from lmlow.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print(json.dumps({"exit": code, "torch": "torch" in sys.modules}))
"""


def test_the_commands_that_need_no_model_start_without_torch(tmp_path, cache):
    """The parser imported lmlow.runs for its options, and with it torch: `lmlow --version`
    took 2.6-3.7 s and 230 MB (AMD EPYC, two trainings beside it), every data command the
    same before doing anything. The package imports torch only when a model is needed."""
    corpus = tmp_path / "corpus"
    env = {"PATH": "/usr/bin:/bin", "LMLOW_CACHE_DIR": str(cache)}
    for args in (["--version"], ["--help"], ["train", "--help"], ["eval", "--help"],
                 ["prepare", SPEECHES, "--out", corpus, "--valid", "0.15", "--test", "0.15"],
                 ["vocab", corpus], ["stats", corpus], ["unk", corpus, "--out", tmp_path / "u"],
                 ["ngram", corpus, "--order", "3", "--out", tmp_path / "kn", "--quiet"]):
        r = subprocess.run([sys.executable, "-c", STARTS, *map(str, args)], env=env,
                           capture_output=True, text=True)
        got = json.loads(r.stdout.strip().splitlines()[-1])
        assert got == {"exit": 0, "torch": False}, (args, r.stderr)
