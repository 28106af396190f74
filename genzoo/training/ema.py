"""An exponential moving average of a method's weights: the decay, its warm-up and the update.

The average is a whole copy of the method (so it samples and exports like one), of which only the
parameters the method declares are averaged (``Method.ema_modules``: names of submodules, e.g.
``("generator",)`` for a GAN; None averages every parameter). The other parameters and every buffer
are copied from the trained model at each update, so a GAN's exported discriminator is its latest.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from ..errors import GenzooError


def ema_decay_at(step: int, decay: float) -> float:
    """The decay after optimisation step ``step`` (0-based): ``min(decay, (1 + step) / (10 + step))``.

    The warm-up (diffusers' and TensorFlow's form) lets a short run export what it learned: at a
    fixed 0.999, the average of a 200-step run still sits almost on the initial weights.
    """
    return min(decay, (1 + step) / (10 + step))


class EMA:
    """The moving average of ``model``'s declared parameters at ``decay`` (with the warm-up)."""

    def __init__(self, model: nn.Module, decay: float, modules: tuple[str, ...] | None = None):
        self.decay = float(decay)
        self.model = copy.deepcopy(model).eval().requires_grad_(False)
        self.averaged = averaged_names(model, modules)

    @classmethod
    def of(cls, model: nn.Module) -> "EMA | None":
        """The EMA a method asks for through its config's ``ema_decay`` (None when 0 or absent)."""
        decay = float(getattr(model.config, "ema_decay", 0.0) or 0.0)
        return cls(model, decay, getattr(model, "ema_modules", None)) if decay > 0 else None

    @torch.no_grad()
    def update(self, model: nn.Module, step: int) -> None:
        """Move the average towards ``model`` after optimisation step ``step`` (0-based)."""
        weight = 1.0 - ema_decay_at(step, self.decay)
        for (name, average), current in zip(self.model.named_parameters(), model.parameters()):
            if name in self.averaged:
                average.lerp_(current.detach(), weight)
            else:
                average.copy_(current.detach())
        for average, current in zip(self.model.buffers(), model.buffers()):
            average.copy_(current)

    def state_dict(self) -> dict[str, Any]:
        return self.model.state_dict()

    def load_state_dict(self, tensors: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(tensors, strict=True)


def averaged_names(model: nn.Module, modules: tuple[str, ...] | None) -> frozenset[str]:
    """The names of the parameters under the submodules ``modules`` (all of them for None)."""
    names = [name for name, _ in model.named_parameters()]
    if modules is None:
        return frozenset(names)
    known = dict(model.named_modules())
    missing = [m for m in modules if m not in known]
    if missing:
        raise GenzooError(f"{type(model).__name__}.ema_modules names {missing}, which are not submodules; "
                          f"its submodules: {', '.join(n for n in known if n and '.' not in n)}")
    return frozenset(n for n in names if any(n.startswith(m + ".") for m in modules))


__all__ = ["EMA", "averaged_names", "ema_decay_at"]
