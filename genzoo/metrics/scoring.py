"""What a metric's ``compute`` is given (:class:`Scoring`), and the training images some metrics compare with.

A metric's row of the plugin host's table is :class:`genzoo.entries.MetricEntry`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..errors import GenzooError
from .scores import precision_recall


@dataclass
class TrainingSet:
    """The training images a memorisation metric compares with, and their features."""

    name: str
    images: torch.Tensor
    features: torch.Tensor


@dataclass
class Scoring:
    """What a metric's ``compute`` receives: features of both sets and what else the evaluation has.

    ``real``/``fake``: reference and sample features (N, D); ``probs``: the feature network's class
    probabilities of the samples (None if it cannot classify); ``labels``: the labels the samples
    were made for (None if unconditional); ``images``: the samples, float NCHW in [0, 1];
    ``options``: the evaluation's settings (:class:`genzoo.metrics.EvalOptions`);
    ``real_images``: the reference images themselves, for metrics computed on pixels.
    """

    real: torch.Tensor
    fake: torch.Tensor
    probs: torch.Tensor | None
    labels: torch.Tensor | None
    images: torch.Tensor
    options: Any
    load_train: Callable[[], TrainingSet] | None = None
    cache: dict[str, Any] = field(default_factory=dict)
    real_images: torch.Tensor | None = None

    def precision_recall(self) -> tuple[float, float]:
        if "precision_recall" not in self.cache:
            self.cache["precision_recall"] = precision_recall(self.real, self.fake, k=self.options.k)
        return self.cache["precision_recall"]

    def train(self) -> TrainingSet:
        if "train" not in self.cache:
            if self.load_train is None:
                raise GenzooError("this metric needs training images, which the evaluation did not load")
            self.cache["train"] = self.load_train()
        return self.cache["train"]
