"""The second backbone (issue 28): a small Transformer under the same embedding flags.

The maths against what it must be (causality, a fixed window: chunked = unbroken = any batch
size), learning, the paper's 20 configurations with the hand-written Table 1 as oracle,
bitwise resume, and the commands end to end."""
import json

import numpy as np
import pytest
import torch
from conftest import TABLE1, expected_frozen, lmlow

from lmlow.config import Config, build_config, table1_configurations
from lmlow.errors import LmlowError
from lmlow.evaluate import lstm_logprobs
from lmlow.transformer import TransformerLM, band_mask, rotate


def small_model(context=8, tie=False, seed=0):
    torch.manual_seed(seed)
    return TransformerLM(50, 16, 16, 2, 2, 16, tie, context, dropout=0, dropouth=0,
                         dropouti=0).eval()


def stream(n=300, seed=0):
    ids = np.random.RandomState(seed).randint(1, 50, n)
    ids[::17] = 0                                  # <eos> every 17 tokens, and at the end
    ids[-1] = 0
    return ids


def test_changing_a_later_token_leaves_earlier_outputs_bitwise_unchanged():
    m = small_model()
    x = torch.tensor(stream()[:40]).unsqueeze(1)
    for t in (0, 11, 30, 39):
        y = x.clone()
        y[t] = (y[t] + 1) % 50
        a, *_ = m(x, m.init_hidden(1))
        b, *_ = m(y, m.init_hidden(1))
        assert torch.equal(a[:t], b[:t]), t        # bitwise, on the CPU
        assert not torch.equal(a[t:], b[t:])


def test_the_window_is_exactly_context_tokens():
    """A token's output depends on itself and the `context` tokens before it, not more:
    changing a token just outside every window of the last layer leaves it alone."""
    m = small_model(context=4)                     # 2 blocks: receptive field 8
    x = torch.tensor(stream()[:30]).unsqueeze(1)
    a, *_ = m(x, m.init_hidden(1))
    y = x.clone()
    y[29 - 9] = (y[29 - 9] + 1) % 50               # 9 back: beyond 2 x 4
    b, *_ = m(y, m.init_hidden(1))
    assert torch.equal(a[29], b[29])
    y = x.clone()
    y[29 - 8] = (y[29 - 8] + 1) % 50               # 8 back: inside
    b, *_ = m(y, m.init_hidden(1))
    assert not torch.equal(a[29], b[29])
    assert m.receptive_field == 8


def test_band_mask_and_rotation_by_hand():
    # 2 queries after 3 memory positions, window 2: query 0 sits at 3, query 1 at 4
    assert band_mask(2, 3, 2, "cpu").tolist() == [[False, True, True, True, False],
                                                  [False, False, True, True, True]]
    # rotary, against complex multiplication: the pair (x[2j], x[2j+1]) as x[2j] + i x[2j+1],
    # turned by position x 10000^(-2j/d) (Su et al., eq. 34)
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64)
    theta = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    for start in (0, 7):
        pos = torch.arange(start, start + 5, dtype=torch.float64)
        turn = torch.polar(torch.ones(5, 4, dtype=torch.float64), pos[:, None] * theta[None, :])
        z = torch.view_as_complex(x.reshape(2, 3, 5, 4, 2).contiguous()) * turn
        want = torch.view_as_real(z).reshape(2, 3, 5, 8)
        assert torch.allclose(rotate(x, start=start), want, atol=1e-6)
    # so the scores of every query with every key depend on their distance only
    q, k = torch.randn(1, 1, 5, 8), torch.randn(1, 1, 5, 8)
    s1 = rotate(q, start=0) @ rotate(k, start=0).transpose(-1, -2)
    s2 = rotate(q, start=9) @ rotate(k, start=9).transpose(-1, -2)
    assert torch.allclose(s1, s2, atol=1e-5)
    assert not torch.allclose(s1, q @ k.transpose(-1, -2), atol=1e-3)


def test_scoring_under_inference_mode_then_training_the_same_shapes():
    # the rotary table and the band mask are cached per shape; made while scoring under
    # torch.inference_mode, they must still serve a training step's backward
    m = small_model(context=11)
    words = torch.randint(0, 50, (7, 3))
    m.eval()
    with torch.inference_mode():
        m(words, m.init_hidden(3))
    m.train()
    out, *_ = m(words, m.init_hidden(3))
    out.sum().backward()
    assert m.blocks[0].qkv.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("chunk", [1, 5, 13, 300])
def test_chunks_with_carried_memory_equal_one_unbroken_pass(chunk):
    m = small_model()
    x = torch.tensor(stream()[:120]).unsqueeze(1)
    whole, *_ = m(x, m.init_hidden(1))
    h, parts = m.init_hidden(1), []
    for t in range(0, len(x), chunk):
        o, h, *_ = m(x[t:t + chunk], h)
        parts.append(o)
    assert torch.allclose(torch.cat(parts), whole, atol=1e-5)


@pytest.mark.parametrize("batch_size, bptt", [(1, 300), (3, 16), (7, 5), (10, 70)])
def test_every_token_scored_once_the_same_for_any_batch_or_chunk(batch_size, bptt):
    """The evaluation contract: every token once, with its whole window (warm-up over the
    receptive field), the same per-token numbers to 1e-4 nats for any batch size and chunk."""
    m, ids = small_model(), stream(400)
    ref = lstm_logprobs(m, ids, 0, batch_size=1, bptt=len(ids))
    got = lstm_logprobs(m, ids, 0, batch_size=batch_size, bptt=bptt)
    assert got.shape == ids.shape and np.abs(got - ref).max() < 1e-4
    lines = lstm_logprobs(m, ids, 0, batch_size=batch_size, bptt=bptt, reset_lines=True)
    assert np.abs(lines - lstm_logprobs(m, ids, 0, batch_size=1, bptt=50, reset_lines=True)).max() < 1e-4


def test_a_tiny_transformer_learns_a_deterministic_sequence():
    torch.manual_seed(0)
    m = TransformerLM(12, 16, 32, 2, 2, 16, False, context=16, dropout=0, dropouth=0,
                      dropouti=0)
    seq = torch.tensor(([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0] * 12)).unsqueeze(1)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    for _ in range(300):
        out, *_ = m(seq[:-1], m.init_hidden(1))
        loss = torch.nn.functional.cross_entropy(m.logits(out).view(-1, 12), seq[1:].view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05


def transformer_cfg(corpus, **kw):
    return build_config("transformer-tiny", None, corpus=str(corpus), emb_size=24, **kw)


@pytest.mark.parametrize("combo", table1_configurations(), ids=lambda c: Config(
    embeddings="x", **c).describe())
def test_every_table1_configuration_freezes_and_trains_what_it_says(combo, speech_corpus,
                                                                   vectors):
    """The LSTM's test (test_model) for the Transformer, with the same hand-written oracle."""
    from lmlow.train import Trainer

    reads = Config(embeddings="x", **combo).reads_vectors      # (a random one may not name them)
    cfg = transformer_cfg(speech_corpus, embeddings=str(vectors) if reads else None,
                          max_steps=3, **combo)
    t = Trainer(cfg, speech_corpus.parent / "unused", quiet=True)
    m = t.model
    assert isinstance(m, TransformerLM) and (m.decoder.weight is m.encoder.weight) == cfg.tie
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    t.run()
    after = dict(m.named_parameters())
    for name, frozen in {**expected_frozen(combo), "decoder.bias": False}.items():
        if name in after:
            assert torch.equal(before[name], after[name].detach()) == frozen, name
    assert not torch.equal(before["blocks.0.qkv.weight"], after["blocks.0.qkv.weight"])
    if cfg.pretrained_input:                           # the vectors' size, projected to width
        assert m.encoder.weight.shape[1] == 24 and m.project_in.weight.shape == (32, 24)
    assert len(TABLE1) == 20


def test_resume_is_bitwise(speech_corpus, tmp_path):
    args = ["--preset", "transformer-tiny", "--max-epochs", "1", "--eval-every", "20",
            "--threads", "1", "--quiet"]
    lmlow("train", speech_corpus, "--out", tmp_path / "whole", *args, check=True)
    lmlow("train", speech_corpus, "--out", tmp_path / "part", *args, "--max-steps", "25",
          check=True)
    lmlow("train", "--resume", tmp_path / "part", "--max-steps", "0", check=True)
    a = torch.load(tmp_path / "whole" / "last.pt", weights_only=True)
    b = torch.load(tmp_path / "part" / "last.pt", weights_only=True)
    assert a["state"]["step"] == b["state"]["step"] > 25
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    rows = lambda r: [x["step"] for x in map(json.loads, (r / "metrics.jsonl").read_text().split("\n")[:-1])]
    # the stopped run validated once more where its budget stopped it (update 25)
    assert [s for s in rows(tmp_path / "part") if s != 25] == rows(tmp_path / "whole")


def test_a_checkpoint_whose_memory_has_another_format_is_one_line(speech_corpus, tmp_path):
    """Before the memory carried keys and values (2 x width a position) it carried block
    inputs (width): such a last.pt must stop the resume with one line naming it, untouched."""
    run = tmp_path / "r"
    lmlow("train", speech_corpus, "--out", run, "--preset", "transformer-tiny", "--max-steps", "5",
          "--threads", "1", "--quiet", check=True)
    ck = torch.load(run / "last.pt", weights_only=False)
    assert ck["hidden"] is not None and ck["hidden"][0].shape[2] == 2 * 32
    ck["hidden"] = [t[..., :32].clone() for t in ck["hidden"]]           # the old format
    torch.save(ck, run / "last.pt")
    (run / "metrics.jsonl").write_text((run / "metrics.jsonl").read_text() +
                                       '{"step": 99, "note": "logged after the last save"}\n')
    before = {f.name: f.read_bytes() for f in run.iterdir() if f.is_file()}
    r = lmlow("train", "--resume", run, "--max-steps", "10")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"{run / 'last.pt'}: its carried state was written by an older lmlow" in r.stderr
    assert {f.name: f.read_bytes() for f in run.iterdir() if f.is_file()} == before


def test_the_commands_run_a_transformer_with_the_papers_flags(speech_corpus, vectors, tmp_path):
    """`lmlow train --arch transformer --tie no --freeze-input --init glove,glove-output,unigram`
    trains; eval, score and generate work on it; the frozen input stays the vectors."""
    run = tmp_path / "r"
    r = lmlow("train", speech_corpus, "--preset", "transformer-tiny", "--arch", "transformer",
              "--tie", "no", "--freeze-input", "--init", "glove,glove-output,unigram",
              "--embeddings", vectors, "--max-steps", "20", "--out", run)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("transformer, untied: input pretrained, frozen; output pretrained")
    r = lmlow("eval", run, "--split", "test", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["tokens"] > 0
    (tmp_path / "s.txt").write_text("the people of the united states\n")
    r = lmlow("score", run, tmp_path / "s.txt")
    assert r.returncode == 0 and json.loads(r.stdout)["words"][-1] == "<eos>"
    r = lmlow("generate", run, "--words", "5", "--seed", "2")
    assert r.returncode == 0 and len(r.stdout.split()) >= 1
    from lmlow.embeddings import load_vectors
    from lmlow.runs import LSTMRun
    kv, lm = load_vectors(vectors), LSTMRun(run)
    w = lm.vocab.words[5]
    if w in kv.key_to_index:
        assert np.allclose(lm.model.encoder.weight[5].numpy(), kv[w], atol=1e-6)


def test_a_width_that_does_not_split_into_heads_is_one_line(speech_corpus, tmp_path):
    with pytest.raises(LmlowError, match="--heads 3 heads of an even size"):
        transformer_cfg(speech_corpus, heads=3)
    r = lmlow("train", speech_corpus, "--arch", "rnn", "--out", tmp_path / "r")
    assert r.returncode != 0 and "--arch" in r.stderr and r.stderr.count("\n") == 1


def test_a_sweep_of_the_six_takes_the_transformer(speech_corpus, vectors, tmp_path):
    """`lmlow sweep --grid six --arch transformer`: every run is a Transformer run."""
    r = lmlow("sweep", speech_corpus, "--grid", "six", "--preset", "transformer-tiny",
              "--arch", "transformer", "--embeddings", vectors, "--out", tmp_path / "s",
              "--dry-run")
    lines = r.stdout.strip().splitlines()
    assert r.returncode == 0 and len(lines) == 6, r.stderr
    assert all("--preset transformer-tiny" in l and "--arch transformer" in l for l in lines)
