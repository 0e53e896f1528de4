"""--map-unseen-inputs (lmlow/input_map.py): the fitted map against a known affine map, the
rows it touches and the ones it must leave alone, and the command line end to end on a real
(tiny) untied run with vectors for words its training text lacks."""
import hashlib
import json

import numpy as np
import pytest
import torch

from conftest import lmlow
from lmlow.config import Config
from lmlow.errors import LmlowError
from lmlow.input_map import FIT_MIN, affine_map, apply_map, map_unseen_inputs


def test_the_fit_recovers_a_known_affine_map():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 5, generator=g, dtype=torch.float64)
    a, b = torch.randn(5, 3, generator=g, dtype=torch.float64), torch.randn(3, generator=g, dtype=torch.float64)
    w = affine_map(x, x @ a + b)
    new = torch.randn(7, 5, generator=g, dtype=torch.float64)
    assert torch.allclose(apply_map(w, new), new @ a + b, atol=1e-10)


class _Model(torch.nn.Module):
    def __init__(self, rows: torch.Tensor):
        super().__init__()
        self.encoder = torch.nn.Embedding(*rows.shape)
        with torch.no_grad():
            self.encoder.weight.copy_(rows)


def _vector_file(path, words, vec: torch.Tensor) -> torch.Tensor:
    """Write ``vec`` as a GloVe text file for the first len(vec) words; the vectors as read
    back (rounded to the file's 6 decimals)."""
    path.write_text("".join(f"{w} " + " ".join(f"{v:.6f}" for v in row.tolist()) + "\n"
                            for w, row in zip(words, vec)))
    return torch.tensor(np.loadtxt(path, usecols=range(1, vec.shape[1] + 1)), dtype=torch.float32)


def test_only_the_unread_words_with_a_vector_move_and_land_where_the_map_puts_them(tmp_path):
    """30 words read >= FIT_MIN times whose trained rows are an affine image of their vectors,
    2 read 3 times, 3 never read (with a vector), 1 never read without a vector: the 3 get
    exactly the affine image of their vectors, every other row stays bitwise."""
    g = torch.Generator().manual_seed(1)
    dim = 4
    a, b = torch.randn(dim, dim, generator=g), torch.randn(dim, generator=g)
    words = [f"w{i}" for i in range(36)]
    counts = np.array([FIT_MIN + i for i in range(30)] + [3, 3, 0, 0, 0, 0])
    vec = _vector_file(tmp_path / "v.txt", words, torch.randn(35, dim, generator=g))  # w35: none
    trained = torch.randn(36, dim, generator=g)
    trained[:30] = vec[:30] @ a + b
    trained[32:35] = 0.9 * vec[32:35]              # unread: the vectors, shrunk by weight decay
    model = _Model(trained)
    cfg = Config(tie=False, init=("glove",), embeddings=str(tmp_path / "v.txt"))
    got = map_unseen_inputs(model, cfg, words, counts, "run")
    after = model.encoder.weight.detach()
    assert (got.rows, got.fit_words) == (3, 30) and got.r2 == pytest.approx(1.0, abs=1e-9)
    assert torch.allclose(after[32:35], vec[32:35] @ a + b, atol=1e-4)
    assert torch.equal(after[:32], trained[:32]) and torch.equal(after[35], trained[35])


@pytest.mark.parametrize("settings, message", [
    (dict(tie=True, init=("glove",), embeddings="v.txt"), "untied runs"),
    (dict(tie=False, init=("random",), embeddings="v.txt"), "initialised from vectors"),
    (dict(tie=False, init=("glove",), embeddings="v.txt", freeze_input=True), "were frozen"),
    (dict(tie=False, init=("glove",), embeddings="nowhere.txt"), "nowhere.txt: the run's --embeddings"),
    (dict(tie=False, init=("glove",), embeddings="v.txt"), "v.txt: the run's input rows of its unread "
     r"words are not these vectors \(cosine -1.000\)"),
])
def test_runs_it_does_not_apply_to_are_refused_in_one_line(settings, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "v.txt").write_text("a 0.1 0.2\nb 0.2 0.1\n")
    with pytest.raises(LmlowError, match=message):
        map_unseen_inputs(_Model(torch.tensor([[-0.1, -0.2], [0.0, 0.0]])), Config(**settings), ["a", "b"],
                          np.array([0, 9]), "run")


def test_rows_that_adam_decay_has_worn_away_are_mapped_without_the_check(tmp_path):
    """Adam with L2 decay moves unread rows off their vectors' direction, so the same-vectors
    check cannot apply there: those rows are mapped; with SGD the same rows are refused."""
    vec = [[0.5, -1.0], [1.0, 0.25], [-0.5, 0.5], [2.0, 1.0], [-1.0, -0.5], [0.25, 2.0],
           [1.5, -0.75], [0.5, 0.25]]
    (tmp_path / "v.txt").write_text("".join(f"w{i} {a} {b}\n" for i, (a, b) in enumerate(vec)))
    counts = np.array([FIT_MIN] * 7 + [0])
    rows = 2.0 * torch.tensor(vec)                           # the map: twice the vector
    rows[7] = torch.tensor([0.001, -0.002])                  # worn away by Adam's decay
    words = [f"w{i}" for i in range(8)]
    adam = Config(tie=False, init=("glove",), embeddings=str(tmp_path / "v.txt"), optimizer="adam", wdecay=1e-6)
    model = _Model(rows)
    assert map_unseen_inputs(model, adam, words, counts, "run").rows == 1
    assert torch.allclose(model.encoder.weight[7].detach(), torch.tensor([1.0, 0.5]), atol=1e-5)
    sgd = Config(tie=False, init=("glove",), embeddings=str(tmp_path / "v.txt"), optimizer="sgd")
    with pytest.raises(LmlowError, match="not these vectors"):
        map_unseen_inputs(_Model(rows), sgd, words, counts, "run")


def test_eval_and_score_with_the_map_on_a_real_run(speech_corpus, vectors, tmp_path, monkeypatch):
    """A tiny untied run whose vectors also hold 5 words of the test split that its training
    text lacks: eval maps exactly the rows of the vector words it never read and changes the
    perplexity; score gives the
    same numbers as without the map for a sentence of words it read, and different ones
    after an unread word."""
    train_words = set((speech_corpus / "train.txt").read_text().split())
    extra = [w for w in dict.fromkeys((speech_corpus / "test.txt").read_text().split())
             if w not in train_words][:5]
    assert len(extra) == 5
    lines = vectors.read_text().splitlines()
    vec = tmp_path / "v.txt"           # an extra word's vector: a known word's, shifted
    vec.write_text("\n".join(lines + [w + " " + " ".join(f"{float(x) + 0.01 * i:.5f}" for x in
                                      lines[i].split()[1:]) for i, w in enumerate(extra)]) + "\n")
    run, cache = tmp_path / "run", tmp_path / "cache"
    r = lmlow("train", speech_corpus, "--out", run, "--preset", "tiny", "--tie", "no", "--init",
              "glove", "--embeddings", vec, "--extend-vocab", "--max-epochs", "2", "--threads", "1",
              cache=cache)
    assert r.returncode == 0, r.stderr
    plain = json.loads(lmlow("eval", run, "--split", "test", "--json", cache=cache, check=True).stdout)
    mapped = json.loads(lmlow("eval", run, "--split", "test", "--json", "--map-unseen-inputs",
                              cache=cache, check=True).stdout)
    # the words with a vector that the training text never has (<eos> ends every line; the
    # fixture's vectors also hold <unk>, which a K=0 run never reads)
    unread = {line.split()[0] for line in vec.read_text().splitlines()} - train_words - {"<eos>"}
    assert set(extra) <= unread and len(unread) <= 6
    assert mapped["mapped_inputs"]["rows"] == len(unread) and mapped["tokens"] == plain["tokens"]
    assert mapped["perplexity"] != plain["perplexity"]
    text = lmlow("eval", run, "--map-unseen-inputs", cache=cache, check=True).stdout
    assert f"input rows of {len(unread)} words never read in training mapped" in text.splitlines()[0]
    seen = [w for w in (speech_corpus / "train.txt").read_text().split()[:6]]
    f = tmp_path / "s.txt"
    f.write_text(" ".join(seen) + "\n" + f"{seen[0]} {extra[0]} {seen[1]}\n")
    a = [json.loads(x) for x in lmlow("score", run, f, cache=cache, check=True).stdout.splitlines()]
    r = lmlow("score", run, f, "--map-unseen-inputs", cache=cache, check=True)
    b = [json.loads(x) for x in r.stdout.splitlines()]
    assert "mapped into the trained space" in r.stderr
    assert a[0] == b[0]
    assert a[1]["log10prob"][:2] == b[1]["log10prob"][:2] and a[1]["log10prob"][2] != b[1]["log10prob"][2]
    # the run folder keeps the mapped evaluation beside its own (lmlow.runs.evaluation, what
    # the demo and experiments/claims.py read): the record `eval --json` printed, stamped
    from lmlow.rundir import RunDir
    from lmlow.runs import evaluation

    monkeypatch.setenv("LMLOW_CACHE_DIR", str(cache))
    kept = evaluation(RunDir(run), "test", map_unseen_inputs=True)
    assert json.loads((run / "eval_mapped_test.json").read_text()) == kept
    assert kept["mapped_inputs"] == pytest.approx(mapped["mapped_inputs"], rel=1e-9)  # R^2: LAPACK
    assert kept["perplexity"] == pytest.approx(mapped["perplexity"], rel=1e-6)
    assert kept["checkpoint_mtime"] == (run / "best.pt").stat().st_mtime
    assert kept["checkpoint_sha256"] == hashlib.sha256((run / "best.pt").read_bytes()).hexdigest()
    assert evaluation(RunDir(run), "test")["perplexity"] == pytest.approx(plain["perplexity"], rel=1e-6)


def test_a_run_stopped_inside_its_first_epoch_is_refused_and_a_fraction_run_is_mapped(
        speech_corpus, vectors, tmp_path):
    """The maps pick their rows by the counts of the run's training text: a run stopped after
    9 tokens (--max-steps 1) left the rows of every word it had not reached as they were, and
    the map said "fitted on 230 words read >= 6 times, R^2 0.995". Each flag, through eval,
    score and the API, is refused in one line naming the run, and nothing is written. A
    --train-fraction run of one epoch read its part of the text once: the counts are that
    part's, so the words of the other part count as never read and their rows are mapped."""
    import lmlow as api

    run, cache = tmp_path / "run", tmp_path / "cache"
    lmlow("train", speech_corpus, "--out", run, "--preset", "tiny", "--tie", "no", "--init",
          "glove,glove-output", "--embeddings", vectors, "--extend-vocab", "--max-steps", "1",
          "--batch-size", "1", "--bptt", "5", "--threads", "1", cache=cache, check=True)
    before = sorted(p.name for p in run.iterdir())
    for flag, args in (("--map-unseen-inputs", ("eval", run)),
                       ("--map-unseen-outputs", ("eval", run, "--checkpoint", "last")),
                       ("--map-unseen-inputs", ("score", run, speech_corpus / "valid.txt"))):
        r = lmlow(*args, flag, "--threads", "1", cache=cache)
        assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert f"{run}: {flag} needs a run trained for at least one full epoch" in r.stderr
        assert "saved after reading 9" in r.stderr and r.stdout == ""
    with pytest.raises(LmlowError, match="at least one full epoch"):
        api.load(run, map_unseen_outputs=True)
    assert sorted(p.name for p in run.iterdir()) == before
    half = tmp_path / "half"
    lmlow("train", speech_corpus, "--out", half, "--preset", "tiny", "--tie", "no", "--init",
          "glove", "--embeddings", vectors, "--extend-vocab", "--train-fraction", "0.5",
          "--max-epochs", "1", "--threads", "1", cache=cache, check=True)
    got = json.loads(lmlow("eval", half, "--json", "--map-unseen-inputs", cache=cache,
                           check=True).stdout)["mapped_inputs"]
    lines = [line.split() + ["<eos>"] for line in (speech_corpus / "train.txt").read_text().splitlines()]
    read, tokens = set(), sum(map(len, lines)) // 2         # the lines before the cut
    for line in lines:
        tokens -= len(line)
        if tokens < 0:
            break
        read.update(line)
    vector_words = {line.split()[0] for line in vectors.read_text().splitlines()}
    everything = {w for line in lines for w in line}
    assert len(vector_words - read) > len(vector_words - everything)
    assert got["rows"] == len(vector_words - read)


@pytest.mark.slow
def test_both_maps_on_a_transformer_run_and_the_evaluations_a_run_keeps(speech_corpus, vectors,
                                                                        tmp_path, monkeypatch):
    """The maps act on the embedding rows, which the Transformer has as the LSTM does: on a
    tiny untied Transformer run with extended vocabulary, `eval --map-unseen-outputs` maps the
    output rows of the words never predicted (the vector words the text lacks and <unk>), both
    flags together give what each map says on its own, and lmlow.runs.evaluation keeps each
    kind of evaluation in the file lmlow.rundir.evaluation_name names (what the demo and
    experiments/claims.py read), recomputed for nothing."""
    from lmlow.rundir import RunDir, evaluation_name
    from lmlow.runs import evaluation

    run, cache = tmp_path / "run", tmp_path / "cache"
    r = lmlow("train", speech_corpus, "--out", run, "--preset", "transformer-tiny", "--tie", "no",
              "--init", "glove,glove-output", "--embeddings", vectors, "--extend-vocab",
              "--max-epochs", "1", "--threads", "1", cache=cache)
    assert r.returncode == 0, r.stderr
    train_words = set((speech_corpus / "train.txt").read_text().split()) | {"<eos>"}
    unread = {line.split()[0] for line in vectors.read_text().splitlines()} - train_words
    assert "<unk>" in unread          # the fixture's vectors hold <unk>: never a target at K=0

    def ev(*flags):
        return json.loads(lmlow("eval", run, "--json", *flags, cache=cache, check=True).stdout)
    plain, outputs = ev(), ev("--map-unseen-outputs")
    both = ev("--map-unseen-inputs", "--map-unseen-outputs")
    assert outputs["mapped_outputs"]["rows"] == len(unread) and "mapped_inputs" not in outputs
    assert outputs["perplexity"] != plain["perplexity"]
    assert both["mapped_outputs"] == pytest.approx(outputs["mapped_outputs"], rel=1e-9)
    # <unk> is never read either, but the input map applies to the words of the vectors the
    # run never read: the same set
    assert both["mapped_inputs"]["rows"] == len(unread)
    monkeypatch.setenv("LMLOW_CACHE_DIR", str(cache))
    for flags, record in (((False, True), outputs), ((True, True), both), ((False, False), plain)):
        kept = evaluation(RunDir(run), "valid", *flags)
        path = run / f"eval_{evaluation_name(*flags)}_valid.json"
        assert json.loads(path.read_text()) == kept      # an empty bin's NaN: null in both
        assert kept["perplexity"] == pytest.approx(record["perplexity"], rel=1e-6)
        stamp = path.stat().st_mtime_ns
        assert evaluation(RunDir(run), "valid", *flags) == kept and path.stat().st_mtime_ns == stamp
    assert {p.name for p in run.glob("eval_*_valid.json")} == {
        "eval_best_valid.json", "eval_mapped_outputs_valid.json", "eval_mapped_both_valid.json"}


class _Decoder(torch.nn.Module):
    def __init__(self, rows: torch.Tensor):
        super().__init__()
        self.decoder = torch.nn.Linear(rows.shape[1], rows.shape[0])
        with torch.no_grad():
            self.decoder.weight.copy_(rows)


def test_only_the_unpredicted_output_rows_with_a_vector_move_and_the_bias_stays(tmp_path):
    """The output side: rows of the words never predicted (count 0) with a vector get the
    affine image of their vectors fitted on the words predicted >= FIT_MIN times, however far
    training pushed them; every other row and the whole bias stay bitwise."""
    from lmlow.input_map import map_unseen_outputs

    g = torch.Generator().manual_seed(4)
    dim = 3
    a, b = torch.randn(dim, dim, generator=g), torch.randn(dim, generator=g)
    words = [f"w{i}" for i in range(26)]
    counts = np.array([FIT_MIN + i for i in range(20)] + [1, 0, 0, 0, 0, 2])
    vec = _vector_file(tmp_path / "v.txt", words, torch.randn(25, dim, generator=g))  # w25: none
    trained = torch.randn(26, dim, generator=g)
    trained[:20] = vec[:20] @ a + b
    trained[21:25] = -40.0 * vec[21:25].abs()          # pushed far down: no check refuses them
    model = _Decoder(trained)
    bias = model.decoder.bias.detach().clone()
    cfg = Config(tie=False, init=("glove", "glove-output"), embeddings=str(tmp_path / "v.txt"))
    got = map_unseen_outputs(model, cfg, words, counts, "run")
    after = model.decoder.weight.detach()
    assert (got.rows, got.fit_words) == (4, 20) and got.r2 == pytest.approx(1.0, abs=1e-9)
    assert torch.allclose(after[21:25], vec[21:25] @ a + b, atol=1e-4)
    assert torch.equal(after[:21], trained[:21]) and torch.equal(after[25], trained[25])
    assert torch.equal(model.decoder.bias.detach(), bias)
    assert got.text().startswith("output rows of 4 words never predicted in training mapped")


@pytest.mark.parametrize("settings, message", [
    (dict(tie=True, init=("glove", "glove-output"), embeddings="v.txt"), "untied runs"),
    (dict(tie=False, init=("glove",), embeddings="v.txt"), r"initialised from vectors \(--init glove-output\)"),
    (dict(tie=False, init=("glove-output",), embeddings="v.txt", freeze_output=True), "were frozen"),
    (dict(tie=False, init=("glove-output",), embeddings="nowhere.txt"),
     "nowhere.txt: the run's --embeddings file is not there; --map-unseen-outputs"),
])
def test_runs_the_output_map_does_not_apply_to_are_refused_in_one_line(settings, message, tmp_path,
                                                                       monkeypatch):
    from lmlow.input_map import map_unseen_outputs

    monkeypatch.chdir(tmp_path)
    (tmp_path / "v.txt").write_text("a 0.1 0.2\nb 0.2 0.1\n")
    with pytest.raises(LmlowError, match=message):
        map_unseen_outputs(_Decoder(torch.tensor([[-0.1, -0.2], [0.0, 0.0]])), Config(**settings),
                           ["a", "b"], np.array([0, 9]), "run")


def test_eval_and_score_with_the_output_map_on_a_real_run(speech_corpus, vectors, tmp_path):
    """A tiny untied run with pretrained output rows and vectors for 5 test words its training
    text lacks: `eval --map-unseen-outputs` maps exactly the output rows of the vector words
    never predicted, says so, and changes the perplexity; with both flags both are reported;
    `score` says so on stderr; a run without pretrained output rows is refused in one line."""
    train_words = set((speech_corpus / "train.txt").read_text().split())
    extra = [w for w in dict.fromkeys((speech_corpus / "test.txt").read_text().split())
             if w not in train_words][:5]
    lines = vectors.read_text().splitlines()
    vec = tmp_path / "v.txt"
    vec.write_text("\n".join(lines + [w + " " + " ".join(f"{float(x) + 0.01 * i:.5f}" for x in
                                      lines[i].split()[1:]) for i, w in enumerate(extra)]) + "\n")
    run, cache = tmp_path / "run", tmp_path / "cache"
    r = lmlow("train", speech_corpus, "--out", run, "--preset", "tiny", "--tie", "no", "--init",
              "glove,glove-output", "--embeddings", vec, "--extend-vocab", "--max-epochs", "2",
              "--threads", "1", cache=cache)
    assert r.returncode == 0, r.stderr
    plain = json.loads(lmlow("eval", run, "--split", "test", "--json", cache=cache, check=True).stdout)
    out = json.loads(lmlow("eval", run, "--split", "test", "--json", "--map-unseen-outputs",
                           cache=cache, check=True).stdout)
    unpredicted = {line.split()[0] for line in vec.read_text().splitlines()} - train_words - {"<eos>"}
    assert set(extra) <= unpredicted
    assert out["mapped_outputs"]["rows"] == len(unpredicted) and "mapped_inputs" not in out
    assert out["tokens"] == plain["tokens"] and out["perplexity"] != plain["perplexity"]
    both = json.loads(lmlow("eval", run, "--split", "test", "--json", "--map-unseen-outputs",
                            "--map-unseen-inputs", cache=cache, check=True).stdout)
    # the same map in both calls (its fit's r2 to the last bits: LAPACK's least squares may
    # round differently in another process, seen once as 1 ulp)
    assert both["mapped_outputs"] == pytest.approx(out["mapped_outputs"], rel=1e-12, abs=0)
    assert both["mapped_inputs"]["rows"] == len(unpredicted)
    text = lmlow("eval", run, "--map-unseen-outputs", cache=cache, check=True).stdout
    assert f"output rows of {len(unpredicted)} words never predicted in training" in text.splitlines()[0]
    f = tmp_path / "s.txt"
    f.write_text(" ".join(sorted(train_words)[:4]) + "\n")
    r = lmlow("score", run, f, "--map-unseen-outputs", cache=cache, check=True)
    assert "never predicted in training mapped" in r.stderr and json.loads(r.stdout.splitlines()[0])
    other = tmp_path / "other"
    assert lmlow("train", speech_corpus, "--out", other, "--preset", "tiny", "--max-steps", "2",
                 "--threads", "1", cache=cache).returncode == 0
    r = lmlow("eval", other, "--map-unseen-outputs", cache=cache)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1
    assert "--map-unseen-outputs needs a run whose output rows" in r.stderr
    # the vectors reshuffled among their words since the run read them: each map would place
    # other vectors (the output map has no check of its own), so both are refused by the
    # sha256 the run recorded
    rows = vec.read_text().splitlines()
    values = [line.split(" ", 1)[1] for line in rows]
    vec.write_text("\n".join(f"{line.split()[0]} {v}" for line, v in
                             zip(rows, values[1:] + values[:1])) + "\n")
    for flag in ("--map-unseen-outputs", "--map-unseen-inputs"):
        r = lmlow("eval", run, "--split", "test", flag, cache=cache)
        assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "not the file this run was initialised from" in r.stderr and flag in r.stderr
