import gzip
import re

import pytest

from lmlow.data.textio import iter_lines, iter_sentences
from lmlow.errors import LmlowError


def test_eos_appended_blank_lines_skipped_tabs_split(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("the house of\trepresentatives\n\n   \nfellow citizens\n", encoding="utf-8")
    assert list(iter_sentences(f)) == [["the", "house", "of", "representatives", "<eos>"],
                                       ["fellow", "citizens", "<eos>"]]
    assert [n for n, _ in iter_lines(f)] == [1, 4]


def test_literal_unk_is_an_ordinary_token(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text(" aer <unk> banknote \n", encoding="utf-8")
    assert list(iter_sentences(f)) == [["aer", "<unk>", "banknote", "<eos>"]]


def test_gzip(tmp_path):
    f = tmp_path / "t.txt.gz"
    with gzip.open(f, "wt", encoding="utf-8") as g:
        g.write("a b\nc\n")
    assert list(iter_sentences(f)) == [["a", "b", "<eos>"], ["c", "<eos>"]]


@pytest.mark.parametrize("content, message", [
    (b"", "empty file"),
    (b"   \n\t\n\n", "empty file"),
    (b"good line\n\x89PNG\r\n\x1a\n\x00\x00\x00", ":4: binary file"),
    (b"caf\xc3\xa9 ok\nna\xefve bytes\n", ":2: not valid UTF-8 (byte 0xef at column 3)"),
    (b"one <eos> two\n", ":1: contains the reserved token <eos>"),
])
def test_bad_input_names_file_and_line(tmp_path, content, message):
    f = tmp_path / "bad.txt"
    f.write_bytes(content)
    with pytest.raises(LmlowError, match=re.escape(message)) as e:
        list(iter_lines(f))
    assert str(e.value).startswith(str(f))
    assert "\n" not in str(e.value)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(LmlowError, match="no such file"):
        list(iter_lines(tmp_path / "nope.txt"))
    with pytest.raises(LmlowError, match="is a folder"):
        list(iter_lines(tmp_path))


def test_a_line_without_end_is_refused_at_the_bound_not_read_whole(tmp_path, monkeypatch):
    """A file with no line breaks (a binary or minified file) is refused at MAX_LINE bytes,
    naming the line, by every line reader (corpora, prepare's input, word lists); lines up to
    the bound, and a last line without a line break, read as before."""
    from lmlow.data import textio
    from lmlow.data.prepare import iter_documents
    from lmlow.data.vocab import read_word_list

    monkeypatch.setattr(textio, "MAX_LINE", 64)
    f = tmp_path / "long.txt"
    f.write_text("a short line\n" + "word " * 40 + "\nlast")
    for read in (lambda: list(iter_lines(f)), lambda: list(iter_documents([f])),
                 lambda: read_word_list(f)):
        with pytest.raises(LmlowError, match=r"long.txt:2: a line longer than 0 MiB"):
            read()
    f.write_text("a short line\n" + "word " * 12 + "\nlast")      # 61 bytes: within
    assert [len(t) for _, t in iter_lines(f)] == [3, 12, 1]


def test_a_pipe_is_read_a_device_is_refused(tmp_path):
    """Text may come through a pipe (`lmlow score RUN <(zcat nbest.gz)`): read once, as it
    streams; a device is refused in one line instead of being read until memory runs out."""
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "w") as w:
            w.write("the cat\n\nsat on <unk>\n")

    writer = threading.Thread(target=write)
    writer.start()
    assert [t for _, t in iter_lines(fifo)] == [["the", "cat"], ["sat", "on", "<unk>"]]
    writer.join()
    with pytest.raises(LmlowError, match="^/dev/zero: a device or socket, not a text file"):
        list(iter_lines("/dev/zero"))


def test_a_byte_order_mark_inside_a_file_is_dropped_too(tmp_path, capsys):
    """Files joined by `cat` keep each one's byte-order mark: only line 1's was dropped, and
    the others made words of their own (`\\ufeffthe` beside `the`). A mark at the start of any
    line is dropped, with one note."""
    f = tmp_path / "joined.txt"
    f.write_bytes("\ufeffthe cat\n\ufeffthe dog\nthe end\n\ufeffthe bird\n".encode("utf-8"))
    assert [tokens[0] for _, tokens in iter_lines(f)] == ["the"] * 4
    err = capsys.readouterr().err
    assert err.count("line 2 starts with a UTF-8 byte-order mark") == 1, err
