"""L2 projected gradient steps on images in [0, 1] (every radius is in units of [0, 1] pixels)."""

from __future__ import annotations

from typing import Callable, Iterable

import torch


def _per_image_norm(t: torch.Tensor) -> torch.Tensor:
    return t.flatten(1).norm(dim=1).clamp_min(1e-12).view(-1, *([1] * (t.ndim - 1)))


def project(x: torch.Tensor, origin: torch.Tensor, eps: float) -> torch.Tensor:
    """Into the L2 ball of radius ``eps`` around ``origin`` and the pixel range [0, 1]."""
    delta = x - origin
    delta = delta * (eps / _per_image_norm(delta)).clamp(max=1.0)
    return (origin + delta).clamp(0, 1)


def random_start(x: torch.Tensor, eps: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """A uniform point of the L2 ball around x (then clamped to [0, 1])."""
    direction = torch.randn(x.shape, generator=generator, device="cpu").to(x.device)
    direction = direction / _per_image_norm(direction)
    d = x[0].numel()
    radius = eps * torch.rand(x.shape[0], generator=generator, device="cpu").to(x.device).pow(1.0 / d)
    return project(x + direction * radius.view(-1, 1, 1, 1), x, eps)


def pgd_ascent(
    objective: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    *,
    eps: float,
    steps: int,
    step_size: float | None = None,
    start: torch.Tensor | None = None,
    track: Callable[[range], Iterable[int]] = iter,
) -> torch.Tensor:
    """Maximise ``objective(x)`` (one value per image) by normalised L2 gradient steps inside the ball.

    ``track`` wraps the loop over the steps (a progress bar). Returns detached images; the model's
    parameter gradients are left untouched.
    """
    if steps <= 0 or eps <= 0:
        return x.detach()
    step_size = step_size if step_size is not None else 2.5 * eps / steps
    origin = x.detach()
    current = (start if start is not None else origin).detach()
    for _ in track(range(steps)):
        current.requires_grad_(True)
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(objective(current).sum(), current)
        current = project(current.detach() + step_size * grad / _per_image_norm(grad), origin, eps)
    return current.detach()
