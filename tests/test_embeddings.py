"""Loading vectors in every format, with one-line errors; GloVe training that learns."""
import re
import warnings

import numpy as np
import pytest

from lmlow.embeddings import detect_format, load_vectors, neighbours, vector_words
from lmlow.errors import LmlowError

GLOVE = "the 0.1 0.2 0.3\nunion 0.4 0.5 0.6\nsenate -0.1 0.0 1e-3\n"


def write(tmp_path, name, text):
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    return f


def test_formats_load_the_same_vectors(tmp_path):
    glove = load_vectors(write(tmp_path, "v.txt", GLOVE))
    assert detect_format(tmp_path / "v.txt") == "glove"
    assert glove.index_to_key == ["the", "union", "senate"]
    np.testing.assert_allclose(glove["union"], [0.4, 0.5, 0.6], rtol=1e-6)
    w2v = load_vectors(write(tmp_path, "w.txt", "3 3\n" + GLOVE))
    assert detect_format(tmp_path / "w.txt") == "word2vec-text"
    glove.save_word2vec_format(str(tmp_path / "b.bin"), binary=True)
    glove.save(str(tmp_path / "g.kv"))
    from lmlow.embeddings import save_npz

    save_npz(glove, tmp_path / "g.npz")
    for kv in (w2v, load_vectors(tmp_path / "b.bin"), load_vectors(tmp_path / "g.kv", allow_pickle=True),
               load_vectors(tmp_path / "g.npz")):
        assert kv.index_to_key == glove.index_to_key
        np.testing.assert_allclose(kv.vectors, glove.vectors, rtol=1e-6)
    for name in ("w.txt", "b.bin", "g.npz"):                    # the words alone, every format
        assert vector_words(tmp_path / name) == glove.index_to_key
    assert vector_words(tmp_path / "g.kv", allow_pickle=True) == glove.index_to_key
    with pytest.raises(LmlowError, match="g.kv: a gensim file is a Python pickle"):
        vector_words(tmp_path / "g.kv")


@pytest.mark.parametrize("text, message", [
    ("the 0.1 0.2 0.3\nunion 0.4 0.5\n", "v.txt:2: 2 values for 'union', expected 3"),
    ("the 0.1 0.2 0.3\nunion 0.4 zero 0.6\n", "v.txt:2: 'zero' is not a number"),
    ("the 0.1 0.2 0.3\nunion 0.4 0x1 0.6\n", "v.txt:2: '0x1' is not a number"),
    # Python's digit grouping: numpy and float() read it as 10.0, a silently wrong vector
    ("the 0.1 0.2 0.3\nunion 0.4 1_0 0.6\n", "v.txt:2: '1_0' is not a number"),
    ("the 1_0 0.2 0.3\nunion 0.4 0.5 0.6\n", "v.txt:1: '1_0' is not a number"),
    ("the 0.1 0.2 0.3\nunion 0.4 nan 0.6\n", "v.txt:2: vector of 'union' has NaN"),
    ("the 0.1 0.2 0.3\nthe 0.4 0.5 0.6\n", "v.txt:2: duplicate word 'the' (first at line 1)"),
    ("", "v.txt: empty file"),
    ("the 0.1 0.2 0.3\nunion 0.4 inf 0.6\n", "v.txt:2: vector of 'union' has NaN or infinite"),
    # a finite number beyond float32's range became infinity (with numpy's warning), then
    # was called NaN or infinite, which the file did not hold
    ("the 1e40 2 3\nunion 0.4 0.5 0.6\n", "v.txt:1: value '1e40' of 'the' is too large for float32"),
    ("the 1 2 3\nunion 0.4 -3.5e38 inf\n", "v.txt:2: value '-3.5e38' of 'union' is too large"),
    ("3 3\nthe 0.1 0.2 0.3\nunion 0.4 0.5 0.6\n", "v.txt:1: the header says 3 vectors; the file has 2"),
    ("1 3\nthe 0.1 0.2 0.3\nunion 0.4 0.5 0.6\n", "v.txt:1: the header says 1 vectors; the file has 2"),
    ("2 3\nthe 0.1 0.2\nunion 0.4 0.5 0.6\n", "v.txt:2: 2 values for 'the', expected 3"),
    ("the\nunion\n", "v.txt:1: 'the' has no values"),
    # a header's dimension is checked before a matrix of its size is allocated
    ("2 1000000000\nthe 0.1 0.2 0.3\nunion 0.4 0.5 0.6\n",
     "v.txt:1: the header says 1000000000 dimensions; the vectors have 3"),
    ("2 2\nthe 0.1 0.2 0.3\nunion 0.4 0.5 0.6\n", "v.txt:1: the header says 2 dimensions"),
])
def test_malformed_files_name_file_and_line(tmp_path, text, message):
    """Loading the vectors and reading their words alone (the vocabulary, coverage) refuse a
    file alike (the words alone check the values of the first lines)."""
    f = write(tmp_path, "v.txt", text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # the one line, and no numpy warning before it
        with pytest.raises(LmlowError, match=re.escape(message)):
            load_vectors(f)
        with pytest.raises(LmlowError, match=re.escape(message)):
            vector_words(f)


def test_a_grouped_number_is_refused_on_the_command_line_too(tmp_path):
    """`a 1_0 2 3` was the vector (10, 2, 3): float() and numpy read Python's digit grouping.
    `lmlow neighbours` now stops at it in one line, as at `0x1`."""
    from conftest import lmlow
    f = write(tmp_path, "v.txt", "the 0.1 0.2 0.3\nunion 1_0 2 3\nsenate 0.3 0.2 0.1\n")
    r = lmlow("neighbours", f, "the", cache=tmp_path / "cache")
    assert r.returncode == 1 and r.stderr == f"lmlow: error: {f}:2: '1_0' is not a number\n"


def test_the_words_alone_parse_the_first_lines_values_only(tmp_path):
    """A bad value past the first ``VALUES_CHECKED`` lines is found where the vectors are
    loaded, not by reading their words (which stays a pass that parses no number); one
    within them is found by both, with its line."""
    from lmlow.embeddings import VALUES_CHECKED
    good = [f"w{i} 0.1 0.2 0.3\n" for i in range(VALUES_CHECKED + 5)]
    late = good[:VALUES_CHECKED + 2] + ["bad 0.1 x 0.3\n"]
    f = write(tmp_path, "late.txt", "".join(late))
    assert vector_words(f)[-1] == "bad"
    with pytest.raises(LmlowError, match=f"late.txt:{VALUES_CHECKED + 3}: 'x' is not a number"):
        load_vectors(f)
    early = good[:VALUES_CHECKED - 1] + ["bad 0.1 x 0.3\n"] + good[VALUES_CHECKED:]
    f = write(tmp_path, "early.txt", "".join(early))
    for read in (vector_words, load_vectors):
        with pytest.raises(LmlowError, match=f"early.txt:{VALUES_CHECKED}: 'x' is not a number"):
            read(f)


def test_text_vectors_read_as_gensims_reader_reads_them(vectors, tmp_path):
    """lmlow reads GloVe and word2vec text itself (one pass, errors with their line); on real
    GloVe vectors it gives gensim's reader's words in order and the same float32 bits."""
    from gensim.models import KeyedVectors
    ref = KeyedVectors.load_word2vec_format(str(vectors), no_header=True)
    ours = load_vectors(vectors)
    assert ours.index_to_key == ref.index_to_key and ours.key_to_index == ref.key_to_index
    assert ours.vectors.dtype == np.float32 and np.array_equal(ours.vectors, ref.vectors)
    assert vector_words(vectors) == ref.index_to_key                # the words alone
    ref.save_word2vec_format(str(tmp_path / "w.txt"))              # with its header
    assert np.array_equal(load_vectors(tmp_path / "w.txt").vectors, ref.vectors)


def test_a_word_with_spaces_is_skipped_with_a_note(tmp_path, capsys):
    """Stanford's glove.840B has lines such as `at name@domain.com 0.1 ...`: more fields than a
    word and its numbers. gensim's reader fails on the whole file; no corpus token has a space,
    so lmlow skips the vector and says how many it skipped and where the first is, even when
    it is the first line (the dimension is the common count, not the first line's)."""
    text = ("at name@domain.com 0.9 0.9 0.9\n" + GLOVE + ". . . 0.5 0.5 0.5\n"
            "to name@domain.com 0.7 0.7 0.7\n")
    kv = load_vectors(write(tmp_path, "v.txt", text))
    assert kv.index_to_key == ["the", "union", "senate"] and kv.vector_size == 3
    assert vector_words(tmp_path / "v.txt") == kv.index_to_key
    np.testing.assert_allclose(kv["senate"], [-0.1, 0.0, 1e-3], rtol=1e-6)
    assert ("v.txt: 3 vectors of words with spaces in them skipped (no corpus token has a "
            "space); the first, 'at name@domain.com', at line 1") in capsys.readouterr().err
    with pytest.raises(LmlowError, match="v.txt:3: 'x' is not a number"):
        load_vectors(write(tmp_path, "v.txt", "a 1 2 3\nb 1 2 3\nat c 1 x 3\n"))


def test_reading_a_vector_file_shows_its_progress_on_a_terminal(tmp_path, capsys, monkeypatch):
    """A glove.840B-sized file (2.2M x 300) would take about a minute at the 400k x 300 rate of
    BENCHMARKS.md (11 s): on a terminal a bar counts its vectors."""
    import lmlow.progress
    monkeypatch.setattr(lmlow.progress, "shown", lambda enabled=True: enabled)
    load_vectors(write(tmp_path, "v.txt", GLOVE))
    err = capsys.readouterr().err
    assert "reading v.txt" in err and "0.00/3.00 " in err and "vec/s" in err   # its 3 vectors
    monkeypatch.undo()
    load_vectors(write(tmp_path, "v.txt", GLOVE))
    assert capsys.readouterr().err == ""                     # not a terminal: no bar


def test_a_word_not_in_utf8_is_named_by_line(tmp_path):
    f = tmp_path / "v.txt"
    f.write_bytes(b"the 0.1 0.2 0.3\nun\xefon 0.4 0.5 0.6\n")       # Latin-1
    with pytest.raises(LmlowError, match=r"v.txt:2: not valid UTF-8 \(byte 0xef at column 3\)"):
        load_vectors(f)


@pytest.mark.parametrize("variant", [lambda t: t.replace(" ", "\t"),      # a TSV export
                                     lambda t: t.replace("\n", "\r\n"),    # Windows line ends
                                     lambda t: t.rstrip("\n"),               # no last line feed
                                     lambda t: "3 3\n" + t.rstrip("\n"),    # word2vec text
                                     lambda t: "\ufeff3 3\n" + t,           # and a BOM (a traceback)
                                     lambda t: t.replace("\n", "\n\n", 1) + "\n  \n"])  # blank lines
def test_variants_of_a_vector_file_read_the_same(tmp_path, variant):
    """Tabs (gensim's reader made 0-d vectors of a TSV export), CRLF line ends, a last line
    without its line feed, a header after a byte-order mark, blank lines (refused before): the
    same vectors as the plain file, none missing or extra."""
    kv = load_vectors(write(tmp_path, "t.txt", variant(GLOVE)))
    ref = load_vectors(write(tmp_path, "v.txt", GLOVE))
    assert kv.index_to_key == ref.index_to_key and np.array_equal(kv.vectors, ref.vectors)
    assert kv.vectors.shape == (3, 3) and kv.key_to_index == {"the": 0, "union": 1, "senate": 2}
    assert vector_words(tmp_path / "t.txt") == ["the", "union", "senate"]


def test_binary_garbage_is_refused(tmp_path):
    f = tmp_path / "v.txt"
    f.write_bytes(b"\x00\x01\x02garbage")
    with pytest.raises(LmlowError, match="binary file"):
        load_vectors(f)


def test_neighbours(tmp_path):
    kv = load_vectors(write(tmp_path, "v.txt", GLOVE))
    assert neighbours(kv, "the", 1)[0][0] == "union"
    assert neighbours(kv, "absent") == []


def test_neighbours_are_gensims_cosine_neighbours(tmp_path):
    """The same lists as gensim's most_similar (an independent implementation) on random
    vectors, similarities to float32 rounding."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(300)]
    text = "".join(f"{w} " + " ".join(f"{x:.6f}" for x in rng.standard_normal(12)) + "\n"
                   for w in words)
    kv = load_vectors(write(tmp_path, "v.txt", text))
    for w in words[:40]:
        ours, theirs = neighbours(kv, w, 10), kv.most_similar(w, topn=10)
        assert [n for n, _ in ours] == [n for n, _ in theirs]
        np.testing.assert_allclose([s for _, s in ours], [s for _, s in theirs], atol=1e-5)


def test_a_vector_of_zeros_has_no_neighbours_and_is_none(tmp_path):
    """A padding row of zeros: cosine is undefined for it, so it lists none (None, not the
    NaN similarities and RuntimeWarning gensim gave) and is no other word's neighbour."""
    import warnings

    from lmlow.embeddings import format_neighbours
    kv = load_vectors(write(tmp_path, "v.txt", GLOVE + "<pad> 0 0 0\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = {w: neighbours(kv, w, 8) for w in ("<pad>", "the", "absent")}
    assert result["<pad>"] is None
    assert [n for n, _ in result["the"]] == ["union", "senate"]      # all the others but <pad>
    assert all(np.isfinite(s) for _, s in result["the"])
    lines = format_neighbours(result).splitlines()
    assert lines[0] == "<pad>: (a vector of zeros: no direction, so no neighbours)"
    assert lines[2] == "absent: (no vector)"


def test_the_words_alone_are_the_loaded_vectors_words_whatever_the_spacing(tmp_path):
    """vector_words reads the words alone (no values parsed, no matrix), line by line as the
    loader does: whatever the spacing (a trailing space, a tab, two spaces, CRLF, a word with
    spaces, a BOM) the words and their order are the loader's, and a bad word's error too."""
    text = ("\ufeffthe 0.1 0.2 0.3\n"          # a BOM before the first word
            "union 0.4 0.5 0.6 \n"             # a trailing space
            "senate\t-0.1 0.0 1e-3\n"          # a tab
            "house  0.3 0.2 0.1\r\n"           # two spaces, CRLF
            "at name@x.com 0.1 0.1 0.1\n"      # a word with a space: skipped by both
            "vote 1 2 3\r\n"                   # plain, CRLF
            " lead 1 2 3\n"                    # a leading space
            "law 4 5 6")                       # no last line feed
    f = write(tmp_path, "v.txt", text)
    assert vector_words(f) == load_vectors(f).index_to_key == [
        "the", "union", "senate", "house", "vote", "lead", "law"]
    bad = tmp_path / "b.txt"
    bad.write_bytes(b"the 0.1 0.2 0.3\nun\xefon 0.4 0.5 0.6\n")
    for read in (vector_words, load_vectors):
        with pytest.raises(LmlowError, match=r"b.txt:2: not valid UTF-8 \(byte 0xef at column 3\)"):
            read(bad)
    dup = write(tmp_path, "d.txt", "the 1 2 3\nunion 1 2 3\nthe 4 5 6\n")
    with pytest.raises(LmlowError, match=re.escape("d.txt:3: duplicate word 'the' (first at line 1)")):
        vector_words(dup)


def test_a_word_whose_only_neighbours_have_no_direction_is_said_so(tmp_path):
    """It has a vector: "(no vector)" said otherwise."""
    from lmlow.embeddings import format_neighbours

    kv = load_vectors(write(tmp_path, "v.txt", "a 1 2 3\nb 0 0 0\n"))
    result = {w: neighbours(kv, w) for w in ("a", "z")}
    assert list(result["a"]) == [] and result["z"] == []    # the JSON stays a list
    lines = format_neighbours(result).splitlines()
    assert lines == ["a: (no other word's vector has a direction: no neighbours)", "z: (no vector)"]


@pytest.mark.parametrize("content, message", [
    (b"hello 1 2\n", "Not a gzipped file"), (None, "Compressed file ended")])
def test_a_vector_file_named_gz_that_is_not_gzip_is_one_line(tmp_path, content, message):
    """Its format was sniffed with a bare readline: a BadGzipFile/EOFError traceback (and a
    file without line breaks read whole into memory)."""
    import gzip

    f = tmp_path / "v.txt.gz"
    f.write_bytes(content if content is not None else gzip.compress(GLOVE.encode())[:30])
    for read in (load_vectors, vector_words):
        with pytest.raises(LmlowError, match=rf"v.txt.gz:\d: cannot read \(.*{message}"):
            read(f)


def test_a_word_with_a_unicode_space_is_skipped_as_a_spaced_word(tmp_path, capsys):
    """Corpora split on every Unicode space, the vector file on ASCII's: a word holding a
    no-break space matched no token, and `vocab --out` then `--vocab` read it back as another
    word (the vocabulary changed size)."""
    f = write(tmp_path, "v.txt", GLOVE + "foo\u00a0bar 1 2 3\ncaf\u00e9 0.5 0.5 0.5\n")
    assert vector_words(f) == ["the", "union", "senate", "caf\u00e9"]
    kv = load_vectors(f)
    assert list(kv.index_to_key) == ["the", "union", "senate", "caf\u00e9"]
    assert "1 vectors of words with spaces in them skipped" in capsys.readouterr().err


def write_bin(path, header, items, line_feeds=True):
    """word2vec's binary format as its C tool writes it: header, then word, space, float32s."""
    with open(path, "wb") as f:
        f.write(header.encode() + b"\n")
        for word, values in items:
            f.write(word.encode() + b" " + np.asarray(values, dtype="<f4").tobytes()
                    + (b"\n" if line_feeds else b""))
    return path


THREE = [("the", [0.1, 0.2, 0.3]), ("cat", [0.4, 0.5, 0.6]), ("dog", [0.7, 0.8, 0.95])]


@pytest.mark.parametrize("header, items, message", [
    # gensim kept the first of a duplicate and stopped at the header's count, silently
    ("3 3", [*THREE[:2], ("the", [1, 2, 3])], "v.bin: vector 3: duplicate word 'the' (first at vector 1)"),
    ("2 3", THREE, "v.bin:1: the header says 2 vectors; the file has more"),
    ("3 4", THREE, "v.bin: the header says 3 vectors; the file ends after"),   # misread
    ("3 x", THREE, "v.bin:1: expected word2vec's 'COUNT DIM' header line"),
    ("2 3", [("caf\udce9", [1, 2, 3]), ("the", [1, 2, 3])], "v.bin: vector 1: its word is not valid UTF-8"),
])
def test_word2vec_binary_is_read_whole_and_checked(tmp_path, header, items, message):
    f = tmp_path / "v.bin"
    with open(f, "wb") as out:
        out.write(header.encode() + b"\n")
        for word, values in items:
            out.write(word.encode("utf-8", "surrogateescape") + b" "
                      + np.asarray(values, dtype="<f4").tobytes() + b"\n")
    with pytest.raises(LmlowError, match=re.escape(message)):
        load_vectors(f)
    with pytest.raises(LmlowError, match=re.escape(message)):
        vector_words(f)


def test_word2vec_binary_variants_read_as_gensims_reader_reads_them(tmp_path):
    """With and without the line feed after each vector, gzipped: gensim's own reader's vectors;
    a word2vec *text* file named .bin (its values read as float32 bytes made vectors of 1e-19)
    is refused."""
    import gzip
    import shutil

    from gensim.models import KeyedVectors

    plain = write_bin(tmp_path / "a.bin", "3 3", THREE)
    bare = write_bin(tmp_path / "b.bin", "3 3", THREE, line_feeds=False)
    with open(plain, "rb") as src, gzip.open(tmp_path / "c.bin.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    want = KeyedVectors.load_word2vec_format(str(plain), binary=True)
    for f in (plain, bare, tmp_path / "c.bin.gz"):
        kv = load_vectors(f)
        assert kv.index_to_key == want.index_to_key == ["the", "cat", "dog"]
        assert np.array_equal(kv.vectors, want.vectors)
    text = write(tmp_path, "t.bin", "3 3\n" + GLOVE)
    with pytest.raises(LmlowError, match="t.bin: its first vector is written as text"):
        load_vectors(text)


def test_word2vec_binary_words_alone_hold_no_matrix(tmp_path):
    """--extend-vocab, stats and ngram read a .bin's words alone: its matrix (GoogleNews's
    3M x 300 is 3.6 GB) was loaded for them. Measured by tracemalloc, which numpy reports to:
    the words alone peak far below the matrix, the vectors at least at it."""
    import tracemalloc

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(20000)]
    f = write_bin(tmp_path / "v.bin", f"{len(words)} 300",
                  zip(words, rng.standard_normal((len(words), 300))))
    matrix = len(words) * 300 * 4
    peaks = {}
    for read in (vector_words, load_vectors):
        tracemalloc.start()
        got = read(f)
        peaks[read.__name__] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert list(got if read is vector_words else got.index_to_key) == words
    assert peaks["load_vectors"] >= matrix > 4 * peaks["vector_words"], peaks


def test_a_gzipped_binary_header_cannot_make_lmlow_allocate_its_count(tmp_path, monkeypatch):
    """A .bin.gz's size does not bound its header's count: a header claiming 10^12 vectors
    was a matrix allocated before the first was read (a MemoryError). The matrix grows with
    what is read: the right vectors when there are more than its first rows, the file's real
    length when the header lies."""
    import gzip

    import lmlow.embeddings
    monkeypatch.setattr(lmlow.embeddings, "GROW_ROWS", 2)      # grow twice for 3 vectors
    plain = write_bin(tmp_path / "a.bin", "3 3", THREE)
    with gzip.open(tmp_path / "a.bin.gz", "wb") as out:
        out.write(plain.read_bytes())
    kv = load_vectors(tmp_path / "a.bin.gz")
    assert kv.index_to_key == ["the", "cat", "dog"]
    assert np.array_equal(kv.vectors, load_vectors(plain).vectors)
    with gzip.open(tmp_path / "lie.bin.gz", "wb") as out:
        out.write(plain.read_bytes().replace(b"3 3\n", b"1000000000000 3\n", 1))
    for read in (load_vectors, vector_words):
        with pytest.raises(LmlowError, match=re.escape(
                "lie.bin.gz: the header says 1000000000000 vectors; the file ends after 3")):
            read(tmp_path / "lie.bin.gz")


def test_a_line_with_more_values_than_the_others_is_refused_not_skipped(tmp_path):
    """`the 0.1 0.2 0.3 0.4 0.5` among 3-d vectors was taken for the word "the 0.1 0.2" and
    skipped as a word with spaces (the word lost its vector, with a misleading note)."""
    f = write(tmp_path, "v.txt", GLOVE + "cat 0.1 0.2 0.3 0.4 0.5\ndog 0.1 0.2 0.3\n")
    for read in (load_vectors, vector_words):
        with pytest.raises(LmlowError, match=re.escape(
                "v.txt:4: 5 values for 'cat', expected 3 (inconsistent dimensions)")):
            read(f)


def test_blank_lines_before_the_vectors_are_skipped_a_late_header_is_refused(tmp_path):
    assert vector_words(write(tmp_path, "g.txt", "\n\n" + GLOVE)) == ["the", "union", "senate"]
    with pytest.raises(LmlowError, match=re.escape("w.txt:2: a 'COUNT DIM' header after 1 blank")):
        load_vectors(write(tmp_path, "w.txt", "\n3 3\n" + GLOVE))


def test_binary_formats_check_their_words_as_text_does(tmp_path, capsys):
    """An .npz word with a space is skipped with a note (it made a vocabulary word that
    `vocab --out` then `--vocab` read back as two), an empty word refused."""
    def npz(name, words):
        np.savez(tmp_path / name, words=np.array(words, dtype=str),
                 vectors=np.ones((len(words), 3), dtype=np.float32) * np.arange(1, 4))
        return tmp_path / name

    assert vector_words(npz("s.npz", ["the", "cat dog", "dog"])) == ["the", "dog"]
    assert "1 vectors of words with spaces in them skipped" in capsys.readouterr().err
    assert load_vectors(tmp_path / "s.npz").index_to_key == ["the", "dog"]
    with pytest.raises(LmlowError, match="e.npz: vector 2 has an empty word"):
        vector_words(npz("e.npz", ["the", "", "dog"]))


def test_a_whole_gensim_model_gives_its_vectors(tmp_path):
    """A Word2Vec model saved whole (.model) was an AttributeError traceback: its .wv is read."""
    from gensim.models import Word2Vec

    model = Word2Vec([["the", "cat", "sat"], ["the", "dog", "sat"]] * 5, vector_size=4,
                     min_count=1, epochs=1, workers=1, seed=1)
    model.save(str(tmp_path / "w.model"))
    kv = load_vectors(tmp_path / "w.model", allow_pickle=True)
    assert kv.index_to_key == model.wv.index_to_key and np.array_equal(kv.vectors, model.wv.vectors)


@pytest.mark.parametrize("scale", [1e20, 1e-30])
def test_neighbours_of_very_long_or_short_vectors_are_their_cosines(tmp_path, scale):
    """Finite values of 1e20 overflowed float32's norms (the word its own neighbour, at -inf),
    values of 1e-30 vanished (called a vector of zeros): cosine is computed in float64."""
    kv = load_vectors(write(tmp_path, "v.txt", "".join(
        f"{w} {' '.join(f'{x * scale:g}' for x in v)}\n" for w, v in THREE)))
    got = neighbours(kv, "the")
    m = kv.vectors.astype(np.float64)
    cos = m @ m[0] / np.linalg.norm(m, axis=1) / np.linalg.norm(m[0])
    assert [w for w, _ in got] == ["cat", "dog"]
    assert [s for _, s in got] == pytest.approx([cos[1], cos[2]], rel=1e-9)


def test_neighbours_tied_at_the_cut_off_keep_the_files_order(tmp_path):
    """A third of the words share the query's vector: the first five of them in the file are
    its neighbours (the partition picked any five of the hundred tied at the cut-off)."""
    rng = np.random.default_rng(0)
    lines = ["q 1 0 0\n"] + [f"w{i} 1 0 0\n" if i % 3 == 0 else
                             f"w{i} " + " ".join(f"{x:.6f}" for x in rng.standard_normal(3)) + "\n"
                             for i in range(300)]
    kv = load_vectors(write(tmp_path, "ties.txt", "".join(lines)))
    assert neighbours(kv, "q", 5) == [(f"w{i}", 1.0) for i in (0, 3, 6, 9, 12)]
    assert [w for w, _ in neighbours(kv, "q", 150)][:100] == [f"w{i}" for i in range(0, 300, 3)]


@pytest.mark.parametrize("separator", ["\x1c", "\x1d", "\x1e", "\x1f"])
def test_a_word_holding_an_ascii_separator_is_skipped_in_every_format(tmp_path, capsys, separator):
    """Corpora split lines with str.split, which splits on \\x1c-\\x1f too; the text reader's
    bytes.split does not, so 'the\\x1fx' was a vector word no token matched (and a vocabulary
    row with --extend-vocab). It is a word with spaces, skipped with the note, in text and in
    the binary formats alike."""
    words = ["the", f"the{separator}x", "union"]
    f = write(tmp_path, "v.txt", "".join(f"{w} 1 2 {i}\n" for i, w in enumerate(words)))
    kv = load_vectors(f)
    glove_like = [("the", [1, 2, 0]), (f"the{separator}x", [1, 2, 1]), ("union", [1, 2, 2])]
    write_bin(tmp_path / "v.bin", "3 3", glove_like)
    np.savez(tmp_path / "v.npz", words=np.array(words), vectors=np.ones((3, 3), np.float32))
    for name in ("v.txt", "v.bin", "v.npz"):
        assert vector_words(tmp_path / name) == ["the", "union"], name
        assert load_vectors(tmp_path / name).index_to_key == ["the", "union"], name
    assert kv["union"].tolist() == [1, 2, 2]
    assert "1 vectors of words with spaces in them skipped" in capsys.readouterr().err


def random_kv(words, dim, seed=0):
    from gensim.models import KeyedVectors

    kv = KeyedVectors(dim)
    kv.add_vectors(words, np.random.default_rng(seed).standard_normal((len(words), dim))
                   .astype(np.float32))
    return kv


def test_npz_reads_each_array_once_and_its_words_alone_hold_no_matrix(tmp_path):
    """An .npz's matrix was read from the zip twice, converted and copied again (3.2x the
    matrix at its peak), and its words alone loaded all of it. Measured by tracemalloc, which
    numpy reports to: the vectors peak near the matrix, the words alone far below it."""
    import tracemalloc

    from lmlow.embeddings import save_npz
    words = [f"w{i}" for i in range(20000)]
    save_npz(random_kv(words, 300), tmp_path / "v.npz")
    matrix = len(words) * 300 * 4
    peaks = {}
    for read in (vector_words, load_vectors):
        tracemalloc.start()
        got = read(tmp_path / "v.npz")
        peaks[read.__name__] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert list(got if read is vector_words else got.index_to_key) == words
    assert 1.5 * matrix > peaks["load_vectors"] >= matrix > 4 * peaks["vector_words"], peaks


def test_npz_words_are_stored_compactly_and_old_files_still_load(tmp_path):
    """The words were a numpy unicode array, every word as wide as the longest in 4-byte
    characters (one 990-character token: 1,000 words took 4 MB beside a 12 kB matrix). They
    are one row of UTF-8 bytes now; a file written before (``words`` as unicode) still loads
    to the same words and float32 bits, its words alone too."""
    from lmlow.embeddings import save_npz
    words = [f"w{i}" for i in range(999)] + ["x" * 990]
    kv = random_kv(words, 3)
    save_npz(kv, tmp_path / "new.npz")
    assert (tmp_path / "new.npz").stat().st_size < 30_000
    np.savez(tmp_path / "old.npz", words=np.array(words, dtype=str), vectors=kv.vectors)
    for name in ("new.npz", "old.npz"):
        got = load_vectors(tmp_path / name)
        assert got.index_to_key == words and vector_words(tmp_path / name) == words
        assert got.vectors.dtype == np.float32 and np.array_equal(got.vectors, kv.vectors)
    with pytest.raises(LmlowError, match=re.escape("vector word 'a\\nb' holds a line feed")):
        save_npz(random_kv(["a\nb"], 3), tmp_path / "lf.npz")
    assert not (tmp_path / "lf.npz").exists()


def npz_file(path, **arrays):
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("arrays, message", [
    (dict(words_utf8=np.frombuffer(b"the\ncat", np.uint8), vectors=np.ones((3, 2))),
     "v.npz: 2 words for a (3, 2) matrix"),
    (dict(words_utf8=np.frombuffer(b"the\ncat\nthe", np.uint8), vectors=np.ones((3, 2))),
     "v.npz: vector 3: duplicate word 'the' (first at vector 1)"),
    (dict(words_utf8=np.frombuffer(b"the\n\xffcat", np.uint8), vectors=np.ones((2, 2))),
     "v.npz: its words are not valid UTF-8"),
    (dict(words_utf8=np.array([1, 2], np.int64), vectors=np.ones((2, 2))),
     "v.npz: its words_utf8 is a int64 array of shape (2,), expected one row of bytes"),
    (dict(words_utf8=np.frombuffer(b"the\ncat", np.uint8), vectors=np.array([["a", "b"]] * 2)),
     "v.npz: its vectors are <U1, expected numbers"),
    (dict(words_utf8=np.frombuffer(b"the\ncat", np.uint8), vectors=np.ones(2)),
     "v.npz: 2 words for a (2,) matrix"),
    (dict(words_utf8=np.frombuffer(b"", np.uint8), vectors=np.ones((0, 2))), "v.npz: no vectors"),
    (dict(words=np.array(["a", "b"]), vectors=np.ones((2, 3)), extra=np.ones(1)),
     "v.npz: not an lmlow vector file"),
    (dict(words=np.array([["a", "b"]]), vectors=np.ones((2, 3))),
     "v.npz: its words are an array of shape (1, 2), expected one row"),
])
def test_a_malformed_npz_is_one_line_for_the_vectors_and_the_words_alone(tmp_path, arrays, message):
    """The words alone read the matrix's shape and type from its header, with every check
    the loader makes of them."""
    f = npz_file(tmp_path / "v.npz", **arrays)
    for read in (load_vectors, vector_words):
        with pytest.raises(LmlowError, match=re.escape(message)):
            read(f)


def test_a_float64_npz_value_beyond_float32_is_named_without_a_warning(tmp_path):
    f = npz_file(tmp_path / "v.npz", words=np.array(["the", "cat"]),
                 vectors=np.array([[1.0, 2.0], [3.0, 1e40]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(LmlowError, match=re.escape(
                "v.npz: vector 2 ('cat') has values too large for float32")):
            load_vectors(f)
    assert load_vectors(npz_file(tmp_path / "w.npz", words=np.array(["the", "cat"]),
                                 vectors=np.array([[1, 2], [3, 4]]))).vectors.dtype == np.float32
