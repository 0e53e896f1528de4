"""A small decoder-only Transformer under the same embedding flags as the AWD-LSTM.

The input embedding has the vectors' size (``emb_size``) and is projected to the model width
when they differ; the last block's output is projected back to the output embedding's size
(``out_size``), so ``--tie``, ``--freeze-input``, ``--freeze-output`` and ``--init glove,
glove-output, unigram`` act on exactly the matrices they act on in the LSTM (``encoder`` and
``decoder``, built and frozen by :func:`lmlow.checkpoint.build_model`).

Why this shape:

- **Pre-norm blocks** (LayerNorm before attention and before the GELU MLP, residual adds, a
  final LayerNorm): they train stably without a learning-rate warm-up trick per layer.
- **Banded causal attention over a carried memory** (Transformer-XL's recurrence without
  relative-position matrices): each token attends to itself and the ``context`` tokens
  before it, and each block keeps the keys and values of its last ``context`` positions as
  its state, carried across BPTT chunks like the LSTM's hidden state and detached the same
  way. A token's output therefore depends on a fixed window only, so a stream scored in any
  batch size, or chunks of any length, gives the same numbers as one unbroken pass (given
  ``layers x context`` tokens of warm-up: :attr:`TransformerLM.receptive_field`), and
  sampling uses the memory as its key/value cache. Transformer-XL carries each block's
  inputs and computes their keys and values again with the current weights; carrying the keys
  and values themselves spares that (a quarter of a block's projection and MLP work on a
  64-token chunk with 128 carried positions; a step 7-8% faster on a CPU), at the price that in training the carried
  ones were made by the weights of an update or two before. Scoring changes no weight, so
  there the two are the same.
- **Rotary positions** (RoPE) on queries and keys: attention scores depend only on the
  distance between two tokens, which is what makes the window's output independent of where
  a chunk starts.
- Attention (:func:`band_attention`): on a CUDA GPU, the memory-efficient kernel's own
  sliding window (``torch.ops.aten._efficient_attention_forward`` with a bottom-right causal
  mask of ``context + 1`` keys), which skips the key blocks outside the band, takes no mask
  tensor and keeps the fused attention dropout; a GPU checks it once per dtype against the
  masked call below and uses the masked call if it disagrees or is missing. Elsewhere (and
  as that fallback) ``torch.nn.functional.scaled_dot_product_attention`` with the band as a
  boolean mask (the math kernel on CPUs). Through a mask, a GPU computes every key of every
  query (twice the band) and SDPA takes a head size that is not a multiple of 4 (fp32) or 8
  to the unfused math kernel; the windowed kernel pads the head size instead.

Dropout: ``dropoute`` (whole words) and ``dropouti`` on the embeddings, ``dropouth`` on the
attention weights and the residual branches, ``dropout`` on the output; ``wdrop`` (the LSTM's
DropConnect) has no meaning here and is ignored.
"""
from __future__ import annotations

import functools
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from lmlow.model import embedding_dropout, locked_dropout, scaled_logits, tie_and_init


@functools.lru_cache(maxsize=32)
@torch.inference_mode(False)
def _rotary_table(d: int, length: int, device: torch.device, dtype: torch.dtype):
    """cos and sin of position x frequency for positions 0..length-1 (length, d/2), made once
    per shape: recomputing them in every block of every step was a dozen small kernels each.
    Built outside inference mode, so a table first made while scoring can be saved for a later
    training step's backward."""
    freqs = 1.0 / (10000 ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
    angles = torch.arange(length, device=device, dtype=torch.float32)[:, None] * freqs[None, :]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate(x: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Rotary position embedding of ``x`` (..., L, d) at positions ``start`` .. ``start+L-1``:
    pairs of dimensions turned by position x frequency, so q.k depends on the positions'
    difference."""
    d, L = x.shape[-1], x.shape[-2]
    # one table per power of two of positions, so sampling (one more position each step)
    # does not make a table per length; a position's values do not depend on the table's size
    cos, sin = _rotary_table(d, max(256, 1 << (start + L - 1).bit_length()), x.device, x.dtype)
    return turn(x, cos[start:start + L], sin[start:start + L])


def turn(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The rotation itself: the pairs of dimensions of ``x`` (..., L, d) turned by the angles
    whose cosines and sines are ``cos``, ``sin`` (L, d/2) (lmlow export's step calls it with
    a table it keeps)."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


@functools.lru_cache(maxsize=32)
@torch.inference_mode(False)
def _cached_band_mask(queries: int, memory: int, window: int, device: torch.device) -> torch.Tensor:
    """:func:`band_mask`, made once per shape (outside inference mode, as the rotary table)."""
    return band_mask(queries, memory, window, device)


def band_mask(queries: int, memory: int, window: int, device) -> torch.Tensor:
    """(queries, memory + queries) booleans: query i (at position memory + i) may attend to
    key j when j is itself or one of the ``window`` positions before it."""
    q = torch.arange(queries, device=device)[:, None] + memory
    k = torch.arange(memory + queries, device=device)[None, :]
    return (k <= q) & (k >= q - window)


def band_attention(q, k, v, window: int, dropout_p: float = 0.0) -> torch.Tensor:
    """Attention of the T queries ``q`` (B, H, T, D), at the last T of the S positions of ``k``
    and ``v`` (B, H, S, D), each to itself and the ``window`` positions before it (the band of
    :func:`band_mask`); (B, H, T, D). On a CUDA GPU through the windowed fused kernel (when its
    check passed for this device and dtype), elsewhere through a masked SDPA call."""
    T, S = q.shape[-2], k.shape[-2]
    if q.is_cuda and window_kernel_agrees(q.device, q.dtype):
        return _window_attention(q, k, v, window, dropout_p)
    mask = _cached_band_mask(T, S - T, window, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


def _window_attention(q, k, v, window: int, dropout_p: float) -> torch.Tensor:
    """The CUDA path of :func:`band_attention`: the head size padded with zeros to a multiple
    of 8 (the kernel's alignment; zeros change no score and add only output columns that are
    cut off), the scale that of the true head size."""
    D = q.shape[-1]
    pad = -D % 8
    if pad:
        q, k, v = (F.pad(t, (0, pad)) for t in (q, k, v))
    # the kernel's layout is (B, S, H, D): a transposed view, as SDPA itself passes it
    out = _WindowAttention.apply(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                 window + 1, float(dropout_p), 1.0 / math.sqrt(D))
    out = out.transpose(1, 2)
    return out[..., :D] if pad else out


_BOTTOM_RIGHT = 2    # the kernel's CausalFromBottomRight: the last query sees the last key


class _WindowAttention(torch.autograd.Function):
    """``aten._efficient_attention_forward/backward`` with a bottom-right causal mask and a
    window of ``keys`` keys (the query's own and the ``keys - 1`` before it): the fused kernel
    SDPA calls for a masked or causal call, asked for the band directly. The forward saves the
    log-sum-exp and the dropout's Philox seed and offset, so backward recomputes the same
    dropout mask, as SDPA's own autograd does."""

    @staticmethod
    def forward(ctx, q, k, v, keys: int, dropout_p: float, scale: float):
        grad = any(ctx.needs_input_grad[:3])      # (forward itself runs without grad mode)
        out, lse, seed, offset, _, _ = torch.ops.aten._efficient_attention_forward(
            q, k, v, None, None, None, None, None, dropout_p, _BOTTOM_RIGHT, grad,
            scale=scale, window_size=keys)
        ctx.save_for_backward(q, k, v, out, lse, seed, offset)
        ctx.args = (keys, dropout_p, scale)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse, seed, offset = ctx.saved_tensors
        keys, dropout_p, scale = ctx.args
        dq, dk, dv, _ = torch.ops.aten._efficient_attention_backward(
            grad_out.contiguous(), q, k, v, None, out, None, None, q.shape[1], k.shape[1], lse,
            dropout_p, seed, offset, _BOTTOM_RIGHT, False, scale=scale, window_size=keys)
        return dq, dk, dv, None, None, None


@functools.lru_cache(maxsize=None)
def window_kernel_agrees(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether the windowed kernel gives the masked call's attention and gradients on this
    device and dtype: checked once per process on a small problem that has a band narrower
    than its memory, a memory shorter than the band and an odd head size, from a generator of
    its own (the run's random state is not touched). A torch without the kernel's window, or
    a disagreement, is said once on stderr, and the masked call is used."""
    try:
        with torch.inference_mode(False), torch.enable_grad(), torch.autocast(
                device.type, enabled=False):
            gen = torch.Generator(device).manual_seed(0)
            for memory, window in ((9, 4), (2, 6)):
                B, H, T, D = 2, 3, 5, 10
                q, k, v = (torch.randn(B, H, n, D, device=device, generator=gen, dtype=dtype)
                           .requires_grad_() for n in (T, memory + T, memory + T))
                g = torch.randn(B, H, T, D, device=device, generator=gen, dtype=dtype)
                mask = band_mask(T, memory, window, device)
                ref = [t.float().detach().requires_grad_() for t in (q, k, v)]
                want = F.scaled_dot_product_attention(*ref, attn_mask=mask)
                want_grads = torch.autograd.grad(want, ref, g.float())
                got = _window_attention(q, k, v, window, 0.0)
                got_grads = torch.autograd.grad(got, (q, k, v), g)
                tol = 1e-4 if dtype == torch.float32 else 3e-2
                for a, b in zip((got, *got_grads), (want, *want_grads)):
                    if not torch.allclose(a.float(), b, atol=tol, rtol=tol):
                        raise ValueError(f"differs by {(a.float() - b).abs().max().item():.3g}")
        return True
    except Exception as e:                                     # noqa: BLE001 (said, then masked)
        reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        print(f"lmlow: warning: the windowed attention kernel is not used on {device} in "
              f"{dtype} ({reason}); the masked call is", file=sys.stderr)
        return False


class Block(nn.Module):
    """Pre-norm block: x + attention(LN(x) over the carried keys/values and x's), then
    x + MLP(LN(x))."""

    def __init__(self, width: int, heads: int, dropout: float):
        super().__init__()
        if width % heads or (width // heads) % 2:
            raise ValueError(f"the width {width} must split into {heads} heads of an even size")
        self.heads, self.dropout = heads, dropout
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor, memory: torch.Tensor, window: int):
        """``x`` (T, B, width) after ``memory`` (M, B, 2 x width): the keys and values (before
        rotation) of the M positions before it. Returns the block's output and the keys and
        values of x's positions (T, B, 2 x width), for the next chunk's memory."""
        T, B, W = x.shape
        M = memory.shape[0]
        q, kv = self.qkv(self.norm1(x)).split((W, 2 * W), dim=-1)
        keys_values = torch.cat([memory.to(kv.dtype), kv])                     # (M+T, B, 2W)
        q = q.reshape(T, B, self.heads, W // self.heads).permute(1, 2, 0, 3)
        k, v = keys_values.view(M + T, B, 2, self.heads, W // self.heads).permute(2, 1, 3, 0, 4)
        q, k = rotate(q, start=M), rotate(k)
        a = band_attention(q, k, v, window, self.dropout if self.training else 0.0)
        a = a.permute(2, 0, 1, 3).reshape(T, B, W)                           # (T, B, W)
        x = x + F.dropout(self.proj(a), self.dropout, self.training)
        return x + F.dropout(self.mlp(self.norm2(x)), self.dropout, self.training), kv


class TransformerLM(nn.Module):
    """Embedding (-> width) -> pre-norm blocks -> LayerNorm (-> output size) -> the output
    layer over the vocabulary; the same ``encoder``/``decoder``/``init_hidden``/``forward``/
    ``logits`` as :class:`lmlow.model.AWDLSTM`, so training, evaluation, sampling and the
    analyses run it unchanged."""

    def __init__(self, vocab_size: int, emb_size: int, width: int, layers: int, heads: int,
                 out_size: int, tie: bool, context: int, dropout: float = 0.1,
                 dropouth: float = 0.1, dropouti: float = 0.1, dropoute: float = 0.0):
        super().__init__()
        if tie and emb_size != out_size:
            raise ValueError("tied embeddings need equal input and output sizes")
        self.encoder = nn.Embedding(vocab_size, emb_size)
        self.project_in = nn.Linear(emb_size, width, bias=False) if emb_size != width else nn.Identity()
        self.blocks = nn.ModuleList(Block(width, heads, dropouth) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.project_out = nn.Linear(width, out_size, bias=False) if out_size != width else nn.Identity()
        self.decoder = nn.Linear(out_size, vocab_size)
        self.tie, self.width, self.context = tie, width, context
        self.dropout, self.dropouti, self.dropoute = dropout, dropouti, dropoute
        self.frozen_input_rows = None
        for name, p in self.named_parameters():
            if p.dim() > 1 and not name.startswith(("encoder", "decoder")):
                nn.init.normal_(p, 0.0, 0.02 / (math.sqrt(2 * layers) if name.endswith(
                    ("proj.weight", "mlp.2.weight")) else 1.0))
            elif name.endswith("bias") and not name.startswith("decoder"):
                nn.init.zeros_(p)
        tie_and_init(self.encoder, self.decoder, tie)

    @classmethod
    def from_config(cls, cfg, vocab_size: int, emb: int, out: int) -> "TransformerLM":
        return cls(vocab_size, emb, cfg.hidden_size, cfg.layers, cfg.heads, out, cfg.tie,
                   cfg.context, cfg.dropout, cfg.dropouth, cfg.dropouti, cfg.dropoute)

    @staticmethod
    def parameter_count(cfg, vocab_size: int, emb: int, out: int) -> int:
        """How many parameters :meth:`from_config` would make, without making them: a block
        is two LayerNorms, the q/k/v and output projections and the 4x MLP (12 w^2 + 13 w)."""
        w = cfg.hidden_size
        return (vocab_size * emb + (emb * w if emb != w else 0) + cfg.layers * (12 * w * w + 13 * w)
                + 2 * w + (w * out if out != w else 0) + (0 if cfg.tie else vocab_size * out)
                + vocab_size)

    @property
    def receptive_field(self) -> int:
        """How far back a token's output can depend on: each block adds ``context``."""
        return len(self.blocks) * self.context

    def init_hidden(self, batch_size: int) -> list[torch.Tensor]:
        """Empty memories: one (0, B, 2 x width) tensor of keys and values per block."""
        w = self.decoder.bias
        return [w.new_zeros(0, batch_size, 2 * self.width) for _ in self.blocks]

    def forward(self, words: torch.Tensor, hidden):
        """(output (T, B, out_size), new memories, raw output, dropped output), as the LSTM's."""
        x = embedding_dropout(self.encoder, words, self.dropoute, self.training)
        x = self.project_in(locked_dropout(x, self.dropouti, self.training))
        memories = []
        for block, memory in zip(self.blocks, hidden):
            x, kv = block(x, memory, self.context)
            memories.append(torch.cat([memory.to(kv.dtype), kv])[-self.context:])
        raw = self.project_out(self.norm(x))
        out = locked_dropout(raw, self.dropout, self.training)
        return out, memories, raw, out

    def logits(self, output: torch.Tensor, bias_scale: float = 1.0,
               out: torch.Tensor | None = None) -> torch.Tensor:
        return scaled_logits(self.decoder, output, bias_scale, out)


__all__ = ["Block", "TransformerLM", "band_attention", "band_mask", "rotate",
           "window_kernel_agrees"]
