"""The model's maths and the embedding configurations: tying shares, freezing holds,
unigram init predicts the unigram distribution, the loss is chunked correctly."""

import numpy as np
import pytest
import torch
from conftest import TABLE1, expected_frozen, unigram_perplexity

from lmlow import train as train_mod
from lmlow.config import Config, build_config, table1_configurations
from lmlow.errors import LmlowError
from lmlow.evaluate import lstm_logprobs
from lmlow.model import AWDLSTM, log_unigram
from lmlow.loss import lm_loss
from lmlow.train import Trainer


def tiny(corpus, **kw):
    return build_config("tiny", None, corpus=str(corpus), emb_size=24, **kw)


def test_tied_model_shares_one_tensor():
    m = AWDLSTM(50, 16, 20, 2, 16, tie=True)
    assert m.decoder.weight is m.encoder.weight
    assert sum(p.numel() for p in m.parameters()) == sum(
        p.numel() for n, p in m.named_parameters() if n != "decoder.weight")


def test_table1_has_exactly_the_papers_twenty_configurations():
    assert {(c["tie"], c["freeze_input"], c["freeze_output"], tuple(c["init"]))
            for c in table1_configurations()} == set(TABLE1)
    assert len(table1_configurations()) == 20


@pytest.mark.parametrize("combo", table1_configurations(), ids=lambda c: Config(
    embeddings="x", **c).describe())
def test_every_table1_configuration_freezes_and_trains_what_it_says(combo, speech_corpus,
                                                                   vectors, tmp_path):
    reads = Config(embeddings="x", **combo).reads_vectors      # (a random one may not name them)
    cfg = tiny(speech_corpus, embeddings=str(vectors) if reads else None, max_steps=3,
               dropoute=0.0, **combo)
    t = Trainer(cfg, tmp_path / "run", quiet=True)
    m = t.model
    assert (m.decoder.weight is m.encoder.weight) == cfg.tie
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    t.run()
    after = dict(m.named_parameters())
    expect_frozen = {**expected_frozen(combo), "decoder.bias": False}   # the paper's table
    for name, frozen in expect_frozen.items():
        if name not in after:
            continue  # the tied decoder weight is the encoder weight
        same = torch.equal(before[name], after[name].detach())
        assert same == frozen, f"{name}: frozen={frozen} but unchanged={same}"
    assert not torch.equal(before["rnns.0.lstm.weight_ih_l0"], after["rnns.0.lstm.weight_ih_l0"])
    if cfg.pretrained_input:
        kv_first = t.kv[t.vocab.words[0]]
        np.testing.assert_allclose(before["encoder.weight"][0].numpy(), kv_first, rtol=1e-6)


def test_freeze_output_bias_and_unigram(speech_corpus, tmp_path):
    cfg = tiny(speech_corpus, tie=False, freeze_output=True, freeze_output_bias=True,
               init="unigram", max_steps=2)
    t = Trainer(cfg, tmp_path / "run", quiet=True)
    bias = t.model.decoder.bias.detach().clone()
    t.run()
    assert torch.equal(bias, t.model.decoder.bias.detach())
    expected = log_unigram(torch.tensor(t.vocab.counts))
    assert torch.allclose(bias, expected)


def test_untrained_unigram_model_predicts_the_training_unigram(speech_corpus, tmp_path):
    """Validation perplexity of the initialised model equals, within 1%, the perplexity of the
    training unigram distribution computed here independently."""
    k = 2
    unigram_ppl = unigram_perplexity(speech_corpus, k)
    cfg = tiny(speech_corpus, tie=False, init="unigram", unk_threshold=k, max_epochs=0)
    summary = train_mod.train(cfg, tmp_path / "run", quiet=True)
    assert summary["best_valid_ppl"] == pytest.approx(unigram_ppl, rel=0.01)
    # and a zero-bias model is far from it (close to uniform)
    cfg0 = tiny(speech_corpus, tie=False, unk_threshold=k, max_epochs=0)
    ppl0 = train_mod.train(cfg0, tmp_path / "run0", quiet=True)["best_valid_ppl"]
    assert ppl0 > 2 * unigram_ppl


def test_log_unigram_smooths_zero_counts():
    lu = log_unigram(torch.tensor([3, 1, 0]))
    assert torch.allclose(lu.exp(), torch.tensor([3, 1, 0.5]) / 4.5)


def test_words_training_never_saw_share_half_a_count_however_many(tmp_path):
    """--extend-vocab adds the vectors' words, most never seen in training: each counted 0.5,
    so 33,794 of them held 21% of the untrained model's "unigram" distribution. Together they
    hold half a count, and the seen words their relative frequencies, whatever the number of
    unseen words; the untrained model predicts that distribution."""
    from conftest import write_corpus

    train = "the cat sat\nthe dog sat\nthe cat ran\n" * 10     # 120 tokens with <eos>
    root = write_corpus(tmp_path / "c", train, "the cat\n", "the dog\n")
    extra = [f"w{i}" for i in range(5000)]                      # vector words train lacks
    vec = tmp_path / "v.txt"
    vec.write_text("".join(f"{w} 0.1 0.2 0.3\n" for w in ["the", "cat", *extra]))
    cfg = build_config("tiny", None, corpus=str(root), embeddings=str(vec), extend_vocab=True,
                       tie=False, init=("glove", "glove-output", "unigram"))
    t = Trainer(cfg, tmp_path / "run", quiet=True)
    counts = torch.tensor(t.vocab.count_array(), dtype=torch.float64)
    p = torch.softmax(t.model.decoder.bias.double(), 0)
    seen = counts > 0
    assert (~seen).sum() >= 5000
    total = counts.sum() + 0.5
    assert torch.allclose(p[~seen].sum(), 0.5 / total, rtol=1e-4)
    assert torch.allclose(p[seen], counts[seen] / total, rtol=1e-4)


def test_unigram_label_smoothing_by_hand():
    m = AWDLSTM(4, 3, 3, 1, 3, tie=False)
    out, y = torch.randn(1, 1, 3), torch.tensor([[2]])
    prior = torch.tensor([0.4, 0.3, 0.2, 0.1])
    logp = torch.log_softmax(m.decoder(out).reshape(-1, 4), -1)[0]
    expected = 0.9 * -logp[2] + 0.1 * -(prior * logp).sum()
    got = lm_loss(m, out, y, 0.1, prior)
    assert torch.allclose(got, expected)


def test_uniform_label_smoothing_by_hand():
    """Koehn's label smoothing: the target is (1 - eps) one-hot + eps uniform."""
    torch.manual_seed(0)
    m = AWDLSTM(5, 3, 3, 1, 3, tie=False)
    out, y = torch.randn(2, 1, 3), torch.tensor([[4], [0]])
    logp = torch.log_softmax(m.decoder(out).reshape(-1, 5), -1)
    nll = -logp[torch.arange(2), y.reshape(-1)]
    expected = (0.8 * nll + 0.2 * -logp.mean(-1)).mean()
    got = lm_loss(m, out, y, 0.2, None)
    assert torch.allclose(got, expected)
    plain = lm_loss(m, out, y, 0.0, None)
    assert torch.allclose(plain, nll.mean())


def test_label_smoothing_flags(speech_corpus, tmp_path):
    t = Trainer(tiny(speech_corpus, label_smoothing=0.1, smoothing_prior="unigram", max_steps=3),
                tmp_path / "r", quiet=True)
    counts = torch.from_numpy(t.vocab.count_array()).float()
    assert torch.allclose(t.prior, counts / counts.sum())   # the training unigram distribution
    t.run()
    with pytest.raises(LmlowError, match="--smoothing-prior"):
        Config(label_smoothing=0.1, smoothing_prior="zipf").validate()


def test_scores_do_not_depend_on_batch_size_or_bptt(speech_corpus, tmp_path):
    cfg = tiny(speech_corpus, max_steps=20)
    t = Trainer(cfg, tmp_path / "run", quiet=True)
    t.run()
    ids = t.valid_ids
    ref = lstm_logprobs(t.model, ids, t.vocab.eos_id, batch_size=1, bptt=35)
    assert len(ref) == len(ids) and np.isfinite(ref).all()
    for b, bptt in ((5, 35), (10, 7), (3, 100)):
        lp = lstm_logprobs(t.model, ids, t.vocab.eos_id, batch_size=b, bptt=bptt)
        assert abs(lp.mean() - ref.mean()) < 1e-4 * abs(ref.mean())
    reset = [lstm_logprobs(t.model, ids, t.vocab.eos_id, batch_size=b, bptt=bptt, reset_lines=True)
             for b, bptt in ((1, 70), (8, 9))]
    np.testing.assert_allclose(reset[0], reset[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw, message", [
    (dict(tie=True, init="glove-output", embeddings="v.txt"), "a tied model has one matrix"),
    (dict(init="glove"), "needs --embeddings"),
    (dict(init="random,glove", embeddings="v.txt"), "contradicts"),
    (dict(init="bert"), "unknown 'bert'"),
    (dict(dropout=1.5), "must be in [0, 1)"),
])
def test_invalid_configurations_are_refused(kw, message):
    with pytest.raises(LmlowError, match=message.replace("[", r"\[").replace(")", r"\)")):
        Config(**kw).validate()


@pytest.mark.parametrize("preset,kw", [
    ("tiny", dict(layers=1, emb_size=12, out_size=20, hidden_size=16, tie=False)),
    ("tiny", dict(layers=2, emb_size=12, out_size=12, hidden_size=16, tie=True)),
    ("tiny", dict(layers=4, emb_size=12, out_size=20, hidden_size=16, tie=False)),
    ("transformer-tiny", dict(layers=2, emb_size=16, out_size=16, hidden_size=16, tie=True)),
    ("transformer-tiny", dict(layers=3, emb_size=12, out_size=20, hidden_size=16, tie=False)),
])
def test_the_size_check_counts_what_the_model_makes(preset, kw):
    """``parameter_count`` (the check before a model is made) against the parameters torch
    made: every layer shape, tied or not, projections or not."""
    from lmlow.checkpoint import backbone

    cfg = build_config(preset, None, **kw)
    cls = backbone(cfg.arch)
    model = cls.from_config(cfg, 57, cfg.emb_size, cfg.out_size)
    made = sum(p.numel() for p in model.parameters())     # a tied matrix is counted once
    assert cls.parameter_count(cfg, 57, cfg.emb_size, cfg.out_size) == made
