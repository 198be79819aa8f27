"""Adam for the chapters' small training runs, without the cost of ``torch.optim.Optimizer``'s first use.

In PyTorch 2.13, ``torch.optim.Optimizer.add_param_group``, ``zero_grad`` and ``step`` are wrapped by
``torch._disable_dynamo`` or call ``torch._dynamo.graph_break``, so the first optimizer a process builds
imports ``torch._dynamo``: about 1.1 s on the book's 2-core build machine, paid once by every chapter that
trains (chapters 5, 9 and 12), whose budget is 10 s (60 s for chapter 9). :class:`Adam` keeps the state
``torch.optim.Adam`` keeps (a step count, the first and second moments of each parameter, initialised as
that class does) and calls the same update, PyTorch's documented functional API ``torch.optim.adam.adam``,
with the same arguments. Its parameters are therefore bit for bit those of ``torch.optim.Adam`` with the
same ``lr`` and ``fused`` on the same process; ``tests/test_adam.py`` compares them over a few steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch.optim.adam import adam

__all__ = ["Adam"]


class Adam:
    """``torch.optim.Adam(params, lr=lr, fused=fused)`` with the defaults otherwise, for CPU training loops.

    Parameters
    ----------
    params : iterable of torch.Tensor
        The parameters to update, for instance ``model.parameters()``.
    lr : float
        Learning rate. The loops change it between steps through ``param_groups[0]["lr"]``, as with
        ``torch.optim.Adam``.
    fused : bool, default False
        Use PyTorch's fused Adam kernel (``fused=True`` of ``torch.optim.Adam``); ``False`` is the
        single-tensor loop that ``torch.optim.Adam`` picks for CPU parameters by default.

    Notes
    -----
    Betas (0.9, 0.999), eps 1e-8, no weight decay, no AMSGrad, as the defaults of ``torch.optim.Adam``.
    Parameters without a gradient are skipped at a step and their state is created at their first step
    with one, as there.
    """

    def __init__(self, params: Iterable[torch.Tensor], *, lr: float, fused: bool = False) -> None:
        self.param_groups: list[dict[str, Any]] = [{"params": list(params), "lr": lr}]
        self.fused = fused
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def zero_grad(self) -> None:
        """Set every parameter's gradient to ``None`` (``torch.optim.Optimizer.zero_grad``'s default)."""
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        if p not in self.state:
            # as torch.optim.Adam._init_group: a float32 step count, float64 if the default dtype is and not fused
            double = torch.get_default_dtype() == torch.float64 and not self.fused
            step_dtype = torch.float64 if double else torch.float32
            self.state[p] = {
                "step": torch.zeros((), dtype=step_dtype),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
            }
        return self.state[p]

    @torch.no_grad()
    def step(self) -> None:
        """One Adam update of every parameter that has a gradient."""
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            states = [self._state(p) for p in params]
            adam(
                params,
                [p.grad for p in params],
                [s["exp_avg"] for s in states],
                [s["exp_avg_sq"] for s in states],
                [],
                [s["step"] for s in states],
                foreach=False,
                fused=self.fused,
                amsgrad=False,
                beta1=0.9,
                beta2=0.999,
                lr=group["lr"],
                weight_decay=0.0,
                eps=1e-8,
                maximize=False,
            )
