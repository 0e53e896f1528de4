"""An LSTM run's model as one file that PyTorch alone runs (``lmlow export``): what a
keyboard's or a recogniser's own code loads, without lmlow. The file is a ``torch.export``
program (``.pt2``) of one step of the model as evaluation runs it (no dropout: training's),
for any number of lines at once, with the vocabulary and the state's shape beside it:

    extra = {"vocabulary.txt": "", "lmlow.json": ""}
    step = torch.export.load("model.pt2", extra_files=extra).module()
    words, info = extra["vocabulary.txt"].split("\\n"), json.loads(extra["lmlow.json"])
    h = [torch.zeros(1, B, n) for n in info["state_sizes"]]; c = [t.clone() for t in h]
    lp, h, c = step(torch.full((B,), info["eos_id"]), h, c)   # a line starts after <eos>
    # lp: (B, vocabulary), ln p of each next word; feed the next words' ids the same way

One step, not a sequence: ``torch.export`` unrolls the LSTM over time, so a program for
sequences would hold one fixed length. The numbers are ``lmlow score``'s for the same line
(tested to 2e-5).
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from lmlow.errors import LmlowError
from lmlow.files import atomic_path, refuse_overwrite

FORMAT = 1
GATES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


class LSTMStep(nn.Module):
    """One step of the AWD-LSTM as evaluation runs it: ``forward(ids (B,), h, c)`` -> (ln p
    of the next word (B, vocabulary), h, c); ``h`` and ``c`` are one (1, B, size) tensor per
    layer. The weights are buffers, the layers the fused LSTM op (what torch.export keeps)."""

    def __init__(self, model):
        super().__init__()
        def copy(t: torch.Tensor) -> torch.Tensor:
            return t.detach().float().cpu().clone()

        self.register_buffer("embedding", copy(model.encoder.weight))
        self.layers = len(model.rnns)
        for i, rnn in enumerate(model.rnns):
            for gate in GATES:
                self.register_buffer(f"{gate}_{i}", copy(getattr(rnn.lstm, f"{gate}_l0")))
        self.register_buffer("out_weight", copy(model.decoder.weight))
        self.register_buffer("out_bias", copy(model.decoder.bias))

    def forward(self, ids: torch.Tensor, h: list[torch.Tensor], c: list[torch.Tensor]):
        x = F.embedding(ids.unsqueeze(0), self.embedding)
        new_h, new_c = [], []
        for i in range(self.layers):
            weights = [getattr(self, f"{gate}_{i}") for gate in GATES]
            x, hi, ci = torch.lstm(x, (h[i], c[i]), weights, True, 1, 0.0, False, False, False)
            new_h.append(hi)
            new_c.append(ci)
        return torch.log_softmax(F.linear(x[0], self.out_weight, self.out_bias), dim=-1), new_h, new_c


def check_target(out: Path, force: bool = False) -> None:
    """The file ``lmlow export`` may write, checked before the model is read."""
    if Path(out).suffix != ".pt2":
        raise LmlowError(f"--out {out}: name it NAME.pt2 (torch.export.load expects the suffix)")
    refuse_overwrite([out], force)


def export(run, out: Path, force: bool = False) -> dict:
    """Write ``run`` (an opened LSTM run, its unseen rows mapped as it was opened) to ``out``,
    atomically; what was written, for the command's line."""
    import torch.export

    from lmlow.model import AWDLSTM

    out = Path(out)
    if not isinstance(getattr(run, "model", None), AWDLSTM):
        arch = getattr(getattr(run, "config", None), "arch", None)
        what = (f"a {arch} run; only LSTM runs export" if arch else "an n-gram run; its "
                "model.bin and model.arpa are KenLM's own formats, which KenLM's C++ and "
                "Python modules load")
        raise LmlowError(f"{run.run_dir}: {what}")
    check_target(out, force)
    Dim = getattr(torch.export, "Dim", None)    # torch.export's dynamic sizes as used here
    if not hasattr(Dim, "AUTO"):
        raise LmlowError(f"lmlow export needs a newer torch than {torch.__version__} (its "
                         "torch.export lacks Dim.AUTO; tested with 2.13)")
    step = LSTMStep(run.model).eval()
    sizes = [rnn.lstm.hidden_size for rnn in run.model.rnns]
    state = [torch.zeros(1, 2, n) for n in sizes]
    lines = {1: Dim.AUTO}                 # any number of lines at once
    program = torch.export.export(step, (torch.zeros(2, dtype=torch.long), state,
                                         [s.clone() for s in state]),
                                  dynamic_shapes=({0: Dim.AUTO}, [lines] * len(sizes),
                                                  [lines] * len(sizes)))
    info = {"format": FORMAT, "eos_id": run.vocab.eos_id, "unk_id": run.vocab.unk_id,
            "state_sizes": sizes, "run": str(Path(run.run_dir).resolve()),
            "checkpoint": run.checkpoint,
            "mapped": {"inputs": bool(run.mapped_inputs), "outputs": bool(run.mapped_outputs)}}
    buffer = io.BytesIO()                 # torch.export.save names a file .pt2, a buffer not
    torch.export.save(program, buffer, extra_files={
        "vocabulary.txt": "\n".join(run.vocab.words), "lmlow.json": json.dumps(info)})
    with atomic_path(out) as tmp:
        tmp.write_bytes(buffer.getvalue())
    return {"out": str(out), "words": len(run.vocab), "layers": len(sizes),
            "parameters": sum(b.numel() for b in step.buffers()), "bytes": out.stat().st_size}
