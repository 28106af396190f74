"""Batch norm whose inference statistics depend on what f is applied to, not on the batch.

IGN trains with batch statistics, and f sees two kinds of input: noise z (first application) and
images (f(z), real or corrupted images). Running averages mix the two, and train-mode batch
statistics at sampling time make a sample depend on the rest of its batch. So each layer keeps
population statistics per source, recomputed after training on exactly the inputs sampling feeds
it (see :func:`calibrate`); at inference the caller names the source.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

SOURCES = ("noise", "image")


class SourceBatchNorm2d(nn.Module):
    def __init__(self, channels: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        for source in SOURCES:
            self.register_buffer(f"{source}_mean", torch.zeros(channels))
            self.register_buffer(f"{source}_var", torch.ones(channels))
        self.source = "noise"
        self._sums: list[torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            if self._sums is not None:  # calibration: accumulate the input's population moments
                xd = x.detach().double()
                self._sums[0] += xd.sum((0, 2, 3))
                self._sums[1] += xd.square().sum((0, 2, 3))
                self._sums[2] += x.shape[0] * x.shape[2] * x.shape[3]
            return F.batch_norm(x, None, None, self.weight, self.bias, training=True, eps=self.eps)
        mean, var = getattr(self, f"{self.source}_mean"), getattr(self, f"{self.source}_var")
        return F.batch_norm(x, mean, var, self.weight, self.bias, training=False, eps=self.eps)


def layers(net: nn.Module) -> list[SourceBatchNorm2d]:
    return [m for m in net.modules() if isinstance(m, SourceBatchNorm2d)]


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
    """Each layer's input mean and variance over every forward pass ``run()`` makes, in :func:`layers` order.

    The passes run in train mode (batch statistics), as training presents the inputs; the moments
    are summed in float64 over all of them.
    """
    bns = layers(net)
    was_training = net.training
    net.train()
    for m in bns:
        m._sums = [torch.zeros_like(m.weight, dtype=torch.float64), torch.zeros_like(m.weight, dtype=torch.float64),
                   torch.zeros((), dtype=torch.float64)]
    try:
        run()
        statistics = []
        for m in bns:
            total, total_sq, n = m._sums
            mean = total / n
            statistics.append((mean.float(), (total_sq / n - mean.square()).clamp_min(0).float()))
    finally:
        for m in bns:
            m._sums = None
        net.train(was_training)
    return statistics


@torch.no_grad()
def set_statistics(net: nn.Module, name: str, statistics: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Make ``statistics`` (from :func:`population_statistics`) the population statistics of source ``name``."""
    for m, (mean, var) in zip(layers(net), statistics):
        getattr(m, f"{name}_mean").copy_(mean)
        getattr(m, f"{name}_var").copy_(var)


@torch.no_grad()
def calibrate(net: nn.Module, draw_noise: Callable[[int, torch.Generator], torch.Tensor], *, count: int = 4096,
              batch: int = 256, seed: int = 0) -> None:
    """Recompute every layer's per-source statistics with batch-statistics forward passes.

    "noise": inputs are z; "image": inputs are f(z), as training and sampling present them.
    Uses its own generator, so the global RNG (and an exact training resume) is untouched.
    """
    if not layers(net):
        return
    generator = torch.Generator().manual_seed(seed)
    zs = [draw_noise(min(batch, count - s), generator) for s in range(0, count, batch)]
    outputs: list[torch.Tensor] = []
    set_statistics(net, "noise", population_statistics(net, lambda: outputs.extend(net(z) for z in zs)))
    set_statistics(net, "image", population_statistics(net, lambda: [net(y) for y in outputs]))
