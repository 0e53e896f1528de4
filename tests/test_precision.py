"""Precision on the CPU and the choices made for GPUs: the state a run saves continues in any
precision, `auto` asks the GPU for real bf16, runs record what they computed in, NT-ASGD is
capturable on CUDA, and the weight-dropped LSTM's one-buffer call equals the module's."""
import json

import pytest
import torch

from lmlow import checkpoint
from lmlow.checkpoint import load_checkpoint
from lmlow.config import build_config
from lmlow.train import Trainer, resume, train

BF16 = pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(),
                          reason="this CPU has no bf16 (AVX-512 BF16 or AMX)")


def cfg(corpus, **kw):
    return build_config("tiny", None, corpus=str(corpus), seed=3, **kw)


@BF16
@pytest.mark.parametrize("first,then", [("bf16", "fp32"), ("fp32", "bf16")])
def test_a_run_continues_in_another_precision(first, then, speech_corpus, tmp_path):
    """A bf16 run's last.pt (as a GPU bf16 run's would be) continues in fp32 on this CPU, and
    the reverse; the hidden state is saved in fp32; the summary records both precisions."""
    run = tmp_path / "r"
    train(cfg(speech_corpus, precision=first, max_epochs=2, max_steps=7), run, quiet=True)
    ck = load_checkpoint(run / "last.pt")
    assert ck["hidden"] is not None and all(h.dtype == torch.float32 for pair in ck["hidden"] for h in pair)
    summary = resume(run, quiet=True, precision=then, max_steps=0)
    assert summary["epochs"] == 2 and summary["precision"] == then
    assert summary["precisions"] == [first, then]
    assert json.loads((run / "config.json").read_text())["precision"] == then


@BF16
def test_a_bf16_run_resumed_in_bf16_ends_where_an_uninterrupted_one_does(speech_corpus, tmp_path):
    """Saving the hidden state in fp32 loses nothing: bf16 values are exact in fp32 and
    autocast casts them back to the same bits."""
    train(cfg(speech_corpus, precision="bf16", max_epochs=1), tmp_path / "full", quiet=True)
    train(cfg(speech_corpus, precision="bf16", max_epochs=1, max_steps=9), tmp_path / "part", quiet=True)
    resume(tmp_path / "part", quiet=True, max_steps=0)
    a, b = (load_checkpoint(tmp_path / p / "last.pt")["model"] for p in ("full", "part"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_summary_records_precision_device_and_torch(speech_corpus, tmp_path):
    summary = train(cfg(speech_corpus, precision="fp32", max_steps=2), tmp_path / "r", quiet=True)
    assert summary["precision"] == "fp32" and summary["torch"] == torch.__version__
    assert summary["device"] and "precisions" not in summary
    on_disk = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert on_disk["device"] == summary["device"]


def test_auto_asks_the_gpu_for_real_bf16_not_emulation(monkeypatch):
    """A V100 or T4 holds bf16 tensors (emulated) but computes them slowly: auto must give it
    fp16 with loss scaling. torch's default question counts emulation."""
    asked = []

    def is_bf16_supported(including_emulation=True):
        asked.append(including_emulation)
        return including_emulation          # an emulating GPU
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    assert checkpoint.pick_precision("auto", torch.device("cuda")) == torch.float16
    assert asked == [False]
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert checkpoint.pick_precision("auto", torch.device("cuda")) == torch.bfloat16


def test_resume_refuses_what_would_change_the_run(speech_corpus, tmp_path):
    from lmlow.errors import LmlowError
    train(cfg(speech_corpus, max_steps=2), tmp_path / "r", quiet=True)
    with pytest.raises(LmlowError, match="not --lr"):
        resume(tmp_path / "r", quiet=True, lr=0.5)
