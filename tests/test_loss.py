"""The fused, chunked softmax cross-entropy (lmlow.loss.lm_loss) against an independent
reference: plain autograd through ``torch.nn.functional.cross_entropy`` / ``log_softmax`` in
float64. Every test checks the loss and every gradient (output h, decoder weight, decoder
bias); none compares lm_loss with itself.

The fused loss computes its matmuls and softmax in float32 (by design, see its docstring), so
float32 inputs are compared with the float64 reference at atol/rtol 1e-5; the logits are made
large and varied (weights ~N(0, 0.5^2), bias ~N(0, 1)) so that a wrong target, prior or
scaling moves the numbers far beyond that tolerance.
"""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import lmlow.loss
from lmlow.loss import lm_loss
from lmlow.model import AWDLSTM

V, D = 97, 8          # vocabulary and output size (V != D, so logit tensors are recognisable)
T, B = 6, 5           # 30 target positions
TOL = dict(atol=1e-5, rtol=1e-5)


def untied(seed=0, vocab=V, d=D):
    torch.manual_seed(seed)
    m = AWDLSTM(vocab, d, 12, 1, d, tie=False)
    with torch.no_grad():   # varied logits: the default init gives an almost uniform softmax
        m.decoder.weight.normal_(0, 0.5)
        m.decoder.bias.normal_(0, 1.0)
    return m


def inputs(seed=1, vocab=V):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(T, B, D, generator=g) * 2
    y = torch.randint(0, vocab, (T, B), generator=g)
    y[0, :3] = 5            # repeated targets inside one chunk (scatter/gather must add up)
    return h, y


def unigram_prior(vocab=V, seed=2):
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(0, 50, (vocab,), generator=g).double() ** 2 + 1
    return counts / counts.sum()   # skewed, far from uniform


def reference(h, weight, bias, y, eps, prior, scale=1.0):
    """(loss, dh, dW, db) of scale * mean smoothed CE, by float64 autograd on F.*."""
    h = h.detach().double().requires_grad_(True)     # same shape as the input: (T, B, d)
    w = weight.detach().double().requires_grad_(True)
    b = bias.detach().double().requires_grad_(True)
    logits = h.reshape(-1, h.size(-1)) @ w.t() + b
    y = y.reshape(-1)
    if eps == 0:
        loss = F.cross_entropy(logits, y)
    elif prior is None:
        loss = F.cross_entropy(logits, y, label_smoothing=eps)
    else:
        logp = F.log_softmax(logits, dim=-1)
        nll = -logp.gather(1, y.unsqueeze(1)).squeeze(1)
        smooth = -(prior.double() * logp).sum(-1)
        loss = ((1 - eps) * nll + eps * smooth).mean()
    (scale * loss).backward()
    return loss.detach(), h.grad, w.grad, b.grad


def fused(model, h, y, eps, prior, scale=1.0):
    """(loss, dh, dW, db) of scale * lm_loss; None for a parameter that gets no gradient."""
    h = h.detach().clone().requires_grad_(True)
    for p in (model.decoder.weight, model.decoder.bias):
        p.grad = None
    loss = lm_loss(model, h, y, label_smoothing=eps, prior=prior)
    (scale * loss).backward()
    return loss.detach(), h.grad, model.decoder.weight.grad, model.decoder.bias.grad


def assert_close(got, want, what, **tol):
    assert got is not None, f"{what}: no gradient"
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    err = (got.double() - want.double()).abs().max().item()
    assert torch.allclose(got.double(), want.double(), **{**TOL, **tol}), \
        f"{what}: max abs error {err:.3g}"


class LogitShapes(TorchDispatchMode):
    """Records the number of rows of every new 2-d (rows, V) tensor an op allocates
    (``rows``; ops whose result aliases an input, such as the transposed (D, V) weight, an
    in-place update or a write into a given buffer, hold no new memory and are left out), and
    of every (rows, V) result, new or not (``written``: the chunks as computed). The decoder's
    gradient, which the loss builds transposed as (D, V) or (D + 1, V) with the bias's in the
    last row, is the size of a parameter, not of a chunk of logits: tensors of D or D + 1
    rows are left out (no test chunks D or D + 1 rows)."""

    def __init__(self, vocab, d=D):
        super().__init__()
        self.vocab, self.rows, self.written, self.grad_rows = vocab, [], [], (d, d + 1)
        self.kinds = []     # (rows, dtype) of each new one

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        aliases = [r.alias_info for r in func._schema.returns if r.alias_info is not None]
        new, writes = not aliases, any(a.is_write for a in aliases)   # views do neither
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if (isinstance(t, torch.Tensor) and t.dim() == 2 and t.size(1) == self.vocab
                    and t.size(0) not in self.grad_rows):
                if new or writes:
                    self.written.append(t.size(0))
                if new:
                    self.rows.append(t.size(0))
                    self.kinds.append((t.size(0), t.dtype))
        return out


CASES = [  # (eps, prior kind)
    (0.0, None),
    (0.0, "unigram"),      # a prior with eps 0 must change nothing
    (0.1, "uniform"),
    (0.3, "uniform"),
    (0.1, "unigram"),
    (0.4, "unigram"),
]


def make_prior(kind):
    return unigram_prior() if kind == "unigram" else None


@pytest.mark.parametrize("row_block", [None, 3], ids=["one-row-block", "3-row-blocks"])
@pytest.mark.parametrize("vocab_block", [None, 10], ids=["one-matmul", "10-word-blocks"])
@pytest.mark.parametrize("chunk_rows", [None, 7, 1], ids=["one-chunk", "7-row-chunks", "1-row-chunks"])
@pytest.mark.parametrize("eps,kind", CASES, ids=[f"eps{e}-{k}" for e, k in CASES])
def test_loss_and_gradients_equal_autograd_cross_entropy(monkeypatch, eps, kind, chunk_rows,
                                                         vocab_block, row_block):
    """Loss, d/dh, d/dW and d/db equal float64 autograd on F.cross_entropy (uniform smoothing:
    its label_smoothing=eps) or (1-eps) nll + eps (-sum prior log_softmax) (unigram prior),
    with one chunk and with several (30 rows in chunks of 7: the last one partial; or 1),
    with the CPU's fp32 matmuls in one call or in blocks of 10 words (the last one 7), and
    with each chunk's softmax taken whole or 3 rows at a time (the last block partial)."""
    if chunk_rows:
        monkeypatch.setattr(lmlow.loss, "LOGIT_CHUNK_ELEMENTS", V * chunk_rows)
    if row_block:
        monkeypatch.setattr(lmlow.loss, "CACHED_ELEMENTS", V * row_block)
    if vocab_block:
        monkeypatch.setattr(lmlow.loss, "VOCAB_BLOCK", vocab_block)
        monkeypatch.setattr(lmlow.loss, "BLOCK_ROWS", 1)     # blocks for chunks of any rows
        monkeypatch.setattr(lmlow.loss, "FP32_BLOCKS", True)  # on any CPU, not only AMD or AVX2
    assert (lmlow.loss.vocab_blocks(V, torch.float32, torch.device("cpu"), 1) is None) \
        == (vocab_block is None)                      # the blocks are taken where asked for
    m, (h, y), prior = untied(), inputs(), make_prior(kind)
    prior_arg = prior.float() if prior is not None else None
    got = fused(m, h, y, eps, prior_arg, scale=2.5)    # backward must scale by the upstream grad
    want = reference(h, m.decoder.weight, m.decoder.bias, y, eps, prior, scale=2.5)
    for g, w, what in zip(got, want, ("loss", "d/dh", "d/dW", "d/db")):
        assert_close(g, w, what)
    assert got[0].dtype == torch.float32 and got[1].dtype == torch.float32


@pytest.mark.parametrize("eps,kind", [(0.0, None), (0.2, "uniform"), (0.2, "unigram")])
def test_several_chunks_give_what_one_chunk_gives_and_never_hold_all_logits(monkeypatch, eps, kind):
    """With the chunk size forced to 7 rows, no (rows, V) tensor larger than 7 rows is ever
    made (the memory claim), 30 rows take 5 chunks, and the numbers are those of one chunk
    and of the reference."""
    m, (h, y), prior = untied(), inputs(), make_prior(kind)
    prior_arg = prior.float() if prior is not None else None
    monkeypatch.setattr(lmlow.loss, "_SCRATCH", {})      # the buffers a process keeps: none yet
    with LogitShapes(V) as whole:
        one = fused(m, h, y, eps, prior_arg)
    assert max(whole.rows) == T * B                     # control: one chunk holds all 30 rows
    monkeypatch.setattr(lmlow.loss, "LOGIT_CHUNK_ELEMENTS", V * 7)
    monkeypatch.setattr(lmlow.loss, "_SCRATCH", {})
    with LogitShapes(V) as chunked:
        many = fused(m, h, y, eps, prior_arg)
    assert max(chunked.rows) == 7                       # never more than a chunk's logits
    assert max(chunked.written) == 7 and chunked.written.count(2) >= 1   # 4 full chunks + 2 rows
    want = reference(h, m.decoder.weight, m.decoder.bias, y, eps, prior)
    for a, b, w, what in zip(one, many, want, ("loss", "d/dh", "d/dW", "d/db")):
        assert_close(b, a, what + " (chunked vs one chunk)")
        assert_close(b, w, what + " (chunked vs reference)")


def test_in_bf16_a_cpu_holds_fp32_logits_only_a_row_block_at_a_time(monkeypatch):
    """Under bf16 autocast on a CPU the chunk's logits are held in bf16 (the matmul's dtype),
    and their fp32 copy and softmax only a block of rows at a time: with chunks of 7 rows and
    blocks of 3, no fp32 (rows, V) tensor of more than 3 rows is made, none in bf16 of more
    than 7, and the numbers stay the reference's within bf16 rounding."""
    monkeypatch.setattr(lmlow.loss, "_SCRATCH", {})
    monkeypatch.setattr(lmlow.loss, "LOGIT_CHUNK_ELEMENTS", V * 7)
    monkeypatch.setattr(lmlow.loss, "CACHED_ELEMENTS", V * 3)
    m, (h, y) = untied(), inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16), LogitShapes(V) as seen:
        got = fused(m, h, y, 0.0, None)
    rows = {dtype: max(r for r, d in seen.kinds if d == dtype) for _, dtype in seen.kinds}
    assert rows == {torch.float32: 3, torch.bfloat16: 7}
    want = reference(h, m.decoder.weight, m.decoder.bias, y, 0.0, None)
    for g, w, what in zip(got, want, ("loss", "d/dh", "d/dW", "d/db")):
        assert (g.double() - w).abs().max().item() <= 0.02 * w.abs().max().item(), what


@pytest.mark.parametrize("precision", [None, torch.bfloat16], ids=["fp32", "bf16"])
def test_a_later_update_on_the_cpu_allocates_no_logits(monkeypatch, precision):
    """The chunk's logits, softmax (and their bf16 copy) live in buffers the process keeps:
    after the first call no (rows, V) tensor is allocated (a fresh one of tens of MB costs a
    page fault per 4 kB on a CPU), and the numbers stay those of the
    first call and of the reference, also when a shorter batch takes part of a buffer."""
    monkeypatch.setattr(lmlow.loss, "_SCRATCH", {})
    m, (h, y) = untied(), inputs()
    with torch.autocast("cpu", dtype=precision or torch.bfloat16, enabled=precision is not None):
        with LogitShapes(V) as first:
            a = fused(m, h, y, 0.0, None)
        with LogitShapes(V) as second:
            b = fused(m, h, y, 0.0, None)
        with LogitShapes(V) as shorter:
            c = fused(m, h[:11], y[:11], 0.0, None)
    assert first.rows and not second.rows and not shorter.rows
    assert all(torch.equal(x, z) for x, z in zip(a, b))
    want = reference(h[:11], m.decoder.weight, m.decoder.bias, y[:11], 0.0, None)
    tol = {} if precision is None else {"rtol": 3e-2, "atol": 3e-3}
    for got, w, what in zip(c, want, ("loss", "d/dh", "d/dW", "d/db")):
        assert_close(got, w, what, **tol)


@pytest.mark.parametrize("row_block", [None, 4], ids=["one-row-block", "4-row-blocks"])
@pytest.mark.parametrize("vocab_block", [None, 10], ids=["one-matmul", "10-word-blocks"])
@pytest.mark.parametrize("bias_scale", [1.0, 0.3])
def test_scoring_again_on_the_cpu_allocates_no_scores(monkeypatch, bias_scale, vocab_block,
                                                      row_block):
    """Scoring (lmlow.evaluate.target_log_probs) writes the scores and their log-softmax into
    kept buffers: scoring a stream a second time allocates no (rows, V) tensor, and the
    per-token numbers are those of log_softmax over W h + lambda b computed afresh (float64
    here), with the scores' matmul in one call or in blocks of 10 words, and the log-softmax
    over all the rows at once or 4 at a time (the last block partial)."""
    import numpy as np

    from lmlow.evaluate import lstm_logprobs

    monkeypatch.setattr(lmlow.loss, "_SCRATCH", {})
    if vocab_block:
        monkeypatch.setattr(lmlow.loss, "VOCAB_BLOCK", vocab_block)
        monkeypatch.setattr(lmlow.loss, "FP32_BLOCKS", True)
    if row_block:
        monkeypatch.setattr(lmlow.loss, "CACHED_ELEMENTS", V * row_block)
    m = untied().eval()
    ids = np.random.RandomState(3).randint(1, V, 200)
    ids[::9] = 0
    lstm_logprobs(m, ids, 0, batch_size=3, bptt=11, bias_scale=bias_scale)
    with LogitShapes(V) as again:
        got = lstm_logprobs(m, ids, 0, batch_size=3, bptt=11, bias_scale=bias_scale)
    assert not again.rows
    m64 = copy.deepcopy(m).double()
    with torch.no_grad():
        inputs = torch.tensor(np.concatenate([[0], ids[:-1]])).unsqueeze(1)   # <eos> first
        out, *_ = m64(inputs, m64.init_hidden(1))
        logits = out.squeeze(1) @ m64.decoder.weight.t() + bias_scale * m64.decoder.bias
        want = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids).unsqueeze(1))
    assert np.abs(got - want.squeeze(1).numpy()).max() < 1e-4


@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_tied_model_gradient_adds_input_and_output_paths(monkeypatch, eps):
    """A tied AWD-LSTM (one matrix for encoder and decoder): the full model's forward, then
    lm_loss, gives every parameter's gradient, the shared matrix's being the sum of its
    embedding and softmax contributions, as float64 autograd through the same model with
    F.cross_entropy does."""
    monkeypatch.setattr(lmlow.loss, "LOGIT_CHUNK_ELEMENTS", V * 4)
    torch.manual_seed(0)
    m = AWDLSTM(V, D, 12, 2, D, tie=True).eval()        # eval: no dropout, deterministic
    with torch.no_grad():
        m.encoder.weight.normal_(0, 0.5)
        m.decoder.bias.normal_(0, 1.0)
    ref = copy.deepcopy(m).double()
    assert m.decoder.weight is m.encoder.weight and ref.decoder.weight is ref.encoder.weight
    words, y = inputs(seed=3)[1], inputs(seed=4)[1]

    out, _, _, _ = m(words, m.init_hidden(B))
    loss = lm_loss(m, out, y, label_smoothing=eps)
    loss.backward()
    rout, _, _, _ = ref(words, ref.init_hidden(B))
    rloss = F.cross_entropy(ref.decoder(rout).reshape(-1, V), y.reshape(-1), label_smoothing=eps)
    rloss.backward()

    assert_close(loss, rloss, "loss")
    grads = dict(m.named_parameters())
    for name, p in ref.named_parameters():
        assert_close(grads[name].grad, p.grad, f"d/d{name}")
    # the shared matrix really gets both paths: the softmax part alone is not its gradient
    _, _, dw_softmax, _ = reference(out, m.decoder.weight, m.decoder.bias, y, eps, None)
    assert not torch.allclose(m.encoder.weight.grad.double(), dw_softmax, atol=1e-4)


@pytest.mark.parametrize("eps,kind", [(0.0, None), (0.2, "unigram")])
def test_frozen_output_weights_get_no_gradient_and_the_rest_are_right(monkeypatch, eps, kind):
    """decoder.weight.requires_grad_(False): it gets no gradient; h and the bias still get
    the reference gradients (several chunks)."""
    monkeypatch.setattr(lmlow.loss, "LOGIT_CHUNK_ELEMENTS", V * 7)
    m, (h, y), prior = untied(), inputs(), make_prior(kind)
    m.decoder.weight.requires_grad_(False)
    loss, dh, dw, db = fused(m, h, y, eps, prior.float() if prior is not None else None)
    assert dw is None
    want = reference(h, m.decoder.weight, m.decoder.bias, y, eps, prior)
    for g, w, what in zip((loss, dh, db), (want[0], want[1], want[3]), ("loss", "d/dh", "d/db")):
        assert_close(g, w, what)


def test_frozen_bias_and_weights_still_give_the_output_gradient(monkeypatch):
    """Only h needs a gradient (frozen weight and bias): it is still right."""
    monkeypatch.setattr(lmlow.loss, "LOGIT_CHUNK_ELEMENTS", V * 7)
    m, (h, y) = untied(), inputs()
    m.decoder.weight.requires_grad_(False)
    m.decoder.bias.requires_grad_(False)
    loss, dh, dw, db = fused(m, h, y, 0.1, None)
    assert dw is None and db is None
    want = reference(h, m.decoder.weight, m.decoder.bias, y, 0.1, None)
    assert_close(loss, want[0], "loss")
    assert_close(dh, want[1], "d/dh")


def test_loss_without_gradients_is_the_reference_loss():
    """Under torch.no_grad (validation) the value is the same cross-entropy."""
    m, (h, y), prior = untied(), inputs(), unigram_prior()
    with torch.no_grad():
        got = lm_loss(m, h, y, label_smoothing=0.25, prior=prior.float())
    assert_close(got, reference(h, m.decoder.weight, m.decoder.bias, y, 0.25, prior)[0], "loss")


@pytest.mark.parametrize("blocks", [False, True], ids=["whole-chunks", "row-and-word-blocks"])
def test_bf16_autocast_stays_close_and_keeps_fp32_gradients(monkeypatch, blocks):
    """Under CPU bf16 autocast (what --precision bf16 runs) the loss and gradients stay within
    bf16 rounding (2%) of the float64 reference and come back in the parameters' dtype, with
    each chunk's softmax taken whole, or 3 rows at a time with the logits' matmul 10 words at a
    time (a CPU's bf16 blocks, smaller than their defaults)."""
    monkeypatch.setattr(lmlow.loss, "LOGIT_CHUNK_ELEMENTS", V * 7)
    if blocks:
        monkeypatch.setattr(lmlow.loss, "CACHED_ELEMENTS", V * 3)
        monkeypatch.setattr(lmlow.loss, "BF16_VOCAB_BLOCK", 10)
        monkeypatch.setattr(lmlow.loss, "BF16_BLOCKS", True)     # on any CPU, not only AMX
        monkeypatch.setattr(lmlow.loss, "BLOCK_ROWS", 1)
    assert (lmlow.loss.vocab_blocks(V, torch.bfloat16, torch.device("cpu"), 7) == 10) == blocks
    m, (h, y) = untied(), inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = fused(m, h, y, 0.1, None)
    want = reference(h, m.decoder.weight, m.decoder.bias, y, 0.1, None)
    for g, w, what in zip(got, want, ("loss", "d/dh", "d/dW", "d/db")):
        assert g.dtype == torch.float32, what
        scale = w.abs().max().item()
        err = (g.double() - w).abs().max().item()
        assert err <= 0.02 * scale, f"{what}: error {err:.3g} vs scale {scale:.3g}"


@pytest.mark.parametrize("wait_free", [False, True], ids=["cpu-fallback", "gpu-wait-free"])
def test_the_log_normaliser_is_logsumexp_even_where_the_target_probability_underflows(wait_free):
    """The loss takes log sum exp of each row from the softmax it computed anyway. Both ways
    (the CPU's x_y - log p_y with logsumexp where p_y is tiny; a GPU's max x - log max p, which
    waits for nothing) equal float64 logsumexp, also on rows whose target lies 200 or 5,000
    below the best logit, where p_y is 0 or a subnormal in float32."""
    from lmlow.loss import log_normaliser

    g = torch.Generator().manual_seed(4)
    logits = torch.randn(6, V, generator=g) * 4
    y = torch.tensor([3, 10, 50, 96, 0, 7])
    logits[1, 10] = logits[1].max() - 200          # p_y = exp(-200): 0 in float32
    logits[2, 50] = logits[2].max() - 5000
    logits[3, 96] = logits[3].max() - 95           # p_y ~ 5e-42: subnormal, 3 digits left
    logits[4] += 1e4                               # large offsets cancel exactly
    probs = torch.softmax(logits, -1)
    picked = logits.gather(1, y[:, None]).squeeze(1)
    got = log_normaliser(logits, probs, picked, probs.gather(1, y[:, None]).squeeze(1), wait_free)
    want = torch.logsumexp(logits.double(), -1)
    assert torch.allclose(got.double(), want, rtol=1e-6, atol=1e-5), (got, want)
    assert probs[1, 10] == 0 and 0 < probs[3, 96] < 1e-38      # the cases are what they say


@pytest.mark.parametrize("precision", [None, torch.bfloat16], ids=["fp32", "bf16"])
def test_a_hopeless_target_costs_its_true_loss_not_infinity(monkeypatch, precision):
    """A target far below the rest of its row (log p = -300: probability 0 in float32)
    gives the reference's loss and gradients, not inf or NaN."""
    monkeypatch.setattr(lmlow.loss, "LOGIT_CHUNK_ELEMENTS", V * 7)
    m, (h, y) = untied(), inputs()
    with torch.no_grad():
        m.decoder.bias[y[2, 1]] = -300.0
    with torch.autocast("cpu", dtype=precision or torch.bfloat16, enabled=precision is not None):
        got = fused(m, h, y, 0.1, None)
    want = reference(h, m.decoder.weight, m.decoder.bias, y, 0.1, None)
    assert want[0] > 300 / (T * B)                 # the one token's loss dominates the mean
    tol = {} if precision is None else {"rtol": 2e-2, "atol": 2e-2}
    for g, w, what in zip(got, want, ("loss", "d/dh", "d/dW", "d/db")):
        assert torch.isfinite(g).all(), what
        assert_close(g, w, what, **tol)


@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_the_plain_cross_entropy_beside_the_smoothed_objective(eps):
    """lm_losses gives the objective and the plain cross-entropy (what a training perplexity
    is of): with label smoothing the two differ, and each is F.cross_entropy's."""
    from lmlow.loss import lm_losses

    m, (h, y) = untied(), inputs()
    loss, nll = lm_losses(m, h, y, label_smoothing=eps)
    want_loss = reference(h, m.decoder.weight, m.decoder.bias, y, eps, None)[0]
    want_nll = reference(h, m.decoder.weight, m.decoder.bias, y, 0.0, None)[0]
    assert loss.item() == pytest.approx(want_loss.item(), rel=1e-5)
    assert nll.item() == pytest.approx(want_nll.item(), rel=1e-5)
    assert not nll.requires_grad


def test_fp16_rounds_the_softmax_gradient_after_the_loss_scale():
    """In fp16 the gradient of the logits is rounded as a loss-scaled backward would round
    it (x the GradScaler's scale over the tokens), so the output rows of rare words, whose
    probabilities (p ~ rank^-2, ~1e-8) lie below fp16's normal range, keep their gradient.
    Unscaled (as before), half the rare rows' gradient entries were 0 and their error 87%."""
    from lmlow.loss import lm_losses

    torch.manual_seed(0)
    vocab, d, n = 10000, 200, 700
    ranks = torch.arange(1, vocab + 1, dtype=torch.float64)
    m = torch.nn.Module()
    m.decoder = torch.nn.Linear(d, vocab)
    with torch.no_grad():
        m.decoder.bias.copy_(torch.log_softmax(-2.0 * ranks.log(), 0))
        m.decoder.weight.uniform_(-0.1, 0.1)
    h = torch.randn(n, d) * 0.5
    y = torch.multinomial(m.decoder.bias.detach().exp(), n, replacement=True)
    scale = torch.tensor(65536.0)                  # a GradScaler's first scale

    def grad(fp16: bool, scaled: bool = True):
        m.decoder.weight.grad = None
        with torch.autocast("cpu", dtype=torch.float16, enabled=fp16):
            loss, _ = lm_losses(m, h, y, grad_scale=scale if scaled else None)
        (loss * scale).backward()                  # as GradScaler.scale(loss).backward()
        return m.decoder.weight.grad / scale

    ref = reference(h, m.decoder.weight, m.decoder.bias, y, 0.0, None)[2]
    rare = slice(vocab // 2, vocab)

    def rare_error(g):
        return ((g.double() - ref)[rare].norm(dim=1) / ref[rare].norm(dim=1)).median().item()
    assert rare_error(grad(fp16=True)) < 0.05
    assert rare_error(grad(fp16=True, scaled=False)) > 0.5      # what the scale is for
    assert rare_error(grad(fp16=False)) < 1e-4
