"""Frequency analyses: the metrics against hand-computed values, the training-time tracker
(which must not change training), `lmlow analyze` and `lmlow compare` end to end."""
import builtins
import json
import math

import numpy as np
import pytest
from conftest import cli
import torch

from lmlow import analysis
from lmlow.analysis import (alc, distinct_n, distribution_stats, kl_divergence, ngram_diversity,
                            pearson, spearman)
from lmlow.cli import main
from lmlow.config import build_config
from lmlow.errors import LmlowError
from lmlow.evaluate import lstm_logprobs
from lmlow.model import AWDLSTM
from lmlow.checkpoint import load_checkpoint
from lmlow.train import resume, train


# --------------------------------------------------------------------------- metrics by hand

def test_kl_divergence_by_hand():
    assert kl_divergence([0.5, 0.5, 0], [0.25, 0.25, 0.5]) == pytest.approx(math.log(2))
    assert kl_divergence([0.2, 0.8], [0.2, 0.8]) == 0
    assert kl_divergence([0.5, 0.5], [1.0, 0.0]) == math.inf


@pytest.mark.parametrize("without_scipy", [False, True])
def test_spearman_and_pearson_by_hand(without_scipy, monkeypatch):
    if without_scipy:
        real_import = builtins.__import__

        def no_scipy(name, *a, **kw):
            if name.startswith("scipy"):
                raise ImportError(name)
            return real_import(name, *a, **kw)
        monkeypatch.setattr(builtins, "__import__", no_scipy)
    # no ties: 1 - 6 * sum(d^2) / (n (n^2 - 1)) = 1 - 6 * 2 / 60
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # ties get their mean rank: ranks of y are 1, 2, 3.5, 5, 3.5; rho = 8 / sqrt(10 * 9.5)
    assert spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(8 / math.sqrt(95))
    assert spearman([1, 2, 3], [10, 100, 1000]) == pytest.approx(1.0)
    assert math.isnan(spearman([0, 0, 0], [1, 2, 3]))       # a zero-initialised bias
    # pearson: deviations (-1, 0, 1) and (-7/3, -1/3, 8/3): 5 / sqrt(2 * 114/9)
    assert pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(5 / math.sqrt(2 * 114 / 9))


def test_alc_trapezoid_by_hand():
    xs, ys = [0, 10, 20], [4, 2, 2]
    assert alc(xs, ys) == pytest.approx((10 * 3 + 10 * 2) / 20)        # 2.5
    assert alc(xs, ys, 15) == pytest.approx((10 * 3 + 5 * 2) / 15)     # interpolated at 15
    assert alc(xs, ys, 5) == pytest.approx(5 * (4 + 3) / 2 / 5)        # y(5) = 3
    assert math.isnan(alc(xs, ys, 30))                                 # the run stopped earlier
    assert alc([100, 300], [5.0, 3.0]) == pytest.approx(4.0)
    assert alc([7], [3.0]) == 3.0


def test_distinct_n_and_ngram_diversity_by_hand():
    samples = [["a", "b", "a", "b"], ["a", "c"]]
    assert distinct_n(samples, 1) == pytest.approx(3 / 6)
    assert distinct_n(samples, 2) == pytest.approx(3 / 4)    # ab ba ab | ac: no n-gram across samples
    assert distinct_n(samples, 3) == 1.0                     # aba bab
    assert distinct_n(samples, 4) == 1.0                     # abab
    assert ngram_diversity(samples) == pytest.approx(0.75 * 1 * 1)
    assert math.isnan(distinct_n([["a"]], 2))


# --------------------------------------------------------------------------- model statistics

def test_distribution_stats_against_brute_force():
    torch.manual_seed(0)
    v = 11
    m = AWDLSTM(v, 6, 8, 2, 6, tie=False)
    with torch.no_grad():
        m.decoder.bias.copy_(torch.randn(v))
    ids = np.random.default_rng(0).integers(0, v, 57)
    ids[-1] = 0                                               # eos id 0
    u = np.random.default_rng(1).dirichlet(np.ones(v))
    u[3] = 0                                                  # a word never seen in training
    u /= u.sum()
    stats = distribution_stats(m, ids, 0, u, (1.0, 0.0, 0.5), batch_size=1, bptt=100)
    full = torch.from_numpy(np.concatenate([[0], ids[:-1]])).unsqueeze(1)
    with torch.no_grad():
        out, _, _, _ = m(full, m.init_hidden(1))
        for s, st in stats.items():
            np.testing.assert_allclose(st.logprobs, lstm_logprobs(m, ids, 0, 3, 10, bias_scale=s),
                                       atol=1e-5)
            logp = torch.log_softmax(m.logits(out[:, 0], s), -1).double().numpy()
            p = np.exp(logp)
            np.testing.assert_allclose(st.mean_distribution, p.mean(0), atol=1e-6)
            by_token = [kl_divergence(u, row) for row in p]
            assert st.kl_unigram_token == pytest.approx(np.mean(by_token), abs=1e-5)
            unif = np.full(v, 1 / v)
            assert st.kl_uniform_token == pytest.approx(np.mean([kl_divergence(unif, r) for r in p]),
                                                        abs=1e-5)


def test_a_unigram_model_is_at_the_unigram_distribution():
    """W = 0 and b = ln u: every prediction is u, so KL(unigram || p) is 0 and KL(uniform || p)
    is KL(uniform || u); the bias is log u exactly (correlation 1)."""
    counts = np.array([50, 20, 10, 10, 5, 3, 2])
    u = counts / counts.sum()
    m = AWDLSTM(7, 4, 5, 1, 4, tie=False)
    with torch.no_grad():
        m.decoder.weight.zero_()
        m.decoder.bias.copy_(torch.from_numpy(np.log(u)))
    ids = np.array([1, 2, 0, 3, 4, 5, 6, 0])
    r = analysis.frequency_record(m, ids, 0, u, batch_size=2, bptt=3)
    assert r["kl_unigram_token"] == pytest.approx(0, abs=1e-6)
    assert r["kl_unigram_avg"] == pytest.approx(0, abs=1e-6)
    assert r["bias_kl_unigram"] == pytest.approx(0, abs=1e-9)
    assert r["kl_uniform_avg"] == pytest.approx(kl_divergence(np.full(7, 1 / 7), u), abs=1e-6)
    assert r["cross_entropy"] == pytest.approx(-np.mean(np.log(u[ids])), abs=1e-6)
    assert r["bias_spearman"] == pytest.approx(1) and r["bias_pearson"] == pytest.approx(1)
    assert r["bias_norm"] == pytest.approx(np.linalg.norm(np.log(u)))


# --------------------------------------------------------------------------- during training

def rows(path):
    return [json.loads(l) for l in path.read_text().splitlines()]


def test_tracking_writes_frequency_jsonl_and_does_not_change_training(speech_corpus, tmp_path):
    def cfg(**kw):
        return build_config("tiny", None, corpus=str(speech_corpus), max_epochs=2, seed=5, **kw)
    plain, tracked, part = tmp_path / "plain", tmp_path / "tracked", tmp_path / "part"
    train(cfg(), plain, quiet=True)
    train(cfg(track_frequency=True), tracked, quiet=True)
    freq = rows(tracked / "frequency.jsonl")
    steps = [r["step"] for r in freq]
    ends = [r["step"] for r in rows(tracked / "metrics.jsonl")[1:]]   # the epochs' last updates
    assert steps == sorted({0, *ends} | {2 ** k for k in range(10) if 2 ** k < ends[-1]})
    assert [r["event"] for r in freq].count("epoch") == 2
    for key in ("kl_unigram_avg", "kl_uniform_avg", "kl_unigram_token", "kl_uniform_token",
                "cross_entropy", "bias_norm", "bias_kl_unigram"):
        assert all(math.isfinite(r[key]) for r in freq), key
    assert freq[0]["bias_norm"] == 0 and freq[0]["bias_spearman"] is None  # zero bias at init
    assert freq[0]["kl_uniform_token"] < 0.01       # a random init predicts nearly uniformly
    assert freq[-1]["kl_unigram_avg"] < freq[0]["kl_unigram_avg"]         # it learns frequency
    m_plain, m_tracked = rows(plain / "metrics.jsonl"), rows(tracked / "metrics.jsonl")
    assert m_tracked[0]["step"] == 0 and "train_loss" not in m_tracked[0]  # untrained model
    assert [r["valid_ppl"] for r in m_tracked[1:]] == [r["valid_ppl"] for r in m_plain]
    a, b = (load_checkpoint(p / "best.pt")["model"] for p in (plain, tracked))
    assert all(torch.equal(a[k], b[k]) for k in a)
    # a killed tracked run resumes to the same numbers, without repeating rows
    train(cfg(track_frequency=True, max_steps=45), part, quiet=True)
    resume(part, quiet=True, max_steps=0)
    resumed = [r for r in rows(part / "metrics.jsonl") if not r.get("partial_epoch")]
    assert [(r["step"], r["valid_ppl"]) for r in resumed] == [(r["step"], r["valid_ppl"])
                                                              for r in m_tracked]
    got = rows(part / "frequency.jsonl")
    assert [r["step"] for r in got if r["event"] == "end"] == [45]      # where it was stopped
    got = [r for r in got if r["event"] != "end"]
    assert [r["step"] for r in got] == steps
    assert [r["cross_entropy"] for r in got] == [r["cross_entropy"] for r in freq]


# --------------------------------------------------------------------------- lmlow analyze / compare

@pytest.fixture(scope="module")
def runs(speech_corpus, tmp_path_factory):
    """A unigram-initialised and a zero-bias tiny run, tracked, dense curves; and an
    initialised-only unigram run."""
    root = tmp_path_factory.mktemp("freq")
    for name, init in (("unigram", "unigram"), ("zero", "random")):
        assert main(["train", str(speech_corpus), "--out", str(root / name), "--preset", "tiny",
                     "--max-epochs", "1", "--tie", "no", "--init", init, "--track-frequency",
                     "--eval-every", "20", "--quiet"]) == 0
    assert main(["train", str(speech_corpus), "--out", str(root / "init"), "--preset", "tiny",
                 "--max-epochs", "0", "--tie", "no", "--init", "unigram", "--quiet"]) == 0
    return root


def test_analyze_an_initialised_unigram_model(runs, tmp_path):
    r = analysis.analyze(runs / "init", out=tmp_path / "a")
    assert r["bias_spearman"] == pytest.approx(1) and r["bias_pearson"] == pytest.approx(1)
    assert r["kl_unigram_avg"] < 0.05                # starts as the unigram model ...
    assert r["kl_unigram_avg_no_bias"] > 10 * r["kl_unigram_avg"]   # ... thanks to the bias
    assert r["kl_uniform_avg_no_bias"] < 0.01        # without it, nearly uniform
    assert r["perplexity_no_bias"] > r["perplexity"]
    full = r["logprob_vs_frequency"]["full"]
    assert full[-1]["y"] > full[0]["y"]              # frequent words get more probability
    assert {p.name for p in (tmp_path / "a").iterdir()} == {
        "analysis.json", "bias_vs_frequency.png", "logprob_vs_frequency.png",
        "prediction_vs_frequency.png"}


def test_analyze_refuses_a_split_part_without_a_word_seen_in_training(runs, speech_corpus,
                                                                      tmp_path):
    """The frequency bins need scored words with a training count: a part of the split
    holding none (only words training lacks) was a numpy traceback (min of an empty array)."""
    import shutil
    corpus = tmp_path / "corpus"
    shutil.copytree(speech_corpus, corpus)
    valid = corpus / "valid.txt"
    valid.write_text("qqqxx rrrzz " + valid.read_text(), encoding="utf-8")
    with pytest.raises(LmlowError, match="none of the 2 tokens scored is a word seen in training"):
        analysis.analyze(runs / "unigram", out=tmp_path / "a", corpus=corpus, tokens=2)
    assert not (tmp_path / "a").exists()


def test_cli_analyze(runs, capsys):
    assert main(["analyze", str(runs / "unigram"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["split"] == "valid" and summary["tokens"] > 0
    out = runs / "unigram" / "analysis"
    data = json.loads((out / "analysis.json").read_text())
    assert len(data["frequency_jsonl"]) > 3 and (out / "frequency_curves.png").stat().st_size > 0
    assert main(["analyze", str(runs / "unigram")]) == 1          # never overwrites silently
    assert "--force" in capsys.readouterr().err
    assert main(["analyze", str(runs / "unigram"), "--force", "--split", "test",
                 "--tokens", "300"]) == 0
    assert json.loads((out / "analysis.json").read_text())["tokens"] == 300


def write_metrics(run, points):
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "elapsed": e, "valid_loss": l, "valid_ppl": math.exp(l)}) + "\n"
        for s, e, l in points))
    (run / "config.json").write_text(json.dumps({"init": ["unigram"]}))


def test_compare_by_hand(tmp_path):
    write_metrics(tmp_path / "a", [(0, 0, 6.0), (100, 10, 5.0), (200, 30, 4.0)])
    write_metrics(tmp_path / "b", [(0, 0, 9.0), (100, 20, 5.0), (100, 21, 4.5)])  # step repeated
    a, b = analysis.compare([tmp_path / "a", tmp_path / "b"], steps=150)
    assert a["ALC@N"] == pytest.approx((100 * 5.5 + 50 * 4.75) / 150)
    assert a["ALC (all updates)"] == pytest.approx((100 * 5.5 + 100 * 4.5) / 200)
    assert a["ALC (wall time)"] == pytest.approx((10 * 5.5 + 20 * 4.5) / 30)
    assert a["final valid ppl"] == pytest.approx(math.exp(4)) and a["updates"] == 200
    assert b["ALC@N"] is None                          # b stopped at update 100: empty
    assert b["ALC (all updates)"] == pytest.approx((9 + 4.5) / 2)   # the last row of a step counts
    assert (a["label"], b["label"]) == ("a", "b")
    # two sweeps' runs of one configuration: told apart in the plots by their parents
    for sweep in ("adam", "sgd"):
        (tmp_path / sweep).mkdir()
        write_metrics(tmp_path / sweep / "standard.seed1", [(0, 0, 6.0), (100, 10, 5.0)])
    rows = analysis.compare([tmp_path / "adam/standard.seed1", tmp_path / "sgd/standard.seed1"])
    assert [r["label"] for r in rows] == ["adam/standard.seed1", "sgd/standard.seed1"]
    with pytest.raises(LmlowError, match="given twice"):
        analysis.compare([tmp_path / "a", tmp_path / "b" / ".." / "a"])
    # the best a checkpoint can hold: not update 0's validation of the untrained model
    # (--track-frequency adds it), even where it is the lowest
    write_metrics(tmp_path / "early", [(0, 0, 3.0), (100, 10, 5.0), (200, 20, 4.5)])
    write_metrics(tmp_path / "untrained", [(0, 0, 3.0)])
    early, untrained = analysis.compare([tmp_path / "early", tmp_path / "untrained"])
    assert early["best valid ppl"] == pytest.approx(math.exp(4.5))
    assert untrained["best valid ppl"] is None
    ppl = analysis.compare([tmp_path / "a"], metric="ppl")[0]
    assert ppl["ALC (all updates)"] == pytest.approx(
        (100 * (math.exp(6) + math.exp(5)) / 2 + 100 * (math.exp(5) + math.exp(4)) / 2) / 200)


def test_cli_compare(runs, tmp_path, capsys):
    args = ["compare", str(runs / "unigram"), str(runs / "zero"), "--steps", "40"]
    assert main(args + ["--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert "ALC@40" in out and out.count("\n| ") >= 2
    assert {p.name for p in (tmp_path / "c").iterdir()} == {
        "compare.md", "compare.csv", "compare.json", "curves.png", "frequency_curves.png"}
    assert main(args + ["--json"]) == 0
    u, z = json.loads(capsys.readouterr().out)
    assert u["curve"][0]["step"] == 0 and u["curve"][1]["step"] == 20
    assert u["ALC@N"] < z["ALC@N"]               # the unigram init starts far ahead
    assert main(args + ["--csv"]) == 0
    assert capsys.readouterr().out.startswith("run,init,updates")


def test_compare_notes_runs_over_other_vocabularies(runs, speech_corpus, tmp_path, capsys):
    """Runs on one corpus and vocabulary compare without a note; a run whose K gives another
    vocabulary (its perplexities are over other words) gets one line on stderr."""
    assert main(["compare", str(runs / "unigram"), str(runs / "init")]) == 0
    assert "not comparable" not in capsys.readouterr().err
    other = tmp_path / "k2"
    assert main(["train", str(speech_corpus), "--out", str(other), "--preset", "tiny",
                 "--max-epochs", "0", "--unk-threshold", "2", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["compare", str(runs / "unigram"), str(other)]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "over different vocabularies" in err and "not comparable" in err
    # k2 (0 epochs) validated once: the table says why its wall-time ALC is blank
    assert "no ALC (wall time) for k2: a curve over time needs two timed validations" in out
    (other / "vocab.txt").unlink()        # as committed: summary.json keeps the list's hash
    assert main(["compare", str(runs / "unigram"), str(other)]) == 0
    assert "over different vocabularies" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["compare", "no/such/run"], "no such run folder"),
    (["compare", "RUN", "--steps", "0"], "--steps 0: must be >= 1"),
    (["analyze", "no/such/run"], "no such run folder"),
    (["analyze", "RUN", "--bins", "1001"], "--bins 1001: must be"),
])
def test_bad_input_is_one_line(argv, message, runs, capsys):
    """Exit 1 (lmlow's own check) or 2 (argparse's type check), one line naming the flag."""
    code, _, err = cli(*[str(runs / "unigram") if a == "RUN" else a for a in argv], capsys=capsys)
    assert code in (1, 2) and message in err and err.count("\n") == 1, err