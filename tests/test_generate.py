"""Sampling with a scaled output bias, and Kobayashi et al.'s bias sweep."""
import json
import re

import pytest
from conftest import cli
import torch

from lmlow.cli import main
from lmlow.errors import LmlowError
from lmlow.generate import (Sampling, bias_sweep, filter_logits, generate, parse_lambdas, render,
                            sample_ids)
from lmlow.runs import load


@pytest.fixture(scope="module")
def run(speech_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("gen") / "run"
    assert main(["train", str(speech_corpus), "--out", str(out), "--preset", "tiny",
                 "--max-epochs", "1", "--tie", "no", "--init", "unigram", "--quiet"]) == 0
    return out


def test_filter_logits_by_hand():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = lambda f: torch.isfinite(f).squeeze(0).tolist()
    assert kept(filter_logits(logits, top_k=2)) == [True, True, False, False]
    assert kept(filter_logits(logits, top_p=0.7)) == [True, True, False, False]  # 0.5 < 0.7 <= 0.8
    assert kept(filter_logits(logits, top_p=0.5)) == [True, False, False, False]
    assert kept(filter_logits(logits, top_p=0.81)) == [True, True, True, False]
    # a top_p float32 holds as 0 kept nothing (NaN probabilities, a traceback in sampling)
    assert kept(filter_logits(logits, top_p=1e-320)) == [True, False, False, False]
    assert kept(filter_logits(logits, temperature=0)) == [True, False, False, False]
    shuffled = logits[:, [2, 0, 3, 1]]                       # the order of the vocabulary is irrelevant
    assert kept(filter_logits(shuffled, top_p=0.7)) == [False, True, False, True]
    assert torch.allclose(torch.softmax(filter_logits(logits, temperature=2), -1),
                          torch.softmax(logits / 2, -1))


def test_render():
    assert render(["a", "b", "<eos>", "c"]) == "a b\nc"
    assert render(["<eos>", "a", "<eos>"]) == "\na\n"


def test_generation_is_repeatable_with_a_seed(run):
    a = generate(run, words=25, samples=3, seed=4)
    assert a == generate(run, words=25, samples=3, seed=4)
    assert a != generate(run, words=25, samples=3, seed=5)
    assert len(a) == 3 and all(len(s) == 25 for s in a)
    assert generate(run, words=25, samples=1, seed=4)[0] == a[0]   # sample i does not depend on --samples


def test_samples_are_drawn_in_bounded_batches_each_the_same(run, monkeypatch):
    """100,000 samples were one batch (10 GB for a 12k vocabulary); now at most
    LOGITS_AT_ONCE logits a step. Sample i is still the same, whatever the batching: here
    batches of 2 against one batch of 5, and the CLI's stream against the list."""
    import lmlow.generate as G
    whole = generate(run, words=20, samples=5, seed=3)
    vocab = load(run).vocab
    monkeypatch.setattr(G, "LOGITS_AT_ONCE", 2 * len(vocab) + 1)
    assert G.sample_batch_size(len(vocab)) == 2
    assert generate(run, words=20, samples=5, seed=3) == whole
    _, texts = G.sample_texts(run, as_json=True, words=20, samples=5, seed=3)
    assert not isinstance(texts, list)                     # yielded as each batch is drawn
    assert [json.loads(t)["tokens"] for t in texts] == whole


def test_top_k_1_is_greedy(run):
    r = load(run)
    prompt = r.vocab.encode("the senate".split())
    got = sample_ids(r.model, r.vocab, prompt, 12, samples=2, seed=9, sampling=Sampling(top_k=1))
    assert got[0] == got[1]
    assert got == sample_ids(r.model, r.vocab, prompt, 12, samples=2, seed=1,
                             sampling=Sampling(temperature=0))
    # the argmax step by step, from <eos> + prompt
    ids, expected = [r.vocab.eos_id, *prompt], []
    with torch.no_grad():
        for _ in range(12):
            out, _, _, _ = r.model(torch.tensor(ids).unsqueeze(1), r.model.init_hidden(1))
            expected.append(int(r.model.logits(out[-1, 0]).argmax()))
            ids.append(expected[-1])
    assert got[0] == expected


def test_bias_scale_changes_the_text(run):
    full = generate(run, words=30, samples=2, seed=2, bias_scale=1.0)
    none = generate(run, words=30, samples=2, seed=2, bias_scale=0.0)
    assert full != none
    assert generate(run, words=30, samples=2, seed=2, bias_scale=1.0) == full
    greedy = generate(run, words=10, top_k=1)[0]
    assert greedy != generate(run, words=10, top_k=1, bias_scale=0)[0]


def test_a_run_opened_with_a_bias_scale_generates_with_it(run):
    """lmlow.load(RUN, bias_scale=0) handed to generate() sampled from the trained model
    (lambda 1) with nothing said; a different bias_scale beside it is refused."""
    opened = load(run, bias_scale=0.0)
    assert generate(opened, words=30, samples=2, seed=2) == \
        generate(run, words=30, samples=2, seed=2, bias_scale=0.0)
    assert generate(opened, words=30, samples=2, seed=2) != generate(run, words=30, samples=2, seed=2)
    with pytest.raises(LmlowError, match="opened with bias_scale 0"):
        generate(opened, words=3, bias_scale=1.0)


@pytest.mark.parametrize("options, key", [
    ({"prompt": None}, "prompt"), ({"prompt": 123}, "prompt"), ({"top_k": 2.5}, "top_k"),
    ({"words": 2.0}, "words"), ({"temperature": "1"}, "temperature"),
    ({"bias_scale": None}, "bias_scale"), ({"seed": True}, "seed")])
def test_options_of_the_wrong_type_are_named(run, options, key):
    """From Python these were AttributeErrors and TypeErrors deep in sampling, or (seed=True)
    a seed of 1."""
    with pytest.raises(LmlowError, match=f"lmlow.generate: {key} = "):
        generate(run, **{"words": 2, **options})
    if key != "bias_scale":                    # bias-sweep's scales are its lambdas
        with pytest.raises(LmlowError, match=f"bias_sweep: {key} = "):
            bias_sweep(run, **{"lambdas": [1], "samples": 1, "words": 2, **options})


def test_a_run_stopped_before_its_first_validation_is_swept_and_analysed_from_last(
        speech_corpus, tmp_path):
    """bias-sweep and analyze took best.pt whatever --checkpoint's help says (best, or last
    for a run stopped before its first validation), as generate and eval do."""
    out = tmp_path / "early"
    assert main(["train", str(speech_corpus), "--out", str(out), "--preset", "tiny",
                 "--max-steps", "3", "--max-epochs", "1", "--quiet"]) == 0
    for name in ("best.pt", "metrics.jsonl", "summary.json"):   # killed before validating
        (out / name).unlink()
    r = bias_sweep(out, lambdas=[1], samples=2, words=5, out=tmp_path / "b")
    assert r["checkpoint"] == "last" and r["rows"][0]["ppl"] > 0
    from lmlow.analysis import analyze
    a = analyze(out, tmp_path / "a", tokens=500)
    assert a["checkpoint"] == "last"


def test_a_run_that_validated_and_lost_best_pt_is_not_scored_from_last_silently(
        speech_corpus, tmp_path, capsys):
    """best.pt gone from a run that validated: eval (and score, predict, generate, export)
    scored last.pt instead without a word, and the report's cache kept its numbers under
    the best's name. It is one line naming the file and the flag that takes the last state."""
    from conftest import cli
    out = tmp_path / "lost"
    assert main(["train", str(speech_corpus), "--out", str(out), "--preset", "tiny",
                 "--max-steps", "3", "--max-epochs", "1", "--quiet"]) == 0
    (out / "best.pt").unlink()
    code, _, err = cli("eval", str(out), capsys=capsys)
    assert code == 1 and err.count("\n") == 1
    assert "best.pt: missing, though the run validated" in err and "--checkpoint last" in err
    assert cli("eval", str(out), "--checkpoint", "last", capsys=capsys)[0] == 0


@pytest.mark.parametrize("options, message", [
    ({"bias_scale": float("nan")}, "bias_scale = nan: expected a number in [-10, 10]"),
    ({"bias_scale": "x"}, "bias_scale = 'x': expected a number"),
    ({"batch_size": 2.5}, "batch_size = 2.5: expected an integer >= 1"),
    ({"batch_size": True}, "batch_size = True: expected an integer >= 1"),
    ({"checkpoint": "final"}, "checkpoint = 'final': expected 'best' or 'last'"),
    ({"foo": 1}, "unknown keyword 'foo'"),
])
def test_load_checks_its_keywords_as_the_flags_are_checked(run, options, message):
    """lmlow.load(RUN, bias_scale=nan) scored every word NaN; a float batch size or an unknown
    keyword was a TypeError from deep inside. Each is one line naming the keyword."""
    with pytest.raises(LmlowError, match="^lmlow.load: " + re.escape(message)):
        load(run, **options)


def test_no_unk(run):
    texts = generate(run, words=200, samples=2, seed=1, no_unk=True, bias_scale=0)
    assert all("<unk>" not in t for t in texts)


def test_bias_sweep(run, tmp_path):
    r = bias_sweep(run, lambdas=[0, 0.5, 1], samples=6, words=20, seed=3, out=tmp_path / "s")
    rows = r["rows"]
    assert [x["lambda"] for x in rows] == [0, 0.5, 1, "test text"]
    ev = load(run).evaluate("test")
    assert rows[2]["ppl"] == pytest.approx(ev.perplexity, rel=1e-4)    # lambda = 1: the model
    assert rows[0]["ppl"] == pytest.approx(load(run, bias_scale=0).evaluate("test").perplexity,
                                           rel=1e-4)
    assert rows[0]["ppl"] > rows[2]["ppl"]
    for x in rows:
        assert 0 < x["Distinct-1"] <= x["Distinct-2"] <= 1 and x["tokens"] == 6 * 20
        assert x["n-gram diversity"] <= x["Distinct-2"]
    assert rows[0]["mean ln unigram"] < rows[2]["mean ln unigram"]    # rarer words without the bias
    assert {p.name for p in (tmp_path / "s").iterdir()} == {
        "bias_sweep.md", "bias_sweep.csv", "bias_sweep.json", "samples.jsonl"}
    lines = (tmp_path / "s" / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 3 * 6 and json.loads(lines[0])["lambda"] == 0
    with pytest.raises(LmlowError, match="--force"):
        bias_sweep(run, lambdas=[1], samples=1, words=5, out=tmp_path / "s")


@pytest.mark.parametrize("text", ["a,b", "", "1,nan", "0,1,1"])
def test_bad_lambdas(text):
    with pytest.raises(LmlowError, match="--lambdas"):
        parse_lambdas(text)


def test_cli_generate_and_bias_sweep(run, tmp_path, capsys):
    args = ["generate", str(run), "--words", "15", "--samples", "2", "--seed", "7", "--top-p",
            "0.9", "--prompt", "the senate", "--json"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    assert capsys.readouterr().out == first
    samples = [json.loads(l) for l in first.splitlines()]
    assert len(samples) == 2 and all(len(s["tokens"]) == 15 for s in samples)
    assert samples[0]["text"].startswith("the senate ")
    assert main(["bias-sweep", str(run), "--lambdas", "0,1", "--samples", "3", "--words", "10",
                 "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "| lambda" in out and "test ppl" in out and (tmp_path / "b" / "bias_sweep.csv").exists()


@pytest.mark.parametrize("argv, message", [
    (["bias-sweep", "RUN", "--lambdas", "0,x"], "--lambdas"),
    (["generate", "no/such/run"], "no such run folder"),
    (["generate", "RUN", "--top-p", "0"], "--top-p"),
    (["generate", "RUN", "--temperature", "-1"], "--temperature"),
    (["generate", "RUN", "--samples", "0"], "--samples"),
])
def test_bad_input_is_one_line(argv, message, run, capsys):
    """Exit 1 (lmlow's own check) or 2 (argparse's type check), one line naming the flag."""
    code, _, err = cli(*[str(run) if a == "RUN" else a for a in argv], capsys=capsys)
    assert code in (1, 2) and message in err and err.count("\n") == 1, err