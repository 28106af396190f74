"""Batch norm whose statistics at inference come from the inputs sampling feeds it, not from the batch.

A network trained with batch statistics needs fixed ones to sample one image at a time (train-mode
statistics would make a sample depend on the rest of its batch), and training's running averages
fit them poorly: they lag behind the weights, and they mix inputs of different kinds when one
network sees several (IGN's f sees noise z and images f(z)). :func:`calibrate` recomputes every
batch norm's population statistics after training, with batch-statistics passes on exactly the
inputs sampling feeds it:

- a plain ``nn.BatchNorm1d/2d/3d`` takes them as its running statistics;
- a :class:`SourceBatchNorm2d` keeps statistics per source ("noise" for inputs z, "image" for inputs
  net(z), real or corrupted images), and at inference the caller names the source (:func:`source`).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

SOURCES = ("noise", "image")


class SourceBatchNorm2d(nn.Module):
    """Batch norm with batch statistics in training and, at inference, the population statistics of one source."""

    def __init__(self, channels: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        for source in SOURCES:
            self.register_buffer(f"{source}_mean", torch.zeros(channels))
            self.register_buffer(f"{source}_var", torch.ones(channels))
        self.source = "noise"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            return F.batch_norm(x, None, None, self.weight, self.bias, training=True, eps=self.eps)
        mean, var = getattr(self, f"{self.source}_mean"), getattr(self, f"{self.source}_var")
        return F.batch_norm(x, mean, var, self.weight, self.bias, training=False, eps=self.eps)


def layers(net: nn.Module) -> list[SourceBatchNorm2d]:
    """The SourceBatchNorm2d layers of ``net``."""
    return [m for m in net.modules() if isinstance(m, SourceBatchNorm2d)]


def batch_norms(net: nn.Module) -> list[nn.Module]:
    """Every batch norm of ``net``: SourceBatchNorm2d layers and plain ``nn.BatchNorm*`` ones, in module order."""
    return [m for m in net.modules() if isinstance(m, (SourceBatchNorm2d, nn.modules.batchnorm._BatchNorm))]


@contextlib.contextmanager
def source(net: nn.Module, name: str) -> Iterator[None]:
    """Use the population statistics of ``name`` ("noise" or "image") at inference."""
    previous = [m.source for m in layers(net)]
    for m in layers(net):
        m.source = name
    try:
        yield
    finally:
        for m, p in zip(layers(net), previous):
            m.source = p


@torch.no_grad()
def population_statistics(net: nn.Module, run: Callable[[], object]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each batch norm's input mean and variance over every forward pass ``run()`` makes, in :func:`batch_norms` order.

    The passes run in train mode (batch statistics), as training presents the inputs; the moments
    are summed in float64 over all of them. Plain batch norms' running statistics are left as they were.
    """
    norms = batch_norms(net)
    sums = {m: [0.0, 0.0, 0] for m in norms}

    def accumulate(module: nn.Module, inputs: tuple) -> None:
        x = inputs[0].detach().double()
        dims = (0, *range(2, x.ndim))
        total = sums[module]
        total[0] = total[0] + x.sum(dims)
        total[1] = total[1] + x.square().sum(dims)
        total[2] += x.numel() // x.shape[1]

    was_training = net.training
    saved = {m: [t.clone() for t in m.buffers()] for m in norms if not isinstance(m, SourceBatchNorm2d)}
    hooks = [m.register_forward_pre_hook(accumulate) for m in norms]
    net.train()
    try:
        run()
    finally:
        for hook in hooks:
            hook.remove()
        for m, buffers in saved.items():
            for buffer, value in zip(m.buffers(), buffers):
                buffer.copy_(value)
        net.train(was_training)
    statistics = []
    for m in norms:
        total, total_sq, n = sums[m]
        if not n:
            raise ValueError(f"calibration ran no input through the batch norm {m}")
        mean = total / n
        statistics.append((mean.float(), (total_sq / n - mean.square()).clamp_min(0).float()))
    return statistics


@torch.no_grad()
def set_statistics(net: nn.Module, name: str, statistics: list[tuple[torch.Tensor, torch.Tensor]], *,
                   plain: bool = True) -> None:
    """Make ``statistics`` (from :func:`population_statistics`) the population statistics of source ``name`` of
    every SourceBatchNorm2d and, with ``plain``, the running statistics of every plain batch norm."""
    for m, (mean, var) in zip(batch_norms(net), statistics):
        if isinstance(m, SourceBatchNorm2d):
            getattr(m, f"{name}_mean").copy_(mean)
            getattr(m, f"{name}_var").copy_(var)
        elif plain:
            m.running_mean.copy_(mean)
            m.running_var.copy_(var)


@torch.no_grad()
def calibrate(net: nn.Module, draw_noise: Callable[[int, torch.Generator], torch.Tensor], *, count: int = 4096,
              batch: int = 256, seed: int = 0) -> None:
    """Recompute every batch norm's population statistics with batch-statistics passes of ``net``.

    ``draw_noise(n, generator)`` returns n inputs z. Plain batch norms and the "noise" source take the
    statistics of the passes on z; the "image" source those of passes on net(z), as sampling and
    refining present them. Uses its own generator, so the global RNG (and an exact training resume)
    is untouched.
    """
    if not batch_norms(net):
        return
    generator = torch.Generator().manual_seed(seed)
    zs = [draw_noise(min(batch, count - s), generator) for s in range(0, count, batch)]
    outputs: list[torch.Tensor] = []
    set_statistics(net, "noise", population_statistics(net, lambda: outputs.extend(net(z) for z in zs)))
    if layers(net):
        set_statistics(net, "image", population_statistics(net, lambda: [net(y) for y in outputs]), plain=False)
