"""`lmlow export`: one step of an LSTM or Transformer run as a torch.export program, run by PyTorch alone
(torch.export.load, no lmlow import), gives the log-probabilities `lmlow score` gives (another
path: score batches whole lines through lmlow's scorer; the file steps word by word through
the program torch.export traced)."""
import json

import pytest
import torch

from conftest import lmlow


def _exported_logprobs(path, lines, grad=False):
    """Each line's per-token ln p from the file alone, all lines side by side as a recogniser
    steps its hypotheses: a fresh state, <eos> first, then the words (out of vocabulary:
    <unk>; a line that has ended is fed <eos> and its numbers ignored). ``grad``: stepped
    outside torch.no_grad(), checking that no output wants a gradient."""
    extra = {"vocabulary.txt": "", "lmlow.json": ""}
    step = torch.export.load(str(path), extra_files=extra).module()
    words, info = extra["vocabulary.txt"].split("\n"), json.loads(extra["lmlow.json"])
    index = {w: i for i, w in enumerate(words)}
    ids = [[info["eos_id"]] + [index.get(w, info["unk_id"]) for w in line.split()]
           + [info["eos_id"]] for line in lines]
    B = len(lines)
    if info["arch"] == "lstm":
        h = [torch.zeros(1, B, n) for n in info["state_sizes"]]
        state = (h, [t.clone() for t in h])
    else:
        state = ([torch.zeros(info["context"], B, info["memory_size"])
                  for _ in range(info["blocks"])], torch.zeros(B, dtype=torch.long))
    out = [[] for _ in lines]
    for t in range(max(map(len, ids)) - 1):
        now = torch.tensor([line[min(t, len(line) - 1)] for line in ids])
        with torch.set_grad_enabled(grad):
            lp, *state = step(now, *state)
        if grad:
            flat = [lp, *(t for part in state for t in (part if isinstance(part, list) else [part]))]
            assert not any(t.requires_grad for t in flat)
        for i, line in enumerate(ids):
            if t + 1 < len(line):
                out[i].append(lp[i, line[t + 1]].item())
    return words, info, out


@pytest.mark.parametrize("preset, tie, flags", [
    ("tiny", "no", ()), ("tiny", "no", ("--map-unseen-outputs",)), ("tiny", "yes", ()),
    ("transformer-tiny", "no", ("--map-unseen-outputs",))])
def test_the_exported_step_scores_as_lmlow_score(speech_corpus, vectors, tmp_path, preset, tie,
                                                 flags):
    """The Transformer's lines are longer than its 16-position context: the padded memory of
    the file drops its oldest keys as the model's own memory does."""
    run, pt2, text = tmp_path / "run", tmp_path / "m.pt2", tmp_path / "s.txt"
    init = "glove,glove-output" if tie == "no" else "glove"
    lmlow("train", speech_corpus, "--out", run, "--preset", preset, "--tie", tie, "--init",
          init, "--embeddings", vectors, "--extend-vocab", "--max-epochs", "1",
          "--threads", "1", check=True)
    lines = (speech_corpus / "valid.txt").read_text().splitlines()[:6] + ["the zzzunseen of"]
    text.write_text("\n".join(lines) + "\n")
    r = lmlow("export", run, "--out", pt2, *flags, check=True)
    assert r.stdout.startswith(f"wrote {pt2}: ") and "W1" not in r.stderr
    scored = [json.loads(x)["logprob"] for x in
              lmlow("score", run, text, *flags, check=True).stdout.splitlines()]
    words, info, exported = _exported_logprobs(pt2, lines)
    assert words == (run / "vocab.txt").read_text().split("\n")[:-1]
    assert info["arch"] == ("lstm" if preset == "tiny" else "transformer")
    assert max(map(len, scored)) > info.get("context", 0)
    for a, b in zip(exported, scored, strict=True):
        assert a == pytest.approx(b, rel=1e-5, abs=2e-5)   # score rounds to 1e-6
    # stepped without torch.no_grad(), as a loop in an app is: nothing keeps a graph (the
    # Transformer's did, through its memory, so a long loop's memory grew without end)
    _, _, first = _exported_logprobs(pt2, lines[:1], grad=True)
    assert first
    assert lmlow("export", run, "--out", pt2).stderr.endswith("exists; pass --force to overwrite it\n")


def test_an_ngram_run_and_other_names_are_refused(speech_corpus, tmp_path):
    r = lmlow("export", tmp_path / "nowhere", "--out", tmp_path / "x.ts")
    assert r.returncode == 1 and "x.ts: name it NAME.pt2" in r.stderr   # before the run is read
    assert not list(tmp_path.glob("x.*"))


def test_an_opened_runs_bias_scale_is_exported_a_tied_matrix_once_and_a_mixture_refused(
        speech_corpus, tmp_path):
    """export(lmlow.load(RUN, bias_scale=0)) wrote the trained bias (lambda 1: the file scored
    6.3 nats away from the run it was given); a tied model's matrix was stored twice (and
    counted twice in the printed size); a mixture was called "an n-gram run"."""
    from lmlow.errors import LmlowError
    from lmlow.export import GATES, export
    from lmlow.runs import InterpolatedRun, load

    run, pt2 = tmp_path / "run", tmp_path / "m.pt2"
    lmlow("train", speech_corpus, "--out", run, "--preset", "tiny", "--tie", "yes",
          "--max-epochs", "1", "--threads", "1", check=True)
    opened = load(run, bias_scale=0.0)
    written = export(opened, pt2)
    model = opened.model
    assert model.decoder.weight is model.encoder.weight
    assert written["parameters"] == (model.encoder.weight.numel() + model.decoder.bias.numel()
                                     + sum(getattr(rnn.lstm, f"{g}_l0").numel()
                                           for rnn in model.rnns for g in GATES))
    line = (speech_corpus / "valid.txt").read_text().splitlines()[0]
    _, info, exported = _exported_logprobs(pt2, [line])
    assert info["bias_scale"] == 0.0
    scaled = [lp for _, lp, _ in opened.score(line)]
    trained = [lp for _, lp, _ in load(run).score(line)]
    assert exported[0] == pytest.approx(scaled, rel=1e-5, abs=2e-5)
    assert exported[0] != pytest.approx(trained, rel=1e-3)
    for bad, message in ((123, "out = 123: expected text or a path"),
                         (None, "out = None: expected text or a path")):
        with pytest.raises(LmlowError, match=f"^lmlow.export: {message}"):
            export(opened, bad)
    with pytest.raises(LmlowError, match="a mixture of two runs"):
        export(InterpolatedRun(load(run), load(run), 0.5), tmp_path / "mix.pt2")
