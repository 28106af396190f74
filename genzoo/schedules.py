"""Learning-rate schedules a method can return from ``configure_optimizers`` with its optimisers.

    def configure_optimizers(self, total_steps):
        opt = torch.optim.Adam(self.parameters(), lr=self.config.lr)
        return [opt], [genzoo.schedules.warmup_cosine(opt, warmup_steps=500, total_steps=total_steps)]

Any ``torch.optim.lr_scheduler`` works too; the loop steps each scheduler once per optimisation
step and saves its state in every checkpoint, so a resumed run follows the same schedule.
"""

from __future__ import annotations

import math

import torch

from .errors import GenzooError


class WarmupCosine:
    """lr factor: linear from 0 to 1 over ``warmup_steps``, then cosine down to ``final_ratio`` at ``total_steps``.

    A callable object, not a closure, so that LambdaLR can save its settings in a checkpoint.
    """

    def __init__(self, warmup_steps: int, total_steps: int, final_ratio: float = 0.0):
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)
        self.final_ratio = float(final_ratio)

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        return self.final_ratio + (1 - self.final_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def warmup_cosine(optimizer: torch.optim.Optimizer, *, warmup_steps: int, total_steps: int | None,
                  final_ratio: float = 0.0) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up for ``warmup_steps``, then cosine decay to ``final_ratio`` x lr at ``total_steps``.

    Pass configure_optimizers' ``total_steps`` to decay over the whole ``genzoo fit --steps``.
    """
    if total_steps is None:
        raise GenzooError("warmup_cosine needs total_steps: pass configure_optimizers' total_steps (the run's --steps)")
    if warmup_steps < 0 or total_steps < 1 or warmup_steps > total_steps:
        raise GenzooError(f"warmup_cosine needs 0 <= warmup_steps <= total_steps, got {warmup_steps} and {total_steps}")
    if not 0 <= final_ratio <= 1:
        raise GenzooError(f"warmup_cosine's final_ratio must be in [0, 1], got {final_ratio}")
    return torch.optim.lr_scheduler.LambdaLR(optimizer, WarmupCosine(max(warmup_steps, 0), total_steps, final_ratio))
