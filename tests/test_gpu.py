"""The GPU path (``pytest -m gpu``; skipped, with the reason, where torch sees no CUDA device):
every Table 1 configuration in fp32, bf16 and fp16; tying and freezing on the GPU; GPU and CPU
scores of one checkpoint; bitwise fp32 resume and exact fp16 resume with the loss scaler;
unigram init; the weight-dropped LSTM handed to cuDNN without a copy; the Transformer's
windowed attention kernel against the band as a mask, and the Transformer trained, resumed
and scored on the GPU."""
import os
import warnings

import pytest
import torch
from conftest import expected_frozen, unigram_perplexity

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")   # before cuBLAS starts

from lmlow.checkpoint import load_checkpoint  # noqa: E402
from lmlow.config import Config, build_config, table1_configurations  # noqa: E402
from lmlow.runs import load  # noqa: E402
from lmlow.train import Trainer, resume, train  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA GPU here; run `pytest -m gpu` on a machine "
    "with one")]

PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def gpu(corpus, **kw):
    return build_config("tiny", None, corpus=str(corpus), emb_size=24, device="cuda", **kw)


@pytest.mark.parametrize("precision", list(PRECISIONS))
@pytest.mark.parametrize("combo", table1_configurations(), ids=lambda c: Config(
    embeddings="x", **c).describe())
def test_every_table1_configuration_trains_on_the_gpu(combo, precision, speech_corpus, vectors,
                                                      tmp_path):
    if precision == "bf16" and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    cfg = gpu(speech_corpus, embeddings=str(vectors), max_steps=4, dropoute=0.0,
              precision=precision, **combo)
    t = Trainer(cfg, tmp_path / "run", quiet=True)
    assert t.device.type == "cuda" and t.amp_dtype == PRECISIONS[precision]
    assert (t.scaler is not None) == (precision == "fp16")
    m = t.model
    assert (m.decoder.weight is m.encoder.weight) == cfg.tie
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    t.run()
    after = dict(m.named_parameters())
    frozen = expected_frozen(combo)          # the paper's table, written out by hand
    for name, is_frozen in frozen.items():
        if name in after:
            assert torch.equal(before[name], after[name].detach()) == is_frozen, name
    assert all(torch.isfinite(p).all() for p in after.values())
    assert not torch.equal(before["rnns.0.lstm.weight_ih_l0"], after["rnns.0.lstm.weight_ih_l0"])
    assert all(p.dtype == torch.float32 for p in after.values())   # weights stay fp32


@pytest.mark.parametrize("arch", ["lstm", "transformer"])
def test_gpu_and_cpu_scores_of_one_checkpoint_agree(arch, speech_corpus, tmp_path):
    """For the Transformer: the GPU scores through the windowed kernel, the CPU through the
    masked math call."""
    make = gpu if arch == "lstm" else tgpu
    train(make(speech_corpus, max_epochs=1), tmp_path / "run", quiet=True)
    on_gpu = load(tmp_path / "run", device="cuda").evaluate("valid")
    on_cpu = load(tmp_path / "run", device="cpu").evaluate("valid")
    assert on_gpu.perplexity == pytest.approx(on_cpu.perplexity, rel=1e-4)
    assert on_gpu.tokens == on_cpu.tokens


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_resumed_gpu_run_equals_an_uninterrupted_one(precision, speech_corpus, tmp_path):
    """Deterministic kernels: fp32 bit for bit; fp16 too, because the loss scaler's state
    (scale, growth tracker) comes back with the run."""
    cfg = dict(max_epochs=2, seed=4, precision=precision, deterministic=True)
    train(gpu(speech_corpus, **cfg), tmp_path / "full", quiet=True)
    train(gpu(speech_corpus, max_steps=30, **cfg), tmp_path / "part", quiet=True)
    resume(tmp_path / "part", quiet=True, max_steps=0)
    a, b = (load_checkpoint(tmp_path / r / "last.pt") for r in ("full", "part"))
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["scaler"] == b["scaler"] and (a["scaler"] is not None) == (precision == "fp16")


def test_unigram_init_gives_the_unigram_perplexity_on_the_gpu(speech_corpus, tmp_path):
    cfg = gpu(speech_corpus, tie=False, init="unigram", unk_threshold=2, max_epochs=0)
    summary = train(cfg, tmp_path / "run", quiet=True)
    assert summary["best_valid_ppl"] == pytest.approx(unigram_perplexity(speech_corpus, 2), rel=0.01)


def test_weight_drop_hands_cudnn_one_buffer():
    """No "not part of single contiguous chunk of memory" warning (cuDNN's copy of the
    weights) in a training step, and the same numbers as the plain functional call."""
    from torch.func import functional_call

    from lmlow.model import WeightDropLSTM

    torch.manual_seed(0)
    layer = WeightDropLSTM(64, 96, 0.5).cuda().train()
    x = torch.randn(35, 8, 64, device="cuda", requires_grad=True)
    h = (torch.zeros(1, 8, 96, device="cuda"), torch.zeros(1, 8, 96, device="cuda"))
    w = layer.lstm.weight_hh_l0 * 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, (hn, cn) = layer.flat_call(x, h, w)
        grads = torch.autograd.grad(out.sum() + cn.sum(), [x, *layer.parameters()])
    w = layer.lstm.weight_hh_l0 * 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, (_, cref) = functional_call(layer.lstm, {"weight_hh_l0": w}, (x, h))
    ref_grads = torch.autograd.grad(ref.sum() + cref.sum(), [x, *layer.parameters()])
    assert torch.allclose(out, ref, atol=1e-5)
    assert all(torch.allclose(g, r, atol=1e-4) for g, r in zip(grads, ref_grads))


@pytest.mark.parametrize("dtype,expected", [(torch.bfloat16, torch.float32),
                                            (torch.float16, torch.float16)])
def test_the_lstm_runs_in_the_dtype_the_readme_says(dtype, expected):
    """bf16 autocast: the LSTM leaves autocast and runs in fp32 (TF32), as torch would
    otherwise run cuDNN's LSTM in fp16 with no loss scaling; fp16 autocast: fp16 (scaled)."""
    from lmlow.model import WeightDropLSTM

    if dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported(including_emulation=False):
        pytest.skip("this GPU has no native bf16")
    layer = WeightDropLSTM(16, 24, 0.5).cuda().train()
    x = torch.randn(5, 2, 16, device="cuda")
    h = (torch.zeros(1, 2, 24, device="cuda"), torch.zeros(1, 2, 24, device="cuda"))
    with torch.autocast("cuda", dtype=dtype):
        out, (hn, cn) = layer(x, h)
    assert out.dtype == hn.dtype == expected


def test_a_resumed_nt_asgd_run_keeps_its_counters_on_the_gpu(speech_corpus, tmp_path):
    """capturable ASGD after a resume: every state tensor, `step` included, is on the GPU."""
    cfg = gpu(speech_corpus, optimizer="sgd", lr=1.0, max_steps=4)
    t = Trainer(cfg, tmp_path / "r", quiet=True)
    t.start_averaging()   # as NT-ASGD does when validation stalls
    t.run()
    r = Trainer(cfg, tmp_path / "r", resume=load_checkpoint(tmp_path / "r" / "last.pt"), quiet=True)
    assert isinstance(r.optimizer, torch.optim.ASGD) and r.optimizer.defaults["capturable"]
    devices = {v.device.type for st in r.optimizer.state.values() for v in st.values()
               if torch.is_tensor(v)}
    assert devices == {"cuda"}


@pytest.mark.parametrize("precision,opt", [(p, o) for p in PRECISIONS for o in ("adam", "sgd", "nt-asgd")])
def test_an_update_never_waits_for_the_gpu(precision, opt, speech_corpus, tmp_path):
    """torch raises at any synchronising call while the sync debug mode is "error": the
    update queues its kernels and returns. (fp16 with NT-ASGD waited once per update until
    lmlow.asgd took the loss scaler's overflow flag on the device.)"""
    from lmlow.train import batchify

    cfg = gpu(speech_corpus, optimizer="adam" if opt == "adam" else "sgd", precision=precision)
    t = Trainer(cfg, tmp_path / "r", quiet=True)
    if opt == "nt-asgd":
        t.start_averaging()   # as NT-ASGD does when validation stalls
    data = batchify(t.train_ids, cfg.batch_size)
    t.n_batches, t.hidden = data.shape[0] - 1, t.model.init_hidden(data.shape[1])
    t.model.train()
    batch = [t._batch(data, s, cfg.bptt) for s in (0, 1)]
    for _ in range(2):                    # lazy set-up (handles, optimiser state) may wait
        t._update(*batch, cfg.bptt)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            t._update(*batch, cfg.bptt)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    t._sync()
    assert t.state.skipped == 0 or precision == "fp16"


# The Transformer on the GPU: its windowed attention kernel against the band as a mask, and
# the run-level promises (every precision trains, bitwise resume, GPU = CPU scores, the
# evaluation contract) through that kernel.

def tgpu(corpus, **kw):
    return build_config("transformer-tiny", None, corpus=str(corpus), device="cuda", **kw)


@pytest.mark.parametrize("dtype", list(PRECISIONS.values())[1:] + [torch.float32],
                         ids=["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("T,memory,window,D", [(64, 128, 128, 48), (1, 128, 128, 58),
                                               (128, 0, 128, 48), (64, 64, 128, 58),
                                               (7, 30, 16, 24)])
def test_the_windowed_kernel_computes_the_band(dtype, T, memory, window, D):
    """Attention and its gradients through the windowed kernel equal the masked SDPA call in
    fp32 on the same (rounded) inputs: a memory longer, equal to and shorter than the band,
    one query (sampling), head sizes the kernel takes and one it must pad (58)."""
    from lmlow.transformer import _window_attention, band_mask, window_kernel_agrees

    if dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    assert window_kernel_agrees(torch.device("cuda", torch.cuda.current_device()), dtype)
    torch.manual_seed(0)
    q, k, v = (torch.randn(3, 2, n, D, device="cuda", dtype=dtype).requires_grad_()
               for n in (T, memory + T, memory + T))
    g = torch.randn(3, 2, T, D, device="cuda", dtype=dtype)
    ref = [t.detach().float().requires_grad_() for t in (q, k, v)]
    want = torch.nn.functional.scaled_dot_product_attention(
        *ref, attn_mask=band_mask(T, memory, window, "cuda"))
    want_grads = torch.autograd.grad(want, ref, g.float())
    got = _window_attention(q, k, v, window, 0.0)
    got_grads = torch.autograd.grad(got, (q, k, v), g)
    tol = 2e-5 if dtype == torch.float32 else 2e-2
    for a, b in zip((got, *got_grads), (want, *want_grads)):
        assert a.dtype == dtype and a.shape == b.shape
        assert torch.allclose(a.float(), b, atol=tol, rtol=tol), (a.float() - b).abs().max()


def test_the_windowed_kernels_dropout_is_the_same_mask_forward_and_backward():
    """With attention dropout the gradient is the derivative of the very function the
    forward computed (the kernel replays its Philox mask in backward): a central difference
    along a random direction, each evaluation from the same random state, equals it."""
    from lmlow.transformer import _window_attention

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, n, 16, device="cuda", dtype=torch.float64).float()
               .requires_grad_() for n in (20, 52, 52))
    d = [torch.randn_like(t) for t in (q, k, v)]
    state = torch.cuda.get_rng_state()

    def f(eps):
        torch.cuda.set_rng_state(state)
        return _window_attention(*(t + eps * u for t, u in zip((q, k, v), d)), 24, 0.3)

    out = f(0.0)
    assert (out == f(0.0)).all() and not torch.allclose(out, _window_attention(q, k, v, 24, 0.0))
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    with torch.no_grad():
        numeric = (f(1e-2).sum() - f(-1e-2).sum()) / 2e-2
    analytic = sum((g * u).sum() for g, u in zip(grads, d))
    assert numeric.item() == pytest.approx(analytic.item(), rel=1e-2, abs=1e-2)


@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_the_transformer_trains_in_every_precision_on_the_gpu(precision, speech_corpus,
                                                              tmp_path):
    if precision == "bf16" and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    """30 updates take the validation perplexity well below the uniform distribution's (the
    vocabulary's size; on the CPU in fp32 and bf16: 635 of 1,721)."""
    summary = train(tgpu(speech_corpus, max_steps=30, precision=precision), tmp_path / "r",
                    quiet=True)
    assert summary["steps"] == 30 and 1 < summary["best_valid_ppl"] < 0.6 * summary["vocabulary"]


def test_a_resumed_transformer_run_on_the_gpu_equals_an_uninterrupted_one(speech_corpus,
                                                                          tmp_path):
    cfg = dict(max_epochs=2, seed=4, deterministic=True)
    train(tgpu(speech_corpus, **cfg), tmp_path / "full", quiet=True)
    train(tgpu(speech_corpus, max_steps=30, **cfg), tmp_path / "part", quiet=True)
    resume(tmp_path / "part", quiet=True, max_steps=0)
    a, b = (load_checkpoint(tmp_path / r / "last.pt") for r in ("full", "part"))
    assert a["state"]["step"] == b["state"]["step"] > 30
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


@pytest.mark.parametrize("batch_size,bptt", [(1, 7), (3, 64), (10, 25)])
def test_every_token_is_scored_the_same_at_any_batch_or_chunk_on_the_gpu(batch_size, bptt):
    """The evaluation contract through the windowed kernel: per-token log-probabilities of
    one stream in any batch size and chunk length equal one unbroken pass (to 1e-4 nats)."""
    import numpy as np

    from lmlow.evaluate import lstm_logprobs
    from lmlow.transformer import TransformerLM

    torch.manual_seed(0)
    m = TransformerLM(50, 16, 16, 2, 2, 16, False, 8, dropout=0, dropouth=0,
                      dropouti=0).cuda().eval()
    ids = np.random.RandomState(0).randint(1, 50, 300)
    ids[::17] = 0
    whole = lstm_logprobs(m, ids, 0, batch_size=1, bptt=len(ids), device="cuda")
    split = lstm_logprobs(m, ids, 0, batch_size=batch_size, bptt=bptt, device="cuda")
    assert split.shape == ids.shape and np.abs(split - whole).max() < 1e-4
