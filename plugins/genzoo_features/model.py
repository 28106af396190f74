"""A small CNN whose penultimate layer serves as the metrics' feature space (one network per dataset).

Inception weights cannot be downloaded offline, so FID/KID/precision/recall are measured in the
penultimate layer of a network of genzoo's own: for MNIST and CIFAR-10 a classifier of the labels,
trained on the training split; for CelebA, which has no labels here, a rotation predictor
(objective=rotation: which of 0/90/180/270 degrees an image was turned by, a self-supervised task)
trained on faces 1-4,000 only, so that the reference faces 4,001-5,000 are unseen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

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
    flip: bool = False  # training augmentation: mirror half the images left-right (not for digits)
    norm: Literal["none", "batch"] = "none"  # batch norm after each convolution (population statistics at inference)
    objective: Literal["labels", "rotation"] = "labels"  # rotation: predict a random 90-degree turn (no labels needed)
    schedule: Literal["constant", "cosine"] = "constant"  # cosine: the learning rate decays to 0 over --steps
    mean: float = MNIST_MEAN
    std: float = MNIST_STD

    def __post_init__(self) -> None:
        if self.image_size % 4:
            raise ValueError(f"image_size must be divisible by 4, got {self.image_size}")
        if self.objective == "rotation" and self.num_classes != 4:
            raise ValueError(f"objective=rotation predicts one of 4 turns: set num_classes=4, got {self.num_classes}")


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

        def conv(a: int, b: int) -> list[nn.Module]:
            return [nn.Conv2d(a, b, 3, padding=1), *([nn.BatchNorm2d(b)] if c.norm == "batch" else []), nn.ReLU()]

        self.body = nn.Sequential(
            *conv(c.channels, w), *conv(w, w), nn.MaxPool2d(2),
            *conv(w, 2 * w), *conv(2 * w, 2 * w), nn.MaxPool2d(2),
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
        x, y = self.training_inputs(batch)
        logits = self.head(self.dropout(self.features(x)))
        loss = F.cross_entropy(logits, y)
        accuracy = (logits.argmax(1) == y).float().mean()
        return {"loss": loss, "accuracy": accuracy}

    def training_inputs(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """The augmented images and their targets. The rotation is applied last: a mirror after a
        quarter turn looks like the opposite quarter turn, which would make 90 and 270 degrees
        indistinguishable (75% accuracy at best)."""
        c = self.config
        x, y = batch["x"], batch["y"]
        if c.objective == "labels" and y is None:
            raise genzoo.GenzooError("feature-classifier trains on labelled data; use a dataset with labels, or "
                                     "--set objective=rotation --set num_classes=4")
        if c.flip:
            mirrored = torch.rand(x.shape[0], device=x.device) < 0.5
            x = torch.where(mirrored[:, None, None, None], x.flip(3), x)
        x = _random_shift(x, c.max_shift)
        if c.objective == "rotation":
            y = torch.randint(0, 4, (x.shape[0],), device=x.device)
            x = rotate(x, y)
        return x, y

    def configure_optimizers(self, total_steps: int):
        c = self.config
        optimizer = torch.optim.AdamW(self.parameters(), lr=c.lr, weight_decay=c.weight_decay)
        if c.schedule == "constant":
            return optimizer
        return [optimizer], [genzoo.schedules.warmup_cosine(optimizer, warmup_steps=0, total_steps=total_steps)]


def rotate(x: torch.Tensor, turns: torch.Tensor) -> torch.Tensor:
    """Image i turned by turns[i] x 90 degrees (square images)."""
    out = x.clone()
    for k in range(1, 4):
        chosen = turns == k
        if chosen.any():
            out[chosen] = torch.rot90(x[chosen], k, dims=(2, 3))
    return out


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
    """What the metrics use: images in [0, 1] -> features, with ``num_features``."""

    def __init__(self, classifier: FeatureClassifier, name: str):
        super().__init__()
        self.classifier = classifier.eval()
        self.name = name
        self.num_features = classifier.config.feature_dim
        self.num_classes = classifier.config.num_classes
        self.image_shape = classifier.image_shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier.features(x)


class ClassifyingFeatureExtractor(FeatureExtractor):
    """A feature network trained on the dataset's labels: it also classifies (class statistics, accuracy)."""

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier.classify(x)


def extractor(model_name: str) -> FeatureExtractor:
    """The feature extractor of a bundled feature-classifier model (a classifier only if trained on labels)."""
    classifier = genzoo.load(model_name)
    kind = ClassifyingFeatureExtractor if classifier.config.objective == "labels" else FeatureExtractor
    return kind(classifier, model_name)
