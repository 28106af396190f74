"""The classifier networks the max-margin theory covers: ReLU MLPs and small ReLU CNNs.

Every network takes a ``slope`` keyword: 0 gives the exact ReLU; a positive value keeps the
forward value exact but replaces the ReLU derivative by sigmoid(slope * z) in the backward
(Haim et al. 2022), so that a double backward sees how the activation pattern moves with x.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def relu(z: torch.Tensor, slope: float = 0.0) -> torch.Tensor:
    """ReLU whose derivative is sigmoid(slope * z) when ``slope`` > 0 (forward value unchanged)."""
    if slope <= 0:
        return F.relu(z)
    smooth = F.softplus(z, beta=slope)  # d/dz softplus(slope z) / slope = sigmoid(slope z)
    return F.relu(z).detach() + (smooth - smooth.detach())


class MLP(nn.Module):
    """``depth`` linear layers with ReLU between them: depth-homogeneous when bias-free."""

    def __init__(self, in_dim: int, width: int, depth: int, classes: int, bias: bool):
        super().__init__()
        dims = [in_dim] + [width] * (depth - 1) + [classes]
        self.layers = nn.ModuleList(nn.Linear(a, b, bias=bias) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x: torch.Tensor, slope: float = 0.0) -> torch.Tensor:
        h = x.flatten(1)
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i < len(self.layers) - 1:
                h = relu(h, slope)
        return h


class CNN(nn.Module):
    """``depth - 1`` stride-2 3x3 ReLU convolutions (width, 2 width, ...) and a linear head."""

    def __init__(self, channels: int, image_size: int, width: int, depth: int, classes: int, bias: bool):
        super().__init__()
        convs, size, c_in = [], image_size, channels
        for i in range(depth - 1):
            c_out = width * 2**i
            convs.append(nn.Conv2d(c_in, c_out, 3, stride=2, padding=1, bias=bias))
            c_in, size = c_out, (size + 1) // 2
        self.convs = nn.ModuleList(convs)
        self.head = nn.Linear(c_in * size * size, classes, bias=bias)

    def forward(self, x: torch.Tensor, slope: float = 0.0) -> torch.Tensor:
        for conv in self.convs:
            x = relu(conv(x), slope)
        return self.head(x.flatten(1))
