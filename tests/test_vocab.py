"""The UNK rule of Kummerfeld et al. (2020), checked against counts worked out by hand."""
from collections import Counter

import numpy as np
import pytest

from conftest import write_corpus
from lmlow.data import Corpus, Vocabulary, build_vocabulary
from lmlow.errors import LmlowError

# Training counts by hand: the 4, of 3, union 2, congress 2, senate 1, <unk> 1 (literal); 3 lines.
TRAIN = "the union of the congress\nthe senate of <unk>\nthe union of congress\n"
VALID = "the senate of virginia\nthe congress\n"          # virginia: count 0
TEST = "the treaty of the union\n"                       # treaty: count 0


@pytest.fixture
def corpus_dir(tmp_path):
    return write_corpus(tmp_path / "c", TRAIN, VALID, TEST)


def test_order_is_count_then_word_and_train_only(corpus_dir):
    v = Corpus(corpus_dir, show_progress=False).vocab
    assert v.words == ["the", "<eos>", "of", "congress", "union", "<unk>", "senate"]
    assert v.counts == [4, 3, 3, 2, 2, 1, 1]
    assert "virginia" not in v and "treaty" not in v


@pytest.mark.parametrize("k, vocab_words, unk_count", [
    (0, {"the", "of", "union", "congress", "senate"}, 1),
    (1, {"the", "of", "union", "congress", "senate"}, 1),
    (2, {"the", "of", "union", "congress"}, 2),          # senate (1) replaced
    (3, {"the", "of"}, 6),                               # + union (2), congress (2)
    (4, {"the"}, 9),                                     # + of (3)
])
def test_unk_rule_threshold(corpus_dir, k, vocab_words, unk_count):
    c = Corpus(corpus_dir, unk_threshold=k, show_progress=False)
    assert set(c.vocab.words) - {"<eos>", "<unk>"} == vocab_words
    assert c.vocab.counts[c.vocab.unk_id] == unk_count
    # every split is read with the same rule: encoded train has exactly unk_count <unk>
    assert int(np.sum(c.encode("train").ids == c.vocab.unk_id)) == unk_count


def test_a_threshold_above_every_count_is_refused(corpus_dir):
    """K=5 replaced every word (the most frequent, 'the', occurs 4 times): a model of <unk>
    and <eos> alone, whose perplexity (about 2) looked like a result."""
    with pytest.raises(LmlowError, match=r"UNK threshold 5: .*'the', occurs 4 times"):
        Corpus(corpus_dir, unk_threshold=5, show_progress=False).vocab


def test_valid_words_unseen_in_train_are_oov_at_k0_and_replaced_at_k1(corpus_dir):
    s0 = Corpus(corpus_dir, 0, show_progress=False).encode("valid").stats
    assert (s0.oov_tokens, s0.oov_types, s0.replaced_tokens) == (1, 1, 0)
    s1 = Corpus(corpus_dir, 1, show_progress=False).encode("valid").stats
    assert (s1.oov_tokens, s1.replaced_tokens, s1.replaced_types) == (0, 1, 1)
    s2 = Corpus(corpus_dir, 2, show_progress=False).encode("valid").stats
    assert (s2.replaced_tokens, s2.replaced_types) == (2, 2)  # senate and virginia
    assert s2.tokens == 8 and s2.lines == 2 and s2.words == 6


def test_embedding_words_extend_vocab_only_when_k_is_0(corpus_dir):
    extra = ["virginia", "the", "treaty"]
    v0 = Corpus(corpus_dir, 0, extra, show_progress=False).vocab
    assert v0.words[-2:] == ["treaty", "virginia"] and v0.counts[-2:] == [0, 0]
    assert Corpus(corpus_dir, 0, extra, show_progress=False).encode("valid").stats.oov_tokens == 0
    v1 = Corpus(corpus_dir, 1, extra, show_progress=False).vocab
    assert "virginia" not in v1 and "treaty" not in v1


def test_literal_unk_in_train_is_counted_not_duplicated():
    v = build_vocabulary(Counter({"a": 3, "<unk>": 2, "b": 1}), n_lines=2, unk_threshold=2)
    assert v.words.count("<unk>") == 1 and v.counts[v.unk_id] == 3


def test_save_load_roundtrip(tmp_path, corpus_dir):
    v = Corpus(corpus_dir, show_progress=False).vocab
    for counts in (False, True):
        v.save(tmp_path / "v.txt", with_counts=counts)
        w = Vocabulary.load(tmp_path / "v.txt")
        assert w.words == v.words and w.digest() == v.digest()
        assert w.counts == (v.counts if counts else [0] * len(v))


def test_bad_vocab_file(tmp_path):
    f = tmp_path / "v.txt"
    f.write_text("<eos>\n<unk>\ntwo words\n")
    with pytest.raises(LmlowError, match=r"v.txt:3: expected one word per line"):
        Vocabulary.load(f)
    f.write_text("a\nb\n")
    with pytest.raises(LmlowError, match="lacks the special token"):
        Vocabulary.load(f)


def test_negative_threshold(corpus_dir):
    with pytest.raises(LmlowError, match="must be >= 0"):
        Corpus(corpus_dir, -1)


# --vocab FILE: a word list fixes the vocabulary. Expected values by hand from TRAIN above.
def test_a_word_list_fixes_the_vocabulary_counted_in_train(corpus_dir, tmp_path):
    words = tmp_path / "lexicon.txt"       # a lexicon: word, then its phones; blank lines and
    words.write_text("the DH AH\n\nof AH V\nthe DH IY\nvirginia V ER\n<unk>\n")  # repeats
    v = Corpus(corpus_dir, vocab_file=words, show_progress=False).vocab
    # union 2, congress 2, senate 1 leave for <unk>, with the literal one: 1 + 5 = 6
    assert v.words == ["<unk>", "the", "<eos>", "of", "virginia"]
    assert v.counts == [6, 4, 3, 3, 0]
    enc = Corpus(corpus_dir, vocab_file=words, show_progress=False).encode("valid")
    # valid: the senate of virginia / the congress: senate and congress are <unk>, virginia a word
    assert v.decode(enc.ids.tolist()) == ["the", "<unk>", "of", "virginia", "<eos>",
                                          "the", "<unk>", "<eos>"]
    assert enc.stats.oov_tokens == 2 and enc.stats.replaced_tokens == 0


def test_a_run_says_how_much_of_its_training_text_is_unk(corpus_dir, tmp_path, capsys):
    """A short --vocab list makes most of the text <unk> and the perplexity small: the start
    line and summary.json give the share. By hand from TRAIN: 16 tokens with the 3 line ends,
    6 of them <unk> under the lexicon above (37.5%); under K=0, the one literal <unk> (6.25%)."""
    import json

    from conftest import cli
    words = tmp_path / "lexicon.txt"
    words.write_text("the DH AH\nof AH V\nvirginia V ER\n<unk>\n")
    small = ["--preset", "tiny", "--max-epochs", "1", "--batch-size", "1", "--bptt", "4",
             "--threads", "1", "--device", "cpu"]
    for extra, pct in ((["--vocab", words], 37.5), ([], 6.25)):
        out = tmp_path / f"run{pct}"
        code, stdout, err = cli("train", corpus_dir, "--out", out, *small, *extra, capsys=capsys)
        assert code == 0, err
        assert f"<unk> {pct:.1f}% of training tokens" in stdout.splitlines()[0], stdout
        assert json.loads((out / "summary.json").read_text())["unk_tokens_pct"] == pct


def test_a_saved_vocabulary_read_as_a_list_is_the_same_vocabulary(corpus_dir, tmp_path):
    """`lmlow vocab --out` then `--vocab`: the UNK rule's vocabulary again, word for word and
    count for count (what makes another corpus's models comparable on this vocabulary)."""
    for k, counts in ((2, False), (0, True)):
        v = Corpus(corpus_dir, k, show_progress=False).vocab
        v.save(tmp_path / "v.txt", with_counts=counts)
        w = Corpus(corpus_dir, vocab_file=tmp_path / "v.txt", show_progress=False).vocab
        assert (w.words, w.counts) == (v.words, v.counts)


def test_read_word_list_takes_the_first_field(tmp_path):
    from lmlow.data.vocab import read_word_list

    f = tmp_path / "words.txt"             # a symbol table (Kaldi's words.txt), with a BOM
    f.write_bytes("\ufeffthe 1\nof\t2\r\nthe 3\n".encode("utf-8"))
    assert read_word_list(f) == ["the", "of"]
    f.write_text("<eos>\n<unk>\n")
    with pytest.raises(LmlowError, match="words.txt: no word besides <eos> and <unk>"):
        read_word_list(f)
