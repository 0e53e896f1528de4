"""The Python API (lmlow.embed, fit_ngram, fit_sweep, results) makes what the commands make,
to the bit, and refuses a bad key or value in one line before writing anything."""
import json

import pytest
from conftest import cli

import lmlow
from lmlow.errors import LmlowError

GRID = """
[runs.standard]
tie = true
init = ["random"]

[runs.ours]
tie = false
freeze_input = true
init = ["glove", "glove-output"]
"""


def test_embed_and_fit_ngram_make_what_embed_and_ngram_make(speech_corpus, vectors, tmp_path,
                                                             capsys):
    text = speech_corpus / "train.txt"
    got = lmlow.embed(text, tmp_path / "api.txt", quiet=True, dim=8, epochs=2, min_count=2,
                      threads=1, seed=4)
    code, _, err = cli("embed", text, "--out", tmp_path / "cmd.txt", "--dim", "8", "--epochs", "2",
                       "--min-count", "2", "--threads", "1", "--seed", "4", capsys=capsys)
    assert code == 0, err
    assert (tmp_path / "api.txt").read_bytes() == (tmp_path / "cmd.txt").read_bytes()
    assert got["files"] == [str(tmp_path / "api.txt"), str(tmp_path / "api.npz")]
    rows = (tmp_path / "api.txt").read_text().splitlines()
    assert got["vocabulary"] == len(rows) and len(got["costs"]) == 2 and got["config"]["dim"] == 8

    # the vectors' words in the vocabulary, given as a Path as a config file gives its text
    cfg = lmlow.fit_ngram(speech_corpus, tmp_path / "kn-api", quiet=True, order=3,
                          extend_vocab=True, embeddings=vectors)
    code, _, err = cli("ngram", speech_corpus, "--out", tmp_path / "kn-cmd", "--order", "3",
                       "--extend-vocab", "--embeddings", vectors, "--quiet", capsys=capsys)
    assert code == 0, err
    for name in ("model.arpa", "vocab.txt"):
        assert (tmp_path / "kn-api" / name).read_bytes() == (tmp_path / "kn-cmd" / name).read_bytes()
    assert cfg == json.loads((tmp_path / "kn-api" / "config.json").read_text())
    assert cfg["order"] == 3 and cfg["extend_vocab"]
    a, b = (lmlow.load(tmp_path / k).evaluate("valid").perplexity for k in ("kn-api", "kn-cmd"))
    assert a == b and 1 < a < 5000

    with pytest.raises(LmlowError, match=r"^lmlow.embed: dim = '8': expected an integer$"):
        lmlow.embed(text, tmp_path / "bad.txt", dim="8")
    with pytest.raises(LmlowError, match=r"^lmlow.embed: texts = 3: expected a path or a list"):
        lmlow.embed(3, tmp_path / "bad.txt")
    with pytest.raises(LmlowError, match=r"^lmlow.fit_ngram: unknown setting 'orders'$"):
        lmlow.fit_ngram(speech_corpus, tmp_path / "bad", orders=3)
    with pytest.raises(LmlowError, match=r"^lmlow.embed: dim = 0: must be in \[1, 2147483647\]$"):
        lmlow.embed(text, tmp_path / "bad.txt", dim=0)
    with pytest.raises(LmlowError, match=r"^lmlow.fit_ngram: order = 9: must be in \[2, 6\]$"):
        lmlow.fit_ngram(speech_corpus, tmp_path / "bad", order=9)
    assert not list(tmp_path.glob("bad*"))


def test_fit_sweep_and_results_make_what_sweep_and_report_make(speech_corpus, vectors, tmp_path,
                                                               capsys):
    (tmp_path / "grid.toml").write_text(GRID)
    states = lmlow.fit_sweep(speech_corpus, tmp_path / "api", tmp_path / "grid.toml", seeds=[1],
                             preset="tiny", embeddings=vectors, quiet=True, max_steps=4,
                             threads=1)
    assert [(s["run"], s["state"]) for s in states] == [("standard.seed1", "finished"),
                                                        ("ours.seed1", "finished")]
    code, _, err = cli("sweep", speech_corpus, "--grid", tmp_path / "grid.toml", "--out",
                       tmp_path / "cmd", "--preset", "tiny", "--embeddings", vectors,
                       "--max-steps", "4", "--threads", "1", capsys=capsys)
    assert code == 0, err
    for run in ("standard.seed1", "ours.seed1"):
        a, b = (json.loads((tmp_path / k / run / "config.json").read_text()) for k in ("api", "cmd"))
        assert a == b
        a, b = ((tmp_path / k / run / "metrics.jsonl").read_text().splitlines() for k in ("api", "cmd"))
        assert [json.loads(r)["valid_ppl"] for r in a] == [json.loads(r)["valid_ppl"] for r in b]
    plan = [(json.loads((tmp_path / k / "sweep.json").read_text())) for k in ("api", "cmd")]
    assert plan[0] == plan[1]

    rows = lmlow.results(tmp_path / "api", paired="standard")
    code, _, err = cli("report", tmp_path / "cmd", "--paired", "standard", capsys=capsys)
    assert code == 0, err
    assert rows == json.loads((tmp_path / "api" / "results.json").read_text())
    theirs = json.loads((tmp_path / "cmd" / "results.json").read_text())
    assert [(r["configuration"], r["valid ppl"], r["test ppl"]) for r in rows] == \
        [(r["configuration"], r["valid ppl"], r["test ppl"]) for r in theirs]

    for bad, message in [(dict(seed=2), r"seed is set by the sweep \(its own argument or one per "
                                        r"run\), not a setting for every run"),
                         (dict(seeds="1"), r"seeds = '1': expected an integer or a list of them"),
                         (dict(max_steps="4"), r"max_steps = '4': expected an integer"),
                         (dict(unigram="yes"), r"unigram = 'yes': expected true or false, unquoted"),
                         # ranges: checked before the plan (lr = -1 failed every run, after it)
                         (dict(jobs=0), r"jobs = 0: must be >= 1"),
                         (dict(lr=-1.0), r"lr = -1.0: must be > 0"),
                         (dict(executor="cluster"),
                          r"executor = 'cluster': choose one of local, slurm"),
                         (dict(slurm={"time": "1:00"}), r"slurm = \{'time': '1:00'\}: settings for "
                                                        r"executor='slurm' \(executor is 'local'\)"),
                         (dict(executor="slurm", jobs=4),
                          r"jobs = 4: runs at a time here \(executor='local'\); a SLURM "
                          r"array's tasks at once are slurm=\{'array_parallelism': N\}"),
                         (dict(executor="slurm", slurm={"cpus_per_run": 0}),
                          r"slurm: cpus_per_run = 0: must be >= 1"),
                         (dict(executor="slurm", slurm={"setup": "module load x"}),
                          r"slurm: setup = 'module load x': expected a list of texts"),
                         (dict(executor="slurm", slurm={"sbatch_args": ["--a\nb"]}),
                          r"slurm: sbatch_args = '--a\\nb': contains '\\n'; a SLURM job script "
                          r"cannot carry it safely")]:
        with pytest.raises(LmlowError, match=rf"^lmlow.fit_sweep: {message}$"):
            lmlow.fit_sweep(speech_corpus, tmp_path / "bad", "six", embeddings=vectors,
                            **{"preset": "tiny", **bad})
    with pytest.raises(LmlowError, match=r"^lmlow.results: paired = 1: expected text or a path$"):
        lmlow.results(tmp_path / "api", paired=1)
    with pytest.raises(LmlowError, match=r"^lmlow.fit_sweep: out = None: expected text or a "):
        lmlow.fit_sweep(speech_corpus, None, "six", preset="tiny")
    assert not (tmp_path / "bad").exists()


def test_an_empty_path_is_refused_not_taken_for_the_current_folder_or_none(speech_corpus,
                                                                          tmp_path,
                                                                          monkeypatch):
    """``out=""`` trained into the current folder (``Path("")`` is "."), ``vocab=""`` built
    the UNK rule's vocabulary as if none were given: one line naming the keyword now, and
    nothing written."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LmlowError, match=r"^lmlow.fit: out = '': an empty path"):
        lmlow.fit(speech_corpus, "", preset="tiny", max_steps=1)
    with pytest.raises(LmlowError, match=r"^lmlow.fit: vocab = '': an empty path"):
        lmlow.fit(speech_corpus, tmp_path / "v", preset="tiny", max_steps=1, vocab="")
    assert list(tmp_path.iterdir()) == []


def test_a_refused_combination_names_the_keywords_given(speech_corpus, tmp_path):
    """Settings that depend on each other are refused in the command's words, which name its
    flags; from Python the keywords given among them follow, with their values (a user of
    lmlow.fit wrote no ``--init``)."""
    for kw, said in [(dict(init=["glove"]), r"--init glove/glove-output needs --embeddings FILE "
                                           r"\(lmlow.fit: init = \['glove'\]\)"),
                     (dict(extend_vocab=True), r"--extend-vocab needs --embeddings FILE "
                                               r"\(lmlow.fit: extend_vocab = True\)"),
                     (dict(tie=True, out_size=50), r"a tied model needs --out-size equal to "
                                                   r"--emb-size \(lmlow.fit: out_size = 50\)")]:
        with pytest.raises(LmlowError, match=rf"^{said}$"):
            lmlow.fit(speech_corpus, tmp_path / "r", preset="tiny", max_steps=1, **kw)
    with pytest.raises(LmlowError, match=r"^--grid pretrain needs --embeddings FILE\[,FILE...\] "
                                         r"\(lmlow.fit_sweep: grid = 'pretrain'\)$"):
        lmlow.fit_sweep(speech_corpus, tmp_path / "s", "pretrain", preset="tiny")
    assert list(tmp_path.iterdir()) == []


def test_a_wrong_type_from_python_is_one_lmlow_error(speech_corpus, tmp_path):
    """Found by fuzzing the Python API: ``load(run).evaluate(["test"])`` raised TypeError
    (unhashable list), ``export(None, ...)`` and ``export("RUN", ...)`` an AttributeError:
    one LmlowError each now, naming the argument."""
    from lmlow.export import export

    lmlow.fit(speech_corpus, tmp_path / "r", preset="tiny", max_steps=1, threads=1, quiet=True)
    run = lmlow.load(tmp_path / "r")
    with pytest.raises(LmlowError, match=r"^split = \['test'\]: choose one of train, valid, test$"):
        run.evaluate(["test"])
    for bad in (None, str(tmp_path / "r")):
        with pytest.raises(LmlowError, match=r"^lmlow.export: run = .*: expected a run opened "
                                             r"with lmlow.load\(RUN_DIR\)$"):
            export(bad, tmp_path / "e.pt2")
    assert not (tmp_path / "e.pt2").exists()
