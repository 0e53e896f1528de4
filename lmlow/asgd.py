"""NT-ASGD's averaging optimiser, able to take the fp16 loss scaler's overflow flag on the GPU.

``torch.optim.ASGD`` does not declare ``_step_supports_amp_scaling``, so ``GradScaler.step``
reads the overflow flag on the host (``.item()``) before stepping it: under fp16 the paper's
recipe waited for the GPU once per update after the switch to averaging (1.05 waits per update
on an H100, ``benchmarks/results/gpu-h100-2026-11-26/gpu_waits.md``), where fused SGD waits
none. :class:`ScalerAwareASGD` declares it and skips an overflowing update on the device: the
gradients are cleaned of inf/nan, the step size ``eta`` and the averaging weight ``mu`` are
multiplied by ``keep = 1 - found_inf`` (so the weights and their average move by exactly 0),
and the scalar state (step, eta, mu) is put back where the flag is set. With a finite gradient
(``keep = 1``) it is ASGD's own update, bit for bit (``tests/test_precision.py`` compares them).

Only the capturable form (CUDA, where lmlow uses it: state on the device) skips on the device;
otherwise it reads the flag as GradScaler would and skips on the host. Without a scaler it is
``torch.optim.ASGD``, and its state dict is ASGD's, so checkpoints do not change.
"""
from __future__ import annotations

import torch


class ScalerAwareASGD(torch.optim.ASGD):
    """``torch.optim.ASGD`` that GradScaler hands its ``found_inf`` (and ``grad_scale``)."""

    _step_supports_amp_scaling = True

    @torch.no_grad()
    def step(self, closure=None):
        found_inf = getattr(self, "found_inf", None)
        grad_scale = getattr(self, "grad_scale", None)
        if found_inf is None:                      # no scaler: ASGD itself
            return super().step(closure)
        if closure is not None:
            raise RuntimeError("a closure cannot be used with a loss scaler")
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        if grad_scale is not None and grads:       # the scaler did not unscale: divide here
            torch._foreach_mul_(grads, grad_scale.reciprocal().to(grads[0].dtype))
        if not all(g["capturable"] for g in self.param_groups):
            if found_inf.item():                   # what GradScaler does: one wait, then skip
                return None
            return super().step()
        return self._masked_step(found_inf)

    def _masked_step(self, found_inf: torch.Tensor) -> None:
        """The update, made a no-op on the device where ``found_inf`` is set."""
        skip = found_inf.to(torch.float32) > 0
        keep = (~skip).to(torch.float32)
        held = []
        for group in self.param_groups:
            self._init_group(group, [], [], [], [], [], [])  # ASGD's state, if not yet made
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                p.grad.nan_to_num_(0.0, 0.0, 0.0)  # 0 * inf would make the weights nan
                # a state that has not stepped yet (made here, or kept through skipped
                # updates) takes the rate of its first real update, as ASGD's would
                state["eta"].copy_(torch.where(state["step"] == 0,
                                               torch.full_like(state["eta"], group["lr"]),
                                               state["eta"]))
                held.append((state, {k: state[k].clone() for k in ("step", "eta", "mu")}))
                state["eta"].mul_(keep.to(state["eta"].dtype))
                state["mu"].mul_(keep.to(state["mu"].dtype))
        super().step()
        for state, scalars in held:
            for k, old in scalars.items():
                state[k].copy_(torch.where(skip.to(old.device), old, state[k]))
        return None
