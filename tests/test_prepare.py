"""lmlow prepare: tokenisation, normalisation, and the deterministic by-document split."""
import pytest

from conftest import SPEECHES
from lmlow.data.prepare import assign_splits, iter_documents, parse_size, prepare
from lmlow.data.tokenize import Normalisation, make_tokenizer
from lmlow.errors import LmlowError


def test_spacy_tokenizer_and_ptb_normalisation_on_real_text():
    line = ("I embrace with great satisfaction the opportunity; in 1790, the sum of "
            "$1,000.50 wasn't \"trivial\" (nor 3.5%).")
    tokens = Normalisation.ptb().apply(next(make_tokenizer("spacy")([line])))
    assert tokens == ["i", "embrace", "with", "great", "satisfaction", "the", "opportunity",
                      "in", "N", "the", "sum", "of", "$", "N", "was", "n't", "trivial", "nor",
                      "N"]  # % is Unicode punctuation (Po); $ is a symbol (Sc)


def test_normalisation_options_are_separate():
    toks = ["The", "1,200", "men", ",", "--", "$"]
    assert Normalisation(lowercase=True).apply(toks) == ["the", "1,200", "men", ",", "--", "$"]
    assert Normalisation(numbers=True).apply(toks) == ["The", "N", "men", ",", "--", "$"]
    assert Normalisation(strip_punct=True).apply(toks) == ["The", "1,200", "men", "$"]
    assert Normalisation(lowercase=True).apply(["<EOS>"]) == ["<EOS>"]  # never a line end


def test_stanza_without_model_gives_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("STANZA_RESOURCES_DIR", str(tmp_path))
    with pytest.raises(LmlowError, match="stanza.download"):
        make_tokenizer("stanza")


def test_documents_from_folder_and_from_blank_lines(tmp_path):
    docs = list(iter_documents([SPEECHES]))
    assert len(docs) == 6 and docs[0][0].startswith("Fellow-Citizens of the Senate")
    f = tmp_path / "raw.txt"
    f.write_text("p one\np two\n\n\np three\n\np four\n")
    assert list(iter_documents([f])) == [["p one", "p two"], ["p three"], ["p four"]]
    assert len(list(iter_documents([f], "line"))) == 4
    assert len(list(iter_documents([f], "file"))) == 1
    # a folder's files are read as --documents says (each was one document whatever it said),
    # a whole file each under auto; an empty file in a folder is skipped
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.txt").write_text("p one\np two\n\np three\n")
    (folder / "b.txt").write_text("p four\n")
    (folder / "c.txt").write_text("\n")
    assert list(iter_documents([folder])) == [["p one", "p two", "p three"], ["p four"]]
    assert list(iter_documents([folder], "blank")) == [["p one", "p two"], ["p three"], ["p four"]]
    assert list(iter_documents([folder], "line")) == [["p one"], ["p two"], ["p three"],
                                                      ["p four"]]


def test_split_sizes_are_met_by_whole_documents_and_seeded():
    sizes = [100] * 50
    a = assign_splits(sizes, 0.1, 0.2, seed=1)
    assert a.count("test") == 10 and a.count("valid") == 5 and a.count("train") == 35
    assert a == assign_splits(sizes, 0.1, 0.2, seed=1)
    assert a != assign_splits(sizes, 0.1, 0.2, seed=2)
    b = assign_splits(sizes, 250, 300, seed=1)  # token counts
    assert b.count("valid") == 3 and b.count("test") == 3


def test_split_needs_enough_documents():
    with pytest.raises(LmlowError, match="not enough documents"):
        assign_splits([10, 10], 0.1, 0.1, seed=1)
    # a fraction too small to round to one token used to give an empty split silently (one
    # 3-token document: valid and test written empty, train then refused valid.txt)
    with pytest.raises(LmlowError, match=r"not enough documents \(1\)"):
        assign_splits([3], 0.1, 0.1, seed=1)
    assert assign_splits([3, 3, 3], 0.1, 0.1, seed=1).count("train") == 1
    assert assign_splits([3], 0.0, 0, seed=1) == ["train"]        # asked for no held-out text
    # the advice to pass --documents line, not to one who did
    with pytest.raises(LmlowError, match=r"smaller sizes, or --documents line$"):
        assign_splits([3], 0.1, 0.1, seed=1)
    with pytest.raises(LmlowError, match=r"smaller sizes$"):
        assign_splits([3], 0.1, 0.1, seed=1, more_documents=False)


def test_parse_size():
    assert parse_size("0.1") == 0.1 and parse_size("80000") == 80000
    for bad in ("-1", "1.5", "ten", "1.0", "1e3"):
        with pytest.raises(LmlowError):
            parse_size(bad)


def test_prepare_splits_by_document(tmp_path):
    out = tmp_path / "c"
    rep = prepare([SPEECHES], out, tokenizer="spacy", norm=Normalisation.ptb(), valid=0.2,
                  test=0.2, seed=5, show_progress=False)
    assert rep.documents == 6 and sum(d["documents"] for d in rep.splits.values()) == 6
    # every output paragraph comes whole from exactly one speech, and each speech from one split
    tokenize, norm = make_tokenizer("spacy"), Normalisation.ptb()
    speech_of = {}
    for i, doc in enumerate(iter_documents([SPEECHES])):
        for toks in tokenize(doc):
            speech_of.setdefault(" ".join(norm.apply(toks)), set()).add(i)
    unique = {line: s.pop() for line, s in speech_of.items() if len(s) == 1}
    split_of = {}
    for split in ("train", "valid", "test"):
        for line in (out / f"{split}.txt").read_text().splitlines():
            if line in unique:
                split_of.setdefault(unique[line], set()).add(split)
    assert all(len(s) == 1 for s in split_of.values()) and len(split_of) == 6
    assert sum(rep.splits[s]["tokens"] for s in rep.splits) == rep.tokens


def test_prepare_refuses_to_overwrite_and_force(tmp_path):
    out = tmp_path / "c"
    prepare([SPEECHES], out, valid=1, test=1, documents="line", show_progress=False)
    before = (out / "train.txt").read_bytes()
    with pytest.raises(LmlowError, match="exists; pass --force"):
        prepare([SPEECHES], out, show_progress=False)
    assert (out / "train.txt").read_bytes() == before
    prepare([SPEECHES], out, valid=1, test=1, documents="line", seed=9, force=True,
            show_progress=False)


def test_dedup_and_exclude(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text("The union is strong.\n\nThe union is strong.\n\nA new paragraph here.\n"
                   "Held out text.\n")
    held = tmp_path / "held.txt"
    held.write_text("held out text\n")
    out = tmp_path / "pre.txt"
    rep = prepare([raw], out, tokenizer="spacy", norm=Normalisation.ptb(), dedup=True,
                  exclude=[held], no_split=True, show_progress=False)
    assert out.read_text() == "the union is strong\na new paragraph here\n"
    assert (rep.duplicates_removed, rep.excluded_removed) == (1, 1)


def test_like_tokenises_as_the_corpus_was(speech_corpus, tmp_path):
    """`--like CORPUS`: a pretraining text (or a second corpus) tokenised and normalised as the
    corpus's prepare.json says (spaCy, --ptb here): byte-identical to giving those flags, and
    recorded alike."""
    import json

    from conftest import lmlow

    raw = tmp_path / "raw.txt"
    raw.write_text("The Senate, in 1794, met.\n\nIts 12 members wasn't \"late\".\n")
    lmlow("prepare", raw, "--out", tmp_path / "like.txt", "--no-split", "--like", speech_corpus,
          check=True)
    lmlow("prepare", raw, "--out", tmp_path / "flags.txt", "--no-split", "--tokenizer", "spacy",
          "--ptb", check=True)
    text = (tmp_path / "like.txt").read_text()
    assert text == (tmp_path / "flags.txt").read_text()
    assert text == "the senate in N met\nits N members was n't late\n"
    more = tmp_path / "more.txt"       # (three lines at least, for three splits)
    more.write_text("The House met in 1795.\n\nIt adjourned.\n")
    lmlow("prepare", raw, more, "--out", tmp_path / "second", "--documents", "line", "--valid",
          "1", "--test", "1", "--like", speech_corpus, check=True)
    assert json.loads((tmp_path / "second" / "prepare.json").read_text()) == \
        json.loads((speech_corpus / "prepare.json").read_text())


def test_a_prepared_corpus_split_again_keeps_its_text_and_its_record(speech_corpus, tmp_path):
    """`--prepared-like CORPUS`: a corpus's own training text split again (as README's example
    does) is kept token for token, and prepare.json records the corpus's spaCy/PTB preparation
    (it recorded `whitespace`: `score --raw` then read capitals and punctuation as unknown);
    raw text scored against it is tokenised as the corpus was."""
    import json

    from conftest import lmlow

    out = tmp_path / "again"
    lmlow("prepare", speech_corpus / "train.txt", "--out", out, "--documents", "line",
          "--valid", "0.2", "--test", "0.2", "--prepared-like", speech_corpus, check=True)
    lines = sorted(line for s in ("train", "valid", "test")
                   for line in (out / f"{s}.txt").read_text().splitlines())
    assert lines == sorted((speech_corpus / "train.txt").read_text().splitlines())
    assert json.loads((out / "prepare.json").read_text()) == \
        json.loads((speech_corpus / "prepare.json").read_text())
    from lmlow.data.corpus import corpus_preparation
    from lmlow.data.tokenize import text_tokenizer
    assert list(text_tokenizer(corpus_preparation(out))(["The Senate, in 1794."])) == \
        [["the", "senate", "in", "N"]]
    for extra, message in ((["--ptb"], "leave out --ptb"),
                           (["--like", speech_corpus], "--like and --prepared-like: give one")):
        r = lmlow("prepare", speech_corpus / "train.txt", "--out", tmp_path / "x",
                  "--prepared-like", speech_corpus, *extra)
        assert r.returncode == 1 and message in r.stderr and not (tmp_path / "x").exists()


def test_the_bundled_corpus_records_how_its_builder_prepared_it():
    """corpora/pydocs-mini/prepare.json (committed by hand: the corpus predates the record)
    says what data_scripts/build_bundled.py passes to prepare, which a rebuild would write."""
    import importlib.util
    from pathlib import Path

    from lmlow.data.corpus import corpus_preparation
    from lmlow.data.tokenize import preparation_record

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("build_bundled",
                                                  root / "data_scripts" / "build_bundled.py")
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    options = builder.OPTIONS
    assert corpus_preparation(root / "corpora" / "pydocs-mini") == \
        preparation_record(options["tokenizer"], options["norm"])


def test_standard_input_is_an_input_named_dash(tmp_path):
    """`zcat a.gz | lmlow prepare - --out C`: the same corpus as from the file itself (`-` was
    "no such file or folder")."""
    import subprocess
    import sys
    text = b"".join(p.read_bytes() for p in sorted(SPEECHES.iterdir()))
    (tmp_path / "in.txt").write_bytes(text)
    runs = {}
    for name, given in (("file", str(tmp_path / "in.txt")), ("dash", "-")):
        r = subprocess.run([sys.executable, "-m", "lmlow.cli", "prepare", given, "--out",
                            str(tmp_path / name), "--documents", "line"], input=text,
                           capture_output=True)
        assert r.returncode == 0, r.stderr.decode()
        runs[name] = {s: (tmp_path / name / f"{s}.txt").read_bytes() for s in ("train", "valid", "test")}
    assert runs["dash"] == runs["file"] and runs["file"]["valid"]


def test_a_name_with_glob_characters_clears_only_its_own_temporaries(tmp_path):
    """What a killed command left is cleared by name: `prepare --no-split --out 'a[1].txt'`
    read its name as a pattern, and a file `a1.txt.tmpPID` of the user's (PID no longer
    running) matched it and was deleted."""
    import subprocess
    import sys
    from lmlow.files import remove_stale_stages
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    theirs, ours = tmp_path / f"a1.txt.tmp{dead}", tmp_path / f"a[1].txt.tmp{dead}"
    theirs.write_text("the user's\n")
    ours.write_text("half\n")
    assert remove_stale_stages(tmp_path, ["a[1].txt"]) == [ours]
    assert theirs.read_text() == "the user's\n" and not ours.exists()


def test_a_stop_between_two_renames_still_renames_the_whole_corpus(tmp_path, monkeypatch):
    """SIGTERM (lmlow.errors.request_stop) after the first of the four renames left a new
    prepare.json beside the old splits (each rename checked for a stop). The corpus is
    renamed whole, then the command ends as terminated."""
    import json
    import os

    import lmlow.errors as errors

    monkeypatch.setattr(errors, "_stop_requested", False)      # restored after the test
    out = tmp_path / "c"
    prepare([SPEECHES], out, valid=1, test=1, documents="line", show_progress=False)
    real, renamed = os.replace, []

    def stopped_after_first(src, dst):
        real(src, dst)
        renamed.append(dst)
        errors.request_stop()
    monkeypatch.setattr(os, "replace", stopped_after_first)
    with pytest.raises(errors.Terminated):
        prepare([SPEECHES], out, tokenizer="spacy", norm=Normalisation.ptb(), valid=1, test=1,
                documents="line", force=True, show_progress=False)
    monkeypatch.setattr(os, "replace", real)
    assert len(renamed) == 4
    assert json.loads((out / "prepare.json").read_text())["tokenizer"] == "spacy"
    first = (out / "train.txt").read_text(encoding="utf-8").split("\n", 1)[0]
    assert first == first.lower()                        # the ptb splits, not the old ones


@pytest.mark.parametrize("out, extra", [("docs/corpus", []), ("docs", []),
                                        ("docs/sub/all.txt", ["--no-split"])])
def test_an_out_inside_an_input_folder_is_refused_before_anything_is_written(tmp_path, out,
                                                                             extra):
    """A folder's files are all read: `prepare docs --out docs/corpus --force` read the last
    run's splits and prepare.json back as documents, and a --no-split file there grew with
    each rerun. Refused in one line naming --out; nothing is written."""
    from conftest import lmlow

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"d{i:02}.txt").write_text(f"document {i} has some words in it\n")
    before = sorted(p.name for p in docs.rglob("*"))
    r = lmlow("prepare", docs, "--out", tmp_path / out, "--force", *extra)
    assert r.returncode == 1 and f"--out {tmp_path / out}:" in r.stderr, r.stderr
    assert "input folder" in r.stderr and len(r.stderr.splitlines()) == 1
    assert sorted(p.name for p in docs.rglob("*")) == before


@pytest.mark.parametrize("given, out, extra", [
    ("in.txt", "in.txt", ["--no-split"]), ("in.txt", "sub/../in.txt", ["--no-split"]),
    ("corpus/train.txt", "corpus", []), ("other.txt", "corpus", ["--exclude", "corpus/test.txt"])])
def test_an_out_that_is_an_input_file_is_refused_and_the_input_kept(tmp_path, given, out,
                                                                     extra):
    """`prepare in.txt --no-split --out in.txt --force` replaced the raw text with its
    tokenised copy, and `prepare corpus/train.txt --out corpus --force` the training split
    with a part of itself (an --exclude file likewise): refused in one line naming --out and
    the input, every file as it was."""
    from conftest import lmlow

    (tmp_path / "corpus").mkdir()
    (tmp_path / "sub").mkdir()
    for name in ("in.txt", "other.txt", *(f"corpus/{s}.txt" for s in ("train", "valid", "test"))):
        (tmp_path / name).write_text("".join(f"Line {i} of {name}, with Words.\n\n"
                                             for i in range(30)))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*.txt")}
    extra = [str(tmp_path / e) if e.endswith(".txt") else e for e in extra]
    r = lmlow("prepare", tmp_path / given, "--out", tmp_path / out, "--force", *extra)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert f"--out {tmp_path / out}:" in r.stderr and "is the input" in r.stderr, r.stderr
    assert {p: p.read_bytes() for p in tmp_path.rglob("*.txt")} == before


def test_prepared_like_refuses_text_the_corpus_preparation_did_not_make(speech_corpus,
                                                                         tmp_path):
    """`--prepared-like CORPUS` keeps its input as it is and records CORPUS's preparation
    (spaCy, --ptb): raw text with capitals, numbers or punctuation was kept and prepare.json
    claimed it was lowercased and stripped. The first line the normalisation would change is
    refused by file and line; text it made (`N`, `<EOS>`, lower case) is accepted."""
    from conftest import lmlow

    made = tmp_path / "made.txt"
    made.write_text("".join(f"the N senate met <EOS> in {w}\n\n" for w in "abcdefghij"))
    r = lmlow("prepare", made, "--out", tmp_path / "ok", "--prepared-like", speech_corpus)
    assert r.returncode == 0, r.stderr
    for line, bad, what in (("the senate in N met", "1794", "number"),
                            ("the senate met", "Senate", "capitals"),
                            ("the senate met", ";", "punctuation")):
        raw = tmp_path / "raw.txt"
        raw.write_text(f"{line}\n\nthe {bad} met\n")
        r = lmlow("prepare", raw, "--out", tmp_path / "bad", "--prepared-like", speech_corpus)
        assert r.returncode == 1 and f"raw.txt:3: {bad!r}" in r.stderr and what in r.stderr, \
            r.stderr
        assert len(r.stderr.splitlines()) == 1 and not (tmp_path / "bad").exists()


def test_sentence_bound_tokens_are_written_so_that_ngram_takes_the_corpus(tmp_path):
    """`<s>` and `</s>` (KenLM's sentence bounds) passed through prepare, so `lmlow ngram`
    refused the corpus prepare had just made. prepare writes them `<S>` and `</S>`, as it
    writes a literal `<eos>` `<EOS>`."""
    from conftest import lmlow

    raw = tmp_path / "raw.txt"
    raw.write_text("".join(f"<s> the cat {w} sat on the mat </s>\n" for w in "abcdefghijkl"))
    lmlow("prepare", raw, "--out", tmp_path / "c", "--documents", "line", "--valid", "2",
          "--test", "2", check=True)
    train = (tmp_path / "c" / "train.txt").read_text().split()
    assert train.count("<S>") == train.count("</S>") > 0 and "<s>" not in train
    r = lmlow("ngram", tmp_path / "c", "--order", "2", "--out", tmp_path / "kn")
    assert r.returncode == 0, r.stderr


def test_lines_separated_by_unicode_line_separators_get_a_note_and_the_refusal_names_the_file(
        tmp_path):
    """A file whose lines are separated only by U+2028 or U+0085 (no line feed) read silently
    as one line, and the split then refused "not enough documents (1)" naming no file. Now a
    note says why, once, and the refusal names the input."""
    from conftest import lmlow

    for name, sep in (("ls.txt", "\u2028"), ("nel.txt", "\x85")):
        raw = tmp_path / name
        raw.write_text(sep.join(f"line {i} of the text" for i in range(20)), encoding="utf-8")
        r = lmlow("prepare", raw, "--out", tmp_path / "c", "--documents", "line")
        assert r.returncode == 1, r.stderr
        assert r.stderr.count("Unicode line separators alone") == 1, r.stderr
        assert f"error: {raw}: not enough documents (1)" in r.stderr, r.stderr
        assert not (tmp_path / "c").exists()


def test_a_tokenizer_named_with_like_is_refused_even_the_default_one(speech_corpus, tmp_path):
    """`--like CORPUS --tokenizer whitespace` silently tokenised with CORPUS's spaCy (only a
    tokenizer other than the default was noticed); it is refused as the normalisation flags
    are. So is the Python API's ``norm`` with ``like``, which replaced the corpus's."""
    from conftest import lmlow

    raw = tmp_path / "raw.txt"
    raw.write_text("The Senate met.\n\nIt met again.\n")
    for flag in ("--like", "--prepared-like"):
        r = lmlow("prepare", raw, "--out", tmp_path / "c", "--no-split", "--tokenizer",
                  "whitespace", flag, speech_corpus)
        assert r.returncode == 1 and "leave out --tokenizer" in r.stderr, r.stderr
        assert not (tmp_path / "c").exists()
    with pytest.raises(LmlowError, match="give no norm"):
        prepare([raw], tmp_path / "c", like=speech_corpus, norm=Normalisation(lowercase=True),
                no_split=True, show_progress=False)


def test_a_split_whole_documents_make_over_twice_its_size_is_warned_of(tmp_path):
    """Sizes are reached by whole documents, so a few large documents gave a 10% test split
    of 20% or more, silently. The split is unchanged (the committed corpora rest on it), and
    a warning on stderr names the input, the split and the share; a split near its size has
    none."""
    from conftest import lmlow

    big = tmp_path / "big.txt"
    big.write_text("\n\n".join(" ".join(["word"] * 200) for _ in range(5)) + "\n")
    r = lmlow("prepare", big, "--out", tmp_path / "c", "--valid", "0.05", "--test", "50")
    assert r.returncode == 0, r.stderr
    warnings = r.stderr.splitlines()
    assert len(warnings) == 2 and all(w.startswith(f"lmlow: warning: {big}: ") for w in warnings)
    assert "valid has 200 tokens, 20% of all, where 5% was asked" in warnings[0]
    assert "test has 200 tokens, 20% of all, where 50 tokens were asked" in warnings[1]
    even = tmp_path / "even.txt"
    even.write_text("\n\n".join(" ".join(["word"] * 10) for _ in range(50)) + "\n")
    r = lmlow("prepare", even, "--out", tmp_path / "e")
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr


def test_a_file_that_is_one_document_is_streamed_not_held_in_memory(tmp_path):
    """A file without blank lines is one document under `auto`, and its lines were all held
    in a list before the first was tokenised (peak memory ~1.8x a 20 MB file). They stream
    now: Python's allocations stay far below the file's size, and the output is the same."""
    import tracemalloc

    raw = tmp_path / "one.txt"
    raw.write_text("".join(f"line {i} of one long document with no blank line\n"
                           for i in range(40000)))
    small = tmp_path / "small.txt"
    small.write_text("a b\n")
    prepare([small], tmp_path / "small.out", no_split=True, show_progress=False)  # imports
    tracemalloc.start()
    try:
        prepare([raw], tmp_path / "all.txt", no_split=True, show_progress=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < raw.stat().st_size / 4, (peak, raw.stat().st_size)
    assert (tmp_path / "all.txt").read_bytes() == raw.read_bytes()


def test_a_stanza_token_with_a_space_becomes_the_words_a_corpus_line_reads(monkeypatch):
    """Stanza's tokens are spans of the text, and nothing in its output rules out a space
    inside one ("1 000"); written to a corpus line it would read back as two tokens, and
    prepare's counts would be off. Such a token is split at its spaces. (A safeguard: not
    seen from the English model, which is not installed here; a stand-in pipeline.)"""
    import sys
    import types

    class Pipeline:
        def __init__(self, *args, **kwargs):
            pass

        def __call__(self, line):
            token = types.SimpleNamespace
            return types.SimpleNamespace(sentences=[types.SimpleNamespace(tokens=[
                token(text="paid"), token(text="1 000"), token(text="\u00a0dollars")])])
    monkeypatch.setitem(sys.modules, "stanza", types.SimpleNamespace(Pipeline=Pipeline))
    assert list(make_tokenizer("stanza")(["paid 1 000 dollars"])) == \
        [["paid", "1", "000", "dollars"]]


@pytest.mark.parametrize("no_split", [True, False])
def test_a_link_planted_under_the_scratch_name_is_not_written_through(tmp_path, no_split):
    """The tokenised text goes first to OUT's folder under `.lmlow-stage.tmpPID`, a name
    lmlow makes in a folder it may not have made: a link planted there (a name with this
    process's pid) was opened and written through, and with --no-split the output became
    that link. The link is removed and the file made afresh."""
    import os
    from lmlow.files import STAGE_PREFIX
    victim = tmp_path / "victim.txt"
    victim.write_text("PRECIOUS\n")
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / f"{STAGE_PREFIX}{os.getpid()}").symlink_to(victim)
    out = folder / "all.txt" if no_split else folder
    sizes = {} if no_split else {"valid": 1, "test": 1}      # (--no-split takes no sizes)
    prepare([SPEECHES], out, no_split=no_split, documents="line", show_progress=False,
            force=True, **sizes)
    assert victim.read_text() == "PRECIOUS\n"
    made = [folder / "all.txt"] if no_split else [folder / f"{s}.txt" for s in ("train", "valid", "test")]
    assert all(p.is_file() and not p.is_symlink() and p.stat().st_size for p in made)


def test_documents_reach_their_splits_whole_when_copied_in_blocks(tmp_path, monkeypatch):
    """A document is copied from the scratch file to its split a block at a time (one input
    file can be one document of gigabytes): blocks far smaller than a document give the same
    splits, byte for byte."""
    import lmlow.data.prepare as prep
    prepare([SPEECHES], tmp_path / "whole", valid=1, test=1, documents="line", show_progress=False)
    monkeypatch.setattr(prep, "COPY_BLOCK", 7)
    prepare([SPEECHES], tmp_path / "blocks", valid=1, test=1, documents="line", show_progress=False)
    for s in ("train", "valid", "test"):
        whole = (tmp_path / "whole" / f"{s}.txt").read_bytes()
        assert whole and (tmp_path / "blocks" / f"{s}.txt").read_bytes() == whole
