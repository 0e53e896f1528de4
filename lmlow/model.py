"""AWD-LSTM (Merity et al. 2018) for today's PyTorch, with an output head that can be tied,
frozen, pretrained, and given a log-unigram bias (Meister et al. 2023).

Regularisers, as in the reference model:
- embedding dropout: whole word types are dropped from the input embedding for a batch;
- locked (variational) dropout: one mask per sequence, shared over time, on the embeddings
  (``dropouti``), between layers (``dropouth``) and on the output (``dropout``);
- weight drop: DropConnect on each layer's hidden-to-hidden matrix. The dropped matrix is
  passed to the fused LSTM kernel (``aten::lstm``; on a GPU cuDNN, in one weight buffer of
  its layout, :meth:`WeightDropLSTM.flat_call`), which still runs the whole sequence: no
  per-step Python loop.
AR and TAR are computed by the training loop from the outputs this model returns.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

from lmlow.loss import logits_into, vocab_blocks

INIT_RANGE = 0.1  # uniform(-0.1, 0.1), as the reference model initialises embeddings


def locked_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout with one mask per sequence (dim 1) shared over time (dim 0)."""
    if not training or p == 0:
        return x
    mask = x.new_empty(1, x.size(1), x.size(2)).bernoulli_(1 - p) / (1 - p)
    return x * mask


def embedding_dropout(embed: nn.Embedding, words: torch.Tensor, p: float,
                      training: bool) -> torch.Tensor:
    """Drop whole word types: every occurrence of a dropped word gets a zero vector.

    The mask is looked up per token rather than applied to the matrix, which is the same
    function without copying a 100k-word matrix for every batch.
    """
    out = embed(words)
    if not training or p == 0:
        return out
    keep = out.new_empty(embed.num_embeddings).bernoulli_(1 - p) / (1 - p)
    return out * keep[words].unsqueeze(-1)


class WeightDropLSTM(nn.Module):
    """One LSTM layer with DropConnect on its hidden-to-hidden weights."""

    def __init__(self, input_size: int, hidden_size: int, weight_drop: float):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size)
        self.weight_drop = weight_drop

    def forward(self, x, hidden):
        if x.is_cuda and lstm_in_fp32("cuda", torch.is_autocast_enabled("cuda"),
                                      torch.get_autocast_dtype("cuda")):
            # under bf16 autocast torch would run cuDNN's LSTM in fp16 without loss scaling
            # (its autocast wrapper casts RNNs to half whatever dtype was asked for): run it in
            # fp32 instead (TF32 tensor cores on Ampere and later), outside autocast
            with torch.autocast("cuda", enabled=False):
                h, c = hidden
                return self._forward(x.float(), (h.float(), c.float()))
        return self._forward(x, hidden)

    def _forward(self, x, hidden):
        if not self.training or self.weight_drop == 0:
            return self.lstm(x, hidden)
        w = self.lstm.weight_hh_l0
        keep = torch.rand_like(w) >= self.weight_drop   # 2x faster than bernoulli_ on CPU
        w = w * keep / (1 - self.weight_drop)
        if x.is_cuda and self.flat_layout_ok():
            return self.flat_call(x, hidden, w)
        return functional_call(self.lstm, {"weight_hh_l0": w}, (x, hidden))

    def flat_layout_ok(self) -> bool:
        """Whether the module's weight buffer has cuDNN's order (w_ih, w_hh, b_ih, b_hh at
        increasing, non-overlapping offsets), which :meth:`flat_call` writes; checked once per
        buffer. If a torch or cuDNN version lays it out otherwise, training falls back to the
        plain functional call (correct, with cuDNN copying the weights at every call) and says
        so once."""
        offsets, total = _flat_layout(self.lstm)
        key = (offsets[0], total, self.lstm._flat_weights[0].untyped_storage().data_ptr())
        if getattr(self, "_layout_checked", None) != key:
            sizes = [w.numel() for w in self.lstm._flat_weights]
            ok = all(o + n <= nxt for o, n, nxt in zip(offsets, sizes, offsets[1:] + [total]))
            ok = ok and len(offsets) == 4 and offsets[0] >= 0
            if not ok:
                warnings.warn(f"the LSTM's weight buffer is not laid out as lmlow expects "
                              f"(offsets {offsets} of {total}); training continues with the "
                              "plain call, which copies the weights at every update")
            self._layout_checked, self._layout_ok = key, ok
        return self._layout_ok

    def flat_call(self, x, hidden, w_hh):
        """The layer with ``w_hh`` as its hidden-to-hidden matrix, its four weights handed to
        the fused kernel as views of one buffer laid out as the module's own flattened buffer.

        cuDNN runs from one such buffer; weights outside one it copies into a fresh buffer on
        every call, matrix by matrix (its "not part of single contiguous chunk of memory"
        warning). The dropped matrix is new at every update anyway, so it is written, with
        the other three, into a buffer of cuDNN's layout by one differentiable ``cat``.
        Elsewhere the same call is just the fused LSTM (same numbers: tested on CPU)."""
        lstm = self.lstm
        params = [lstm.weight_ih_l0, w_hh, lstm.bias_ih_l0, lstm.bias_hh_l0]
        offsets, total = _flat_layout(lstm)
        pieces, at = [], 0
        for p, off in zip(params, offsets):
            if off > at:
                pieces.append(p.new_zeros(off - at))
            pieces.append(p.reshape(-1))
            at = off + p.numel()
        if total > at:
            pieces.append(params[0].new_zeros(total - at))
        buf = torch.cat(pieces)
        views = [buf[o:o + p.numel()].view_as(p) for p, o in zip(params, offsets)]
        out, h, c = torch._VF.lstm(x, hidden, views, True, 1, 0.0, True, False, False)
        return out, (h, c)


def lstm_in_fp32(device_type: str, autocast: bool, dtype: torch.dtype) -> bool:
    """Whether the LSTM must leave autocast and run in fp32: on CUDA under bf16 autocast
    (where torch's RNN autocast would compute it in fp16 with no loss scaling). Under fp16
    autocast (pre-Ampere GPUs) cuDNN's fp16 LSTM is what the GradScaler is there for; on CPUs
    bf16 autocast runs oneDNN's bf16 LSTM, which is bf16."""
    return device_type == "cuda" and autocast and dtype == torch.bfloat16


def _flat_layout(lstm: nn.LSTM) -> tuple[list[int], int]:
    """(offset of each of the layer's four weights, buffer size) in the buffer the module's
    weights share after ``flatten_parameters()`` (done by ``.to(cuda)``); back to back when
    they share none (CPU)."""
    ws = lstm._flat_weights
    storage = ws[0].untyped_storage()
    if all(w.untyped_storage().data_ptr() == storage.data_ptr() for w in ws):
        return [w.storage_offset() for w in ws], storage.nbytes() // ws[0].element_size()
    offsets = np.cumsum([0] + [w.numel() for w in ws]).tolist()
    return offsets[:-1], offsets[-1]


class AWDLSTM(nn.Module):
    """Embedding -> stacked weight-dropped LSTMs -> linear output layer over the vocabulary."""

    def __init__(self, vocab_size: int, emb_size: int, hidden_size: int, layers: int,
                 out_size: int, tie: bool, dropout: float = 0.4, dropouth: float = 0.3,
                 dropouti: float = 0.65, dropoute: float = 0.1, wdrop: float = 0.5):
        super().__init__()
        if tie and emb_size != out_size:
            raise ValueError("tied embeddings need equal input and output sizes")
        self.encoder = nn.Embedding(vocab_size, emb_size)
        sizes = [emb_size] + [hidden_size] * (layers - 1) + [out_size]
        self.rnns = nn.ModuleList(WeightDropLSTM(sizes[i], sizes[i + 1], wdrop)
                                  for i in range(layers))
        self.decoder = nn.Linear(out_size, vocab_size)
        self.tie = tie
        self.dropout, self.dropouth, self.dropouti, self.dropoute = dropout, dropouth, dropouti, dropoute
        tie_and_init(self.encoder, self.decoder, tie)

    @classmethod
    def from_config(cls, cfg, vocab_size: int, emb: int, out: int) -> "AWDLSTM":
        return cls(vocab_size, emb, cfg.hidden_size, cfg.layers, out, cfg.tie, cfg.dropout,
                   cfg.dropouth, cfg.dropouti, cfg.dropoute, cfg.wdrop)

    @staticmethod
    def parameter_count(cfg, vocab_size: int, emb: int, out: int) -> int:
        """How many parameters :meth:`from_config` would make, without making them: each
        LSTM layer has 4 gates of weights over its input and its own output, and two biases
        (in closed form: a list of a billion layer sizes was itself the trouble)."""
        def layer(i, o):
            return 4 * o * (i + o) + 8 * o

        h, n = cfg.hidden_size, cfg.layers
        lstms = (layer(emb, out) if n == 1 else
                 layer(emb, h) + (n - 2) * layer(h, h) + layer(h, out))
        return vocab_size * emb + lstms + (0 if cfg.tie else vocab_size * out) + vocab_size

    @property
    def sizes(self) -> list[int]:
        return [r.lstm.hidden_size for r in self.rnns]

    def init_hidden(self, batch_size: int):
        w = self.decoder.bias
        return [(w.new_zeros(1, batch_size, n), w.new_zeros(1, batch_size, n)) for n in self.sizes]

    def forward(self, words: torch.Tensor, hidden):
        """Return (output, hidden, raw_last, dropped_last): output is (T, B, out_size).

        ``raw_last`` is the last layer's output before dropout (for TAR) and ``dropped_last``
        after it (for AR), as in Merity et al.
        """
        x = embedding_dropout(self.encoder, words, self.dropoute, self.training)
        x = locked_dropout(x, self.dropouti, self.training)
        new_hidden = []
        for i, rnn in enumerate(self.rnns):
            x, h = rnn(x, hidden[i])
            new_hidden.append(h)
            if i < len(self.rnns) - 1:
                x = locked_dropout(x, self.dropouth, self.training)
        raw = x
        out = locked_dropout(x, self.dropout, self.training)
        return out, new_hidden, raw, out

    def logits(self, output: torch.Tensor, bias_scale: float = 1.0,
               out: torch.Tensor | None = None) -> torch.Tensor:
        return scaled_logits(self.decoder, output, bias_scale, out)


def tie_and_init(encoder: nn.Embedding, decoder: nn.Linear, tie: bool) -> None:
    """The embedding ends of every backbone: tied means one tensor (not a copy); weights
    uniform in +-INIT_RANGE as the reference model initialises them, the output bias 0."""
    if tie:
        decoder.weight = encoder.weight
    nn.init.uniform_(encoder.weight, -INIT_RANGE, INIT_RANGE)
    if not tie:
        nn.init.uniform_(decoder.weight, -INIT_RANGE, INIT_RANGE)
    nn.init.zeros_(decoder.bias)


def scaled_logits(decoder: nn.Linear, output: torch.Tensor, bias_scale: float = 1.0,
                  out: torch.Tensor | None = None) -> torch.Tensor:
    """Scores over the vocabulary, W h + lambda b; ``bias_scale`` is Kobayashi et al.'s lambda.
    ``out``: a (rows, vocabulary) buffer to write the scores of 2-d ``output`` into (scoring
    on a CPU keeps one, :func:`lmlow.evaluate.log_probs`), with the same numbers, in blocks of
    words where the loss takes them (:func:`lmlow.loss.vocab_blocks`: the same bits, faster)."""
    if out is None:
        if bias_scale == 1.0:
            return decoder(output)
        return F.linear(output, decoder.weight) + bias_scale * decoder.bias
    block = vocab_blocks(decoder.weight.size(0), output.dtype, output.device, output.size(0))
    if bias_scale == 1.0:                    # what nn.Linear does for a 2-d input, into out
        return logits_into(out, output, decoder.weight, block, bias=decoder.bias)
    return logits_into(out, output, decoder.weight, block).add_(bias_scale * decoder.bias)


def map_state(fn, state):
    """``fn`` applied to every tensor of a recurrent state (the LSTM's list of (h, c) pairs,
    the Transformer's list of memories), the structure kept: saving, moving and slicing a
    state is written once for every backbone."""
    if isinstance(state, torch.Tensor):
        return fn(state)
    if isinstance(state, (list, tuple)):
        return type(state)(map_state(fn, s) for s in state)
    return state


def join_states(states: list, fn):
    """One state from several of the same structure: ``fn`` on each list of matching tensors
    (e.g. the ranks' batch columns, concatenated)."""
    first = states[0]
    if isinstance(first, torch.Tensor):
        return fn(states)
    return type(first)(join_states([s[i] for s in states], fn) for i in range(len(first)))


def detach_hidden(hidden):
    return map_state(lambda t: t.detach(), hidden)


def log_unigram(counts: torch.Tensor, zero_count: float = 0.5) -> torch.Tensor:
    """Log relative frequencies of the training counts. The words never seen in training
    (``<unk>`` with no unknown word in train, the vectors' own words under ``--extend-vocab``)
    share ``zero_count`` counts between them, half a singleton: possible (log 0 = -inf
    would be), at a mass the seen words do not miss. Until 2026-11-30 each of them counted
    0.5 alone, so a vocabulary extended by 33,794 vector words held 21% of its "unigram"
    distribution on words training never saw (3.0% in the committed unigram tables);
    with one such word (a K=0 vocabulary's ``<unk>``) the two rules are the same.
    """
    c = counts.double().clamp(min=0)
    unseen = c == 0
    share = zero_count / max(1, int(unseen.sum()))
    c = torch.where(unseen, torch.full_like(c, share), c)
    return (c / c.sum()).log().float()


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Trainable and frozen parameter counts (a tied matrix counted once)."""
    seen, trainable, frozen = set(), 0, 0
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        if p.requires_grad:
            trainable += p.numel()
        else:
            frozen += p.numel()
    return {"trainable": trainable, "frozen": frozen}


def pretrained_matrix(words: list[str], kv, generator: torch.Generator) -> tuple[torch.Tensor, np.ndarray]:
    """Rows for ``words`` from gensim vectors ``kv``; missing words get N(0, s^2) rows,
    s the standard deviation of all pretrained values, so they match the vectors' scale.
    Returns (matrix, boolean mask of the rows that had a vector)."""
    dim = kv.vector_size
    vectors = torch.from_numpy(kv.vectors).float()
    std = float(vectors.std())
    out = torch.randn(len(words), dim, generator=generator) * std
    found = np.zeros(len(words), bool)
    for i, w in enumerate(words):
        j = kv.key_to_index.get(w)
        if j is not None:
            out[i] = vectors[j]
            found[i] = True
    return out, found
