"""`lmlow predict` and ``Scorer.next_words``: the next-word distribution of an LSTM, a KenLM
n-gram and their mixture sums to one over the vocabulary and gives each word the probability
`lmlow score` gives it in that place; the command lists the most probable words. And
`lmlow score --interpolate`: a reranker's mixed sentence scores."""
import collections
import json
import math
import re

import numpy as np
import pytest

from conftest import lmlow
from lmlow.config import build_config
from lmlow.errors import LmlowError
from lmlow.runs import InterpolatedRun, load

CONTEXTS = ["", "the", "the people", "zzzunknown the", "<unk> of"]


@pytest.fixture(scope="module")
def runs(speech_corpus, tmp_path_factory):
    """An LSTM (one epoch) and a 3-gram of the speeches at K=2: the same vocabulary."""
    from lmlow.ngram import train_ngram
    from lmlow.train import train

    base = tmp_path_factory.mktemp("predict")
    train(build_config("tiny", None, corpus=str(speech_corpus), max_epochs=1, unk_threshold=2,
                       threads=1), base / "lstm", quiet=True)
    train_ngram(speech_corpus, base / "kn", order=3, unk_threshold=2, memory="100M", quiet=True)
    return base / "lstm", base / "kn"


@pytest.fixture(scope="module")
def transformer(speech_corpus, tmp_path_factory):
    """A Transformer run (one epoch of transformer-tiny): its scorer is LSTMRun's too."""
    from lmlow.train import train

    run = tmp_path_factory.mktemp("transformer") / "tf"
    train(build_config("transformer-tiny", None, corpus=str(speech_corpus), max_epochs=1,
                       unk_threshold=2, threads=1), run, quiet=True)
    return run


@pytest.fixture(scope="module")
def extended(speech_corpus, tmp_path_factory):
    """A 3-gram whose vocabulary adds 20 words of vectors that training never saw: they share
    KenLM's <unk> probability (lmlow.ngram_run)."""
    from lmlow.ngram import train_ngram

    base = tmp_path_factory.mktemp("extended")
    train = set((speech_corpus / "train.txt").read_text().split())
    unseen = sorted(set((speech_corpus / "valid.txt").read_text().split()) - train)[:20]
    (base / "v.txt").write_text("".join(f"{w} 0.1 0.2\n" for w in [*unseen, "the"]))
    train_ngram(speech_corpus, base / "kn", order=3, memory="100M", quiet=True,
                embeddings=str(base / "v.txt"), extend_vocab=True)
    return base / "kn"


def kenlm_total(kn, context: str) -> float:
    """The sum of KenLM's probabilities of every word of its own vocabulary (its ARPA file's
    unigrams but <s>) after <s> and ``context`` (<unk> for a word it does not know)."""
    import kenlm

    arpa = (kn / "model.arpa").read_text()
    unigrams = arpa.split("\\1-grams:\n")[1].split("\n\n")[0].splitlines()
    words = [line.split("\t")[1] for line in unigrams]
    model = kenlm.Model(str(kn / "model.bin"))
    state, after = kenlm.State(), kenlm.State()
    model.BeginSentenceWrite(state)
    for w in context.split():
        model.BaseScore(state, w if w in model else "<unk>", after)
        state, after = after, state
    return math.fsum(10 ** model.BaseScore(state, w, after) for w in words if w != "<s>")


@pytest.mark.parametrize("kind", ["lstm", "transformer", "ngram", "extended", "mixture"])
def test_next_word_probabilities_sum_to_one_and_agree_with_scoring(runs, extended, transformer,
                                                                    kind):
    lstm, kn = runs
    if kind in ("extended", "transformer"):
        kn, lstm, kind = ((extended, lstm, "ngram") if kind == "extended"
                          else (kn, transformer, "lstm"))
    scorer = {"lstm": lambda: load(lstm), "ngram": lambda: load(kn),
              "mixture": lambda: InterpolatedRun(load(lstm), load(kn), 0.3)}[kind]()
    v = scorer.vocab
    for context in CONTEXTS:
        lp = scorer.next_logprobs(context)
        assert lp.shape == (len(v.words),)
        # KenLM's own conditional distributions sum to 1 within ~3e-4 on this small corpus
        # (rounded backoffs): the n-gram's must sum to exactly what KenLM's do
        total = {"lstm": 1, "ngram": kenlm_total(kn, context),
                 "mixture": 0.3 + 0.7 * kenlm_total(kn, context)}[kind]
        assert abs(total - 1) < 1e-3
        tolerance = {"lstm": 1e-5, "ngram": 1e-9, "mixture": 1e-6}[kind]
        assert math.fsum(np.exp(lp)) == pytest.approx(total, abs=tolerance)
        words = context.split()
        # the most probable words, the line's end, <unk> and the rarest word, each scored as
        # the next token of a line by the scoring path (KenLM's full_scores, the batched LSTM)
        picks = [*np.argsort(-lp)[:3].tolist(), v.eos_id, v.unk_id, len(v.words) - 1]
        for i in picks:
            line = words + ([] if i == v.eos_id else [v.words[i]])
            scored = scorer.score(line)[len(words)][1]
            assert lp[i] == pytest.approx(scored, abs=1e-5), (context, v.words[i])
        reader = scorer.reader()                 # a keyboard's loop: one word at a time
        for w in words:
            reader.feed(w)
        assert reader.words == words
        assert np.abs(reader.next_logprobs() - lp).max() < 1e-5, context
    long = ["the", "people", "of", "this", "nation", "and"] * 40    # longer than the BPTT length
    reader = scorer.reader()
    for start in range(0, len(long), 7):
        reader.feed(long[start:start + 7])
    at_once = scorer.next_logprobs(long)
    before = scorer.reader().feed("the")                # a keyboard's undo: fork, then go back
    after = before.fork().feed("people")
    assert before.words == ["the"] and after.words == ["the", "people"]
    assert np.abs(before.next_logprobs() - scorer.next_logprobs("the")).max() < 1e-5
    assert np.abs(after.next_logprobs() - scorer.next_logprobs("the people")).max() < 1e-5
    assert np.abs(before.feed("of").next_logprobs() - scorer.next_logprobs("the of")).max() < 1e-5
    assert np.abs(reader.next_logprobs() - at_once).max() < 1e-5
    assert at_once[v.index["the"]] == pytest.approx(scorer.score(long + ["the"])[-2][1], abs=1e-5)


def test_next_words_are_the_most_probable_first_without_unk(runs):
    run = load(runs[1])
    lp = run.next_logprobs("the")
    top = run.next_words("the", top=5)
    assert [p for _, p in top] == sorted((p for _, p in top), reverse=True)
    assert [w for w, _ in top] == [run.vocab.words[i] for i in np.argsort(-lp, kind="stable")
                                   if i != run.vocab.unk_id][:5]
    everything = run.next_words("the", top=10**6, include_unk=True)
    assert len(everything) == len(run.vocab.words) and "<unk>" in dict(everything)
    assert "<unk>" not in dict(run.next_words("the", top=10**6))
    with pytest.raises(LmlowError, match="the context holds <eos>"):
        run.next_words(["the", "<eos>"])
    # a wrong argument is one error naming it, not a slice of the list or a TypeError
    for top in (0, -1, "3", 2.5, True):
        with pytest.raises(LmlowError, match=f"top = {top!r}: expected a whole number >= 1"):
            run.next_words("the", top=top)
        with pytest.raises(LmlowError, match="top = "):
            run.reader().feed("the").next_words(top)
    for text in (5, ["the", 5], None):
        with pytest.raises(LmlowError, match="expected a text or a list of words"):
            run.score(text)
        with pytest.raises(LmlowError, match="expected a text or a list of words"):
            run.next_words(text)


def test_the_python_entry_points_refuse_arguments_of_the_wrong_type(runs, speech_corpus, tmp_path):
    """From Python a wrong argument is one LmlowError naming it (was: TypeError from pathlib,
    torch's list of every device type it knows, AttributeError from inside the mixture)."""
    import lmlow
    lstm, kn = runs
    run = load(lstm)
    cases = [
        (lambda: lmlow.fit(speech_corpus, 5), "lmlow.fit: out = 5: expected text or a path"),
        (lambda: lmlow.fit(5, tmp_path / "r"), "lmlow.fit: corpus = 5: expected text or a path"),
        (lambda: lmlow.resume(5), "lmlow.resume: run_dir = 5: expected text or a path"),
        (lambda: lmlow.load(5), "lmlow.load: run_dir = 5: expected text or a path"),
        (lambda: lmlow.load(lstm, device="tpu"), "--device 'tpu': choose auto, cpu or cuda"),
        (lambda: run.evaluate("valid", corpus=5), "evaluate: corpus = 5: expected text or a path"),
        (lambda: lmlow.interpolate(run, str(kn)), "lmlow.interpolate: b = "),
        (lambda: lmlow.interpolate(run, load(kn), weight="a"),
         "lmlow.interpolate: weight = 'a': expected a number"),
    ]
    for call, message in cases:
        with pytest.raises(LmlowError, match=re.escape(message)):
            call()
    assert not (tmp_path / "r").exists()
    mixed = lmlow.interpolate(run, load(kn), weight=1)          # an int weight is a weight
    got, want = mixed.next_words("the", top=3), run.next_words("the", top=3)
    assert [w for w, _ in got] == [w for w, _ in want]
    assert [p for _, p in got] == pytest.approx([p for _, p in want], abs=1e-6)


@pytest.mark.parametrize("kind", ["lstm", "transformer", "ngram", "mixture"])
def test_contexts_read_on_from_the_one_before_list_what_a_fresh_read_lists(runs, transformer,
                                                                           kind, monkeypatch):
    """`predict --file` reads a context that begins with one asked before on from there (a
    keyboard's growing line, a word deleted, another line, an unknown word, a completion):
    each list is the one a fresh read of the whole context gives, to 1e-5, with two readers
    kept (backing up further starts from an older one or the line's start)."""
    from lmlow.evaluate import ContextReaders
    from lmlow.predict import predictions

    monkeypatch.setattr(ContextReaders, "KEPT", 2)

    lstm, kn = runs
    scorer = {"lstm": lambda: load(lstm), "transformer": lambda: load(transformer),
              "ngram": lambda: load(kn),
              "mixture": lambda: InterpolatedRun(load(lstm), load(kn), 0.3)}[kind]()
    asked = ["the", "the people", "the people of", "the", "the people zzzunknown of",
             "the people zzzunknown of this", "the people zzzunknown of this nation", "the", "",
             "we the people", "we the people of this nation", "we the", "the people of",
             "the people of th"]
    items = [(i + 1, None, context) for i, context in enumerate(asked)]
    records = list(predictions(scorer, items[:-1], top=20))
    records += list(predictions(scorer, items[-1:], top=20, partial=True))
    for record, context in zip(records, asked):
        words = context.split()
        prefix = words.pop() if context == asked[-1] else ""
        want = scorer.next_words(words, top=20, prefix=prefix)
        assert [n["word"] for n in record["next"]] == [w for w, _ in want], context
        assert [n["logprob"] for n in record["next"]] == pytest.approx(
            [lp for _, lp in want], abs=1e-5)


@pytest.mark.parametrize("top", [1, 3, 10, 500])
def test_the_top_words_are_those_of_a_full_sort_ties_in_vocabulary_order(top):
    """top_words sorts only the words from its top-th score up: what it lists equals a full
    sort by probability, ties in vocabulary order (many ties here: scores on a coarse grid),
    with and without <unk>, for completions of a prefix, and for more words than there are."""
    from lmlow.data.vocab import Vocabulary
    from lmlow.evaluate import top_words

    rng = np.random.default_rng(top)
    words = ["<eos>", "<unk>"] + [f"{c}{i}" for i in range(200) for c in "ab"]
    vocab = Vocabulary(words, [1] * len(words))
    lp = np.round(rng.normal(-8, 1, len(words)), 1)
    lp[[1, 5, 9]] = lp.max()                       # <unk> among the words tied for first
    for include_unk in (False, True):
        for prefix in ("", "a1", "b19"):
            ids = [i for i, w in enumerate(words) if w.startswith(prefix)
                   and (include_unk or w != "<unk>")]
            want = sorted(ids, key=lambda i: -lp[i])[:top]         # sorted() is stable
            got = top_words(vocab, lp, top, include_unk=include_unk, prefix=prefix)
            assert got == [(words[i], float(lp[i])) for i in want]


def test_the_command_lists_what_the_api_gives(runs, tmp_path):
    lstm, kn = runs
    r = lmlow("predict", lstm, "--top", "3", "the", "people", "--json")    # an option between
    assert r.returncode == 0, r.stderr
    record = json.loads(r.stdout)
    assert record["context"] == ["the", "people"] and record["oov"] == [False, False]
    expected = load(lstm).next_words("the people", top=3)
    assert [n["word"] for n in record["next"]] == [w for w, _ in expected]
    assert [n["logprob"] for n in record["next"]] == pytest.approx([p for _, p in expected],
                                                                   abs=1e-5)
    assert [n["prob"] for n in record["next"]] == pytest.approx(
        [math.exp(p) for _, p in expected], abs=1e-7)

    contexts = tmp_path / "contexts.txt"
    contexts.write_text("the\n\nzzzunknown of\n")
    r = lmlow("predict", lstm, "--file", contexts, "--interpolate", kn, "--weight", "0.5",
              "--top", "2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("1: the -> ")
    assert lines[1].startswith("3: zzzunknown(<unk>) of -> ") and lines[1].count("%") + \
        lines[1].count("e-") == 2
    mixed = InterpolatedRun(load(lstm), load(kn), 0.5).next_words("the", top=2)
    shown = [item.rsplit(" ", 1) for item in lines[0].removeprefix("1: the -> ").split(", ")]
    assert [w for w, _ in shown] == [w for w, _ in mixed]
    for (_, text), (_, p) in zip(shown, mixed):   # two significant figures, as a percent
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        assert len(text.rstrip("%").replace(".", "").lstrip("0")) >= 2
        assert value == pytest.approx(math.exp(p), rel=0.05)
    # words that look like options come after `--`, also after an option (they were refused)
    r = lmlow("predict", lstm, "--top", "3", "--json", "--", "-x", "the")
    assert r.returncode == 0 and json.loads(r.stdout)["context"] == ["-x", "the"], r.stderr
    r = lmlow("predict", lstm, "--top", "3", "the", "--", "--help")
    assert r.returncode == 0 and r.stdout.startswith("the --help(<unk>) -> "), r.stderr
    r = lmlow("predict", kn)                          # no context: the first word of a line
    assert r.returncode == 0 and r.stdout.startswith("<line start> -> ")


def test_score_of_a_mixture_mixes_the_two_runs_scores_word_by_word(runs, tmp_path):
    lstm, kn = runs
    sentences = tmp_path / "s.txt"
    sentences.write_text("the people of this nation\nzzzunknown and the\n")
    each = []
    for run in (lstm, kn):
        r = lmlow("score", run, sentences)
        assert r.returncode == 0, r.stderr
        each.append([json.loads(line) for line in r.stdout.splitlines()])
    r = lmlow("score", lstm, sentences, "--interpolate", kn, "--weight", "0.3")
    assert r.returncode == 0, r.stderr
    assert "lstm x 0.300 + " in r.stderr
    mixed = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(mixed) == 2
    for m, a, b in zip(mixed, *each):
        assert m["words"] == a["words"] == b["words"] and m["oov"] == a["oov"]
        expected = [math.log(0.3 * math.exp(x) + 0.7 * math.exp(y))
                    for x, y in zip(a["logprob"], b["logprob"])]
        assert m["logprob"] == pytest.approx(expected, abs=1e-5)
        assert m["total_logprob"] == pytest.approx(sum(expected), abs=1e-4)
    tuned = lmlow("score", lstm, sentences, "--interpolate", kn)      # weight tuned on valid
    assert tuned.returncode == 0 and "+ " in tuned.stderr and " x " in tuned.stderr


def test_a_tuned_mixture_reads_the_corpus_the_command_is_given(speech_corpus, tmp_path):
    """A mixture's weight, tuned by EM, is tuned on the validation split of `eval --corpus`'s
    folder: with the runs' corpus moved, `eval --corpus NEW --interpolate` said "no such
    corpus folder ...; if it moved, pass --corpus PATH", given that flag. `score` has no
    --corpus: it asks for --weight. The Python mixture takes reset_lines and weight as
    checked values."""
    import shutil

    from lmlow.ngram import train_ngram
    from lmlow.train import train

    corpus = tmp_path / "c"
    shutil.copytree(speech_corpus, corpus)
    train(build_config("tiny", None, corpus=str(corpus), max_epochs=0, threads=1),
          tmp_path / "lstm", quiet=True)
    train_ngram(corpus, tmp_path / "kn", order=3, memory="100M", quiet=True)
    lstm, kn = tmp_path / "lstm", tmp_path / "kn"
    here = InterpolatedRun(load(lstm), load(kn))
    moved = corpus.rename(tmp_path / "moved")
    r = lmlow("eval", lstm, "--corpus", moved, "--interpolate", kn, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["weight"] == pytest.approx(here.weight, abs=1e-12)
    (tmp_path / "line.txt").write_text("the people\n")
    r = lmlow("score", lstm, tmp_path / "line.txt", "--interpolate", kn)
    assert r.returncode == 1 and "give --weight W, or restore the folder" in r.stderr
    assert lmlow("score", lstm, tmp_path / "line.txt", "--interpolate", kn, "--weight",
                 "0.5").returncode == 0
    with pytest.raises(LmlowError, match=r"^lmlow.interpolate: reset_lines = 'no': expected true"):
        InterpolatedRun(load(lstm), load(kn), 0.5, reset_lines="no")
    with pytest.raises(LmlowError, match=r"^lmlow.interpolate: weight = 1.5: must be between"):
        InterpolatedRun(load(lstm), load(kn), 1.5)
    with pytest.raises(LmlowError, match=r"^evaluate: reset_lines = 'no': expected true"):
        load(kn).evaluate("valid", moved, reset_lines="no")


@pytest.mark.parametrize("at_once", [1, 3, 1024])
def test_a_file_scored_in_blocks_of_lines_is_each_line_scored_alone(runs, tmp_path, at_once):
    """score_file gives the model many lines at once (side by side for an LSTM); every line's
    numbers are the ones it gets scored alone from a fresh state, blank lines keep their
    numbers, and an out-of-vocabulary word is flagged."""
    run = load(runs[0])
    text = ["the people of this nation", "", "zzzunknown and the", "we", "", "the the the",
            "and so on", "to be"]
    f = tmp_path / "lines.txt"
    f.write_text("\n".join(text) + "\n")
    records = list(run.score_file(f, lines_at_once=at_once))
    assert [r["line"] for r in records] == [i + 1 for i, t in enumerate(text) if t]
    for r in records:
        alone = run.score(text[r["line"] - 1])
        assert r["words"] == [w for w, _, _ in alone] and r["oov"] == [o for _, _, o in alone]
        assert r["logprob"] == pytest.approx([p for _, p, _ in alone], abs=2e-6)
        assert r["total_logprob"] == pytest.approx(sum(p for _, p, _ in alone), abs=1e-5)



@pytest.mark.parametrize("command", ["predict", "score"])
def test_a_terminal_is_read_as_typed(runs, command):
    """`--file /dev/stdin` (predict) or `/dev/stdin` (score) typed at a terminal: the
    terminal that is lmlow's standard input is the one device read as text (it ends at
    Ctrl-D), each line answered as it is typed (a pseudo-terminal here, as a shell gives);
    the same terminal named when it is not the standard input is refused, unopened."""
    import os
    import pty
    import selectors
    import subprocess
    import sys

    lstm, _ = runs
    typed, terminal = pty.openpty()
    flags = ["--json", "--top", "2"] if command == "predict" else []

    def argv(path):
        return [sys.executable, "-m", "lmlow.cli", command, lstm,
                *(["--file", path] if command == "predict" else [path]), *flags]

    other = subprocess.run(argv(os.ttyname(terminal)), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=120)
    assert other.returncode == 1 and other.stderr.endswith(
        "a device or socket, not a text file; refusing to read it\n"), other.stderr
    p = subprocess.Popen(argv("/dev/stdin"), stdin=terminal, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, bufsize=0,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    wait = selectors.DefaultSelector()
    wait.register(p.stdout, selectors.EVENT_READ)
    try:
        for context in ("the people", "we the"):
            os.write(typed, (context + "\n").encode())
            assert wait.select(timeout=120), "no answer to a typed line"
            record = json.loads(p.stdout.readline())
            assert record["context" if command == "predict" else "words"][:2] == context.split()
        os.write(typed, b"\x04")                          # Ctrl-D: the end of the input
        p.wait(timeout=120)
    finally:
        p.kill()
        os.close(typed)
        os.close(terminal)
    assert p.returncode == 0, p.stderr.read()


def test_out_of_vocabulary_means_one_thing_in_eval_score_and_stats(runs, speech_corpus):
    """At K = 2 a valid word seen once in training is read as <unk>: `eval` counted it as no
    out-of-vocabulary word (0), `score` flagged it and `stats` put it in the OOV rate. Now all
    three count the words read as <unk>, here from the text itself."""
    from lmlow.data.corpus import Corpus
    from lmlow.data.stats import corpus_stats

    lstm, kn = runs
    train = collections.Counter((speech_corpus / "train.txt").read_text().split())
    valid = (speech_corpus / "valid.txt").read_text().split()
    rare = sum(train[w] < 2 for w in valid)
    assert rare > 20 and "<unk>" not in train
    for run in (lstm, kn):
        ev = load(run).evaluate("valid")
        flagged = sum(sum(r["oov"]) for r in load(run).score_file(speech_corpus / "valid.txt"))
        assert ev.oov_tokens == ev.unk_tokens == flagged == rare
    oov = corpus_stats(Corpus(speech_corpus, 2, show_progress=False), thresholds=[2])["oov"]["valid"]
    assert oov["tokens"] == rare


def test_a_reader_that_leaves_early_ends_the_command_quietly(runs, tmp_path):
    """`lmlow score RUN FILE | head -1`: once head has gone, the command stops as `cat` does,
    with 141 (128 + SIGPIPE) and nothing on stderr, not a BrokenPipeError's traceback."""
    import subprocess
    import sys

    lstm, _ = runs
    f = tmp_path / "many.txt"
    f.write_text("the people of this nation\n" * 3000)       # far more than a pipe's 64 KiB
    cmd = f"{sys.executable} -m lmlow.cli score {lstm} {f}; echo rc=$? >&2"
    p = subprocess.run(["bash", "-c", f"({cmd}) | head -1"], capture_output=True, text=True)
    assert p.stdout.count("\n") == 1
    assert p.stderr == "rc=141\n", p.stderr


@pytest.mark.parametrize("name", ["/dev/stdin", "-"])
def test_lines_through_a_pipe_are_scored_as_they_come(runs, tmp_path, name):
    """`lmlow score RUN /dev/stdin` (or `-`, the Unix habit, which was "-: no such file"), as
    a recogniser sends one utterance's n-best list and
    waits for its scores: the lines written so far are answered before more are written (a
    reader that waited for 1,024 lines would leave readline waiting until the timeout), with
    the numbers a file gives; a bad line later ends the run in one line naming /dev/stdin and
    the line, after the answers before it."""
    import os
    import selectors
    import subprocess
    import sys

    lstm, _ = runs
    utterances = [["utt1-1 the people of this nation", "utt1-2 the people of the nation"],
                  ["utt2-1 we the people"]]
    f = tmp_path / "nbest.txt"
    f.write_text("".join(line + "\n" for lines in utterances for line in lines))
    want = list(load(lstm).score_file(f, ids=True))
    p = subprocess.Popen([sys.executable, "-m", "lmlow.cli", "score", lstm, name, "--ids"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         bufsize=0, env={**os.environ, "OMP_NUM_THREADS": "1"})
    wait = selectors.DefaultSelector()      # unbuffered: readline takes no more than its line
    wait.register(p.stdout, selectors.EVENT_READ)
    got = []
    try:
        for lines in utterances:
            p.stdin.write("".join(line + "\n" for line in lines).encode())
            for _ in lines:
                assert wait.select(timeout=120), "no answer before the next utterance was written"
                got.append(json.loads(p.stdout.readline()))
        p.stdin.write(b"utt3-1 a line with <eos> inside\n")
    finally:
        p.stdin.close()
        p.wait(timeout=120)
    assert [(g["line"], g["id"], g["words"], g["oov"]) for g in got] == \
        [(w["line"], w["id"], w["words"], w["oov"]) for w in want]
    for g, w in zip(got, want):
        assert g["logprob"] == pytest.approx(w["logprob"], abs=2e-6)
    assert p.returncode == 1 and p.stdout.read() == b""
    assert p.stderr.read().decode().strip().splitlines()[-1] == \
        "lmlow: error: /dev/stdin:4: contains the reserved token <eos>; lines end implicitly, remove it"


RAW = ('The United States, in 1794, have "directed" the Officers.\n'
       "\n"
       "<eos> and $1,000.50 wasn't trivial\n"
       "!!! ...\n"
       "Fellow-Citizens of the Senate\n")


def test_raw_text_is_read_as_prepare_made_the_corpus(runs, speech_corpus, tmp_path):
    """`--raw`: a sentence as typed or recognised is tokenised and normalised as `lmlow prepare`
    made the run's corpus (spaCy, --ptb here): the records equal those of the same text
    tokenised by `lmlow prepare` itself and scored as given, for the LSTM, the n-gram and
    their mixture; predict reads a raw context the same way; a line that normalises to no word
    is scored as its end alone, so every line keeps its record."""
    lstm, kn = runs
    assert json.loads((speech_corpus / "prepare.json").read_text()) == {
        "tokenizer": "spacy", "lowercase": True, "numbers": True, "strip_punct": True}
    raw = tmp_path / "raw.txt"
    raw.write_text(RAW)
    tokenised = tmp_path / "tokenised.txt"
    lmlow("prepare", raw, "--out", tokenised, "--no-split", "--documents", "line",
          "--tokenizer", "spacy", "--ptb", check=True)
    lines = tokenised.read_text().splitlines()
    assert lines[0] == "the united states in N have directed the officers"   # by hand
    assert lines[1] == "< eos > and $ N was n't trivial" and len(lines) == 3  # "!!! ..." dropped
    r = lmlow("score", lstm, raw, "--raw")
    assert r.returncode == 0, r.stderr
    got = [json.loads(line) for line in r.stdout.splitlines()]
    want = [json.loads(line) for line in lmlow("score", lstm, tokenised, check=True).stdout
            .splitlines()]
    assert [g["line"] for g in got] == [1, 3, 4, 5] and got[2]["words"] == ["<eos>"]
    assert [g["words"] for g in got[:2] + got[3:]] == [w["words"] for w in want]
    assert [g["logprob"] for g in got[:2] + got[3:]] == [w["logprob"] for w in want]
    for scorer in (load(kn), InterpolatedRun(load(lstm), load(kn), 0.3)):    # the same reading
        got = list(scorer.score_file(raw, raw=True))
        assert [g["words"][:-1] for g in got] == [line.split() for line in lines[:2]] + \
            [[]] + [lines[2].split()]
        assert [g["total_logprob"] for g in got[:2] + got[3:]] == \
            [r["total_logprob"] for r in scorer.score_file(tokenised)]
    r = lmlow("predict", lstm, "The", "United", "States,", "--raw", "--json", "--top", "3")
    assert r.returncode == 0, r.stderr
    record = json.loads(r.stdout)
    assert record["context"] == ["the", "united", "states"]
    assert [(n["word"], n["logprob"]) for n in record["next"]] == [
        (w, round(lp, 6)) for w, lp in load(lstm).next_words("the united states", top=3)]
    run = load(lstm)
    assert run.score("The Officers.", raw=True) == run.score("the officers")
    assert run.next_words("In 1794,", raw=True) == run.next_words("in N")
    assert list(run.tokenise(["The 5 men.", ""])) == [["the", "N", "men"], []]
    from lmlow.generate import generate

    assert generate(run, prompt="The Officers,", raw=True, words=4) == \
        generate(run, prompt="the officers", words=4)
    r = lmlow("generate", lstm, "--prompt", "The Officers,", "--raw", "--words", "4")
    assert r.returncode == 0 and r.stdout.startswith("the officers "), r.stderr


def test_the_word_being_typed_is_the_raw_texts_last_piece_read_as_the_corpus_reads(runs):
    """`predict --raw --partial`: the prefix was the last token of the whole text, so a last
    piece the corpus's normalisation drops (`(` under --strip-punct) made the finished word
    before it the prefix; from Python, `next_words(..., prefix="Uni", raw=True)` took the
    prefix as given, not lowercased as the corpus was, and listed nothing. A literal <eos>
    in a sentence to score split it into two lines; it is refused, as in a file."""
    lstm, _ = runs
    run = load(lstm)
    ask = lambda *words: json.loads(lmlow("predict", lstm, *words, "--raw", "--partial",
                                          "--json", "--top", "3", check=True).stdout)
    dropped = ask("The", "United", "(")
    assert dropped["context"] == ["the", "united"] and dropped["prefix"] == ""
    assert [n["word"] for n in dropped["next"]] == [w for w, _ in run.next_words("the united", 3)]
    typing = ask("The", "Uni")
    assert typing["context"] == ["the"] and typing["prefix"] == "uni"
    assert run.next_words("The", 3, raw=True, prefix="Uni") == \
        run.next_words("the", 3, prefix="uni") != []
    assert run.typed("The United ", raw=True) == (["the", "united"], "")   # a new word begun
    with pytest.raises(LmlowError, match="contains the reserved token <eos>"):
        run.score("the <eos> people")


def test_raw_text_needs_the_runs_record_and_one_tokenisation(runs, speech_corpus, tmp_path):
    """A run keeps its corpus's record (data.json, the n-gram's config.json) when the corpus
    moves without it (a resume from the moved corpus) and `lmlow unk` passes it on; two runs
    whose corpora were tokenised differently cannot read one raw line for their mixture."""
    import shutil

    lstm, kn = runs
    moved = tmp_path / "moved"
    shutil.copytree(speech_corpus, moved, ignore=shutil.ignore_patterns("prepare.json"))
    run = tmp_path / "run"
    shutil.copytree(lstm, run, ignore=shutil.ignore_patterns(".lock"))
    before = json.loads((run / "data.json").read_text())["prepared"]
    r = lmlow("train", moved, "--resume", run, "--max-epochs", "2", "--threads", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    data = json.loads((run / "data.json").read_text())
    assert data["corpus"] == str(moved.resolve()) and data["prepared"] == before
    lmlow("unk", speech_corpus, "--unk-threshold", "2", "--out", tmp_path / "unk", check=True)
    assert json.loads((tmp_path / "unk" / "prepare.json").read_text()) == before
    other = tmp_path / "kn-other"
    shutil.copytree(kn, other)
    config = json.loads((other / "config.json").read_text())
    config["prepared"]["lowercase"] = False
    (other / "config.json").write_text(json.dumps(config))
    mixed = InterpolatedRun(load(lstm), load(other), 0.5)
    with pytest.raises(LmlowError, match="tokenised differently"):
        mixed.score("The people", raw=True)
    # a run from before runs kept the record reads its corpus's, if the splits are its own
    old = tmp_path / "old"
    shutil.copytree(lstm, old, ignore=shutil.ignore_patterns(".lock"))
    data = json.loads((old / "data.json").read_text())
    data.pop("prepared")
    (old / "data.json").write_text(json.dumps(data))
    assert load(old).score("The people", raw=True) == load(lstm).score("the people")
    changed = tmp_path / "changed"
    shutil.copytree(speech_corpus, changed)
    with open(changed / "valid.txt", "a") as f:
        f.write("one more line\n")
    (old / "data.json").write_text(json.dumps(data | {"corpus": str(changed)}))
    with pytest.raises(LmlowError, match="no record of how its corpus was tokenised"):
        load(old).score("The people", raw=True)


def test_an_nbest_list_keeps_its_identifiers(runs, tmp_path):
    """`--ids`: each line starts with an identifier (an n-best list's), copied into the record
    and not scored: the records equal those of the lines without it, raw or not, for score and
    for predict; predict needs --file for it."""
    import torch
    lstm, _ = runs
    # one thread here and in the commands compared with it: the thread count splits the
    # sums, and on some CPUs (an AMD EPYC, AVX2) a 6-decimal logprob differs by 1e-6
    torch.set_num_threads(1)
    nbest, plain = tmp_path / "nbest.txt", tmp_path / "plain.txt"
    nbest.write_text("utt1-1 the people of the united states\nutt1-2 the people\n\nutt2-1\n")
    plain.write_text("the people of the united states\nthe people\n\n\n")
    run = load(lstm)
    got = list(run.score_file(nbest, ids=True))
    assert [(g["line"], g["id"]) for g in got] == [(1, "utt1-1"), (2, "utt1-2"), (4, "utt2-1")]
    want = list(run.score_file(plain))
    assert [{k: v for k, v in g.items() if k != "id"} for g in got[:2]] == want
    assert got[2]["words"] == ["<eos>"]
    raw = tmp_path / "raw.txt"
    raw.write_text("utt1-1 The People of the United States.\nutt1-2   The people\n\nutt2-1\n")
    assert list(run.score_file(raw, raw=True, ids=True)) == got
    r = lmlow("score", lstm, nbest, "--ids", "--threads", "1")
    assert r.returncode == 0 and [json.loads(x) for x in r.stdout.splitlines()] == got, r.stderr
    r = lmlow("score", lstm, nbest, "--ids", "--totals", "--threads", "1")   # a reranker's table
    assert r.returncode == 0, r.stderr
    assert [line.split("\t") for line in r.stdout.splitlines()] == [
        [g["id"], str(g["total_logprob"]), str(g["total_log10prob"]), str(len(g["words"])),
         str(sum(g["oov"]))] for g in got]
    r = lmlow("predict", lstm, "--file", raw, "--raw", "--ids", "--top", "2")
    assert r.returncode == 0, r.stderr
    want = lmlow("predict", lstm, "--file", plain, "--top", "2", check=True).stdout.splitlines()
    lines = r.stdout.splitlines()
    assert lines[:2] == [w.replace("1: ", "1: utt1-1: ").replace("2: ", "2: utt1-2: ")
                         for w in want] and lines[2].startswith("4: utt2-1: <line start> -> ")
    r = lmlow("predict", lstm, "the", "--ids")
    assert r.returncode == 1 and "--ids needs --file" in r.stderr


@pytest.mark.parametrize("prefix", ["st", "u", "<", "zzzq"])
def test_completions_are_the_next_words_that_begin_with_the_typed_prefix(runs, prefix):
    """`prefix` (a word being typed; `--partial`): the listed words are exactly the vocabulary's
    words that begin with it (found here by str.startswith over the whole vocabulary), ranked by
    the full distribution, with the same probabilities; the reader and the command agree."""
    lstm, kn = runs
    for run in (load(lstm), load(kn)):
        lp = run.next_logprobs("the united")
        want = sorted(((w, float(lp[i])) for i, w in enumerate(run.vocab.words)
                       if w.startswith(prefix) and w != "<unk>"), key=lambda x: -x[1])
        got = run.next_words("the united", top=len(run.vocab), prefix=prefix)
        assert [w for w, _ in got] == [w for w, _ in want]
        assert [p for _, p in got] == pytest.approx([p for _, p in want])
        assert run.reader().feed("the united").next_words(3, prefix=prefix) == got[:3]
    r = lmlow("predict", kn, "the", "united", prefix, "--partial", "--top", "2", "--json")
    assert r.returncode == 0, r.stderr
    record = json.loads(r.stdout)
    assert record["context"] == ["the", "united"] and record["prefix"] == prefix
    assert [n["word"] for n in record["next"]] == [w for w, _ in want[:2]]
    text = lmlow("predict", kn, "the", "united", prefix, "--partial", check=True).stdout
    assert text.startswith(f"the united {prefix}* -> ")
    assert want or text.endswith("(no word of the vocabulary begins with it)\n")


def test_contexts_through_a_pipe_are_answered_as_they_come(runs):
    """`lmlow predict RUN --file /dev/stdin --json`, as a keyboard's or another program's
    pipe: each context is answered before the next is written (a reader that waited for the end
    of its input would leave the second readline waiting until the timeout), with what the
    API gives for it."""
    import os
    import selectors
    import subprocess
    import sys

    lstm, kn = runs
    p = subprocess.Popen([sys.executable, "-m", "lmlow.cli", "predict", lstm, "--file",
                          "/dev/stdin", "--json", "--top", "2", "--interpolate", kn],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    wait = selectors.DefaultSelector()
    wait.register(p.stdout, selectors.EVENT_READ)
    mixed = InterpolatedRun(load(lstm), load(kn), reset_lines=True)   # as predict mixes
    try:
        for context in ("the people", "the united states of"):
            p.stdin.write(context + "\n")
            p.stdin.flush()
            assert wait.select(timeout=120), "no answer before the next context was written"
            record = json.loads(p.stdout.readline())
            assert record["context"] == context.split()
            assert [n["word"] for n in record["next"]] == [w for w, _ in mixed.next_words(context, 2)]
    finally:
        p.stdin.close()
        p.wait(timeout=120)
    assert p.returncode == 0, p.stderr.read()


def test_threads_sets_the_model_commands_threads_and_0_follows_omp_num_threads(runs, capsys,
                                                                                monkeypatch):
    """`--threads` of the commands that run a model (they had none: a scorer started beside a
    training took every core): N sets torch's count; 0 keeps the count OMP_NUM_THREADS gave
    torch when it is set, else takes the cores the process may use."""
    import torch

    from conftest import cli
    from lmlow.cpus import available_cpus

    lstm, _ = runs
    before, other = torch.get_num_threads(), available_cpus() + 1
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        torch.set_num_threads(other)
        assert cli("predict", lstm, "the", "--threads", "1", capsys=capsys)[0] == 0
        assert torch.get_num_threads() == 1
        assert cli("predict", lstm, "the", capsys=capsys)[0] == 0
        assert torch.get_num_threads() == available_cpus()
        monkeypatch.setenv("OMP_NUM_THREADS", str(other))
        torch.set_num_threads(other)                # what torch read from it at start
        assert cli("eval", lstm, "--threads", "0", capsys=capsys)[0] == 0
        assert torch.get_num_threads() == other
    finally:
        torch.set_num_threads(before)


def test_a_cgroup_cpu_quota_v1_or_v2_caps_the_threads(tmp_path):
    """--threads 0 takes one share of the cores a quota allows: cgroup v1's cfs quota (it was
    read from v2's cpu.max only: 64 threads in a `docker --cpus 2` on a v1 host), and v2's set
    on a group above the process's own (a SLURM job's, its step below it)."""
    from lmlow.cpus import cgroup_quota

    proc = tmp_path / "cgroup"
    v1 = tmp_path / "v1"
    (v1 / "cpu" / "job").mkdir(parents=True)
    for folder, quota in ((v1 / "cpu", "-1"), (v1 / "cpu" / "job", "150000")):
        (folder / "cpu.cfs_quota_us").write_text(quota + "\n")
        (folder / "cpu.cfs_period_us").write_text("100000\n")
    proc.write_text("4:cpu,cpuacct:/job\n1:name=systemd:/job\n")
    assert cgroup_quota(v1, proc) == 2
    v2 = tmp_path / "v2"
    (v2 / "slurm" / "job_1" / "step_0").mkdir(parents=True)
    (v2 / "slurm" / "job_1" / "cpu.max").write_text("300000 100000\n")
    (v2 / "slurm" / "job_1" / "step_0" / "cpu.max").write_text("max 100000\n")
    proc.write_text("0::/slurm/job_1/step_0\n")
    assert cgroup_quota(v2, proc) == 3
    assert cgroup_quota(tmp_path / "none", proc) is None
