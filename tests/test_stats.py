"""Rare-word statistics (Table 4) and UNK shares (Table 3), against hand-computed values."""
from collections import Counter

import pytest

from conftest import write_corpus
from lmlow.data import Corpus
from lmlow.data.corpus import WordCounts
from lmlow.data.stats import corpus_stats, coverage, rare_share, table4, unk_rule_shares


def test_rare_share_counts_words_with_count_at_most_5():
    c = Counter({"a": 10, "b": 5, "c": 1, "<unk>": 7})   # <unk> is not a word here
    assert rare_share(c) == pytest.approx({"types_pct": 200 / 3, "tokens_pct": 600 / 16})


def test_table4_train_in_pretrain():
    train = WordCounts(Counter({"a": 10, "b": 5, "c": 1}), 3)
    pre = WordCounts(Counter({"a": 100, "b": 2, "d": 50}), 9)   # c absent: count 0
    row = table4(train, pre)
    assert row["pretrain"] == pytest.approx({"types_pct": 100 / 3, "tokens_pct": 200 / 152})
    assert row["train_in_pretrain"] == pytest.approx({"types_pct": 200 / 3, "tokens_pct": 600 / 16})


def test_unk_rule_shares_use_training_counts():
    train = Counter({"a": 3, "b": 1})
    valid = Counter({"a": 2, "b": 1, "z": 1})
    assert unk_rule_shares(valid, train, 0) == {"types_pct": 0.0, "tokens_pct": 0.0}
    assert unk_rule_shares(valid, train, 1) == pytest.approx({"types_pct": 100 / 3, "tokens_pct": 25})
    assert unk_rule_shares(valid, train, 2) == pytest.approx({"types_pct": 200 / 3, "tokens_pct": 50})


def test_coverage():
    cov = coverage(Counter({"a": 3, "b": 1, "c": 4}), {"a", "c", "x"})
    assert cov == pytest.approx({"types_pct": 200 / 3, "tokens_pct": 87.5, "types": 2, "tokens": 7})


def test_corpus_stats_shape(tmp_path):
    root = write_corpus(tmp_path / "c", "a a b\nc <unk>\n", "a d\n", "b\n")
    s = corpus_stats(Corpus(root, show_progress=False), embedding_words={"a", "d"})
    assert s["sizes"]["train"] == {"lines": 2, "words": 5, "types": 4, "literal_unk": 1}
    assert s["oov"]["valid"]["tokens_pct"] == 50.0
    assert s["embedding_coverage"]["valid"]["tokens_pct"] == 100.0
    assert s["embedding_only_words"] == 1
    # GloVe's own <unk> vector and an all-text <eos> are the LM's special rows, not words
    # the vectors add (the count was one too many on every GloVe file)
    s = corpus_stats(Corpus(root, show_progress=False),
                     embedding_words={"a", "d", "<unk>", "<eos>"})
    assert s["embedding_only_words"] == 1



def test_the_unk_table_gives_each_k_its_vocabulary_size(tmp_path):
    """By hand: train counts a 3, b 2, c 1 and a literal <unk>: K=0 and 1 keep a, b, c; K=2
    a, b; K=3 a; K=4 nothing; each with <eos> and <unk>. Equal to the vocabulary a run gets."""
    root = write_corpus(tmp_path / "c", "a a b\nc <unk> a b\n", "a d\n", "b\n")
    s = corpus_stats(Corpus(root, show_progress=False), thresholds=[0, 1, 2, 3, 4])
    assert s["unk_rule_vocabulary"] == {"0": 5, "1": 5, "2": 4, "3": 3, "4": 2}
    assert [len(Corpus(root, k, show_progress=False).vocab) for k in (0, 1, 2, 3)] == [5, 5, 4, 3]
    # --extend-vocab adds the vectors' words the training text lacks, at K = 0 only (the
    # column said 5 under a header of 7 words)
    extended = Corpus(root, 0, ["d", "e", "a", "<eos>"], show_progress=False)
    s = corpus_stats(extended, embedding_words={"d", "e", "a"}, thresholds=[0, 2])
    assert s["unk_rule_vocabulary"] == {"0": 7, "2": 4} and s["vocabulary_size"] == 7
    assert len(Corpus(root, 2, ["d", "e", "a"], show_progress=False).vocab) == 4


def test_row_coverage_counts_eos_and_reads_words_as_their_rows(tmp_path):
    """Coverage as the LM reads the text: vocabulary rows <eos>, <unk>, a, b, c; train is
    a a b <eos> c <unk> <eos> (4 of 7 rows with a vector: a, a, <eos>, <eos>); valid is
    a d <eos>, d read as <unk> (2 of 3)."""
    root = write_corpus(tmp_path / "c", "a a b\nc <unk>\n", "a d\n", "b\n")
    s = corpus_stats(Corpus(root, show_progress=False), embedding_words={"a", "<eos>", "zz"})
    r = s["row_coverage"]
    assert r["rows"]["types"] == 2 and r["rows"]["types_pct"] == pytest.approx(40.0)
    assert r["rows"]["eos"] and not r["rows"]["unk"]
    assert r["train_tokens"] == pytest.approx({"tokens": 4, "tokens_pct": 400 / 7})
    assert r["valid_tokens"] == pytest.approx({"tokens": 2, "tokens_pct": 200 / 3})
    s = corpus_stats(Corpus(root, show_progress=False), embedding_words={"a", "<unk>"})
    assert s["row_coverage"]["valid_tokens"]["tokens_pct"] == pytest.approx(200 / 3)   # a, d


def test_stats_ends_with_the_freezing_advice_only_when_coverage_decides(tmp_path, monkeypatch):
    """The advice comes from lmlow/recommendation.py's coverage rule (generated from the
    tables): none while no rule exists; with a rule, it compares this corpus's train-token
    coverage (4 of 7 here, 57.1%) with the threshold."""
    from lmlow import recommendation
    from lmlow.data.stats import format_stats
    root = write_corpus(tmp_path / "c", "a a b\nc <unk>\n", "a d\n", "b\n")
    stats = lambda: corpus_stats(Corpus(root, show_progress=False), embedding_words={"a", "<eos>"})
    monkeypatch.setattr(recommendation, "FREEZE_MIN_TOKEN_COVERAGE", None)
    assert stats()["freeze_advice"] is None and "Advice" not in format_stats(stats())
    monkeypatch.setattr(recommendation, "FREEZE_MIN_TOKEN_COVERAGE", 50.0)
    assert stats()["freeze_advice"].startswith("freezing advised: the vectors cover 57.1%")
    monkeypatch.setattr(recommendation, "FREEZE_MIN_TOKEN_COVERAGE", 90.0)
    assert "freezing not advised" in format_stats(stats())
