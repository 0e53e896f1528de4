"""Models in and out of files: device choice, building the AWD-LSTM a Config describes, and
saving and loading checkpoints. Training and every command that opens a run share this module,
so evaluating a model never imports the training loop.

Checkpoints hold only tensors and plain data, are written atomically and load with
``torch.load(..., weights_only=True)`` (a checkpoint from a stranger cannot run code).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from lmlow.config import ARCHS, Config
from lmlow.cpus import amx_tiles, cpu_vendor, machine_memory_gb
from lmlow.data.vocab import Vocabulary
from lmlow.errors import LmlowError
from lmlow.files import atomic_path, require_regular
from lmlow.frozen_rows import row_report
from lmlow.model import count_parameters, log_unigram, pretrained_matrix

CHECKPOINT_FORMAT = 1


def pick_device(name: str) -> torch.device:
    """``auto`` (a GPU if torch sees one), ``cpu``, ``cuda`` or ``cuda:N``; any other name is
    one error, not torch's list of every device type it knows."""
    if not isinstance(name, str) or not re.fullmatch(r"auto|cpu|cuda(:\d+)?", name):
        raise LmlowError(f"--device {name!r}: choose auto, cpu or cuda (cuda:N for one GPU)")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise LmlowError(f"--device {name}: no CUDA GPU is available to torch")
        if ":" in name and int(name.split(":")[1]) >= torch.cuda.device_count():
            raise LmlowError(f"--device {name}: torch sees {torch.cuda.device_count()} GPU(s)")
    return torch.device(name)


def pick_precision(name: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype, or None for plain fp32. ``auto``: bf16 on GPUs that have it (Ampere
    and later: fp32's range, so no loss scaling), fp16 with a GradScaler on older GPUs, bf16 on
    CPUs where it was measured faster (:func:`cpu_bf16_is_faster`), else fp32."""
    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if cuda_has_bf16() else torch.float16
        return torch.bfloat16 if cpu_bf16_is_faster() else None
    if name == "fp16" and device.type != "cuda":
        raise LmlowError("--precision fp16 needs a CUDA device; use bf16 on a CPU")
    if name == "bf16" and device.type == "cpu" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        raise LmlowError("--precision bf16: this CPU has no bf16 support (AVX-512 BF16 or AMX); "
                         "use fp32")
    if name == "bf16" and device.type == "cuda" and not cuda_has_bf16():
        raise LmlowError("--precision bf16: this GPU has no bf16 (it came with Ampere); use fp16")
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def cpu_bf16_is_faster() -> bool:
    """Whether this CPU trains faster in bf16 than in fp32, as measured (BENCHMARKS.md, "fp32
    against bf16 on a CPU"): CPUs with AMX tiles (Intel Sapphire Rapids and later: the LSTM and
    softmax matmuls about 1.5x), and AMD CPUs with AVX-512 BF16 (Zen 4 and later: the whole
    update 1.05-1.75x, every preset; ``benchmarks/results/precision-amd-cpu.log``). Not an
    Intel CPU with AVX-512 BF16 and no AMX, where bf16 ran at 0.59-0.68x (measured before the
    loss kept its buffers, ``precision-cpu.log``; fp32 there until measured again)."""
    if amx_tiles():
        return True
    avx512_bf16 = getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)()
    return avx512_bf16 and cpu_vendor() == "AuthenticAMD"


def fast_matmuls(device: torch.device, deterministic: bool = False) -> None:
    """TF32 for fp32 matmuls and convolutions on Ampere and later GPUs (inputs rounded to a
    10-bit mantissa, sums in fp32): the fp32 softmax of training and every evaluation then runs
    on tensor cores. Simulated TF32 rounding moved validation perplexity by 1e-6 relative
    (issue 25). ``--deterministic`` keeps full fp32 for both."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = not deterministic
        torch.backends.cudnn.allow_tf32 = not deterministic


def cuda_has_bf16() -> bool:
    """Whether the GPU computes in bf16 natively (Ampere and later). torch's
    ``is_bf16_supported()`` also says yes for GPUs that only emulate it (V100, T4: any GPU that
    can hold a bf16 tensor), where bf16 is slow; those get fp16 with loss scaling instead."""
    try:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:                     # a torch from before the argument (2.3 and older)
        return torch.cuda.is_bf16_supported()


def device_name(device: torch.device) -> str:
    """What ran a run, for its summary: the GPU's name, or the CPU's model."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8", errors="replace"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine() or "cpu"


def precision_name(dtype: torch.dtype | None) -> str:
    return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]


def make_scaler(dtype: torch.dtype | None, device: torch.device):
    """The loss scaler fp16 needs (its 5 exponent bits underflow small gradients), or None:
    bf16 and fp32 have fp32's range and need none."""
    return torch.amp.GradScaler(device.type) if dtype == torch.float16 else None


def model_sizes(cfg: Config, kv=None) -> tuple[int, int]:
    """(input, output) embedding sizes: pretrained vectors fix the size of what they initialise."""
    emb = kv.vector_size if (kv is not None and cfg.pretrained_input) else cfg.emb_size
    out = kv.vector_size if (kv is not None and cfg.pretrained_output) else (cfg.out_size or emb)
    if cfg.tie and emb != out:
        raise LmlowError(f"tied embeddings need equal sizes, got input {emb} and output {out}")
    return emb, out


def backbone(arch: str):
    """The model class registered for ``arch`` in :data:`lmlow.config.ARCHS`."""
    import importlib

    module, _, name = ARCHS[arch].partition(":")
    return getattr(importlib.import_module(module), name)


def check_fits(cfg: Config, vocab_size: int, emb: int, out: int) -> None:
    """Refuse a model whose float32 weights alone exceed this machine's memory, before any is
    made. Torch's allocator refuses one huge tensor in a line, but many small ones (``--layers
    1000000000``) were made one by one (120 s without a word before it was stopped), on the
    way to the kernel's OOM killer, which ends a process, this one or a training beside it,
    without a word."""
    count = backbone(cfg.arch).parameter_count(cfg, vocab_size, emb, out)
    need, have = count * 4 / 2**30, machine_memory_gb()
    if need > have:
        raise LmlowError(f"out of memory: the model has {count:,} parameters, {need:,.1f} GiB in "
                         f"float32 before gradients and optimizer state, more than this "
                         f"machine's {have:.1f} GiB; a smaller model (--layers, --hidden-size, "
                         f"--emb-size, vocabulary) fits")


def build_model(cfg: Config, vocab: Vocabulary, kv=None, seed: int | None = None,
                frozen_rows: np.ndarray | None = None):
    """The model of ``cfg`` (its backbone, ``cfg.arch``) for ``vocab``, initialised and frozen
    as ``cfg`` says.

    Seeds torch's global generator with ``seed`` (default ``cfg.seed``) first, as training
    needs: the initial weights and all later dropout masks follow from the seed. Returns
    (model, report): what was pretrained, how much of the vocabulary the vectors covered, and
    which input rows are frozen (``input_rows``). Under ``--freeze-input-rows pretrained`` the
    input matrix keeps ``requires_grad`` and ``model.frozen_input_rows`` is the mask of the
    rows the trainer holds fixed (:mod:`lmlow.frozen_rows`); otherwise it is None. A resumed
    run passes the mask its checkpoint saved as ``frozen_rows`` (it has no vectors to read).
    """
    g = torch.Generator().manual_seed(cfg.seed if seed is None else seed)
    torch.manual_seed(cfg.seed if seed is None else seed)
    emb, out = model_sizes(cfg, kv)
    check_fits(cfg, len(vocab), emb, out)
    model = backbone(cfg.arch).from_config(cfg, len(vocab), emb, out)
    report = {"vocabulary": len(vocab), "emb_size": emb, "out_size": out}
    counts = vocab.count_array()
    found = None
    with torch.no_grad():
        if kv is not None and (cfg.pretrained_input or cfg.pretrained_output):
            matrix, found = pretrained_matrix(vocab.words, kv, g)
            report["coverage_types_pct"] = 100.0 * int(found.sum()) / len(vocab)
            report["coverage_tokens_pct"] = 100.0 * int(counts[found].sum()) / max(1, int(counts.sum()))
            if cfg.pretrained_input:
                model.encoder.weight.copy_(matrix)
            if cfg.pretrained_output and not cfg.tie:
                model.decoder.weight.copy_(matrix)
        if cfg.unigram_bias:
            model.decoder.bias.copy_(log_unigram(torch.from_numpy(vocab.count_array())))
            if not cfg.tie and not cfg.pretrained_output:
                # small contextual logits at step 0, so the model starts as the unigram model
                model.decoder.weight.mul_(0.1)
    if frozen_rows is not None:
        found = np.asarray(frozen_rows, bool)
    roles = cfg.roles                    # the one place that says what is shared and frozen
    partial = roles.input_frozen and roles.frozen_rows == "pretrained" and found is not None
    whole = roles.input_frozen and not partial
    model.frozen_input_rows = found.copy() if partial else None
    model.encoder.weight.requires_grad_(not whole)
    if not cfg.tie:                      # a tied decoder is the encoder's matrix, set above
        model.decoder.weight.requires_grad_(not roles.output_frozen)
    model.decoder.bias.requires_grad_(not cfg.freeze_output_bias)
    report.update(count_parameters(model))
    if partial:        # the held rows are parameters no update changes
        held = int(found.sum()) * emb
        report["trainable"] -= held
        report["frozen"] += held
    if kv is not None or cfg.input_frozen:
        report["input_rows"] = row_report(model.frozen_input_rows,
                                          found if cfg.pretrained_input else None, counts,
                                          whole)
    return model, report


def checkpoint_config(cfg: Config, state_dict: dict) -> Config:
    """``cfg`` with the sizes a saved model has and no pretrained init: what rebuilds a
    checkpoint's model without reading the vectors again (its weights come from the file)."""
    return Config(**{**cfg.to_dict(), "emb_size": state_dict["encoder.weight"].shape[1],
                     "out_size": state_dict["decoder.weight"].shape[1], "init": ["random"],
                     "embeddings": None, "extend_vocab": False, "vocab": None})


def save_checkpoint(obj: dict, path: Path) -> None:
    """Write a checkpoint atomically and durably: the previous file survives any failure,
    a crash of the host among them."""
    path = Path(path)
    try:
        with atomic_path(path, durable=True) as tmp:
            torch.save({"format": CHECKPOINT_FORMAT, **obj}, tmp)
    except (OSError, RuntimeError) as e:          # torch reports a full disk as RuntimeError
        reason = getattr(e, "strerror", None) or "the write failed (disk full, quota or file-size limit?)"
        old = " (the previous one is intact)" if path.exists() else ""
        raise LmlowError(f"{path}: cannot write the checkpoint: {reason}{old}") from None


def load_checkpoint(path: Path, mmap: bool = False) -> dict:
    """The checkpoint at ``path``, or one line saying why it is none; ``mmap`` maps its
    tensors from the file instead of reading them (to read a field or two of a large one)."""
    path = require_regular(Path(path))
    if not path.exists():
        raise LmlowError(f"{path}: no such checkpoint")
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as e:
        raise LmlowError(f"{path}: not a readable lmlow checkpoint ({type(e).__name__})") from None
    if not isinstance(ck, dict) or ck.get("format") != CHECKPOINT_FORMAT:
        raise LmlowError(f"{path}: not an lmlow checkpoint (or from another version)")
    return ck


def checkpoint_processes(path: Path) -> int:
    """How many training processes wrote checkpoint ``path``: a resume needs as many."""
    return load_checkpoint(path, mmap=True).get("processes", 1)


def checkpoint_state(path: Path) -> dict:
    """The training state checkpoint ``path`` was saved in (``RunState``'s fields: completed
    ``epoch``s, ``tokens`` read, ...; empty if it records none)."""
    return load_checkpoint(path, mmap=True).get("state") or {}


def checkpoint_vocabulary(ck: dict, cfg: Config) -> Vocabulary:
    return Vocabulary(ck["vocab"], ck["counts"], cfg.unk_threshold)


def load_model(path: Path, device: str | torch.device = "cpu"):
    """(config, vocabulary, model in eval mode on ``device``) from a checkpoint file.
    Torch's global random state is left as it was: opening a model changes nothing."""
    path = Path(path)
    ck = load_checkpoint(path)
    cfg = Config.from_dict(ck["config"], str(path))
    vocab = checkpoint_vocabulary(ck, cfg)
    with torch.random.fork_rng(devices=[]):
        model, _ = build_model(checkpoint_config(cfg, ck["model"]), vocab)
    try:
        model.load_state_dict(ck["model"])
    except RuntimeError as e:
        raise LmlowError(f"{path} does not fit its configuration "
                         f"({str(e).splitlines()[0]})") from None
    if (ck.get("state") or {}).get("asgd") and ck.get("optimizer"):
        use_average(ck, model, path)
    device = device if isinstance(device, torch.device) else pick_device(device)
    return cfg, vocab, model.to(device).eval()


def use_average(ck: dict, model: torch.nn.Module, path: Path) -> None:
    """``last.pt`` of a run in NT-ASGD's averaging holds the raw weights and, in the
    optimizer's state (``ax``), their average, which its validations and ``best.pt`` use:
    the model gets the average, so ``--checkpoint last`` scores what training measured (the
    raw weights scored 282 where the average, its validation, had 251)."""
    groups = ck["optimizer"].get("param_groups") or [{}]
    order = [i for g in groups for i in g.get("params", [])]
    names = ck.get("trained_parameters") or [n for n, p in model.named_parameters()
                                             if p.requires_grad]
    params = dict(model.named_parameters())
    states = ck["optimizer"].get("state", {})
    pairs = [(params.get(name), states.get(i, {}).get("ax")) for i, name in zip(order, names)]
    if len(order) != len(names) or any(p is None or ax is not None and ax.shape != p.shape
                                       for p, ax in pairs):
        raise LmlowError(f"{path}: cannot tell which weights its averaged SGD state belongs to; "
                         "evaluate best.pt (the average at its best validation)")
    with torch.no_grad():
        for p, ax in pairs:
            if ax is not None:
                p.copy_(ax)
