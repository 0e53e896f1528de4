"""GloVe training on real in-domain text learns relatedness; the CLI writes both formats."""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from lmlow.embeddings import load_vectors
from lmlow.glove import GloveConfig, glove_vocabulary, save_vectors, train_glove

PRETRAIN = Path(__file__).parents[1] / "corpora" / "pydocs-mini" / "pretrain.txt.gz"
RELATED = [("request", "response"), ("query", "database"), ("template", "variable"),
           ("test", "fixture"), ("url", "http"), ("model", "field"), ("form", "validation"),
           ("session", "cookie"), ("server", "client"), ("app", "flask")]
UNRELATED = [("request", "fixture"), ("query", "cookie"), ("template", "http"), ("test", "session"),
             ("url", "validation"), ("model", "client"), ("form", "database"),
             ("session", "variable"), ("server", "field"), ("app", "response")]


def gap(kv) -> float:
    return (np.mean([kv.similarity(a, b) for a, b in RELATED])
            - np.mean([kv.similarity(a, b) for a, b in UNRELATED]))


def null_gaps(draws: int = 1000, dim: int = 50, seed: int = 0) -> np.ndarray:
    """gap() for ``draws`` independent sets of random N(0, 1) vectors for the words involved
    (vectorised cosines): what the margin looks like when the vectors know nothing."""
    words = sorted({w for pairs in (RELATED, UNRELATED) for pair in pairs for w in pair})
    at = {w: i for i, w in enumerate(words)}
    v = np.random.default_rng(seed).normal(size=(draws, len(words), dim))
    v /= np.linalg.norm(v, axis=-1, keepdims=True)

    def mean_cos(pairs):
        a, b = (np.array([at[p[k]] for p in pairs]) for k in (0, 1))
        return np.einsum("npd,npd->np", v[:, a], v[:, b]).mean(axis=1)

    return mean_cos(RELATED) - mean_cos(UNRELATED)


def test_null_margin_of_random_vectors_is_centred_on_zero():
    """The null distribution itself: random vectors give margins around 0 (sd about
    sqrt(2/10) / sqrt(50) = 0.063 for 10 + 10 pairs of 50-d vectors), so a trained margin
    must be well clear of it to count."""
    null = null_gaps()
    assert abs(null.mean()) < 0.01 and 0.04 < null.std() < 0.09


@pytest.mark.slow
def test_trained_vectors_put_related_words_closer(tmp_path):
    kv, rep = train_glove([PRETRAIN], GloveConfig(dim=50, epochs=15, threads=2), show_progress=False)
    assert rep.tokens == 778411 + 36340 and "<unk>" in kv.key_to_index   # words + <eos>s
    # The margin must beat random vectors: it is compared with the 99.9th percentile of the
    # margins of 1000 draws of random Gaussian 50-d vectors for the same 20 pairs (so random
    # vectors reach it in at most 1 draw in 1000). Measured on the 2-core dev machine
    # (Stanford GloVe built by make install, 15 s): trained margin 0.338-0.340 over runs; null
    # 99.9th percentile 0.197 (null mean 0.002, sd 0.062; no draw of 1000 reaches 0.338).
    # With the 10 epochs this test used before, the margin was only 0.157-0.160: 6 of 1000
    # random draws reached it (p ~ 0.006), so 10 epochs did not pass this bar; 15 epochs (the
    # demo's setting) do, at no extra time (20 epochs: 0.417, 25: 0.443).
    trained = gap(kv)
    null = null_gaps(dim=kv.vector_size)
    q999 = float(np.quantile(null, 0.999))
    beaten = int((null >= trained).sum())
    assert trained > q999 and beaten <= 1, (
        f"trained margin {trained:.4f} does not beat random vectors: null 99.9th percentile "
        f"{q999:.4f}, {beaten} of {len(null)} random draws reach it")
    paths = save_vectors(kv, tmp_path / "v.txt")
    for p in paths:
        again = load_vectors(p)
        np.testing.assert_allclose(again["request"], kv["request"], rtol=1e-5)


def test_min_count_keeps_frequent_words_in_glove_order():
    from collections import Counter
    v = glove_vocabulary(Counter({"b": 9, "a": 9, "c": 5, "d": 4, "<unk>": 7}), min_count=5)
    assert list(v) == ["a", "b", "<unk>", "c"]


def test_embed_cli_refuses_to_overwrite(tmp_path):
    out = tmp_path / "v.txt"
    out.write_text("mine\n")
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "embed", str(PRETRAIN), "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "--force" in r.stderr and out.read_text() == "mine\n"


def test_embed_refuses_an_out_that_is_one_of_its_input_texts(tmp_path, monkeypatch):
    """`lmlow embed in.txt --out in.txt --force` trained, then renamed its vectors over the
    text it had read. Now an --out (or the .npz beside it) that is an input, however spelled
    (another path to it, a link to it, the target of an input given as a link), is refused
    in one line before any work, and every file is as it was."""
    import lmlow.glove as G
    from lmlow.errors import LmlowError
    text, other = tmp_path / "in.txt", tmp_path / "other.txt"
    text.write_text("the union and the states\n" * 20)
    other.write_text("the senate\n" * 20)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.txt").symlink_to(text)
    (tmp_path / "w.npz").write_text("not vectors\n")
    before = {p: p.read_text() for p in (text, other, tmp_path / "w.npz")}
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "embed", str(text), "--out", str(text),
                        "--force"], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert f"--out {text}: is the input {text}; writing it would replace" in r.stderr

    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking its outputs")
    monkeypatch.setattr(G, "train_glove", no_training)
    for inputs, out, said in (
            ([other, text], tmp_path / "sub" / ".." / "in.txt", "is the input"),
            ([tmp_path / "link.txt"], text, f"is the input {tmp_path / 'link.txt'}"),
            ([text], tmp_path / "link.txt", "is the input"),
            ([tmp_path / "w.npz"], tmp_path / "w.txt", f"writes {tmp_path / 'w.npz'}, which is the input")):
        with pytest.raises(LmlowError, match=re.escape(f"--out {out}: {said}")):
            G.embed(inputs, out, GloveConfig(dim=4, epochs=1, threads=1), force=True,
                    show_progress=False)
    assert {p: p.read_text() for p in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "link.txt", "other.txt",
                                                          "sub", "w.npz"]


def test_memory_and_window_are_bounded_by_what_glove_cooccur_survives(tmp_path):
    """Any --memory above 0 and --window from 1 went to glove-cooccur: --memory 1e-4 died of a
    double free, 200 on a 23 GB machine of SIGSEGV, 1000000 hung, --window 3000000000
    overflowed the tool's int (SIGSEGV), none of them naming the flag. Now --memory is in
    [0.1, this machine's memory] and --window in [1, 1000], as --help says, each refused in
    one line before any work; the bounds themselves count the same pairs as the defaults."""
    import math

    import lmlow
    from lmlow.errors import LmlowError
    kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
              if line.startswith("MemTotal:"))
    machine = math.floor(kb / 2**20 * 10) / 10                 # GB of 2**30 bytes, as the tool's
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "embed", "--help"], capture_output=True,
                       text=True)
    said = " ".join(r.stdout.split())
    assert f"(in [0.1, {machine:g}])" in said and "(default: 10; in [1, 1000])" in said
    text, out = tmp_path / "t.txt", tmp_path / "v.txt"
    words = [f"w{i}" for i in range(300)]
    text.write_text("".join(" ".join(words[i:i + 50]) + "\n" for i in range(0, 250, 7)) * 2)
    for flag, value in (("--memory", "1e-4"), ("--memory", f"{machine + 0.2:g}"),
                        ("--memory", "1000000"), ("--window", "3000000000"), ("--window", "1001")):
        r = subprocess.run([sys.executable, "-m", "lmlow.cli", "embed", str(text), "--out", str(out),
                            flag, value], capture_output=True, text=True)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert f"{flag} {value}: must be in [" in r.stderr
    with pytest.raises(LmlowError, match=rf"memory = {machine + 0.2:g}: must be in \[0.1, "):
        lmlow.embed(text, out, memory=machine + 0.2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]
    kv, rep = train_glove([text], GloveConfig(dim=4, epochs=1, threads=1, min_count=1, window=1000,
                                              memory=0.1), show_progress=False)
    same, plain = train_glove([text], GloveConfig(dim=4, epochs=1, threads=1, min_count=1,
                                                  window=1000), show_progress=False)
    assert rep.cooccurrences == plain.cooccurrences and len(kv) == len(same) == 297


def test_cooccur_counts_match_a_count_in_python_when_its_buffer_of_rare_pairs_fills(tmp_path):
    """glove-cooccur's weighted counts (1/distance, both directions, within a line) against
    numpy's, on 6,000 tokens of 2,000 equally rare words at the smallest --memory (a buffer of
    950,000 rare pairs) and the widest window: about 12 million rare pairs, so the buffer is
    written to disk a dozen times. Stanford's check left `window` places for a word's up to
    2 x window pairs, and this text wrote past the buffer's end: SIGSEGV within 2 seconds
    (tools/build_glove.py now leaves 2 x window)."""
    from lmlow.external import find_program
    from lmlow.glove import MAX_WINDOW, MIN_MEMORY_GB

    n, window = 2000, MAX_WINDOW
    ids = np.random.default_rng(0).permutation(np.repeat(np.arange(n), 3))
    lines = [ids[:3000], ids[3000:]]
    (tmp_path / "vocab.txt").write_text("".join(f"w{i} 3\n" for i in range(n)))  # id = line
    (tmp_path / "text.txt").write_text("".join(" ".join(f"w{i}" for i in line) + "\n"
                                               for line in lines))
    r = subprocess.run([find_program("glove-cooccur", ""), tmp_path / "text.txt",
                        tmp_path / "vocab.txt", tmp_path / "cooc.bin", str(window),
                        tmp_path / "overflow", str(MIN_MEMORY_GB)], capture_output=True, text=True)
    assert r.returncode == 0, (r.returncode, r.stderr[-300:])
    want = np.zeros((n, n))
    for line in lines:
        for d in range(1, window + 1):
            np.add.at(want, (line[d:], line[:-d]), 1 / d)      # (word, a word d before it)
            np.add.at(want, (line[:-d], line[d:]), 1 / d)
    records = np.fromfile(tmp_path / "cooc.bin", dtype=[("w1", "<i4"), ("w2", "<i4"), ("x", "<f8")])
    got = np.zeros((n, n))
    np.add.at(got, (records["w1"] - 1, records["w2"] - 1), records["x"])
    assert len(records) > 3_000_000 and np.abs(got - want).max() < 1e-9


HOLD = """import sys
from lmlow.files import atomic_path
with atomic_path(sys.argv[1], exclusive=True):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_embed_holds_its_outputs_from_the_start(tmp_path, monkeypatch):
    """A second `lmlow embed` to the same --out was refused only at the end, after its own
    hours of GloVe training, and an output folder that takes no files (/proc) only after
    training too. Now both outputs' temporaries are made and locked first: both cases are
    refused before any training; a temporary left by a killed embed holds no lock, does not
    count, and is cleared by the next one."""
    import signal

    import lmlow.glove as G
    from lmlow.errors import LmlowError
    out = tmp_path / "v.txt"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"

    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking its outputs")
    monkeypatch.setattr(G, "train_glove", no_training)
    cfg = GloveConfig(dim=8, epochs=1, threads=1)
    try:
        with pytest.raises(LmlowError, match="v.txt: another lmlow command is writing it now"):
            G.embed([PRETRAIN], out, cfg, show_progress=False)
        with pytest.raises(LmlowError, match="lmlow-test.txt: cannot write"):
            G.embed([PRETRAIN], Path("/proc/self/lmlow-test.txt"), cfg, show_progress=False)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    stale = [p.name for p in tmp_path.iterdir()]
    assert stale == [f"v.txt.tmp{holder.pid}"]              # what the kill left
    monkeypatch.undo()
    import gzip
    with gzip.open(PRETRAIN, "rt", encoding="utf-8") as f:
        text = tmp_path / "t.txt"
        text.write_text("".join(line for _, line in zip(range(2000), f)), encoding="utf-8")
    G.embed([text], out, cfg, show_progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt", "v.npz", "v.txt"]


def test_every_line_end_gets_an_eos_vector_unless_asked_not_to(tmp_path):
    """GloVe reads each line with <eos> at its end, as the LM does, so the LM's line-end row
    gets a vector; --eos no leaves it out. The counted tokens say which text GloVe read."""
    import gzip
    with gzip.open(PRETRAIN, "rt", encoding="utf-8") as f:
        lines = [line for _, line in zip(range(3000), f) if line.strip()]
    text = tmp_path / "t.txt"
    text.write_text("".join(lines), encoding="utf-8")
    words = sum(len(line.split()) for line in lines)
    kv, rep = train_glove([text], GloveConfig(dim=16, epochs=3, threads=1), show_progress=False)
    assert "<eos>" in kv.key_to_index and rep.tokens == words + len(lines)
    kv, rep = train_glove([text], GloveConfig(dim=16, epochs=3, threads=1, eos=False),
                          show_progress=False)
    assert "<eos>" not in kv.key_to_index and rep.tokens == words
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "embed", "--help"], capture_output=True,
                       text=True)
    assert "--eos {yes,no}" in r.stdout


def test_a_word_too_long_for_glove_gets_no_vector_and_is_named(tmp_path):
    """Stanford GloVe keeps 998 bytes of a word (its 1000-byte buffer, get_word): a 1001-byte
    word (a base64 blob in a technical text) overran it and training ended in "GloVe
    diverged; lower --learning-rate", and a 999-byte one, cut, kept its random start vector.
    Now such a word is left out, with its count and first FILE:LINE in the report; a word of
    998 bytes (499 two-byte letters) gets a trained vector: it moves with the epochs."""
    import gzip
    with gzip.open(PRETRAIN, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for _, line in zip(range(3000), f) if line.strip()]
    fits, cut, over = "\u00e9" * 499, "y" * 999, "x" * 1001
    text = tmp_path / "t.txt"
    text.write_text("".join(f"{line} {fits} {cut} {over if i >= 7 and i % 5 == 2 else ''}\n"
                            for i, line in enumerate(lines)), encoding="utf-8")
    kv, rep = train_glove([text], GloveConfig(dim=16, epochs=3, threads=1), show_progress=False)
    assert np.isfinite(rep.costs).all() and fits in kv.key_to_index
    assert cut not in kv.key_to_index and over not in kv.key_to_index
    assert (rep.too_long, rep.too_long_first) == (2, f"{text}:1")
    # "from N tokens": what GloVe read, each line's words, the 998-byte word and <eos>; the
    # words left out were counted too
    assert rep.tokens == sum(len(line.split()) + 2 for line in lines)
    assert f" from {rep.tokens} tokens " in rep.text()
    assert f"2 words longer than 998 bytes (GloVe's limit) have no vector; the first at {text}:1" \
        in rep.text()
    one, _ = train_glove([text], GloveConfig(dim=16, epochs=1, threads=1), show_progress=False)
    moved = np.abs(kv[fits] - one[fits]).max()
    assert moved > 1e-3 and moved > 0.1 * np.abs(kv["the"] - one["the"]).max()


@pytest.mark.parametrize("fails", ["text", "npz"])
def test_vectors_are_written_as_a_pair_or_not_at_all(fails, tmp_path, monkeypatch):
    """The text file and the .npz beside it are one result: a full disk while writing either
    leaves the earlier pair as it was (--force) and no temporary; before, a failed .npz
    left the new text file beside the old .npz, two different vector sets under one name."""
    import errno

    from gensim.models import KeyedVectors

    import lmlow.embeddings as E
    old, new = KeyedVectors(2), KeyedVectors(2)
    old.add_vectors(["a", "b"], np.array([[1, 0], [0, 1]], dtype=np.float32))
    new.add_vectors(["a", "b"], np.array([[5, 5], [6, 6]], dtype=np.float32))
    out = tmp_path / "v.txt"
    save_vectors(old, out)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    if fails == "npz":
        monkeypatch.setattr(E, "write_npz", full)
    else:
        monkeypatch.setattr(KeyedVectors, "save_word2vec_format", full)
    with pytest.raises(Exception, match="No space left"):
        save_vectors(new, out, force=True)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    monkeypatch.undo()
    save_vectors(new, out, force=True)
    for f in (out, tmp_path / "v.npz"):
        np.testing.assert_array_equal(load_vectors(f)["b"], [6, 6])


def _child(pid: int, name: str) -> int | None:
    """The process id of ``pid``'s child called ``name``, if it is running."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
            comm, ppid = fields[0].split("(", 1)[1], int(fields[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and comm == name[:15]:
            return int(stat.parent.name)
    return None


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the tool's process in /proc")
def test_a_tool_dying_of_sigill_says_the_build_is_for_another_cpu(tmp_path):
    """GloVe is compiled with -march=native: on a CPU without an instruction it uses (a
    cluster's older node, a checkout moved to another machine) a tool dies of SIGILL. The real
    glove-train is sent that signal mid-training: embed ends in one line saying what it means
    and how to rebuild, and leaves no output."""
    out = tmp_path / "v.txt"
    proc = subprocess.Popen([sys.executable, "-m", "lmlow.cli", "embed", str(PRETRAIN), "--out",
                             str(out), "--dim", "50", "--epochs", "100000", "--threads", "1",
                             "--min-count", "1"], stderr=subprocess.PIPE, text=True)
    try:
        deadline, tool = time.time() + 120, None
        while tool is None and proc.poll() is None and time.time() < deadline:
            tool = _child(proc.pid, "glove-train")
            time.sleep(0.05)
        assert tool is not None, "glove-train never started"
        os.kill(tool, signal.SIGILL)
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("lmlow: error: glove-train failed (killed by SIGILL, an instruction "
                           "this CPU does not have: it was compiled for another CPU; rebuild "), line
    assert "`python tools/build_glove.py --force`" in line
    assert not out.exists() and not out.with_suffix(".npz").exists()


def test_the_npz_beside_the_text_has_its_own_name(tmp_path):
    """`--out w.npz` made the text and the .npz one temporary: the npz was written and the
    command failed; `--out v.100d` and `--out v.200d` both wrote v.npz. Refused / OUT.npz."""
    from gensim.models import KeyedVectors

    from lmlow.errors import LmlowError
    kv = KeyedVectors(2)
    kv.add_vectors(["a", "b"], np.array([[1, 0], [0, 1]], dtype=np.float32))
    for name in ("w.npz", "w.txt.gz", "w.bin"):
        with pytest.raises(LmlowError, match=f"--out .*{name}"):
            save_vectors(kv, tmp_path / name)
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "embed", str(PRETRAIN), "--out",
                        str(tmp_path / "w.npz")], capture_output=True, text=True)
    assert r.returncode == 1 and "name it NAME.txt" in r.stderr      # before any work
    assert not list(tmp_path.iterdir())
    assert save_vectors(kv, tmp_path / "v.100d") == [tmp_path / "v.100d", tmp_path / "v.100d.npz"]
    assert save_vectors(kv, tmp_path / "v.txt") == [tmp_path / "v.txt", tmp_path / "v.npz"]


def test_the_tools_name_for_unk_in_the_text_is_refused_at_its_line(tmp_path):
    """The tools read a literal <unk> as <lmlow-text-unk>: a text holding that word got two
    <unk> vectors (a file lmlow then refuses) and none for the word."""
    from lmlow.errors import LmlowError
    text = tmp_path / "t.txt"
    text.write_text("the union <unk>\nthe senate <lmlow-text-unk>\n")
    with pytest.raises(LmlowError, match=r"t.txt:2: the word <lmlow-text-unk>"):
        train_glove([text], GloveConfig(dim=4, epochs=1, threads=1, min_count=1),
                    show_progress=False)


def test_a_stop_between_the_two_renames_waits_for_the_second(tmp_path, monkeypatch):
    """SIGTERM (lmlow.errors.request_stop) right after the .npz was renamed used to block the
    text's rename: a new .npz beside the old text. The pair is renamed whole, then the
    command ends as terminated; a stop before the renames commits neither."""
    import lmlow.errors as errors
    from gensim.models import KeyedVectors

    monkeypatch.setattr(errors, "_stop_requested", False)      # restored after the test
    old, new = KeyedVectors(2), KeyedVectors(2)
    old.add_vectors(["a", "b"], np.array([[1, 0], [0, 1]], dtype=np.float32))
    new.add_vectors(["a", "b"], np.array([[5, 5], [6, 6]], dtype=np.float32))
    out = tmp_path / "v.txt"
    save_vectors(old, out)
    real = os.replace

    def stopped_after_first(src, dst):
        real(src, dst)
        errors.request_stop()                 # the signal handler, between two renames
    monkeypatch.setattr(os, "replace", stopped_after_first)
    with pytest.raises(errors.Terminated):
        save_vectors(new, out, force=True)
    monkeypatch.setattr(os, "replace", real)
    for f in (out, tmp_path / "v.npz"):
        np.testing.assert_array_equal(load_vectors(f)["b"], [6, 6])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(errors.Terminated):    # stopped before: nothing committed
        save_vectors(old, out, force=True)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
