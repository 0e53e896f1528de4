"""Behaviour through the public interfaces, on the small real corpus (Washington's addresses,
6.3k training tokens): NT-ASGD switches when the rule says and saves averaged weights; label
smoothing flattens the predictions; --no-unk never samples <unk> where the model otherwise
does; weight drop masks the recurrent weights while the fused LSTM kernel still runs the
whole sequence; perplexity with and without <unk> and per frequency bin equal a hand
computation; GloVe-initialised input and output rows equal the vector file.

Training runs use the tiny preset on the CPU in fp32 with one thread, so their numbers are
deterministic; each takes a few seconds.
"""
import json
import math
from collections import Counter

import numpy as np
import pytest
import torch

from lmlow.checkpoint import load_checkpoint
from lmlow.config import build_config
from lmlow.evaluate import evaluate_logprobs, lstm_outputs
from lmlow.generate import generate
from lmlow.model import AWDLSTM, WeightDropLSTM
from lmlow.runs import load
from lmlow.train import train


def tiny(corpus, **kw):
    return build_config("tiny", None, corpus=str(corpus), threads=1, device="cpu",
                        precision="fp32", **kw)


def metrics(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


# --------------------------------------------------------------------------- a. NT-ASGD

def nt_asgd_switch_epoch(losses, nonmono):
    """The epoch at whose end NT-ASGD switches (Merity et al.; lmlow.train._epoch_end):
    the first epoch whose validation loss is worse than the best of the history that excludes
    the last ``nonmono`` epochs, once the history is longer than ``nonmono``."""
    history = []
    for epoch, loss in enumerate(losses, 1):
        if len(history) > nonmono and loss > min(history[:-nonmono]):
            return epoch
        history.append(loss)
    return None


def test_nt_asgd_switches_when_validation_stalls_and_saves_averaged_weights(speech_corpus, tmp_path):
    """SGD at lr 30 soon stops improving on validation. The switch to ASGD happens at the end
    of the epoch the rule names (derived here from the logged losses; measured: epoch 8 of
    10, after epoch 6 was already worse than epoch 5 but still inside the nonmono=2 window):
    the ASGD optimiser in last.pt has taken exactly the updates made after that epoch, the
    rows say "asgd" from the next epoch on, and best.pt (an epoch after the switch, validated
    on averaged weights) holds ASGD's running average 'ax' of that epoch, not the raw weights.
    Which averaged epoch is best depends on the CPU's rounding (the last on the Intel and AVX-512
    AMD CPUs, the 9th of 10 on an AMD CPU without AVX-512, by 0.005): when it is not the last,
    the same run is trained again to that epoch (no schedule: the same updates, checked on its
    logged losses) for its 'ax'. 9-18 s."""
    nonmono, epochs, run = 2, 10, tmp_path / "run"

    def nt_asgd(max_epochs):
        return tiny(speech_corpus, optimizer="sgd", lr=30.0, asgd=True, nonmono=nonmono,
                    max_epochs=max_epochs)

    train(nt_asgd(epochs), run, quiet=True)
    rows = metrics(run)
    assert [r["epoch"] for r in rows] == list(range(1, epochs + 1))
    losses = [r["valid_loss"] for r in rows]
    switch = nt_asgd_switch_epoch(losses, nonmono)
    assert switch is not None and switch < epochs, f"validation never stalled: {losses}"
    # the window mattered: some epoch before the switch was already worse than an earlier one
    assert any(losses[e] > min(losses[:e]) for e in range(1, switch - 1)), losses
    assert [r["optimizer"] for r in rows] == ["sgd"] * switch + ["asgd"] * (epochs - switch)

    last = load_checkpoint(run / "last.pt")
    assert last["state"]["asgd"] is True
    opt_state = last["optimizer"]["state"]
    names = [n for n, _ in load(run).model.named_parameters()]    # the optimiser's order
    assert len(opt_state) == len(names)
    updates_after_switch = rows[-1]["step"] - rows[switch - 1]["step"]
    for i in range(len(names)):
        assert {"ax", "eta", "mu", "step"} <= set(opt_state[i]), "not an ASGD state"
        assert int(opt_state[i]["step"]) == updates_after_switch   # created at the switch

    best_epoch = 1 + int(np.argmin(losses))
    assert best_epoch > switch, f"expected an averaged model to be the best: {losses}"
    at_best = last
    if best_epoch < epochs:
        again = tmp_path / "to-best"
        train(nt_asgd(best_epoch), again, quiet=True)
        assert [r["valid_loss"] for r in metrics(again)] == losses[:best_epoch]
        at_best = load_checkpoint(again / "last.pt")
    best = load_checkpoint(run / "best.pt")["model"]
    for i, name in enumerate(names):
        ax = at_best["optimizer"]["state"][i]["ax"]
        assert torch.equal(best[name], ax), f"best.pt {name} is not ASGD's average"
        raw = at_best["model"][name]
        assert not torch.allclose(raw, ax), f"{name}: average equals the raw weights"

    # best.pt is the model that was validated: its loss is the logged one; last.pt holds the
    # raw weights and the average, and `--checkpoint last` scores the average, as the last
    # epoch's validation did (the raw weights, scored before, differ: checked above)
    assert load(run).evaluate("valid").cross_entropy == pytest.approx(losses[best_epoch - 1],
                                                                      abs=1e-4)
    last_loss = load(run, checkpoint="last").evaluate("valid").cross_entropy
    assert last_loss == pytest.approx(losses[-1], abs=1e-4)


def test_nt_asgd_rule_by_hand():
    """The helper the test above relies on, on sequences worked out by hand."""
    assert nt_asgd_switch_epoch([5, 4, 4.5, 3], 1) is None    # 4.5 < min([5]), 3 < min([5, 4])
    assert nt_asgd_switch_epoch([5, 4, 4.5, 4.2], 1) == 4     # 4.2 > min([5, 4])
    assert nt_asgd_switch_epoch([5, 5.5, 6], 1) == 3          # epoch 2: history too short
    assert nt_asgd_switch_epoch([5, 6, 7, 8], 2) == 4         # history[:-2] = [5] at epoch 4
    assert nt_asgd_switch_epoch([5, 4, 3, 2], 1) is None


# --------------------------------------------------------------------------- b. label smoothing

def prediction_stats(run, split):
    """Mean entropy, mean top probability and mean cross-entropy against the uniform
    distribution (-mean_j log p_j) of the model's next-word distributions on ``split``, and
    its ordinary cross-entropy there."""
    r = load(run)
    ids = r.corpus().encode(split).ids
    ent = top = uni = n = 0.0
    with torch.no_grad():
        for out, y, _ in lstm_outputs(r.model, ids, r.vocab.eos_id, 10, 16):
            lp = torch.log_softmax(r.model.logits(out).double(), -1)
            ent += float(-(lp.exp() * lp).sum())
            top += float(lp.exp().max(-1).values.sum())
            uni += float(-lp.mean(-1).sum())
            n += len(y)
    return {"entropy": ent / n, "top": top / n, "uniform_ce": uni / n,
            "ce": r.evaluate(split).cross_entropy}


def test_label_smoothing_flattens_the_predictions(speech_corpus, tmp_path):
    """Same seed, eps 0 vs eps 0.3 (uniform prior), 3 epochs. The smoothed loss adds
    eps x (-mean_j log p_j), which only falls when every word gets more probability, so the
    smoothed model's predictions on valid are flatter: higher entropy (measured 6.80 vs 6.30
    nats), lower top probability (0.040 vs 0.062), lower cross-entropy against uniform (7.77
    vs 8.05 nats).
    The unsmoothed model, which minimises exactly the training cross-entropy, fits the
    training text better (5.84 vs 5.96 nats, both measured in eval mode); on valid the two are
    within 0.1 nats."""
    runs = {}
    for eps in (0.0, 0.3):
        runs[eps] = tmp_path / f"eps{eps}"
        train(tiny(speech_corpus, label_smoothing=eps, smoothing_prior="uniform", max_epochs=3,
                   seed=1), runs[eps], quiet=True)
    plain, smooth = (prediction_stats(runs[e], "valid") for e in (0.0, 0.3))
    assert smooth["entropy"] > plain["entropy"] + 0.2, (plain, smooth)
    assert smooth["top"] < plain["top"], (plain, smooth)
    assert smooth["uniform_ce"] < plain["uniform_ce"] - 0.1, (plain, smooth)
    assert abs(smooth["ce"] - plain["ce"]) < 0.1, (plain, smooth)
    train_plain, train_smooth = (load(runs[e]).evaluate("train").cross_entropy for e in (0.0, 0.3))
    assert train_plain < train_smooth, (train_plain, train_smooth)


# --------------------------------------------------------------------------- c. --no-unk

def test_no_unk_never_samples_unk_where_the_model_does(speech_corpus, tmp_path):
    """With K=3 a quarter of the training tokens are <unk>, so sampled text has many <unk>
    (the control: 41 of 500 tokens); with no_unk and the same seed, none of 500, and the
    samples are as long and otherwise made of the vocabulary's words."""
    run = tmp_path / "run"
    train(tiny(speech_corpus, unk_threshold=3, max_epochs=1), run, quiet=True)
    vocab = load(run).vocab
    assert vocab.counts[vocab.unk_id] / sum(vocab.counts) > 0.2
    control = generate(run, words=100, samples=5, seed=1, no_unk=False)
    clean = generate(run, words=100, samples=5, seed=1, no_unk=True)
    flat_control = [t for s in control for t in s]
    flat_clean = [t for s in clean for t in s]
    assert flat_control.count("<unk>") >= 10
    assert "<unk>" not in flat_clean
    assert [len(s) for s in clean] == [100] * 5 and set(flat_clean) <= set(vocab.words)
    assert len(set(flat_clean)) > 50       # still sampling the vocabulary, not one word


# --------------------------------------------------------------------------- d. weight drop

class LSTMSpy:
    """Records the input and the flat weights of every call of the fused kernel."""

    def __init__(self, real):
        self.real, self.calls = real, []

    def __call__(self, *args):
        inp, _, weights = args[0], args[1], args[2]
        self.calls.append({"steps": inp.shape[0], "w_ih": weights[0].detach().clone(),
                           "w_hh": weights[1].detach().clone()})
        return self.real(*args)


@pytest.fixture
def lstm_spy(monkeypatch):
    spy = LSTMSpy(torch._VF.lstm)
    monkeypatch.setattr(torch._VF, "lstm", spy)
    return spy


@pytest.mark.parametrize("wdrop", [0.2, 0.5])
def test_weight_drop_masks_recurrent_weights_in_one_fused_call(lstm_spy, wdrop):
    """Training mode: the fused kernel (torch._VF.lstm, i.e. aten::lstm) is called once for the
    whole 12-step sequence, with a hidden-to-hidden matrix whose entries are either 0 (a
    fraction wdrop of them) or the weight / (1 - wdrop); the input matrix is untouched; the
    mask changes between calls; dropped entries get no gradient. Eval mode: the weights
    pass unmasked."""
    torch.manual_seed(0)
    layer = WeightDropLSTM(10, 64, wdrop).train()
    w = layer.lstm.weight_hh_l0
    x = torch.randn(12, 3, 10)
    hidden = (torch.zeros(1, 3, 64), torch.zeros(1, 3, 64))

    out, _ = layer(x, hidden)
    assert len(lstm_spy.calls) == 1 and lstm_spy.calls[0]["steps"] == 12   # no per-step loop
    call = lstm_spy.calls[0]
    assert torch.equal(call["w_ih"], layer.lstm.weight_ih_l0.detach())
    dropped = call["w_hh"] == 0
    assert abs(dropped.double().mean().item() - wdrop) < 0.03      # 16384 entries: sd 0.004
    torch.testing.assert_close(call["w_hh"][~dropped], w.detach()[~dropped] / (1 - wdrop))

    # the masked matrix is the one the output was computed with: a plain LSTM given it agrees
    plain = torch.nn.LSTM(10, 64)
    plain.load_state_dict(layer.lstm.state_dict())
    with torch.no_grad():
        plain.weight_hh_l0.copy_(call["w_hh"])
        torch.testing.assert_close(out, plain(x, hidden)[0])

    out.pow(2).sum().backward()
    assert (w.grad[dropped] == 0).all() and (w.grad[~dropped] != 0).float().mean() > 0.99

    layer(x, hidden)
    assert not torch.equal(lstm_spy.calls[2]["w_hh"] == 0, dropped)   # a new mask per call
    # (calls[1] was the plain reference)

    layer.eval()
    layer(x, hidden)
    assert len(lstm_spy.calls) == 4          # 3 ours + 1 from the plain reference
    assert torch.equal(lstm_spy.calls[-1]["w_hh"], w.detach())


def test_awd_lstm_drops_every_layer_in_training_only(lstm_spy):
    """The full model: one fused call per layer over the whole sequence, each layer's
    recurrent matrix masked in training, unmasked in eval; the eval output is deterministic."""
    torch.manual_seed(0)
    m = AWDLSTM(50, 16, 32, 3, 16, tie=True, wdrop=0.4)
    words = torch.randint(0, 50, (9, 2))
    m.train()
    m(words, m.init_hidden(2))
    assert [c["steps"] for c in lstm_spy.calls] == [9, 9, 9]
    for c, rnn in zip(lstm_spy.calls, m.rnns):
        frac = (c["w_hh"] == 0).double().mean().item()
        assert 0.3 < frac < 0.5, frac
        kept = c["w_hh"] != 0
        torch.testing.assert_close(c["w_hh"][kept], rnn.lstm.weight_hh_l0.detach()[kept] / 0.6)
    lstm_spy.calls.clear()
    m.eval()
    a = m(words, m.init_hidden(2))[0]
    b = m(words, m.init_hidden(2))[0]
    assert torch.equal(a, b) and len(lstm_spy.calls) == 6
    for c, rnn in zip(lstm_spy.calls[:3], m.rnns):
        assert torch.equal(c["w_hh"], rnn.lstm.weight_hh_l0.detach())


# --------------------------------------------------------------------------- e. evaluation

def test_perplexity_excluding_unk_and_bins_by_hand():
    """Ten tokens whose probabilities and training counts are chosen by hand."""
    # id:        0 <eos>, 1 <unk>, 2 a, 3 b, 4 c, 5 d (embedding-only word), 6 e
    counts = np.array([7, 4, 1, 3, 150, 0, 50])
    ids = np.array([2, 1, 3, 0, 1, 4, 5, 6, 3, 0])
    p = np.array([0.1, 0.2, 0.05, 0.5, 0.25, 0.4, 0.01, 0.3, 0.08, 0.6])
    ev = evaluate_logprobs("valid", ids, np.log(p), counts, unk_id=1)

    assert ev.tokens == 10 and ev.unk_tokens == 2
    all_prod = 0.1 * 0.2 * 0.05 * 0.5 * 0.25 * 0.4 * 0.01 * 0.3 * 0.08 * 0.6
    assert ev.perplexity == pytest.approx(all_prod ** (-1 / 10), rel=1e-12)
    assert ev.cross_entropy == pytest.approx(-math.log(all_prod) / 10, rel=1e-12)
    no_unk = 0.1 * 0.05 * 0.5 * 0.4 * 0.01 * 0.3 * 0.08 * 0.6          # without 0.2 and 0.25
    assert ev.perplexity_excluding_unk == pytest.approx(no_unk ** (-1 / 8), rel=1e-12)
    assert ev.perplexity_excluding_unk > ev.perplexity    # the dropped <unk> were easy (0.2, 0.25)

    bins = {b["bin"]: (b["tokens"], b["perplexity"]) for b in ev.bins}
    expected = {
        "unseen": (1, 1 / 0.01),                                       # d, count 0
        "1": (1, 1 / 0.1),                                             # a, count 1
        "2-5": (4, (0.2 * 0.25 * 0.05 * 0.08) ** (-1 / 4)),            # <unk> (4) twice, b (3) twice
        "6-20": (2, (0.5 * 0.6) ** (-1 / 2)),                          # <eos> (7) twice
        "21-100": (1, 1 / 0.3),                                        # e, count 50
        ">100": (1, 1 / 0.4),                                          # c, count 150
    }
    assert list(bins) == list(expected)
    for name, (n, ppl) in expected.items():
        assert bins[name][0] == n, name
        assert bins[name][1] == pytest.approx(ppl, rel=1e-12), name


def test_bins_by_the_word_read_before_by_hand():
    """The same ten tokens binned by the word before each (the first follows the stream's
    start, an <eos>), with <unk> in a bin of its own."""
    counts = np.array([7, 4, 1, 3, 150, 0, 50])
    ids = np.array([2, 1, 3, 0, 1, 4, 5, 6, 3, 0])
    p = np.array([0.1, 0.2, 0.05, 0.5, 0.25, 0.4, 0.01, 0.3, 0.08, 0.6])
    ev = evaluate_logprobs("valid", ids, np.log(p), counts, unk_id=1, eos_id=0)
    # read before: <eos> a <unk> b <eos> <unk> c d e b
    expected = {
        "<unk>": (2, (0.05 * 0.4) ** (-1 / 2)),
        "unseen": (1, 1 / 0.3),                                        # after d
        "1": (1, 1 / 0.2),                                             # after a
        "2-5": (2, (0.5 * 0.6) ** (-1 / 2)),                           # after b, twice
        "6-20": (2, (0.1 * 0.25) ** (-1 / 2)),                         # after <eos>, twice
        "21-100": (1, 1 / 0.08),                                       # after e
        ">100": (1, 1 / 0.01),                                         # after c
    }
    got = {b["bin"]: (b["tokens"], b["perplexity"]) for b in ev.context_bins}
    assert list(got) == list(expected)
    for name, (n, ppl) in expected.items():
        assert got[name][0] == n and got[name][1] == pytest.approx(ppl, rel=1e-12), name
    assert "word read before" in ev.text("m")
    # without eos_id (a caller that does not know the stream's start) there are none
    assert evaluate_logprobs("valid", ids, np.log(p), counts, unk_id=1).context_bins == []


def test_frequency_bin_edges():
    """Counts on every bin edge land in the bin whose range includes them; an empty bin has
    no perplexity (nan)."""
    counts = np.array([2, 5, 6, 20, 21, 100, 101, 1, 0, 9])
    ids = np.arange(9)                                   # each once; id 9 never occurs
    ev = evaluate_logprobs("test", ids, np.full(9, math.log(0.5)), counts, unk_id=9)
    assert [b["tokens"] for b in ev.bins] == [1, 1, 2, 2, 2, 1]
    assert ev.unk_tokens == 0 and ev.perplexity_excluding_unk == pytest.approx(2.0)
    empty = evaluate_logprobs("test", np.array([6]), np.array([-1.0]), counts, unk_id=9)
    assert math.isnan(empty.bins[0]["perplexity"]) and empty.bins[5]["tokens"] == 1
    printed = [l.split("|")[1:4] for l in empty.text("m").splitlines() if l.startswith("| unseen")]
    assert [c.strip() for c in printed[0]] == ["unseen", "0", "-"]     # as `lmlow eval` prints it
    assert "nan" not in empty.text("m")


# --------------------------------------------------------------------------- f. GloVe init

def test_glove_input_and_output_rows_equal_the_vector_file(speech_corpus, tmp_path):
    """Untied, init glove + glove-output from a hand-written 6-d GloVe file, saved untrained
    (max_epochs 0): the encoder and decoder rows of the covered words are exactly the file's
    vectors (values chosen exactly representable in float32); the other words get random rows
    on the vectors' scale; the output bias starts at zero."""
    common = [w for w, _ in Counter((speech_corpus / "train.txt").read_text().split()).most_common(8)]
    rng = np.random.default_rng(0)
    vectors = {w: rng.integers(-16, 17, size=6) / 8.0 for w in common + ["notacorpusword"]}
    path = tmp_path / "vectors.txt"
    path.write_text("".join(f"{w} {' '.join(str(float(x)) for x in v)}\n" for w, v in vectors.items()))

    run = tmp_path / "run"
    train(tiny(speech_corpus, tie=False, init=("glove", "glove-output"), embeddings=str(path),
               max_epochs=0), run, quiet=True)
    best = load_checkpoint(run / "best.pt")
    model, words = best["model"], best["vocab"]
    enc, dec = model["encoder.weight"].double(), model["decoder.weight"].double()
    assert enc.shape == dec.shape == (len(words), 6)
    index = {w: i for i, w in enumerate(words)}
    assert "notacorpusword" not in index
    for w in common:
        want = torch.tensor(vectors[w], dtype=torch.float64)
        assert torch.equal(dec[index[w]], want), w
        assert torch.equal(enc[index[w]], want), w
    assert torch.equal(model["decoder.bias"], torch.zeros(len(words)))

    others = [i for w, i in index.items() if w not in vectors]
    assert len(others) > 1000
    file_std = float(np.std(np.concatenate(list(vectors.values()))))
    for matrix in (enc, dec):
        rest = matrix[others]
        assert (rest != 0).all() and len(torch.unique(rest, dim=0)) == len(others)
        assert rest.std().item() == pytest.approx(file_std, rel=0.1)   # scaled like the vectors
