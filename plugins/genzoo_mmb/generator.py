"""``mmb``: a class-conditional generator trained from classifiers alone (Yu and Wang, NeurIPS 2023).

G(eps, y, k) replaces the unknown training set of classifier k and h(x, y, k) >= 0 its KKT
multipliers; both are trained so that the classifier's weights satisfy the KKT conditions of the
max-margin problem on the generated points (kkt.py; the derivation is in docs/methods/mmb.md).
The classifiers are read at fit time only: sampling needs nothing but G.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import genzoo
from genzoo import GenzooError, Noise

from .classifier import PAPER
from .kkt import KKTTarget, Stationarity, duality_loss, relu_multipliers


@dataclass
class GeneratorConfig:
    classifiers: tuple[str, ...] = ()  # mmb-classifier models (names or directories), used at fit time only
    channels: int = 0  # 0: taken from the classifiers when fitting
    image_size: int = 0
    num_classes: int = 0
    num_classifiers: int = 0
    train_size: int = 0  # N, the classifiers' training-set size; 0: what each classifier recorded
    latent: int = 64
    width: int = 512  # hidden units of G and h
    stationarity: Stationarity = "max-block"
    dual_weight: float = 10.0
    relu_slope: float = 150.0  # sigmoid slope of the ReLU derivative in the double backward; 0: exact ReLU
    lambda_inputs: int = 64  # random inputs for estimating Lambda
    lr: float = 1e-3
    ema_decay: float = 0.0
    grad_clip: float = 0.0


def resolve_shapes(config: Any, refs: tuple[str, ...], where: str, field: str) -> Any:
    """Fill channels, image_size, num_classes (and num_classifiers) from the classifiers' config.json."""
    from genzoo.loading import resolve
    from genzoo.weights import read_config

    if not refs:
        raise GenzooError(f"{where} needs a classifier: pass --set {field}=DIR (a model from genzoo fit mmb-classifier)")
    shapes = set()
    for ref in refs:
        document = read_config(resolve(ref)[0])
        if document["method"] != "mmb-classifier":
            raise GenzooError(f"{ref} is a {document['method']!r} model; {where} learns from mmb-classifier models")
        c = document["config"]
        shapes.add((c.get("channels", 1), c.get("image_size", 28), c.get("num_classes", 10)))
    if len(shapes) > 1:
        raise GenzooError(f"the classifiers {', '.join(refs)} disagree on (channels, image_size, num_classes): {sorted(shapes)}")
    channels, image_size, num_classes = shapes.pop()
    values = {"channels": channels, "image_size": image_size, "num_classes": num_classes}
    if hasattr(config, "num_classifiers"):
        values["num_classifiers"] = len(refs)
    for key, value in values.items():
        given = getattr(config, key)
        if given and given != value:
            raise GenzooError(f"{where}: {key}={given} was set, but the classifiers have {key}={value}; drop the --set")
    return dataclasses.replace(config, **values)


def load_targets(refs: tuple[str, ...], config: Any, device: torch.device) -> list[KKTTarget]:
    """The classifiers, loaded and turned into KKT targets (Lambda estimated without data)."""
    return [
        KKTTarget(genzoo.load(ref), stationarity=config.stationarity, train_size=config.train_size,
                  lambda_inputs=config.lambda_inputs).to(device)
        for ref in refs
    ]


def mlp(dims: list[int], last_bias: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        layers.append(nn.Linear(a, b, bias=last_bias or i < len(dims) - 2))
        if i < len(dims) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class MMBGenerator(genzoo.Method):
    name = "mmb"
    summary = "class-conditional generator trained from a classifier alone, through the KKT conditions of its max margin"
    Config = GeneratorConfig
    capabilities = frozenset({"fit", "sample"})
    default_model = "mmb-mnist"
    paper = PAPER
    needs_data = False
    sample_options = {"classifier": int}

    def __init__(self, config: Any = None):
        super().__init__(config)
        c = self.config
        if not (c.channels and c.image_size and c.num_classes and c.num_classifiers):
            self.config = c = resolve_shapes(c, c.classifiers, "mmb", "classifiers")
        dim = c.channels * c.image_size**2
        conditions = c.num_classes + c.num_classifiers
        self.generator = mlp([c.latent + conditions, c.width, c.width, dim])  # G(eps, y, k)
        # h(x, y, k): no output bias, since relu_multipliers centres its output on the batch
        self.multiplier = mlp([dim + conditions, c.width, c.width // 2, 1], last_bias=False)
        self.targets: list[KKTTarget] = []

    def conditions(self, labels: torch.Tensor, k: int) -> torch.Tensor:
        c = self.config
        index = torch.full_like(labels, k)
        return torch.cat([F.one_hot(labels, c.num_classes), F.one_hot(index, c.num_classifiers)], 1).float()

    def generate(self, eps: torch.Tensor, labels: torch.Tensor, k: int = 0) -> torch.Tensor:
        """G(eps, y, k): images in [0, 1]."""
        return torch.sigmoid(self.generator(torch.cat([eps, self.conditions(labels, k)], 1))).view(-1, *self.image_shape)

    def multipliers(self, x: torch.Tensor, labels: torch.Tensor, k: int = 0) -> torch.Tensor:
        """Relative multipliers lambda / unit >= 0 of a batch: ReLU of h(x, y, k) centred on the batch."""
        return relu_multipliers(self.multiplier(torch.cat([x.flatten(1), self.conditions(labels, k)], 1))[:, 0])

    def sample_batch(self, noise: Noise, labels: torch.Tensor | None, classifier: int = 0) -> torch.Tensor:
        if not 0 <= classifier < self.config.num_classifiers:
            raise GenzooError(f"classifier index must be in 0..{self.config.num_classifiers - 1}, got {classifier}")
        eps = noise.randn(self.config.latent, device=self.device)
        return self.generate(eps, labels, classifier)

    # -- training -------------------------------------------------------------------------------

    def setup_fit(self, data: Any) -> None:
        self.targets = load_targets(self.config.classifiers, self.config, self.device)

    def training_step(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        if not self.targets:
            raise GenzooError("mmb has no classifiers loaded: train it with genzoo fit mmb --set classifiers=DIR")
        size, c = batch["size"], self.config
        logs: dict[str, torch.Tensor] = {}
        total = torch.zeros((), device=self.device)
        for k, target in enumerate(self.targets):
            if target.device != self.device:
                target.to(self.device)
            # balanced labels with a random offset: the training set is class-balanced
            labels = (torch.arange(size) + torch.randint(c.num_classes, ())).remainder(c.num_classes).to(self.device)
            x = self.generate(torch.randn(size, c.latent, device=self.device), labels, k)
            lam_rel = self.multipliers(x, labels, k)
            stationarity, q, scale = target.stationarity(x, labels, target.unit * lam_rel, c.relu_slope)
            dual = duality_loss(q, lam_rel)
            total = total + stationarity + c.dual_weight * dual
            suffix = f"_{k}" if len(self.targets) > 1 else ""
            logs.update({f"stationarity{suffix}": stationarity.detach(), f"dual{suffix}": dual.detach(),
                         f"margin{suffix}": q.detach().mean(), f"feasible{suffix}": (q.detach() >= 1).float().mean(),
                         f"lambda{suffix}": (scale * lam_rel).detach().mean()})
        return {"loss": total, **logs}

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.config.lr)
