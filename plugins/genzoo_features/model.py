"""A small CNN classifier of MNIST digits whose penultimate layer serves as the metrics' feature space.

Inception weights cannot be downloaded offline, so FID/KID/precision/recall are measured in the
128-dimensional penultimate layer of this network, trained on the 60k MNIST training images.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import torch
import torch.nn.functional as F
from torch import nn

import genzoo
from genzoo.configs import NonNegative, Positive, UnitOpen

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


@dataclass
class FeatureClassifierConfig:
    channels: int = 1
    image_size: int = 28
    num_classes: Annotated[int, Positive] = 10
    width: Annotated[int, Positive] = 32
    feature_dim: Annotated[int, Positive] = 128
    dropout: Annotated[float, UnitOpen] = 0.3
    lr: Annotated[float, Positive] = 1e-3
    weight_decay: Annotated[float, NonNegative] = 1e-4
    max_shift: Annotated[int, NonNegative] = 2  # training augmentation: random translation by up to this many pixels
    mean: float = MNIST_MEAN
    std: float = MNIST_STD

    def __post_init__(self) -> None:
        if self.image_size % 4:
            raise ValueError(f"image_size must be divisible by 4, got {self.image_size}")


class FeatureClassifier(genzoo.Method):
    name = "feature-classifier"
    summary = "CNN classifier whose penultimate layer gives the feature space of genzoo's metrics"
    Config = FeatureClassifierConfig
    capabilities = frozenset({"fit"})
    default_model = "features-mnist"

    def __init__(self, config=None):
        super().__init__(config)
        c = self.config
        w = c.width
        self.body = nn.Sequential(
            nn.Conv2d(c.channels, w, 3, padding=1), nn.ReLU(),
            nn.Conv2d(w, w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU(),
            nn.Conv2d(2 * w, 2 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(2 * w * (c.image_size // 4) ** 2, c.feature_dim), nn.ReLU(),
        )
        self.dropout = nn.Dropout(c.dropout)
        self.head = nn.Linear(c.feature_dim, c.num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Penultimate activations of images in [0, 1] (quantised to 8 bits by rounding first)."""
        x = torch.round(x.clamp(0, 1) * 255) / 255
        return self.body((x - self.config.mean) / self.config.std)

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))

    def training_step(self, batch):
        x, y = batch["x"], batch["y"]
        if y is None:
            raise genzoo.GenzooError("feature-classifier trains on labelled data; use a dataset with labels")
        x = _random_shift(x, self.config.max_shift)
        logits = self.head(self.dropout(self.features(x)))
        loss = F.cross_entropy(logits, y)
        accuracy = (logits.argmax(1) == y).float().mean()
        return {"loss": loss, "accuracy": accuracy}

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.config.lr, weight_decay=self.config.weight_decay)


def _random_shift(x: torch.Tensor, max_shift: int) -> torch.Tensor:
    """Translate each image by a random integer offset in [-max_shift, max_shift] (zero padding)."""
    if max_shift <= 0:
        return x
    n, _, h, w = x.shape
    padded = F.pad(x, (max_shift,) * 4)
    dy = torch.randint(0, 2 * max_shift + 1, (n,), device=x.device)
    dx = torch.randint(0, 2 * max_shift + 1, (n,), device=x.device)
    rows = (dy[:, None] + torch.arange(h, device=x.device)[None])[:, None, :, None]
    cols = (dx[:, None] + torch.arange(w, device=x.device)[None])[:, None, None, :]
    batch = torch.arange(n, device=x.device)[:, None, None, None]
    channel = torch.arange(x.shape[1], device=x.device)[None, :, None, None]
    return padded[batch, channel, rows, cols]


class FeatureExtractor(nn.Module):
    """What the metrics use: images in [0, 1] -> features, with ``num_features`` and ``classify``."""

    def __init__(self, classifier: FeatureClassifier, name: str):
        super().__init__()
        self.classifier = classifier.eval()
        self.name = name
        self.num_features = classifier.config.feature_dim
        self.num_classes = classifier.config.num_classes
        self.image_shape = classifier.image_shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier.features(x)

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier.classify(x)
