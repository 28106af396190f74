"""``mmb-reconstruct``: Haim et al.'s (NeurIPS 2022) per-image reconstruction, the baseline of the MMB paper.

Instead of a generator, ``count`` images x_m and their multipliers lambda_m >= 0 are optimised
directly against the same KKT losses as ``mmb`` (kkt.py), with every image in every step. Image m
carries label m mod C. It starts as Haim et al. do: x_m = mean + u_m with small u_m, the pixels free
and kept in [0, 1] by a penalty (their "prior" loss), clipped when sampled.

Sampling returns the reconstructions themselves: image i of a call with default labels is
reconstruction i mod count (so for n > count they repeat); with explicit labels, image i is the
(i // C)-th reconstruction of its label, cycling through that label's reconstructions. The seed
has no effect: there is nothing random to draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import genzoo
from genzoo import GenzooError, Noise

from .classifier import PAPER
from .generator import load_targets, resolve_shapes
from .kkt import KKTTarget, Stationarity, box_penalty, duality_loss, relu_multipliers


@dataclass
class ReconstructConfig:
    classifier: str = ""  # the mmb-classifier model to reconstruct from (fit time only)
    count: int = 500  # M, the number of images reconstructed
    channels: int = 0  # 0: taken from the classifier when fitting
    image_size: int = 0
    num_classes: int = 0
    train_size: int = 0  # N; 0: what the classifier recorded
    stationarity: Stationarity = "max-block"
    dual_weight: float = 10.0
    relu_slope: float = 150.0
    lambda_inputs: int = 64
    init_std: float = 0.01  # x = mean image + u, u ~ N(0, init_std^2)
    box_weight: float = 1.0  # weight of the penalty sum relu(-x)^2 + relu(x - 1)^2 per image
    lr: float = 0.01

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"count must be >= 1, got {self.count}")


class MMBReconstruct(genzoo.Method):
    name = "mmb-reconstruct"
    summary = "baseline: reconstruct a classifier's training images one by one from its KKT conditions (Haim et al. 2022)"
    Config = ReconstructConfig
    capabilities = frozenset({"fit", "sample"})
    paper = PAPER
    needs_data = False

    def __init__(self, config: Any = None):
        super().__init__(config)
        c = self.config
        if not (c.channels and c.image_size and c.num_classes):
            self.config = c = resolve_shapes(c, (c.classifier,) if c.classifier else (), "mmb-reconstruct", "classifier")
        self.pixels = nn.Parameter(c.init_std * torch.randn(c.count, *self.image_shape))  # x_m = centre + pixels_m
        # the classifier's centring image, copied in setup_fit so sampling needs no classifier
        self.register_buffer("centre", torch.zeros(self.image_shape))
        self.raw_multipliers = nn.Parameter(torch.zeros(c.count))  # lambda_m = unit * c * relu(1 + raw_m - mean raw)
        self.register_buffer("labels", torch.arange(c.count) % c.num_classes)
        self.targets: list[KKTTarget] = []

    def raw_images(self) -> torch.Tensor:
        """The images the losses see (not yet clipped to [0, 1])."""
        return self.centre + self.pixels

    def images(self) -> torch.Tensor:
        return self.raw_images().clamp(0, 1)

    def sample_batch(self, noise: Noise, labels: torch.Tensor | None, **options: Any) -> torch.Tensor:
        c = self.config
        i = torch.arange(noise.start, noise.stop, device=self.device)
        if labels is None:
            index = i % c.count
        else:
            per_label = (c.count - labels + c.num_classes - 1) // c.num_classes  # reconstructions with that label
            if (per_label <= 0).any():
                raise GenzooError(f"there are no reconstructions of some requested labels (count={c.count}); fit a larger count")
            index = labels + c.num_classes * ((i // c.num_classes) % per_label)
        return self.images()[index]

    def setup_fit(self, data: Any) -> None:
        self.targets = load_targets((self.config.classifier,), self.config, self.device)
        with torch.no_grad():
            self.centre.copy_(self.targets[0].classifier.mean.to(self.centre))

    def training_step(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        # Every image in every step: the loop's batch size is ignored.
        if not self.targets:
            raise GenzooError("mmb-reconstruct has no classifier loaded: train it with --set classifier=DIR")
        target = self.targets[0]
        if target.device != self.device:
            target.to(self.device)
        x = self.raw_images()
        lam_rel = relu_multipliers(self.raw_multipliers)
        stationarity, q, scale = target.stationarity(x, self.labels, target.unit * lam_rel, self.config.relu_slope)
        dual = duality_loss(q, lam_rel)
        loss = stationarity + self.config.dual_weight * dual
        logs = {"stationarity": stationarity.detach(), "dual": dual.detach(), "margin": q.detach().mean(),
                "feasible": (q.detach() >= 1).float().mean(), "lambda": (scale * lam_rel).detach().mean()}
        box = box_penalty(x)
        loss = loss + self.config.box_weight * box
        logs["box"] = box.detach()
        return {"loss": loss, **logs}

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.config.lr)
