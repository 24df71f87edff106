"""Adam for the trainer: ``torch.optim.Adam``'s own update (its functional ``torch.optim.adam.adam``, the same
kernels, so the same bits), without the ``torch.optim.Optimizer`` class around it.

Why not the class: every ``Optimizer`` method (the constructor's ``add_param_group``, ``step``, ``zero_grad``,
``state_dict``) is wrapped so that its first call imports ``torch._dynamo``, which is 2 s on a 2-core CPU box and
most of what a short ``gpukit train`` run waited for on the H200 (``WallTimes.imports_s``). The functional update
imports nothing. This class keeps the two attributes the trainer and ``torch.amp.GradScaler`` read, ``param_groups``
and ``state`` (param → ``step``, ``exp_avg``, ``exp_avg_sq``), in ``torch.optim.Adam``'s layout, so checkpoints keep
their keys. A test steps it beside ``torch.optim.Adam`` and requires equal tensors.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["Adam"]


@functools.cache
def _decoupled_in_torch() -> bool:
    """Whether torch's functional Adam takes ``decoupled_weight_decay`` (torch >= 2.7)."""
    import inspect

    from torch.optim.adam import adam

    return "decoupled_weight_decay" in inspect.signature(adam).parameters


class Adam:
    """Adam with one parameter group; a ``weight_decay`` is decoupled (AdamW: each step multiplies the weights by
    1 - lr·weight_decay, apart from the gradient's moments). ``fused`` runs one kernel for the whole update (CUDA);
    ``capturable`` keeps the step counter on the parameters' device so the update can be captured in a CUDA graph,
    and then ``lr`` may be a device tensor that the step sets in place."""

    # torch.amp.GradScaler then passes grad_scale / found_inf to step() instead of unscaling with a host sync
    # (fused Adam's kernel unscales and skips a step with inf gradients itself)
    _step_supports_amp_scaling: bool

    def __init__(self, params: Iterable[torch.Tensor], lr: float | torch.Tensor = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, *, weight_decay: float = 0.0,
                 fused: bool = False, capturable: bool = False) -> None:  # fmt: skip
        import torch

        group: dict[str, Any] = {"params": list(params), "lr": lr, "betas": betas, "eps": eps,
                                 "weight_decay": weight_decay, "fused": fused, "capturable": capturable}  # fmt: skip
        if not group["params"]:
            raise ValueError("Adam got no parameters")
        if isinstance(lr, torch.Tensor) and not (fused or capturable):
            raise ValueError("a tensor lr needs fused or capturable")
        self.param_groups = [group]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}
        # GradScaler.step sets grad_scale and found_inf around step() and deletes them after; they must be absent
        # otherwise (it multiplies an existing grad_scale into the new one)
        self._step_supports_amp_scaling = fused

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        import torch

        state = self.state.get(p)
        if state is None:  # lazily, as torch.optim.Adam: the same dtypes, devices and memory layout
            group = self.param_groups[0]
            on_device = group["capturable"] or group["fused"]
            step = torch.zeros((), dtype=torch.float32, device=p.device if on_device else "cpu")
            state = {"step": step, "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                     "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}  # fmt: skip
            self.state[p] = state
        return state

    def step(self) -> None:
        import torch
        from torch.optim.adam import adam

        group = self.param_groups[0]
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        states = [self._state(p) for p in params]
        beta1, beta2 = group["betas"]
        decay, kwargs = group["weight_decay"], {}
        with torch.no_grad():
            if _decoupled_in_torch():
                kwargs = {"decoupled_weight_decay": True}
            elif decay:  # torch < 2.7: AdamW's own first step, by hand
                torch._foreach_mul_(params, 1 - group["lr"] * decay)
                decay = 0.0
            adam(params, [p.grad for p in params], [s["exp_avg"] for s in states],
                 [s["exp_avg_sq"] for s in states], [], [s["step"] for s in states], foreach=None,
                 capturable=group["capturable"], differentiable=False, fused=group["fused"],
                 grad_scale=getattr(self, "grad_scale", None), found_inf=getattr(self, "found_inf", None),
                 has_complex=False, amsgrad=False, beta1=beta1, beta2=beta2, lr=group["lr"],
                 weight_decay=decay, eps=group["eps"], maximize=False, **kwargs)  # fmt: skip

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.param_groups[0]["params"]:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_().zero_()
