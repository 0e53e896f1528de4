"""The training loss: softmax cross-entropy over the vocabulary, optionally label-smoothed,
fused so that a 100k-word softmax is cheap in time and memory.

``ChunkedSoftmaxCE`` computes the logits ``h @ W.T + b`` in row chunks of at most
``LOGIT_CHUNK_ELEMENTS`` values, takes one softmax per chunk and derives every gradient from it
in the forward pass (d loss / d logits = softmax - target), so no chunk's logits are kept for
backward and a large vocabulary never holds all its logits at once. Backward only scales the
stored gradients. The loss comes from the same softmax (:func:`log_normaliser`), not from a
log-softmax and a second pass of exp. Matmuls run in the autocast dtype when autocast is on
(each chunk's products, the gradients of W and b among them, rounded to it as autocast rounds
them); the softmax and all accumulators are fp32. In fp16 the gradient of the logits is rounded
as a loss-scaled backward rounds it, times the GradScaler's scale over the tokens
(``grad_scale``), then divided back in fp32: without it, probabilities below fp16's normal
range (6e-5; rare words' under a sharp model) lost their gradient. An overflow is an inf the
scaler sees, skips and lowers its scale for, as under plain autocast. On a CPU the chunk's
logits and softmax are written into buffers the process keeps (:func:`scratch`) rather than
into fresh tensors, whose page faults cost more than the writing. At 61k words the loss is 95%
of an update; these choices make the paper regime's bf16 update 1.38x as fast (BENCHMARKS.md,
"One pass less in the loss"). On a CPU in fp32 the two matmuls with the vocabulary as their
long side take it in blocks (:func:`vocab_blocks`): the same bits, 1.14-1.2x the update's speed
on an AMD CPU without AVX-512 and 1.20-1.27x on one with it (not on an Intel Xeon with AVX-512:
one call was faster there). On a CPU the chunk's matmul writes its logits in its own dtype, and
the bias, the fp32 softmax, the target's -1 and the rounding back for the next matmuls go over
``CACHED_ELEMENTS`` values at a time (a few rows), which stay in the core's cache between those
steps instead of going to memory and back four times; in bf16 with AMX the logits' matmul also
takes the vocabulary in blocks: the same bits (but for d/db when the output weights are frozen
and the bias trains: summed a row block at a time, other rounding), the paper regime's bf16
update 1.30-1.36x as fast on an Intel Xeon with AMX (BENCHMARKS.md, "The loss row block by row
block"). A GPU takes each chunk whole.

Label smoothing (Koehn 2020, 10.2.3): the target is (1 - eps) x the true word + eps x a prior
over the vocabulary, uniform unless a prior (e.g. the training unigram distribution) is given.
"""
from __future__ import annotations

import torch

from lmlow.cpus import amx_tiles, cpu_vendor

LOGIT_CHUNK_ELEMENTS = 1 << 26   # logits computed at once (256 MB of fp32, 128 of bf16)
CACHED_ELEMENTS = 1 << 20   # of those, what a CPU takes through bias, softmax, rounding at once
VOCAB_BLOCK = 256   # words per fp32 matmul on a CPU (:func:`vocab_blocks`)
BF16_VOCAB_BLOCK = 4096   # words per bf16 logits matmul on a CPU (:func:`vocab_blocks`)
# fp32 blocks only where they were measured to help: an AMD CPU (with AVX2 only or with
# AVX-512) and any CPU whose widest vector unit torch uses is AVX2; on an Intel Xeon with
# AVX-512 one call was as fast or faster (:func:`vocab_blocks`)
FP32_BLOCKS = (torch.backends.cpu.get_cpu_capability() == "AVX2"
               or cpu_vendor() == "AuthenticAMD")
# bf16 blocks only where measured to help: a CPU with AMX tiles (oneDNN's AMX kernels)
BF16_BLOCKS = amx_tiles()
BLOCK_ROWS = 2      # one row (a keyboard's next word) takes the vocabulary in one call

_SCRATCH: dict = {}


@torch.inference_mode(False)
def scratch(slot: str, shape: tuple[int, int], dtype: torch.dtype,
            device: torch.device) -> torch.Tensor:
    """A buffer of ``shape`` kept from one call to the next (per slot, dtype and device) for
    the loss's chunk of logits and its softmax. On a CPU a fresh tensor of tens of MB comes
    from the system anew at each allocation and pays a page fault per 4 kB at first touch;
    with these buffers PTB's update is 1.13x as fast in fp32 and 1.46x in bf16 (BENCHMARKS.md,
    "The loss's buffers"). A GPU's caching allocator reuses its blocks already, so there a
    fresh tensor is returned and the GPU's memory is as before. At most
    ``LOGIT_CHUNK_ELEMENTS`` values a buffer, the size the loss's chunk took anyway; made
    outside inference mode, so scoring and training share it."""
    if device.type != "cpu":
        return torch.empty(shape, dtype=dtype, device=device)
    rows, vocab = shape
    key = (slot, dtype, device)
    buf = _SCRATCH.get(key)
    if buf is None or buf.size(1) != vocab or buf.size(0) < rows:
        _SCRATCH.pop(key, None)                   # the old one goes before the new one comes
        buf = _SCRATCH[key] = torch.empty(shape, dtype=dtype, device=device)
    return buf[:rows]


def vocab_blocks(vocab: int, dtype: torch.dtype, device: torch.device,
                 rows: int) -> int | None:
    """How many words each of the loss's two matmuls with a (rows, V) side (the logits, and
    d loss / d W) takes at a time. On a CPU in fp32 that is an AMD one or whose widest vector
    unit is AVX2 (``FP32_BLOCKS``), from ``BLOCK_ROWS`` rows up: ``VOCAB_BLOCK`` words a call,
    so that W's slice stays in cache while the rows pass over it; at 61k words the logits ran
    1.05-1.40x and d loss / d W 1.11-1.29x as fast on an AMD EPYC core without AVX-512
    (scoring 1.35x), the logits 1.51x, d loss / d W 1.34x and the fused loss 1.31x on one with
    AVX-512, and the loss, its gradients and the scores came out the same to the bit (each
    value is still one sum over d or over the rows; BENCHMARKS.md, "The loss in blocks of
    words", "fp32's blocks on an AMD EPYC with AVX-512"). On an Intel Xeon with AVX-512 one
    call was the faster (1.08-1.14x at 700-1,098 rows: BENCHMARKS.md, "Scoring row block by
    row block"), so there, and on any other CPU not measured (an ARM one), fp32 takes one
    call. One row (a keyboard's next word) reuses no slice, and a call per block only adds its
    overhead: one call was 1.14-1.96x as fast (BENCHMARKS.md, "The next word's scores in one
    call"; from 2 to 32 rows neither way won everywhere). On a CPU in bf16 with AMX tiles
    (``BF16_BLOCKS``), ``BF16_VOCAB_BLOCK`` words a call for the logits (the loss takes d loss
    / d W in one call there: blocks did not make it faster): at 61k words the logits' matmul
    ran 1.65x as fast on an Intel Xeon with AMX, the same bits (BENCHMARKS.md, "The loss row
    block by row block"); on an AMD EPYC with AVX-512 BF16 and no AMX the fused loss was 1.00x
    with them (two runs, best of 10), so it keeps one call. None (one call) elsewhere: on a
    GPU more calls are only more launches."""
    if device.type != "cpu" or rows < BLOCK_ROWS:
        return None
    if dtype == torch.float32 and FP32_BLOCKS and vocab > 2 * VOCAB_BLOCK:
        return VOCAB_BLOCK
    if dtype == torch.bfloat16 and BF16_BLOCKS and vocab > 2 * BF16_VOCAB_BLOCK:
        return BF16_VOCAB_BLOCK
    return None


def word_slices(vocab: int, block: int | None) -> list[slice]:
    """The slices of the vocabulary a matmul takes one call each: ``block`` words at a time,
    or all at once (None)."""
    return [slice(None)] if block is None else [slice(v, v + block) for v in range(0, vocab, block)]


def logits_into(out: torch.Tensor, h: torch.Tensor, w: torch.Tensor, block: int | None,
                bias: torch.Tensor | None = None) -> torch.Tensor:
    """``out = h @ w.T`` (with ``bias``: ``bias + h @ w.T`` as one ``addmm``, what
    ``nn.Linear`` computes), ``block`` words of ``w`` at a time (None: at once)."""
    for part in word_slices(w.size(0), block):
        if bias is None:
            torch.mm(h, w[part].t(), out=out[:, part])
        else:
            torch.addmm(bias[part], h, w[part].t(), out=out[:, part])
    return out


def add_product(acc: torch.Tensor, a: torch.Tensor, g: torch.Tensor, block: int | None) -> None:
    """``acc += a @ g``, ``block`` columns of ``g`` at a time (None: at once)."""
    for part in word_slices(g.size(1), block):
        acc[:, part].addmm_(a, g[:, part])


def lm_loss(model, output: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0,
            prior: torch.Tensor | None = None) -> torch.Tensor:
    """Mean (label-smoothed) cross-entropy of ``model.decoder`` applied to ``output`` (..., d)
    against ``targets`` (...); ``prior`` is the smoothing distribution (None: uniform)."""
    return lm_losses(model, output, targets, label_smoothing, prior)[0]


def lm_losses(model, output: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0,
              prior: torch.Tensor | None = None, grad_scale: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """(:func:`lm_loss`, the plain cross-entropy, no gradient): with label smoothing the
    objective is not the cross-entropy a perplexity is of, and training logs the latter.
    ``grad_scale``: the fp16 GradScaler's scale (module docstring)."""
    flat, y = output.reshape(-1, output.size(-1)), targets.reshape(-1)
    vocab = model.decoder.weight.size(0)
    rows = max(1, LOGIT_CHUNK_ELEMENTS // vocab)
    eps = float(label_smoothing)
    target_prior = None
    if eps:
        target_prior = prior if prior is not None else flat.new_full((vocab,), 1.0 / vocab)
    device = flat.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
    unscale = grad_scale / y.numel() if grad_scale is not None and dtype == torch.float16 else None
    total, nll = ChunkedSoftmaxCE.apply(flat, model.decoder.weight, model.decoder.bias, y, eps,
                                        target_prior, rows, dtype, torch.is_grad_enabled(), unscale)
    return total / y.numel(), nll / y.numel()


TINY = 1e-30   # a probability below this may have lost its precision (fp32's normal floor: 1e-38)


def log_normaliser(logits: torch.Tensor, probs: torch.Tensor, picked: torch.Tensor,
                   p_picked: torch.Tensor, wait_free: bool = False) -> torch.Tensor:
    """log sum_v exp(logits_v) of each row, from the softmax already computed: no pass of exp
    over the (rows, V) chunk of its own (one pass less than log_softmax then exp: BENCHMARKS.md,
    "One pass less in the loss"). From the target's logit and probability, lse = x_y - log p_y,
    exact while p_y is a normal float; rows where it is below ``TINY`` are recomputed with
    logsumexp. That test needs the host to read a flag, free on a CPU, a wait on a GPU; with
    ``wait_free`` (a GPU) the largest probability, never below 1/V, gives lse = max x - log
    max p instead (two reductions, no wait)."""
    if wait_free:
        return logits.amax(-1) - probs.amax(-1).log()
    lse = picked - p_picked.log()
    low = p_picked < TINY
    if low.any():
        lse[low] = torch.logsumexp(logits[low], dim=-1)
    return lse


class ChunkedSoftmaxCE(torch.autograd.Function):
    """Summed (label-smoothed) cross-entropy of ``h @ W.T + b``, chunk by chunk, with the
    gradients of h, W and b computed in the forward pass from each chunk's softmax, then
    scaled in backward; and the summed plain cross-entropy (no gradient). Matmuls run in
    ``dtype`` when given; softmax and sums are fp32. ``scale``: what the softmax's gradient is
    multiplied by before it is rounded to fp16 (module docstring)."""

    @staticmethod
    def forward(ctx, h, weight, bias, y, eps, prior, rows, dtype, grads=True, scale=None):
        # under torch.no_grad() only the loss is wanted: skip the gradient work
        need_h, need_w, need_b = (n and grads for n in ctx.needs_input_grad[:3])
        mm = dtype or torch.float32
        w = weight.to(mm)
        gh = torch.empty(h.shape, dtype=torch.float32, device=h.device) if need_h else None
        # d loss / d W is accumulated transposed, (d, V): the matmul that writes it that way
        # is 1.4x as fast on a CPU as the one that writes (V, d). With W's gradient, a row
        # of ones under h^T makes the same matmul give the bias's gradient in its last row.
        fold_b = need_b and need_w
        gwt = torch.zeros((weight.size(1) + fold_b, weight.size(0)), dtype=torch.float32,
                          device=h.device) if need_w else None
        gb = torch.zeros(bias.shape, dtype=torch.float32, device=h.device) \
            if need_b and not fold_b else None
        total = torch.zeros((), dtype=torch.float32, device=h.device)
        nll = torch.zeros((), dtype=torch.float32, device=h.device) if eps else total
        prior = prior.float() if eps else None
        prior_total = prior.sum() if eps else None
        block = vocab_blocks(weight.size(0), mm, h.device, min(rows, h.size(0)))
        with torch.autocast(h.device.type, enabled=False):
            bias32 = bias.float()
            for i in range(0, h.size(0), rows):
                hc, yc = h[i:i + rows].to(mm), y[i:i + rows].unsqueeze(1)
                shape, dev = (hc.size(0), weight.size(0)), h.device
                # the chunk's logits as the matmul writes them (in its dtype), then, a block of
                # rows at a time, what the next two matmuls read: d loss / d logits, rounded
                g = logits_into(scratch("low", shape, mm, dev), hc, w, block)
                step = shape[0] if dev.type != "cpu" else max(1, CACHED_ELEMENTS // shape[1])
                per_row = torch.empty((2 if eps else 1, shape[0]), dtype=torch.float32, device=dev)
                for j in range(0, shape[0], step):
                    part, yj = g[j:j + step], yc[j:j + step]
                    if mm == torch.float32:
                        logits = part.add_(bias32)                   # in place: 3x faster on CPU
                    else:   # copy, then add: torch.add(part, bias32, out=) makes a copy first
                        logits = scratch("logits", part.shape, torch.float32, dev)
                        logits.copy_(part).add_(bias32)
                    probs = torch.softmax(logits, dim=-1,
                                          out=scratch("probs", part.shape, torch.float32, dev))
                    picked = logits.gather(1, yj).squeeze(1)
                    lse = log_normaliser(logits, probs, picked, probs.gather(1, yj).squeeze(1),
                                         wait_free=dev.type != "cpu")
                    per_row[0, j:j + step] = lse - picked
                    if eps:
                        per_row[1, j:j + step] = lse * prior_total - logits @ prior
                    probs.scatter_add_(1, yj, probs.new_full((yj.size(0), 1), -(1 - eps)))
                    if eps:
                        probs -= eps * prior
                    if gb is not None:
                        gb += probs.sum(0)
                    if mm == torch.float32 and step >= shape[0]:
                        g = probs                    # one block (a GPU): read where it is
                    elif scale is None:
                        part.copy_(probs)            # rounded to the matmuls' dtype, if lower
                    else:
                        torch.mul(probs, scale, out=part)
                plain = per_row[0].sum()
                loss = (1 - eps) * plain
                if eps:
                    loss = loss + eps * per_row[1].sum()
                    nll += plain
                total += loss
                if need_h:
                    if mm == torch.float32:
                        torch.mm(g, w, out=gh[i:i + rows])
                    elif scale is None:
                        gh[i:i + rows] = (g @ w).float()
                    else:
                        gh[i:i + rows] = (g @ w).float() / scale
                if need_w:
                    ht = hc.t()
                    if fold_b:
                        ht = torch.cat([ht, ht.new_ones((1, ht.size(1)))])
                    if mm == torch.float32:
                        add_product(gwt, ht, g, block)
                    elif scale is None:
                        gwt += torch.mm(ht, g, out=scratch("dW", gwt.shape, mm, dev))
                    else:
                        gwt.addcdiv_(torch.mm(ht, g, out=scratch("dW", gwt.shape, mm, dev)), scale)
        gw = gwt[:weight.size(1)].t().contiguous() if need_w else None
        if fold_b:
            gb = gwt[-1].clone()
        ctx.save_for_backward(*(t if t is not None else torch.empty(0) for t in (gh, gw, gb)))
        ctx.dtypes = (h.dtype, weight.dtype, bias.dtype)
        ctx.needs = (need_h, need_w, need_b)
        nll = nll.clone() if nll is total else nll
        ctx.mark_non_differentiable(nll)
        return total, nll

    @staticmethod
    def backward(ctx, grad, _nll_grad):
        grads = [g.mul(grad).to(dt) if need else None
                 for g, dt, need in zip(ctx.saved_tensors, ctx.dtypes, ctx.needs)]
        return (*grads, None, None, None, None, None, None, None)
