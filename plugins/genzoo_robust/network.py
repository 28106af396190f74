"""J: a small CNN with C class logits, used both as a robust classifier and as a discriminator."""

from __future__ import annotations

from torch import nn


def build_classifier(channels: int, image_size: int, num_classes: int, width: int) -> nn.Sequential:
    """conv-conv-pool twice, then a hidden layer; GroupNorm keeps every image independent of its batch."""
    w = width
    return nn.Sequential(
        nn.Conv2d(channels, w, 3, padding=1), nn.GroupNorm(8, w), nn.SiLU(),
        nn.Conv2d(w, w, 3, padding=1), nn.GroupNorm(8, w), nn.SiLU(), nn.AvgPool2d(2),
        nn.Conv2d(w, 2 * w, 3, padding=1), nn.GroupNorm(8, 2 * w), nn.SiLU(),
        nn.Conv2d(2 * w, 2 * w, 3, padding=1), nn.GroupNorm(8, 2 * w), nn.SiLU(), nn.AvgPool2d(2),
        nn.Flatten(),
        nn.Linear(2 * w * (image_size // 4) ** 2, 4 * w), nn.SiLU(),
        nn.Linear(4 * w, num_classes),
    )
