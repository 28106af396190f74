"""Images between genzoo's [0, 1] (every public boundary) and the [-1, 1] most networks work in."""

from __future__ import annotations

import torch


def to_signed(x: torch.Tensor) -> torch.Tensor:
    """Images in [0, 1] as images in [-1, 1]."""
    return x * 2 - 1


def to_unit(x: torch.Tensor, *, clamp: bool = False) -> torch.Tensor:
    """Images in [-1, 1] as images in [0, 1]; ``clamp`` first clips x to [-1, 1] (a network's output may stray)."""
    if clamp:
        x = x.clamp(-1, 1)
    return (x + 1) / 2
