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
