"""``mmb-classifier``: the kind of classifier the maximum-margin theory covers, and what MMB needs from it.

A ReLU MLP (bias-free or with biases) or a small ReLU CNN, trained by full-batch gradient descent
from a small initialisation on a class-balanced subset (``per_class`` images per label), with an
exponential-tailed loss (cross-entropy). Gradient flow on such a loss converges in direction to a
KKT point of the max-margin problem (Lyu and Li 2020); the generator reads the KKT conditions
back out of the trained weights.

Saved with the model: the subset's indices into the training set (``indices``), the mean image
the inputs are centred with (``mean``) and the smallest training margin of the saved weights
(``margin``), which fixes the rescaling exp(-alpha Lambda) theta to min-margin 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

import genzoo
from genzoo import GenzooError

from .nets import CNN, MLP

PAPER = """@inproceedings{yu2023generator,
  title     = {Generator Born from Classifier},
  author    = {Yu, Runpeng and Wang, Xinchao},
  booktitle = {Advances in Neural Information Processing Systems},
  year      = {2023}
}"""


@dataclass
class ClassifierConfig:
    arch: Literal["mlp", "cnn"] = "mlp"
    channels: int = 1
    image_size: int = 28  # a flat d-dimensional input is a d x 1 x 1 image: channels=d, image_size=1
    num_classes: int = 10
    width: int = 256  # hidden units (mlp) or first-layer channels (cnn)
    depth: int = 3  # number of layers L (linear layers for mlp; convolutions + linear head for cnn)
    bias: bool = False  # bias-free nets are L-homogeneous; with biases they are quasi-homogeneous
    per_class: int = 50  # training subset: this many images of each label
    subset_seed: int = 0
    init_scale: float = 0.1  # multiplies PyTorch's default initialisation ("small initialisation")
    step_rule: Literal["normalised", "plain"] = "normalised"
    lr: float = 1.0  # normalised: the bound on each step (see NormalisedGD); plain: the learning rate of GD

    def __post_init__(self) -> None:
        if self.depth < 2:
            raise ValueError(f"depth must be at least 2 (one hidden layer), got {self.depth}")
        if min(self.channels, self.image_size, self.width, self.per_class) < 1 or self.num_classes < 2:
            raise ValueError("channels, image_size, width and per_class must be >= 1 and num_classes >= 2")


class NormalisedGD(torch.optim.Optimizer):
    """Gradient descent on log L with step size lr * min(||theta|| / ||g||, 1 / ||g||^2).

    A positive rescaling of the gradient changes only the speed along the gradient-flow path, not
    the path. The step moves theta by at most ``lr`` of its norm (the early phase, escaping a small
    initialisation) and lowers log L, to first order, by at most ``lr`` (the late phase, where the
    margins are large and a fixed relative step would jump between support points instead of
    following the flow). Late in training the margins then grow linearly with the step count,
    where plain gradient descent needs exponentially many steps for the same loss.
    """

    def __init__(self, params: Any, lr: float):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            g_norm = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in params))
            p_norm = math.sqrt(sum(float(p.double().pow(2).sum()) for p in params))
            if g_norm == 0 or not math.isfinite(g_norm):
                continue
            scale = group["lr"] * min(p_norm / g_norm, 1 / g_norm**2)
            for p in params:
                p.add_(p.grad, alpha=-scale)


def margins(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """q = Phi_y(x) - max_{j != y} Phi_j(x), one per row."""
    true = logits.gather(1, labels[:, None])[:, 0]
    others = logits.scatter(1, labels[:, None], float("-inf"))
    return true - others.amax(1)


def log_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log of the mean cross-entropy, exact in log space even when the loss underflows.

    Per sample, CE = log(1 + s) with s = sum_{j != y} exp(Phi_j - Phi_y); log CE = log s up to
    s / 2 once s is tiny, so deep in training nothing rounds to 0 (or its gradient to nan).
    """
    true = logits.gather(1, labels[:, None])
    log_s = torch.logsumexp(logits.scatter(1, labels[:, None], float("-inf")) - true, 1)
    log_ce = torch.where(log_s < -20, log_s, torch.log(nn.functional.softplus(log_s.clamp(min=-20))))
    return torch.logsumexp(log_ce, 0) - math.log(len(log_ce))


class MMBClassifier(genzoo.Method):
    name = "mmb-classifier"
    summary = "ReLU classifier trained by full-batch GD into the max-margin regime; what the MMB generator learns from"
    Config = ClassifierConfig
    capabilities = frozenset({"fit"})
    default_model = "mmb-mnist-classifier"
    paper = PAPER

    def __init__(self, config: Any = None):
        super().__init__(config)
        c = self.config
        if c.arch == "mlp":
            self.net = MLP(c.channels * c.image_size**2, c.width, c.depth, c.num_classes, c.bias)
        else:
            self.net = CNN(c.channels, c.image_size, c.width, c.depth, c.num_classes, c.bias)
        with torch.no_grad():
            for p in self.net.parameters():
                p.mul_(c.init_scale)
        n = c.per_class * c.num_classes
        self.register_buffer("mean", torch.zeros(c.channels, c.image_size, c.image_size))
        self.register_buffer("indices", torch.full((n,), -1, dtype=torch.long))
        self.register_buffer("margin", torch.tensor(float("nan")))
        self.register_buffer("train_x", torch.empty(0), persistent=False)
        self.register_buffer("train_y", torch.empty(0, dtype=torch.long), persistent=False)
        self.register_state_dict_pre_hook(_refresh_margin)

    # -- what the generator reads ------------------------------------------------------------------

    @property
    def depth(self) -> int:
        return self.config.depth

    @property
    def train_size(self) -> int:
        """N, the number of training images the classifier was fitted to."""
        return self.indices.numel()

    def logits(self, x: torch.Tensor, slope: float = 0.0) -> torch.Tensor:
        """Class scores Phi(x) of images in [0, 1] (centred with the training mean first)."""
        return self.net(x - self.mean, slope=slope)

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(x)

    def margins(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return margins(self.logits(x), labels)

    # -- training -----------------------------------------------------------------------------------

    def setup_fit(self, data: Any) -> None:
        if data is None or data.labels is None:
            raise GenzooError("mmb-classifier trains on labelled images: pass --dataset (e.g. mnist)")
        c = self.config
        if tuple(data.image_shape) != self.image_shape:
            ch, s = data.image_shape[0], data.image_shape[1]
            raise GenzooError(
                f"{data.name} has images of shape {tuple(data.image_shape)}, the classifier is built for "
                f"{self.image_shape}; pass --set channels={ch} --set image_size={s}"
            )
        if data.num_classes > c.num_classes:
            raise GenzooError(f"{data.name} has {data.num_classes} classes; pass --set num_classes={data.num_classes}")
        index = select_subset(data.labels, c.per_class, c.num_classes, c.subset_seed)
        self.set_training_set(data.floats(index), data.labels[index], index)

    def set_training_set(self, x: torch.Tensor, y: torch.Tensor, indices: torch.Tensor | None = None) -> None:
        """Fit to these images (float NCHW in [0, 1]) and labels; ``indices`` (into the dataset) default to 0..N-1."""
        if x.shape[0] != self.indices.numel():
            raise GenzooError(f"the classifier expects per_class x num_classes = {self.indices.numel()} images, got {x.shape[0]}")
        self.indices.copy_(torch.arange(x.shape[0]) if indices is None else indices)
        self.mean.copy_(x.mean(0))  # data centred: inputs are x - mean
        self.train_x = x.to(self.mean.device)
        self.train_y = y.to(self.mean.device)

    def training_step(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        # Full-batch gradient descent: the loop's minibatch is ignored; every step sees the subset.
        if self.train_x.numel() == 0:
            raise GenzooError("mmb-classifier has no training set: it is set by setup_fit (genzoo fit --dataset ...)")
        logits = self.logits(self.train_x)
        log_ce = log_cross_entropy(logits, self.train_y)
        q = margins(logits.detach(), self.train_y)
        with torch.no_grad():
            norm = torch.sqrt(sum(p.pow(2).sum() for p in self.net.parameters()))
            self.margin.copy_(q.min())
        loss = log_ce if self.config.step_rule == "normalised" else log_ce.exp()
        return {
            "loss": loss,
            "log_ce": log_ce.detach(),
            "accuracy": (q > 0).float().mean(),
            "margin": q.min(),
            "normalised_margin": q.min() / norm**self.depth,  # min_i q_i / ||theta||^L (exact for bias-free nets)
        }

    def configure_optimizers(self) -> torch.optim.Optimizer:
        if self.config.step_rule == "normalised":
            return NormalisedGD(self.net.parameters(), self.config.lr)
        return torch.optim.SGD(self.net.parameters(), lr=self.config.lr)


def select_subset(labels: torch.Tensor, per_class: int, num_classes: int, seed: int) -> torch.Tensor:
    """``per_class`` indices of each label 0..num_classes-1, drawn with a fixed seed, in label order."""
    generator = torch.Generator().manual_seed(seed)
    chosen = []
    for c in range(num_classes):
        pool = torch.nonzero(labels == c)[:, 0]
        if len(pool) < per_class:
            raise GenzooError(f"label {c} has {len(pool)} images, fewer than per_class={per_class}; lower per_class")
        chosen.append(pool[torch.randperm(len(pool), generator=generator)[:per_class]].sort().values)
    return torch.cat(chosen)


def _refresh_margin(module: MMBClassifier, prefix: str, keep_vars: bool) -> None:
    """Before weights are saved, record the smallest training margin of exactly these weights."""
    if module.train_x.numel():
        with torch.no_grad():
            module.margin.copy_(module.margins(module.train_x, module.train_y).min())
