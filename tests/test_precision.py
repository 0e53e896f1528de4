"""Precision on the CPU and the choices made for GPUs: the state a run saves continues in any
precision, `auto` asks the GPU for real bf16, runs record what they computed in, NT-ASGD is
capturable on CUDA, and the weight-dropped LSTM's one-buffer call equals the module's."""
import json

import pytest
import torch

from lmlow import checkpoint, cpus
from lmlow.checkpoint import load_checkpoint
from lmlow.config import build_config
from lmlow.train import Trainer, resume, train

BF16 = pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(),
                          reason="this CPU has no bf16 (AVX-512 BF16 or AMX)")


def cfg(corpus, **kw):
    return build_config("tiny", None, corpus=str(corpus), **{"seed": 3, **kw})


@BF16
@pytest.mark.parametrize("first,then", [("bf16", "fp32"), ("fp32", "bf16")])
def test_a_run_continues_in_another_precision(first, then, speech_corpus, tmp_path):
    """A bf16 run's last.pt (as a GPU bf16 run's would be) continues in fp32 on this CPU, and
    the reverse; the hidden state is saved in fp32; the summary records both precisions."""
    run = tmp_path / "r"
    train(cfg(speech_corpus, precision=first, max_epochs=2, max_steps=7), run, quiet=True)
    ck = load_checkpoint(run / "last.pt")
    assert ck["hidden"] is not None and all(h.dtype == torch.float32 for pair in ck["hidden"] for h in pair)
    before = (run / "metrics.jsonl").read_text().splitlines()
    summary = resume(run, quiet=True, precision=then, max_steps=0)
    assert summary["epochs"] == 2 and summary["precision"] == then
    assert summary["precisions"] == [first, then]
    assert json.loads((run / "config.json").read_text())["precision"] == then
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    epochs = [(i < len(before), r["precision"]) for i, r in enumerate(rows) if "train_loss" in r]
    assert epochs and {p for old, p in epochs if old} <= {first}      # each epoch's precision
    assert {p for old, p in epochs if not old} == {then}


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


@pytest.mark.parametrize("amx, avx512_bf16, vendor, picked", [
    (True, True, "GenuineIntel", torch.bfloat16),     # Sapphire Rapids and later
    (False, True, "AuthenticAMD", torch.bfloat16),    # Zen 4 and later: measured 1.05-1.75x
    (False, True, "GenuineIntel", None),              # measured 0.59-0.68x: fp32
    (False, False, "AuthenticAMD", None),             # no bf16 units at all
    (False, True, "", None),                          # a vendor not known: fp32
])
def test_auto_on_a_cpu_takes_bf16_where_it_was_measured_faster(amx, avx512_bf16, vendor, picked,
                                                                monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(checkpoint, "cpu_vendor", lambda: vendor)
    assert checkpoint.pick_precision("auto", torch.device("cpu")) == picked
    assert checkpoint.pick_precision("fp32", torch.device("cpu")) is None      # asked: given


def test_the_cpu_vendor_is_read_from_proc_cpuinfo_or_the_platform(monkeypatch, tmp_path):
    import builtins
    import platform

    real_open = builtins.open
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n")
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: real_open(
        info if path == "/proc/cpuinfo" else path, *a, **k))
    assert cpus.cpu_vendor() == "AuthenticAMD"

    def no_proc(path, *a, **k):
        if path == "/proc/cpuinfo":
            raise FileNotFoundError(path)
        return real_open(path, *a, **k)
    monkeypatch.setattr(builtins, "open", no_proc)
    monkeypatch.setattr(platform, "processor",
                        lambda: "Intel64 Family 6 Model 143 Stepping 8, GenuineIntel")
    assert cpus.cpu_vendor() == "GenuineIntel"
    monkeypatch.setattr(platform, "processor", lambda: "arm")
    assert cpus.cpu_vendor() == ""


def test_resume_refuses_what_would_change_the_run(speech_corpus, tmp_path):
    from lmlow.errors import LmlowError
    train(cfg(speech_corpus, max_steps=2), tmp_path / "r", quiet=True)
    with pytest.raises(LmlowError, match="not --lr"):
        resume(tmp_path / "r", quiet=True, lr=0.5)


def test_the_one_buffer_call_equals_the_module_call_on_the_cpu():
    """flat_call (the weight-dropped LSTM as cuDNN gets it on a GPU: the four weights as views
    of one buffer, through the fused kernel) gives the outputs and gradients of the plain
    functional call, here on the CPU; and the layout check accepts the CPU's layout."""
    from torch.func import functional_call

    from lmlow.model import WeightDropLSTM

    torch.manual_seed(0)
    layer = WeightDropLSTM(12, 16, 0.5).train()
    x = torch.randn(9, 3, 12, requires_grad=True)
    h = (torch.randn(1, 3, 16), torch.randn(1, 3, 16))
    w = layer.lstm.weight_hh_l0 * 0.7
    out, (hn, cn) = layer.flat_call(x, h, w)
    grads = torch.autograd.grad(out.sum() + cn.sum(), [x, *layer.parameters()])
    w = layer.lstm.weight_hh_l0 * 0.7
    ref, (_, cref) = functional_call(layer.lstm, {"weight_hh_l0": w}, (x, h))
    ref_grads = torch.autograd.grad(ref.sum() + cref.sum(), [x, *layer.parameters()])
    assert torch.allclose(out, ref, atol=1e-6) and torch.allclose(cn, cref, atol=1e-6)
    assert all(torch.allclose(g, r, atol=1e-5) for g, r in zip(grads, ref_grads))
    assert layer.flat_layout_ok()


def test_a_weight_buffer_in_another_order_falls_back_loudly(monkeypatch):
    from lmlow import model

    layer = model.WeightDropLSTM(4, 5, 0.5)
    monkeypatch.setattr(model, "_flat_layout", lambda lstm: ([100, 0, 180, 200], 220))
    with pytest.warns(UserWarning, match="not laid out as lmlow expects"):
        assert not layer.flat_layout_ok()


def test_the_lstm_leaves_bf16_autocast_only_on_cuda():
    """Under CUDA bf16 autocast the LSTM must run in fp32 (torch would run cuDNN in fp16
    without loss scaling); under fp16 autocast and on CPUs it stays in autocast."""
    from lmlow.model import lstm_in_fp32

    assert lstm_in_fp32("cuda", True, torch.bfloat16)
    assert not lstm_in_fp32("cuda", False, torch.bfloat16)       # no autocast at all
    assert not lstm_in_fp32("cuda", True, torch.float16)         # fp16 has its loss scaler
    assert not lstm_in_fp32("cpu", True, torch.bfloat16)


def test_nt_asgd_is_capturable_exactly_on_cuda(speech_corpus, tmp_path):
    """ASGD without capturable reads its step counters with .item() at every update (a wait
    for the GPU per parameter): on CUDA it must be capturable. Checked on the optimiser the
    trainer builds for each device type (the parameters stay where they are)."""
    t = Trainer(cfg(speech_corpus, optimizer="sgd", max_steps=1), tmp_path / "r", quiet=True)
    assert t._make_optimizer(asgd=True).defaults["capturable"] is False
    t.device = torch.device("cuda")
    assert t._make_optimizer(asgd=True).defaults["capturable"] is True


def test_the_loss_scaler_is_not_asked_for_its_scale_at_every_update(speech_corpus, tmp_path,
                                                                   monkeypatch):
    """The fp16 path (GradScaler on this CPU): get_scale() waits for the GPU, so the trainer
    reads it only with the metrics rows, not twice an update; skipped steps are still counted
    (a scale of 2^126 overflows the first updates)."""
    import lmlow.train as training

    monkeypatch.setattr(training, "make_scaler", lambda dtype, device: torch.amp.GradScaler(
        "cpu", init_scale=2.0 ** 126, growth_interval=4))
    calls = []
    real = torch.amp.GradScaler.get_scale
    monkeypatch.setattr(torch.amp.GradScaler, "get_scale",
                        lambda self: calls.append(1) or real(self))
    summary = train(cfg(speech_corpus, max_steps=30, max_epochs=1), tmp_path / "r", quiet=True)
    ck = load_checkpoint(tmp_path / "r" / "last.pt")
    rows = [json.loads(l) for l in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert summary["steps"] == 30 and ck["state"]["skipped"] > 0
    saves = 2                  # the first last.pt and the last one: state_dict() reads the scale
    assert len(calls) <= len(rows) + saves and rows[-1]["skipped_steps"] == ck["state"]["skipped"]


def test_a_report_names_the_precisions_and_warns_when_a_table_mixes_them(speech_corpus, tmp_path,
                                                                       capsys):
    """Two seeds of one configuration, one in fp32 and one in bf16 (as runs made on an AMX
    machine and on one without would be under `auto`): the report's precision column says
    both, and report warns in results.md and on stderr."""
    from conftest import cli

    sweep = tmp_path / "sweep"
    train(cfg(speech_corpus, precision="fp32", max_steps=2, seed=1), sweep / "tied.seed1", quiet=True)
    second = "bf16" if torch.ops.mkldnn._is_mkldnn_bf16_supported() else "fp32"
    train(cfg(speech_corpus, precision=second, max_steps=2, seed=2), sweep / "tied.seed2", quiet=True)
    code, out, err = cli("report", sweep, capsys=capsys)
    assert code == 0
    row = json.loads((sweep / "results.json").read_text())[0]
    assert row["precision"] == ", ".join(sorted({"fp32", second}))
    if second == "bf16":
        assert "mixed precisions" in (sweep / "results.md").read_text() and "mixed precisions" in err
    else:
        assert "mixed" not in err


@pytest.fixture
def capturable_on_cpu(monkeypatch):
    """torch allows ASGD's capturable form (its state on the device) only on accelerators;
    its arithmetic is the same on the CPU, where these tests compare it."""
    import torch.optim.asgd as asgd

    monkeypatch.setattr(asgd, "_get_capturable_supported_devices", lambda *a, **k: ["cpu"])


def _params(seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(7, 5, generator=g).requires_grad_(), torch.randn(5, generator=g).requires_grad_()]


@pytest.mark.parametrize("foreach", [False, True])
def test_the_scaler_aware_asgd_is_asgd_and_skips_an_overflow_on_the_device(foreach,
                                                                           capturable_on_cpu):
    """Against torch's own ASGD (NT-ASGD's settings, a learning rate that changes per update
    as lmlow's does with the BPTT length): with the overflow flag clear, the same weights,
    average and counters bit for bit; with it set (gradients holding inf and nan), nothing
    moves, as GradScaler's host-side skip would leave it."""
    from lmlow.asgd import ScalerAwareASGD

    kw = dict(lr=30.0, t0=0, lambd=0.0, weight_decay=1.2e-6, capturable=True, foreach=foreach)
    ref_p, our_p = _params(0), _params(0)
    ref, ours = torch.optim.ASGD(ref_p, **kw), ScalerAwareASGD(our_p, **kw)
    g = torch.Generator().manual_seed(1)
    for k in range(7):
        overflow = k in (0, 3, 4)
        grads = [torch.randn(p.shape, generator=g) for p in ref_p]
        for opt, ps in ((ref, ref_p), (ours, our_p)):
            for group in opt.param_groups:
                group["lr"] = 30.0 * (0.8 + 0.05 * k)
            for p, gr in zip(ps, grads):
                p.grad = gr.clone()
        if overflow:
            our_p[0].grad[1, 2], our_p[1].grad[0] = float("inf"), float("nan")
        ours.found_inf, ours.grad_scale = torch.tensor(float(overflow)), None
        ours.step()
        del ours.found_inf, ours.grad_scale
        if not overflow:
            ref.step()
        for a, b in zip(ref_p, our_p):
            assert torch.equal(a, b), f"update {k}: weights differ"
            sa, sb = ref.state[a], ours.state[b]
            if not sa:        # ASGD has not stepped yet; ours holds the state of no step
                assert int(sb["step"]) == 0 and not sb["ax"].any()
                continue
            assert sa.keys() == sb.keys()
            assert all(torch.equal(sa[n], sb[n]) for n in sa), f"update {k}: state differs"
    assert int(ours.state[our_p[0]]["step"]) == 4


def test_the_loss_scaler_steps_nt_asgd_without_reading_its_flag_on_the_host(capturable_on_cpu,
                                                                            monkeypatch):
    """GradScaler reads the overflow flag on the host (a wait for the GPU per update) before
    stepping any optimiser that does not declare it takes the flag itself: the one lmlow makes
    for NT-ASGD declares it, and a scaled, unscaled, clipped update (lmlow's order) lands
    where unscaled ASGD lands."""
    from lmlow.asgd import ScalerAwareASGD

    def host_read(*a, **k):
        raise AssertionError("GradScaler read the overflow flag on the host")

    monkeypatch.setattr(torch.amp.GradScaler, "_maybe_opt_step", host_read)
    kw = dict(lr=30.0, t0=0, lambd=0.0, weight_decay=1.2e-6, capturable=True)
    ref_p, our_p = _params(2), _params(2)
    ref, ours = torch.optim.ASGD(ref_p, **kw), ScalerAwareASGD(our_p, **kw)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    x = torch.randn(3, 7, generator=torch.Generator().manual_seed(3))
    for _ in range(3):
        ref.zero_grad()
        (x @ ref_p[0] + ref_p[1]).square().mean().backward()
        torch.nn.utils.clip_grad_norm_(ref_p, 0.25)
        ref.step()
        ours.zero_grad()
        scaler.scale((x @ our_p[0] + our_p[1]).square().mean()).backward()
        scaler.unscale_(ours)
        torch.nn.utils.clip_grad_norm_(our_p, 0.25)
        scaler.step(ours)
        scaler.update()
    assert all(torch.equal(a, b) for a, b in zip(ref_p, our_p))
    assert all(torch.equal(ref.state[a]["ax"], ours.state[b]["ax"]) for a, b in zip(ref_p, our_p))


def test_the_trainer_switches_to_the_scaler_aware_asgd(speech_corpus, tmp_path):
    from lmlow.asgd import ScalerAwareASGD

    t = Trainer(cfg(speech_corpus, optimizer="sgd", max_steps=1), tmp_path / "r", quiet=True)
    t.start_averaging()
    assert type(t.optimizer) is ScalerAwareASGD
