"""A run's model as one file that PyTorch alone runs (``lmlow export``): what a keyboard's or
a recogniser's own code loads, without lmlow. The file is a ``torch.export`` program (``.pt2``)
of one step of the model as evaluation runs it (no dropout: training's), for any number of
lines at once, with the vocabulary and the state's shape beside it. For an LSTM:

    extra = {"vocabulary.txt": "", "lmlow.json": ""}
    step = torch.export.load("model.pt2", extra_files=extra).module()
    words, info = extra["vocabulary.txt"].split("\\n"), json.loads(extra["lmlow.json"])
    h = [torch.zeros(1, B, n) for n in info["state_sizes"]]; c = [t.clone() for t in h]
    lp, h, c = step(torch.full((B,), info["eos_id"]), h, c)   # a line starts after <eos>
    # lp: (B, vocabulary), ln p of each next word; feed the next words' ids the same way

A Transformer's state is its memory instead (:class:`TransformerStep`): ``lmlow.json`` says
which (``arch``) and its shapes. One step, not a sequence: ``torch.export`` unrolls the LSTM
over time, so a program for sequences would hold one fixed length. The numbers are
``lmlow score``'s for the same line (tested to 1e-5, relative).
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from lmlow.config import bool_value, path_value
from lmlow.errors import LmlowError
from lmlow.files import atomic_path, refuse_overwrite
from lmlow.model import AWDLSTM
from lmlow.transformer import TransformerLM, _rotary_table, turn

FORMAT = 1
GATES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


class LSTMStep(nn.Module):
    """One step of the AWD-LSTM as evaluation runs it: ``forward(ids (B,), h, c)`` -> (ln p
    of the next word (B, vocabulary), h, c); ``h`` and ``c`` are one (1, B, size) tensor per
    layer. The weights are buffers, the layers the fused LSTM op (what torch.export keeps).
    ``bias_scale``: the output bias's lambda the run was opened with (Kobayashi et al.; 1: as
    trained). A tied model's one matrix is kept once."""

    def __init__(self, model, bias_scale: float = 1.0):
        super().__init__()
        def copy(t: torch.Tensor) -> torch.Tensor:
            return t.detach().float().cpu().clone()

        embedding = copy(model.encoder.weight)
        self.register_buffer("embedding", embedding)
        self.layers = len(model.rnns)
        for i, rnn in enumerate(model.rnns):
            for gate in GATES:
                self.register_buffer(f"{gate}_{i}", copy(getattr(rnn.lstm, f"{gate}_l0")))
        tied = model.decoder.weight is model.encoder.weight
        self.register_buffer("out_weight", embedding if tied else copy(model.decoder.weight))
        self.register_buffer("out_bias", copy(model.decoder.bias) * bias_scale)

    def forward(self, ids: torch.Tensor, h: list[torch.Tensor], c: list[torch.Tensor]):
        x = F.embedding(ids.unsqueeze(0), self.embedding)
        new_h, new_c = [], []
        for i in range(self.layers):
            weights = [getattr(self, f"{gate}_{i}") for gate in GATES]
            x, hi, ci = torch.lstm(x, (h[i], c[i]), weights, True, 1, 0.0, False, False, False)
            new_h.append(hi)
            new_c.append(ci)
        return torch.log_softmax(F.linear(x[0], self.out_weight, self.out_bias), dim=-1), new_h, new_c


class TransformerStep(nn.Module):
    """One step of lmlow's Transformer as evaluation runs it: ``forward(ids (B,), memories,
    filled (B,))`` -> (ln p of the next word (B, vocabulary), memories, filled). A memory is
    one (context, B, 2 x width) tensor of keys and values per block, of which the last
    ``filled`` positions of each line are real (the rest, zeros at the start of a line, are
    masked out): a fixed shape, where the model's own memory grows to ``context`` positions.
    Rotary positions depend on the difference of two positions only, so a key kept at slot j
    of the padded memory scores as at its place in the model's."""

    def __init__(self, model, bias_scale: float = 1.0):
        import copy

        super().__init__()
        model = copy.deepcopy(model).float().cpu().eval()
        # no parameter wants a gradient: stepped without torch.no_grad() (a keyboard's loop),
        # each step's graph hung off the memory handed to the next, and memory grew without end
        model.requires_grad_(False)
        with torch.no_grad():
            model.decoder.bias.mul_(bias_scale)        # the run's lambda, as LSTMStep's
        self.encoder, self.project_in, self.blocks = model.encoder, model.project_in, model.blocks
        self.norm, self.project_out, self.decoder = model.norm, model.project_out, model.decoder
        self.context, self.width = model.context, model.width
        head = model.width // model.blocks[0].heads
        cos, sin = _rotary_table(head, model.context + 1, torch.device("cpu"), torch.float32)
        self.register_buffer("cos", cos.clone())
        self.register_buffer("sin", sin.clone())

    def rotate(self, x: torch.Tensor, start: int) -> torch.Tensor:
        """lmlow.transformer.rotate over positions start.. of the table made once here."""
        L = x.shape[-2]
        return turn(x, self.cos[start:start + L], self.sin[start:start + L])

    def forward(self, ids: torch.Tensor, memories: list[torch.Tensor], filled: torch.Tensor):
        C, W = self.context, self.width
        x = self.project_in(F.embedding(ids.unsqueeze(0), self.encoder.weight))     # (1, B, W)
        B = x.shape[1]
        slots = torch.arange(C + 1, device=x.device)
        allowed = slots[None, :] >= (C - filled)[:, None]                     # (B, C + 1)
        new_memories = []
        for block, memory in zip(self.blocks, memories):
            H = block.heads
            q, kv = block.qkv(block.norm1(x)).split((W, 2 * W), dim=-1)
            keys_values = torch.cat([memory, kv])                             # (C + 1, B, 2W)
            q = q.reshape(1, B, H, W // H).permute(1, 2, 0, 3)
            k, v = keys_values.view(C + 1, B, 2, H, W // H).permute(2, 1, 3, 0, 4)
            q, k = self.rotate(q, C), self.rotate(k, 0)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed[:, None, None, :])
            x = x + block.proj(a.permute(2, 0, 1, 3).reshape(1, B, W))
            x = x + block.mlp(block.norm2(x))
            new_memories.append(keys_values[1:])
        out = self.decoder(self.project_out(self.norm(x)))[0]
        return torch.log_softmax(out, dim=-1), new_memories, torch.clamp(filled + 1, max=C)


def check_target(out: Path, force: bool = False) -> None:
    """The file ``lmlow export`` may write, checked before the model is read."""
    if Path(out).suffix != ".pt2":
        raise LmlowError(f"--out {out}: name it NAME.pt2 (torch.export.load expects the suffix)")
    refuse_overwrite([out], force)


def export(run, out: Path, force: bool = False) -> dict:
    """Write ``run`` (an opened LSTM or Transformer run, its unseen rows mapped and its output
    bias scaled as it was opened) to ``out``, atomically; what was written, for the command's
    line."""
    import torch.export

    out = path_value(out, "lmlow.export", "out")     # export(run, 123): one line, no TypeError
    bool_value(force, "lmlow.export", "force")
    if hasattr(run, "a") and hasattr(run, "b"):      # lmlow.interpolate's mixture (runs.py)
        raise LmlowError("a mixture of two runs is not one model file: export the LSTM run, "
                         "and use the n-gram run's model.bin beside it")
    model = getattr(run, "model", None)
    if not hasattr(run, "run_dir"):                  # a path or None: an AttributeError
        raise LmlowError(f"lmlow.export: run = {run!r:.60}: expected a run opened with "
                         "lmlow.load(RUN_DIR)")
    if not isinstance(model, (AWDLSTM, TransformerLM)):
        raise LmlowError(f"{run.run_dir}: an n-gram run; its model.bin and model.arpa are "
                         "KenLM's own formats, which KenLM's C++ and Python modules load")
    check_target(out, force)
    Dim = getattr(torch.export, "Dim", None)    # torch.export's dynamic sizes as used here
    if not hasattr(Dim, "AUTO"):
        raise LmlowError(f"lmlow export needs a newer torch than {torch.__version__} (its "
                         "torch.export lacks Dim.AUTO; tested with 2.13)")
    lines = {1: Dim.AUTO}                       # any number of lines at once
    info = {"format": FORMAT, "eos_id": run.vocab.eos_id, "unk_id": run.vocab.unk_id,
            "run": str(Path(run.run_dir).resolve()), "checkpoint": run.checkpoint,
            "mapped": {"inputs": bool(run.mapped_inputs), "outputs": bool(run.mapped_outputs)},
            "bias_scale": run.bias_scale}
    ids = torch.zeros(2, dtype=torch.long)
    if isinstance(model, AWDLSTM):
        step = LSTMStep(model, run.bias_scale).eval()
        sizes = [rnn.lstm.hidden_size for rnn in model.rnns]
        state = [torch.zeros(1, 2, n) for n in sizes]
        args = (ids, state, [s.clone() for s in state])
        shapes = ({0: Dim.AUTO}, [lines] * len(sizes), [lines] * len(sizes))
        info |= {"arch": "lstm", "state_sizes": sizes}
    else:
        step = TransformerStep(model, run.bias_scale).eval()
        memory = [torch.zeros(model.context, 2, 2 * model.width) for _ in model.blocks]
        args = (ids, memory, torch.zeros(2, dtype=torch.long))
        shapes = ({0: Dim.AUTO}, [lines] * len(memory), {0: Dim.AUTO})
        info |= {"arch": "transformer", "blocks": len(model.blocks), "context": model.context,
                 "memory_size": 2 * model.width}
    with torch.no_grad():
        program = torch.export.export(step, args, dynamic_shapes=shapes)
    buffer = io.BytesIO()                 # torch.export.save names a file .pt2, a buffer not
    torch.export.save(program, buffer, extra_files={
        "vocabulary.txt": "\n".join(run.vocab.words), "lmlow.json": json.dumps(info)})
    with atomic_path(out) as tmp:
        tmp.write_bytes(buffer.getvalue())
    numbers = sum(t.numel() for t in {id(t): t for t in (*step.parameters(),
                                                          *step.buffers())}.values())
    return {"out": str(out), "words": len(run.vocab), "arch": info["arch"],
            "layers": len(getattr(model, "rnns", getattr(model, "blocks", []))),
            "parameters": numbers, "bytes": out.stat().st_size}
