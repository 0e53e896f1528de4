"""The KenLM baseline: real lmplz, numbers that agree with KenLM's own tools, and the same tokens,
UNK rule and report as the LSTM runs."""
import collections
import json
import math
import os
import re
import resource
import subprocess
import sys

import numpy as np
import pytest

from conftest import write_corpus, lmlow
from lmlow.data.corpus import Corpus
from lmlow.data.vocab import Vocabulary
from lmlow.errors import LmlowError
from lmlow.evaluate import LN10
from lmlow.external import find_program
from lmlow.ngram import train_ngram
from lmlow.ngram_run import NgramRun
from lmlow.runs import load

try:
    find_program("lmplz", "")
    find_program("build_binary", "")
except LmlowError as e:
    pytestmark = pytest.mark.skip(reason=f"KenLM not built ({e})")




@pytest.fixture(scope="module")
def kn(speech_corpus, tmp_path_factory):
    """A 4-gram on the speeches, K=2 (so the training text has <unk>s)."""
    run = tmp_path_factory.mktemp("kn") / "run"
    train_ngram(speech_corpus, run, order=4, unk_threshold=2, memory="100M", quiet=True)
    return run


def query_perplexity(model, text):
    """KenLM's own query program on the ARPA file: the reference, independent of lmlow."""
    out = subprocess.run([find_program("query", ""), str(model)], stdin=open(text),
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"Perplexity including OOVs:\s*(\S+)", out).group(1))


def kenlm_perplexity(model, text):
    """The kenlm module's full_scores over the lines of a text file."""
    import kenlm

    m = kenlm.Model(str(model))
    scores = [s[0] for line in open(text) if line.split() for s in m.full_scores(line)]
    return 10 ** (-sum(scores) / len(scores))


@pytest.mark.parametrize("k", [0, 2])
def test_perplexity_agrees_with_kenlm_query_and_full_scores(speech_corpus, tmp_path, k):
    run = tmp_path / "run"
    train_ngram(speech_corpus, run, order=5, unk_threshold=k, memory="100M", quiet=True)
    text = speech_corpus / "test.txt"
    if k:  # other tools read the UNK-replaced text, as lmlow unk writes it
        Corpus(speech_corpus, k).write_unk_replaced(tmp_path / "unk")
        text = tmp_path / "unk" / "test.txt"
    ppl = load(run).evaluate("test").perplexity
    assert f"{ppl:.4g}" == f"{query_perplexity(run / 'model.arpa', text):.4g}"
    assert f"{ppl:.4g}" == f"{kenlm_perplexity(run / 'model.bin', text):.4g}"


def test_literal_unk_is_kept_trained_and_counted(tmp_path):
    train = "the cat sat on the <unk>\nthe <unk> sat on the mat\na dog sat on a <unk>\n" * 3
    corpus = write_corpus(tmp_path / "c", train + "the dog ran\n", "the <unk> sat on a mat\n",
                          "a cat sat on the <unk>\n")
    cfg = train_ngram(corpus, tmp_path / "run", order=3, memory="50M", quiet=True)
    assert cfg.discount_fallback and "discount" in cfg.discount_fallback_reason  # tiny data
    arpa = (tmp_path / "run" / "model.arpa").read_text()
    assert "<lmlow-unk>" not in arpa
    assert re.search(r"^\S+\tthe <unk>\t", arpa, re.M)   # <unk> was a word in lmplz's input
    unigrams = dict(l.split("\t")[1::-1] for l in arpa.split("\\1-grams:\n")[1].split("\n\n")[0]
                    .splitlines())
    assert float(unigrams["<unk>"]) > float(unigrams["dog"])  # 9 occurrences beat 4
    assert sum(10 ** float(p) for w, p in unigrams.items() if w != "<s>") == pytest.approx(1, abs=1e-5)
    run = load(tmp_path / "run")
    ev = run.evaluate("valid")
    assert ev.unk_tokens == 1 and ev.tokens == 7
    assert run.vocab.counts[run.vocab.unk_id] == 9


def test_merged_unk_is_a_distribution_after_every_context(kn):
    """K=2, every vocabulary word seen: the trained <unk> takes KenLM's own <unk> mass. KenLM
    reaches its <unk> after any context by backing off to the unigram, so the merge must add
    it wherever <unk> has an entry after a context too, not only in the unigrams: after such
    contexts the n-gram summed to 0.9995 (checked here through KenLM's own binary model)."""
    ng = NgramRun(kn)
    arpa = (kn / "model.arpa").read_text()
    contexts = []
    for order in (2, 3, 4):
        grams = [l.split("\t")[1].split(" ") for l in
                 arpa.split(f"\\{order}-grams:\n")[1].split("\n\n")[0].splitlines()]
        found = [g[:-1] for g in grams if g[-1] == "<unk>" and not {"<s>", "</s>"} & set(g)]
        assert len(found) >= 5
        contexts += found[:15]
    for context in contexts:
        assert np.exp(ng.reader().feed(context).next_logprobs()).sum() == pytest.approx(1, abs=1e-5)


def test_unk_rule_and_report_match_an_lstm_run(speech_corpus, kn, tmp_path):
    from lmlow.config import build_config
    from lmlow.train import train

    lstm = tmp_path / "lstm"  # an initialised LSTM is enough: only tokens and keys are compared
    train(build_config("tiny", None, corpus=str(speech_corpus), max_epochs=0, unk_threshold=2),
          lstm, quiet=True)
    assert load(kn).vocab.words == load(lstm).vocab.words
    assert load(kn).vocab.counts == Corpus(speech_corpus, 2).vocab.counts
    r = lmlow("eval", kn, "--split", "test", "--json", cache=tmp_path / "cache")
    ev = [json.loads(r.stdout), load(lstm).evaluate("test").to_dict()]  # what --json prints
    assert ev[0].keys() == ev[1].keys()
    for key in ("tokens", "unk_tokens", "oov_tokens", "split"):
        assert ev[0][key] == ev[1][key]
    assert [b["tokens"] for b in ev[0]["bins"]] == [b["tokens"] for b in ev[1]["bins"]]


def test_score_gives_kenlm_full_scores_in_natural_log(kn, tmp_path):
    import kenlm

    f = tmp_path / "s.txt"
    f.write_text("the senate of the united states\nzzz house\n")
    r = lmlow("score", kn, f, cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(l) for l in r.stdout.splitlines()]
    assert lines[1]["words"] == ["zzz", "house", "<eos>"] and lines[1]["oov"] == [True, False, False]
    m = kenlm.Model(str(kn / "model.bin"))
    for line, text in zip(lines, f.read_text().splitlines()):
        ref = [s[0] for s in m.full_scores(text.replace("zzz", "<unk>"))]
        assert line["logprob"] == pytest.approx([p * LN10 for p in ref], abs=1e-5)
    assert isinstance(load(kn), NgramRun) and math.isfinite(load(kn).score("the house")[0][1])
    out = subprocess.run([find_program("query", ""), str(kn / "model.arpa")], stdin=open(f),
                         capture_output=True, text=True, check=True).stdout   # KenLM's totals
    want = [float(re.search(rf"Perplexity {w} OOVs:\s*(\S+)", out).group(1))
            for w in ("including", "excluding")]
    got = re.fullmatch(r"lmlow: \S+: 2 lines, 10 tokens with <eos>, 1 out of the vocabulary: "
                       r"perplexity (\S+) \((\S+) without them\)\n", r.stderr)
    assert got and [float(x) for x in got.groups()] == pytest.approx(want, abs=0.006), r.stderr


def test_errors_are_one_line(speech_corpus, kn, tmp_path):
    cache = tmp_path / "cache"
    for args, message in [(("eval", tmp_path / "nowhere"), "no such run folder"),
                          (("ngram", speech_corpus, "--out", kn), "is not empty; pass --force"),
                          (("ngram", speech_corpus, "--out", tmp_path / "r", "--order", "9"), "--order 9: must be in [2, 6]"),
                          (("ngram", speech_corpus, "--out", tmp_path / "r", "--prune", "0,2,1"),
                           "non-decreasing"),
                          # lmplz refused these after the folder was made: no fraction, not 0
                          (("ngram", speech_corpus, "--out", tmp_path / "r", "--memory", "1.5G"),
                           "--memory '1.5G': expected a whole size above 0"),
                          (("ngram", speech_corpus, "--out", tmp_path / "r", "--memory", "0%"),
                           "--memory '0%'"),
                          # lmplz refused it ("Bad pruning threshold") after the corpus was read
                          (("ngram", speech_corpus, "--out", tmp_path / "r", "--prune",
                            f"0,0,{2**64}"), "a count is at most 2**64 - 1"),
                          # lmplz's 64-bit size overflowed: "Sort block size 0", no flag named
                          (("ngram", speech_corpus, "--out", tmp_path / "r", "--memory",
                            "99999999999999999999G"), "more than this machine's memory"),
                          (("ngram", speech_corpus, "--out", tmp_path / "r", "--memory",
                            f"{2**60}"), "more than this machine's memory"),   # K by default
                          # lmplz failed on any corpus, saying "Sort block size 0" or "Vocab
                          # hash size estimate 25165824 exceeds total memory", no flag named
                          (("ngram", speech_corpus, "--out", tmp_path / "r", "--memory", "1b"),
                           "--memory 1b: below lmplz's least, 25M"),
                          (("ngram", speech_corpus, "--out", tmp_path / "r", "--memory", "24M"),
                           "--memory 24M: below lmplz's least"),
                          (("ngram", speech_corpus, "--out", tmp_path / "r", "--memory", "25599"),
                           "--memory 25599: below lmplz's least"),       # K by default
                          # the LSTM's flag copied alone did nothing: a baseline over other words
                          (("ngram", speech_corpus, "--out", tmp_path / "r", "--embeddings",
                            tmp_path / "nowhere.txt"), "give both, or neither")]:
        r = lmlow(*args, cache=cache)      # 2: refused while the command line is read
        assert r.returncode in (1, 2) and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
    assert not (tmp_path / "r").exists()
    # the Python API's prune list is checked as the flag is (it pruned unigrams: ppl 833 vs 234)
    with pytest.raises(LmlowError, match="starting with 0"):
        train_ngram(speech_corpus, tmp_path / "r", order=3, prune=[1])
    train_ngram(speech_corpus, tmp_path / "old", order=2, memory="50M", quiet=True)
    # --force whose estimate fails keeps the finished run (it was cleared first: only .lock
    # left). lmplz fails as on a full disk: no file may grow past the order-2 ARPA's size, so
    # lmlow's training text (smaller) is written and lmplz's order-3 ARPA (larger) is not
    old = tmp_path / "old"
    before = {p.name: p.read_bytes() for p in old.iterdir() if p.is_file()}
    limit = (old / "model.arpa").stat().st_size
    assert limit > 2 * (speech_corpus / "train.txt").stat().st_size
    args = ("ngram", speech_corpus, "--out", old, "--force", "--order", "3", "--memory", "25M")
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", *map(str, args)], capture_output=True,
                       text=True, env={"PATH": "/usr/bin:/bin", "LMLOW_CACHE_DIR": str(cache)},
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    # what lmplz said last in words, not its progress bar ("its last words: ****")
    said = re.search(r"lmplz failed: killed by SIGXFSZ \(its last words: (.*)\)$", r.stderr.strip())
    assert said and re.search("[A-Za-z]", said.group(1)), r.stderr
    assert {p.name: p.read_bytes() for p in old.iterdir() if p.is_file()} == before
    assert load(old).config.order == 2
    r = lmlow(*args, cache=cache)                    # 25M, the least, is enough for lmplz
    assert r.returncode == 0 and "valid ppl" in r.stdout, r.stderr
    assert load(old).config.order == 3


def test_a_killed_lmplz_is_quoted_by_its_last_words_not_its_progress_bar():
    """lmplz's stderr as it stands when it is killed while reading its text (its own lines,
    from KenLM 0.3.0): the error quoted the bar's stars as its "last words"."""
    from lmlow.ngram import kenlm_message
    stderr = ("=== 1/5 Counting and sorting n-grams ===\n"
              "Reading /tmp/r/train.lmplz.txt.tmp4242\n"
              "----5---10---15---20---25---30---35---40---45---50---55---60---65---70---75---80"
              "---85---90---95--100\n" + "*" * 36 + "\n")
    assert kenlm_message(stderr) == "Reading /tmp/r/train.lmplz.txt.tmp4242"


def test_missing_lmplz_says_how_to_build_it(speech_corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LmlowError, match="make install.*build_kenlm.py"):
        train_ngram(speech_corpus, tmp_path / "r")


def test_interpolation_with_an_lstm(speech_corpus, kn, tmp_path):
    """LSTM + n-gram mixed word by word: weight 1 is the LSTM, the EM-tuned weight is at least
    as good as either model on the split it was tuned on, and the mixture sums to one."""
    from lmlow.config import build_config
    from lmlow.evaluate import mix_logprobs, tune_weight
    from lmlow.runs import InterpolatedRun
    from lmlow.train import train

    lstm = tmp_path / "lstm"
    train(build_config("tiny", None, corpus=str(speech_corpus), max_epochs=1, unk_threshold=2),
          lstm, quiet=True)
    a, b = load(lstm), load(kn)
    ids = a.corpus().encode("valid").ids
    lp_a, lp_b = a.token_logprobs(ids), b.token_logprobs(ids)
    w = tune_weight(lp_a, lp_b)
    assert 0 < w < 1
    mixed = -np.mean(mix_logprobs(lp_a, lp_b, w))
    assert mixed <= min(-np.mean(lp_a), -np.mean(lp_b)) + 1e-9
    for other in (0.1, 0.5, 0.9):                       # EM found the maximum
        assert mixed <= -np.mean(mix_logprobs(lp_a, lp_b, other)) + 1e-6
    assert mix_logprobs(np.log([0.2]), np.log([0.6]), 0.25) == pytest.approx(np.log([0.5]))
    assert InterpolatedRun(a, b, 1.0).evaluate("test").perplexity == pytest.approx(
        a.evaluate("test").perplexity)
    cache = tmp_path / "cache"
    r = lmlow("eval", lstm, "--interpolate", kn, "--split", "valid", "--json", cache=cache)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["weight"] == pytest.approx(w, abs=1e-4) and out["perplexity"] == pytest.approx(math.exp(mixed))
    other = tmp_path / "k0"
    train_ngram(speech_corpus, other, order=2, unk_threshold=0, memory="50M", quiet=True)
    r = lmlow("eval", lstm, "--interpolate", other, cache=cache)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "different vocabularies" in r.stderr
    r = lmlow("eval", lstm, "--weight", "0.5", cache=cache)
    assert r.returncode == 1 and "--interpolate" in r.stderr
    r = lmlow("eval", lstm, "--interpolate", kn, "--weight", "1.5", cache=cache)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--weight 1.5: must be in [0, 1]" in r.stderr


def test_extended_vocabulary_shares_unk_probability(speech_corpus, tmp_path):
    """--extend-vocab: the vectors' words that training never saw share KenLM's <unk>
    probability equally with <unk>, so the n-gram is still a distribution over the LSTM's
    (extended) vocabulary: probabilities after a context sum to 1, as KenLM's own do."""
    import kenlm

    from lmlow.embeddings import vector_words

    train = set((speech_corpus / "train.txt").read_text().split())
    unseen = sorted(set((speech_corpus / "valid.txt").read_text().split()) - train)[:20]
    vec = tmp_path / "v.txt"
    vec.write_text("".join(f"{w} 0.1 0.2\n" for w in [*unseen, "</s>", "the"]))
    unseen.append("</s>")     # word2vec's GoogleNews has it: an unseen word, not KenLM's end
    run = tmp_path / "run"
    train_ngram(speech_corpus, run, order=3, memory="100M", quiet=True, embeddings=str(vec),
                extend_vocab=True)
    ng = NgramRun(run)
    assert ng.vocab.words == Corpus(speech_corpus, 0, vector_words(vec)).vocab.words
    assert all(w in ng.vocab for w in unseen)
    v = ng.vocab
    context = [v.index["the"], v.index["people"]]
    probs = [math.exp(ng.token_logprobs(np.array([*context, i] + ([] if i == v.eos_id else [v.eos_id])))[2])
             for i in range(len(v))]
    assert abs(sum(probs) - 1) < 1e-4
    m = kenlm.Model(str(run / "model.bin"))
    state, mid, out = kenlm.State(), kenlm.State(), kenlm.State()
    m.BeginSentenceWrite(state)
    m.BaseScore(state, "the", mid)
    m.BaseScore(mid, "people", state)
    p_unk = 10 ** m.BaseScore(state, "<unk>", out)
    share = p_unk / (len(unseen) + 1)
    assert probs[v.index[unseen[0]]] == pytest.approx(share, rel=1e-6)
    assert probs[v.index["</s>"]] == pytest.approx(share, rel=1e-6)
    assert probs[v.unk_id] == pytest.approx(share, rel=1e-6)
    r = lmlow("ngram", speech_corpus, "--out", tmp_path / "x", "--extend-vocab")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "--embeddings" in r.stderr
    # gensim vectors: the refusal's advice, --allow-pickle, is a flag ngram takes (it was not)
    from lmlow.embeddings import load_vectors
    load_vectors(vec).save(str(tmp_path / "v.kv"))
    args = ("ngram", speech_corpus, "--out", tmp_path / "kv", "--order", "3", "--memory",
            "100M", "--extend-vocab", "--embeddings", tmp_path / "v.kv", "--quiet")
    r = lmlow(*args)
    assert r.returncode == 1 and "pass --allow-pickle if you trust it" in r.stderr
    lmlow(*args, "--allow-pickle", check=True)
    assert Vocabulary.load(tmp_path / "kv" / "vocab.txt").words == ng.vocab.words


def test_trained_unk_keeps_its_probability_beside_unseen_words(speech_corpus, tmp_path):
    """K=2 on a training fraction: <unk> is a trained word and the vocabulary has words the
    fraction never saw. <unk> gets the trained probability (KenLM's, for the placeholder it was
    estimated as), the unseen words share KenLM's own <unk>, and the whole is a distribution.
    Before, <unk> and the n unseen words split the trained <unk>: a 1/(n+1) share each."""
    import kenlm

    run = tmp_path / "run"
    train_ngram(speech_corpus, run, order=3, unk_threshold=2, memory="100M", quiet=True,
                train_fraction=0.3)
    ng = NgramRun(run)
    v, m = ng.vocab, kenlm.Model(str(run / "model.arpa"))
    unseen = [i for i, c in enumerate(v.counts) if not c and i not in (v.unk_id, v.eos_id)]
    assert len(unseen) > 10 and v.counts[v.unk_id] > 0
    context = [v.index["the"]]
    probs = np.array([math.exp(ng.token_logprobs(np.array([*context, i] + ([] if i == v.eos_id else [v.eos_id])))[1])
                      for i in range(len(v))])
    assert abs(probs.sum() - 1) < 1e-4
    state, mid = kenlm.State(), kenlm.State()
    m.BeginSentenceWrite(state)
    m.BaseScore(state, "the", mid)
    trained_unk = 10 ** m.BaseScore(mid, "<lmlow-unk>", kenlm.State())
    kenlm_unk = 10 ** m.BaseScore(mid, "<unk>", kenlm.State())
    assert probs[v.unk_id] == pytest.approx(trained_unk, rel=1e-6)
    assert probs[unseen] == pytest.approx(kenlm_unk / len(unseen), rel=1e-6)
    assert probs[v.unk_id] > 50 * probs[unseen[0]]
    # a run estimated the old way (the trained <unk> merged, then shared) is refused, not scored
    from lmlow.ngram import rename_unk
    (run / "model.bin").unlink()
    (run / "model.arpa").rename(tmp_path / "kept.arpa")
    rename_unk(tmp_path / "kept.arpa", run / "model.arpa", has_unk=True)
    with pytest.raises(LmlowError, match="estimate it again .* --force"):
        NgramRun(run)
    # vocab.txt's counts from another text than the model's (the whole split's, as an lmlow
    # of 2026-11-25 kept under --train-fraction): refused, not scored with a wrong share
    os.replace(tmp_path / "kept.arpa", run / "model.arpa")
    NgramRun(run)
    whole = Vocabulary.load(run / "vocab.txt")
    whole.counts[unseen[0]] = 1
    whole.save(run / "vocab.txt", with_counts=True)
    with pytest.raises(LmlowError, match="vocab.txt: .* words of count 0, but the model lacks"):
        NgramRun(run)


def test_a_committed_baseline_reports_without_its_model_files(kn):
    """lmlow report --baseline on an n-gram run whose ARPA/binary files were left out of git
    reads the evaluations cached when it was first reported."""
    from lmlow.report import baseline_row

    first = baseline_row(kn)
    assert first["valid ppl"] == pytest.approx(NgramRun(kn).evaluate("valid").perplexity)
    moved = [(p, p.with_suffix(p.suffix + ".away")) for p in (kn / "model.bin", kn / "model.arpa")]
    for p, away in moved:
        p.rename(away)
    try:
        assert baseline_row(kn) == first
    finally:
        for p, away in moved:
            away.rename(p)


def arpa_unigrams(arpa) -> set[str]:
    """The words of an ARPA file's unigram section."""
    words, inside = set(), False
    for line in open(arpa, encoding="utf-8"):
        if line.strip() in ("\\1-grams:", "\\2-grams:"):
            inside = line.strip() == "\\1-grams:"
        elif inside and line.strip():
            words.add(line.split("\t")[1])
    return words


def test_train_fraction_estimates_on_the_first_lines_over_the_full_vocabulary(speech_corpus, tmp_path):
    """--train-fraction 0.4: lmplz sees exactly the training lines that fit in the first 40% of
    the tokens (counted here from the text itself, each line's words plus its end), while the
    vocabulary stays the whole split's, so the tokens scored are those of the full model."""
    lines = [l.split() for l in (speech_corpus / "train.txt").read_text().splitlines() if l.split()]
    cut, used, kept = int(sum(len(l) + 1 for l in lines) * 0.4), 0, []
    for line in lines:
        used += len(line) + 1
        if used > cut:
            break
        kept.append(line)
    full, part = tmp_path / "full", tmp_path / "part"
    train_ngram(speech_corpus, full, order=3, memory="100M", quiet=True)
    train_ngram(speech_corpus, part, order=3, memory="100M", quiet=True, train_fraction=0.4)
    def counts(run):
        return dict(line.split("\t") for line in (run / "vocab.txt").read_text().splitlines())
    assert list(counts(part)) == list(counts(full))         # the whole split's words, in order
    kept_counts = collections.Counter(w for l in kept for w in l + ["<eos>"])
    assert {w: int(c) for w, c in counts(part).items() if int(c)} == dict(kept_counts)
    assert arpa_unigrams(part / "model.arpa") == {w for l in kept for w in l} | {"<s>", "</s>", "<unk>"}
    assert json.loads((part / "config.json").read_text())["train_fraction"] == 0.4
    ev_full, ev_part = NgramRun(full).evaluate("valid"), NgramRun(part).evaluate("valid")
    assert ev_part.tokens == ev_full.tokens and ev_part.perplexity > ev_full.perplexity
    for bad, says in (("0", "--train-fraction 0: must be"), ("0.0001", "no complete training line")):
        r = lmlow("ngram", speech_corpus, "--out", tmp_path / "bad", "--train-fraction", bad)
        assert r.returncode in (1, 2) and r.stderr.count("\n") == 1 and says in r.stderr, r.stderr
        assert not (tmp_path / "bad").exists()


def test_report_takes_one_baseline_row_per_data_size(speech_corpus, tmp_path):
    """`lmlow report --baseline A --baseline B`: each n-gram is a row of the sweep's table,
    named by its order and (below 1) its training fraction, with the perplexity KenLM gives."""
    import csv

    (tmp_path / "grid.toml").write_text('[runs.standard]\ntie = true\ninit = ["random"]\n')
    sweep = tmp_path / "sweep"
    r = lmlow("sweep", speech_corpus, "--grid", tmp_path / "grid.toml", "--out", sweep,
              "--preset", "tiny", "--max-epochs", "1")
    assert r.returncode == 0, r.stderr
    for name, fraction in (("kn", 1.0), ("kn-half", 0.5)):
        train_ngram(speech_corpus, tmp_path / name, order=3, memory="100M", quiet=True,
                    train_fraction=fraction)
    import shutil

    prior = tmp_path / "prior"                  # an LSTM run as a baseline: a row of its own
    shutil.copytree(sweep / "standard.seed1", prior, ignore=shutil.ignore_patterns(".lock"))
    r = lmlow("report", sweep, "--baseline", tmp_path / "kn", "--baseline", tmp_path / "kn-half",
              "--baseline", prior)
    assert r.returncode == 0, r.stderr
    rows = {row["configuration"]: row for row in csv.DictReader((sweep / "results.csv").open())}
    assert set(rows) == {"standard", "KenLM 3-gram", "KenLM 3-gram.data0.5", "prior"}
    for column in ("valid ppl", "test ppl", "trainable params", "tie", "best epoch", "converged"):
        assert rows["prior"][column] == rows["standard"][column] != ""
    lines = (sweep / "results.md").read_text().splitlines()
    header = next(line for line in lines if line.startswith("| configuration"))
    kenlm = next(line for line in lines if line.startswith("| KenLM 3-gram "))
    cells = dict(zip((c.strip() for c in header.split("|")), (c.strip() for c in kenlm.split("|"))))
    assert cells["valid sd"] == cells["trainable params"] == "" and "None" not in kenlm
    for name, run in (("KenLM 3-gram", "kn"), ("KenLM 3-gram.data0.5", "kn-half")):
        assert float(rows[name]["valid ppl"]) == pytest.approx(
            NgramRun(tmp_path / run).evaluate("valid").perplexity, rel=1e-6)
    assert "Warning" not in (sweep / "results.md").read_text() and "warning" not in r.stderr
    # a baseline on other tokens (K=2: its <unk> holds the words seen once) is named as such
    train_ngram(speech_corpus, tmp_path / "kn-k2", order=3, memory="100M", quiet=True,
                unk_threshold=2)
    r = lmlow("report", sweep, "--baseline", tmp_path / "kn", "--baseline", tmp_path / "kn-k2")
    said = f"{tmp_path / 'kn-k2'}: other tokens than every run of this table"
    assert r.returncode == 0 and r.stderr.count("warning") == 1 and said in r.stderr
    assert f"**Warning: {said}" in (sweep / "results.md").read_text()
    assert str(tmp_path / "kn") + "," not in r.stderr
    # as committed (no vocab.txt anywhere): the hashes in summary.json still tell
    for words in [*sweep.glob("*/vocab.txt"), tmp_path / "kn" / "vocab.txt", tmp_path / "kn-k2" / "vocab.txt"]:
        words.unlink()
    r = lmlow("report", sweep, "--baseline", tmp_path / "kn", "--baseline", tmp_path / "kn-k2")
    assert r.returncode == 0 and r.stderr.count("warning") == 1 and said in r.stderr, r.stderr
    # from before summary.json kept the hash: the validation tokens each evaluation counted
    for summary in [*sweep.glob("*/summary.json"), tmp_path / "kn" / "summary.json",
                    tmp_path / "kn-k2" / "summary.json"]:
        summary.write_text(json.dumps({k: v for k, v in json.loads(summary.read_text()).items()
                                       if k != "vocabulary_digest"}))
    r = lmlow("report", sweep, "--baseline", tmp_path / "kn", "--baseline", tmp_path / "kn-k2")
    assert r.returncode == 0 and r.stderr.count("warning") == 1 and said in r.stderr, r.stderr
    # a baseline of another corpus, judged by its validation tokens alone (the runs have no hash)
    other = write_corpus(tmp_path / "other", "a b c\nb c a\n", "a b\nc\n", "a\n")
    train_ngram(other, tmp_path / "kn-other", order=2, memory="100M", quiet=True)
    r = lmlow("report", sweep, "--baseline", tmp_path / "kn", "--baseline", tmp_path / "kn-other")
    assert r.returncode == 0 and f"{tmp_path / 'kn-other'}: other tokens" in r.stderr, r.stderr


def test_a_word_list_gives_both_models_its_vocabulary(speech_corpus, tmp_path):
    """`--vocab FILE` (a recogniser's word list), through the command line: the LSTM and the
    5-gram get the list's words and no other, score the same tokens (every other word one
    <unk>, counted here from the text), mix, and the LSTM resumes without the file."""
    train = collections.Counter((speech_corpus / "train.txt").read_text().split())
    valid = [line.split() for line in (speech_corpus / "valid.txt").read_text().splitlines()]
    absent = sorted({w for line in valid for w in line} - set(train))[:5]
    listed = [w for w, _ in train.most_common(300)] + absent
    words = tmp_path / "words.txt"             # a symbol table: word and id
    words.write_text("".join(f"{w} {i}\n" for i, w in enumerate(listed)))
    lstm, kn3 = tmp_path / "lstm", tmp_path / "kn3"
    lmlow("train", speech_corpus, "--out", lstm, "--vocab", words, "--preset", "tiny",
          "--max-epochs", "1", "--threads", "1", "--quiet", check=True)
    lmlow("ngram", speech_corpus, "--out", kn3, "--vocab", words, "--order", "3",
          "--memory", "100M", "--quiet", check=True)
    for run in (lstm, kn3):
        vocab = (run / "vocab.txt").read_text().split("\n")
        assert {line.split("\t")[0] for line in vocab if line} == {*listed, "<eos>", "<unk>"}
        assert json.loads((run / "config.json").read_text())["vocab"] == str(words.resolve())
    unk = sum(w not in listed for line in valid for w in line)
    unseen = sum(w in absent for line in valid for w in line)
    tokens = sum(len(line) + 1 for line in valid)
    evals = [json.loads(lmlow("eval", run, "--json", check=True).stdout) for run in (lstm, kn3)]
    for ev in evals:
        assert (ev["tokens"], ev["unk_tokens"], ev["bins"][0]["tokens"]) == (tokens, unk, unseen)
    mixed = lmlow("eval", lstm, "--interpolate", kn3, "--json", check=True)
    assert json.loads(mixed.stdout)["tokens"] == tokens
    words.unlink()                             # a run keeps the vocabulary it started with
    lmlow("train", "--resume", lstm, "--max-epochs", "2", "--quiet", check=True)
    assert lmlow("eval", lstm, "--json", check=True).stdout.count(f'"unk_tokens": {unk},') == 1


@pytest.mark.parametrize("key, value", [("corpus", None), ("unk_threshold", "2"),
                                        ("prune", ["0", "1"]), ("order", 4.5)])
def test_a_damaged_config_value_is_named_not_a_traceback(kn, tmp_path, key, value):
    """config.json's values were used as they were: a null corpus or a text K was a TypeError
    when the run was scored."""
    import shutil

    run = tmp_path / "kn"
    shutil.copytree(kn, run)
    cfg = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**cfg, key: value}))
    r = lmlow("eval", run)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"config.json: {key} = " in r.stderr and "expected" in r.stderr


def test_force_does_not_write_through_links_planted_under_the_temporary_names(speech_corpus, tmp_path):
    """lmplz and build_binary write to RUN/NAME.tmpPID, names handed to programs that follow
    links: with --force on a folder lmlow did not make, a link planted under them (this
    process's pid) sent the ARPA file over whatever it pointed to. The names are made afresh
    as regular files first."""
    from lmlow.files import temporary_path
    from lmlow.rundir import RunDir
    run = tmp_path / "run"
    run.mkdir()
    victims = {}
    for name in ("lmplz_arpa", "binary"):
        victim = tmp_path / f"victim-{name}"
        victim.write_text("PRECIOUS\n")
        temporary_path(getattr(RunDir(run), name)).symlink_to(victim)
        victims[name] = victim
    train_ngram(speech_corpus, run, order=3, unk_threshold=2, memory="100M", quiet=True,
                force=True)
    assert all(v.read_text() == "PRECIOUS\n" for v in victims.values())
    assert RunDir(run).binary.is_file() and not list(run.glob("*.tmp[0-9]*"))


def test_discount_fallback_is_reported_as_a_reason_not_an_error(tmp_path):
    """Text where modified Kneser-Ney's closed-form discount for bigrams comes out negative
    (many lines seen 4 times, few 3 times: D3 = 3 - 4 Y n4/n3 < 0): lmplz fails, lmlow
    reruns it with --discount_fallback and says why, in words that do not read as a failure
    (it printed lmplz's "ERROR: ... rerun with --discount_fallback" on a finished run)."""
    rng = np.random.default_rng(1)
    lines = []
    for repeats, n in ((4, 300), (1, 200), (2, 100), (3, 5)):
        for _ in range(n):
            lines += [" ".join(f"w{i}" for i in rng.integers(0, 2000, 10))] * repeats
    order = rng.permutation(len(lines))
    text = "".join(lines[i] + "\n" for i in order)
    corpus = write_corpus(tmp_path / "c", text, text[:2000], text[2000:4000])
    r = lmlow("ngram", corpus, "--out", tmp_path / "run", "--order", "5", "--memory", "50M",
              check=True)
    said = [l for l in r.stderr.splitlines() if l.startswith("lmplz:")]
    assert len(said) == 1 and "discount out of range" in said[0], r.stderr
    assert "ERROR" not in r.stderr and "rerun with" not in r.stderr, r.stderr
    assert said[0].endswith("using --discount_fallback (fixed discounts 0.5, 1, 1.5 for the "
                            "orders where the estimate fails)")
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["discount_fallback"] and cfg["discount_fallback_reason"].startswith("2-gram discount")
