"""Encoded splits: correct ids, memory-mapped, cached by the file and the options."""
import os

import numpy as np
import pytest

from conftest import write_corpus
from lmlow.data import Corpus, iter_sentences
from lmlow.data import corpus as corpus_mod
from lmlow.errors import LmlowError


def test_encoded_ids_round_trip_to_text(speech_corpus):
    c = Corpus(speech_corpus, show_progress=False)
    enc = c.encode("train")
    assert isinstance(enc.ids, np.memmap) and enc.ids.dtype == np.int32
    tokens = [t for s in iter_sentences(speech_corpus / "train.txt") for t in s]
    assert c.vocab.decode(enc.ids.tolist()) == tokens
    assert enc.stats.tokens == len(tokens) and enc.stats.lines == tokens.count("<eos>")


def test_second_encode_reads_the_cache_without_reading_text(speech_corpus, monkeypatch):
    c = Corpus(speech_corpus, show_progress=False)
    first = c.encode("valid")
    monkeypatch.setattr(corpus_mod, "_stream_encode", lambda *a: pytest.fail("re-encoded"))
    monkeypatch.setattr(corpus_mod, "iter_lines", lambda *a: pytest.fail("re-counted"))
    again = Corpus(speech_corpus, show_progress=False)
    assert np.array_equal(again.encode("valid").ids, first.ids)
    assert again.encode("valid").stats == first.stats


def test_cache_key_follows_file_and_threshold(tmp_path):
    root = write_corpus(tmp_path / "c", "a a b\n", "a b c\n", "c\n")
    k0 = Corpus(root, 0, show_progress=False).encode("valid")
    k2 = Corpus(root, 2, show_progress=False).encode("valid")
    assert k0.stats.oov_tokens == 1 and k2.stats.replaced_tokens == 2
    (root / "valid.txt").write_text("a a a a\n")
    os.utime(root / "valid.txt", ns=(1, 1))  # a new mtime even within the clock's resolution
    assert Corpus(root, 0, show_progress=False).encode("valid").stats.tokens == 5


def test_write_unk_replaced(tmp_path):
    root = write_corpus(tmp_path / "c", "a a b <unk>\nb c c\n", "a d b\n", "c e\n")
    Corpus(root, 2, show_progress=False).write_unk_replaced(tmp_path / "out")
    assert (tmp_path / "out" / "train.txt").read_text() == "a a b <unk>\nb c c\n"
    # K=3: no word reaches it (c, the most frequent, occurs twice), so it is refused
    with pytest.raises(LmlowError, match="every token would be <unk>"):
        Corpus(root, 3, show_progress=False).write_unk_replaced(tmp_path / "out3")
    assert not (tmp_path / "out3").exists()
    assert (tmp_path / "out" / "valid.txt").read_text() == "a <unk> b\n"


def test_missing_split_and_folder(tmp_path):
    root = tmp_path / "c"
    root.mkdir()
    (root / "train.txt").write_text("a\n")
    (root / "valid.txt").write_text("a\n")
    with pytest.raises(LmlowError, match="missing test.txt"):
        Corpus(root)
    with pytest.raises(LmlowError, match="no such corpus folder"):
        Corpus(tmp_path / "nope")


def test_empty_split_is_an_error(tmp_path):
    root = write_corpus(tmp_path / "c", "a b\n", "", "a\n")
    with pytest.raises(LmlowError, match=r"valid.txt: empty file"):
        Corpus(root, show_progress=False).encode("valid")


def test_a_same_size_rewrite_with_its_mtime_put_back_is_counted_again(tmp_path):
    """`cp -p` or `touch -d` over a corpus split gives a same-size file with the old mtime:
    the cache (keyed by path, size, mtime) returned the old file's counts. The change time,
    which no user call can set, now tells them apart."""
    import time

    from lmlow.data.corpus import count_words

    path = tmp_path / "train.txt"
    path.write_text("a a b\n")
    old = path.stat()
    assert count_words(path, show_progress=False).counts == {"a": 2, "b": 1}
    time.sleep(0.05)                       # past the kernel's coarse clock tick
    path.write_text("c c c\n")             # same size, same inode
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
    assert count_words(path, show_progress=False).counts == {"c": 3}
