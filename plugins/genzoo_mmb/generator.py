"""``mmb``: a class-conditional generator trained from classifiers alone (Yu and Wang, NeurIPS 2023).

G(z, y) stands in for the classifiers' unknown training set: G and the KKT multipliers are trained so
that each classifier's weights satisfy the KKT conditions of the max-margin problem on the generated
points (kkt.py; the derivation is in docs/methods/mmb.md). The classifiers are read at fit time only:
sampling needs nothing but G. Latents are Gaussian or a learned code book (``codes``); one generated set
serves every classifier (``shared``); a mode-seeking term keeps a label's samples apart. The defaults are
the bundled mmb-mnist's recipe; docs/lab/mmb.md records what each option trades, as measured.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Literal

import torch
import torch.nn.functional as F
from torch import nn

import genzoo
from genzoo import GenzooError, Noise
from genzoo.configs import NonNegative, Positive, UnitOpen

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
    latent: Annotated[int, Positive] = 64
    width: Annotated[int, Positive] = 256  # hidden units of G (mlp) and h; channels of the first conv stage x 8
    generator: Literal["conv", "mlp"] = "conv"  # mlp: for points (the 2D toy), not images
    codes: Annotated[int, NonNegative] = 0  # 0: Gaussian latents; N: a learned code book of N codes (B = N)
    shared: bool = True  # several classifiers: one generated set for all (else G is conditioned on k)
    code_shrinkage: Annotated[float, UnitOpen] = 0.1  # covariance of each label's codes: (1 - a) S + a diag(S)
    mode_seeking: Annotated[float, NonNegative] = 15.0  # weight of the mode-seeking ratio (maximised)
    mode_space: Literal["first-layer", "pixels"] = "first-layer"  # where the ratio's image distance is measured
    stationarity: Stationarity = "max-block"
    dual_weight: Annotated[float, NonNegative] = 10.0
    relu_slope: Annotated[float, NonNegative] = 150.0  # sigmoid slope of the ReLU derivative in the double backward; 0: exact
    lambda_inputs: Annotated[int, Positive] = 64  # random inputs for estimating Lambda
    lr: Annotated[float, Positive] = 1e-3
    ema_decay: float = 0.0
    grad_clip: float = 0.0

    def __post_init__(self) -> None:
        if self.generator == "conv" and self.image_size and self.image_size % 4:
            raise ValueError(f"generator=conv needs an image size divisible by 4, got {self.image_size}")
        if self.codes and self.num_classes and self.codes < 2 * self.num_classes:
            raise ValueError(f"codes={self.codes} gives some label fewer than 2 codes; use at least "
                             f"{2 * self.num_classes}")


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


class ConvDecoder(nn.Module):
    """z -> a (width x S/4 x S/4) map -> two x2 upsampling 3x3 convolution stages -> images (logits)."""

    def __init__(self, inputs: int, channels: int, image_size: int, width: int):
        super().__init__()
        c1, c2 = max(8, width // 8), max(8, width // 16)
        self.start = (c1, image_size // 4)
        self.project = nn.Linear(inputs, c1 * self.start[1] ** 2)
        self.body = nn.Sequential(
            nn.ReLU(), nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(),
            nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(c2, c2, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c2, channels, 3, padding=1),
        )

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        c, s = self.start
        return self.body(self.project(inputs).view(-1, c, s, s))


def sphere(z: torch.Tensor) -> torch.Tensor:
    return z / z.norm(dim=-1, keepdim=True).clamp_min(1e-12)


class MMBGenerator(genzoo.Method):
    name = "mmb"
    summary = "class-conditional generator trained from a classifier alone, through the KKT conditions of its max margin"
    Config = GeneratorConfig
    capabilities = frozenset({"fit", "sample"})
    default_model = "mmb-mnist"
    paper = PAPER
    needs_data = False
    sample_options = {"classifier": int, "temperature": float}

    def __init__(self, config: Any = None):
        super().__init__(config)
        c = self.config
        if not (c.channels and c.image_size and c.num_classes and c.num_classifiers):
            self.config = c = resolve_shapes(c, c.classifiers, "mmb", "classifiers")
            GeneratorConfig.__post_init__(c)
        dim = c.channels * c.image_size**2
        inputs = c.latent + c.num_classes + self._classifier_conditions
        if c.generator == "conv":
            self.generator = ConvDecoder(inputs, c.channels, c.image_size, c.width)  # G(z, y, k)
        else:
            self.generator = mlp([inputs, c.width, c.width, dim])
        if c.codes:
            self.codes = nn.Parameter(torch.randn(c.codes, c.latent))  # used on the unit sphere
            self.register_buffer("code_labels", torch.arange(c.codes) % c.num_classes)
            # lambda_ik = unit_k * relu(1 + a_ik - mean_i a_ik): one multiplier per code and classifier
            self.code_multipliers = nn.Parameter(torch.zeros(c.num_classifiers, c.codes))
            # each label's density over the sphere, fitted by prepare_export (so sampling needs no codes)
            self.register_buffer("code_mean", torch.zeros(c.num_classes, c.latent))
            self.register_buffer("code_factor", torch.eye(c.latent).repeat(c.num_classes, 1, 1))
        else:
            # h(x, y, k): no output bias, since relu_multipliers centres its output on the batch
            # h is conditioned on k even for a shared set: each classifier has its own support points
            self.multiplier = mlp([dim + c.num_classes + c.num_classifiers, c.width, c.width // 2, 1], last_bias=False)
        self.targets: list[KKTTarget] = []

    @property
    def _classifier_conditions(self) -> int:
        return 0 if self.config.shared else self.config.num_classifiers

    def conditions(self, labels: torch.Tensor, k: int, *, of_classifier: bool = False) -> torch.Tensor:
        """One-hot label, then one-hot k unless the set is shared (``of_classifier``: always)."""
        c = self.config
        parts = [F.one_hot(labels, c.num_classes)]
        if of_classifier or not c.shared:
            parts.append(F.one_hot(torch.full_like(labels, k), c.num_classifiers))
        return torch.cat(parts, 1).float()

    def generate(self, z: torch.Tensor, labels: torch.Tensor, k: int = 0) -> torch.Tensor:
        """G(z, y, k): images in [0, 1] (z on the unit sphere in code-book mode)."""
        return torch.sigmoid(self.generator(torch.cat([z, self.conditions(labels, k)], 1))).view(-1, *self.image_shape)

    def multipliers(self, x: torch.Tensor, labels: torch.Tensor, k: int = 0) -> torch.Tensor:
        """Relative multipliers lambda / unit >= 0 of a batch: ReLU of h(x, y, k) centred on the batch."""
        conditions = self.conditions(labels, k, of_classifier=True)
        return relu_multipliers(self.multiplier(torch.cat([x.flatten(1), conditions], 1))[:, 0])

    def latents(self, eps: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
        """Standard normal draws -> latents: as they are, or (code book) a draw of the label's code density."""
        if not self.config.codes:
            return eps * temperature
        spread = torch.einsum("bij,bj->bi", self.code_factor[labels], eps)
        return sphere(self.code_mean[labels] + temperature * spread)

    def sample_batch(self, noise: Noise, labels: torch.Tensor | None, classifier: int = 0,
                     temperature: float = 1.0) -> torch.Tensor:
        if not 0 <= classifier < self.config.num_classifiers:
            raise GenzooError(f"classifier index must be in 0..{self.config.num_classifiers - 1}, got {classifier}")
        if temperature < 0:
            raise GenzooError(f"temperature must be >= 0, got {temperature}")
        eps = noise.randn(self.config.latent, device=self.device)
        return self.generate(self.latents(eps, labels, temperature), labels, classifier)

    def interpolate(self, label: int, *, pairs: int = 4, steps: int = 9, seed: int = 0,
                    classifier: int = 0) -> torch.Tensor:
        """``pairs`` rows of ``steps`` images walking between two latents of ``label`` (on the sphere, by slerp)."""
        c = self.config
        if not 0 <= label < c.num_classes:
            raise GenzooError(f"label must be in 0..{c.num_classes - 1}, got {label}")
        if pairs < 1 or steps < 2:
            raise GenzooError(f"an interpolation needs pairs >= 1 and steps >= 2, got {pairs} and {steps}")
        labels = torch.full((2 * pairs,), label, dtype=torch.long, device=self.device)
        eps = Noise(seed, 0, 2 * pairs, "interpolate").randn(c.latent, device=self.device)
        with torch.no_grad():
            ends = self.latents(eps, labels)
            a, b = ends[0::2], ends[1::2]
            t = torch.linspace(0, 1, steps, device=self.device)
            if c.codes:
                omega = torch.acos((sphere(a) * sphere(b)).sum(1).clamp(-1 + 1e-7, 1 - 1e-7))[:, None, None]
                tt = t[None, :, None]
                z = (torch.sin((1 - tt) * omega) * a[:, None] + torch.sin(tt * omega) * b[:, None]) / torch.sin(omega)
            else:
                z = a[:, None] + t[None, :, None] * (b - a)[:, None]
            images = self.generate(z.reshape(-1, c.latent), labels[:1].expand(pairs * steps), classifier)
        return images.clamp(0, 1)

    # -- training -------------------------------------------------------------------------------

    def setup_fit(self, data: Any) -> None:
        self.targets = load_targets(self.config.classifiers, self.config, self.device)
        if self.config.codes:
            sizes = {target.train_size for target in self.targets}
            if sizes != {self.config.codes}:
                raise GenzooError(f"codes={self.config.codes}, but the classifiers were trained on {sorted(sizes)} "
                                  f"images; a code book holds one code per training image: --set codes={min(sizes)}")

    def training_step(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        if not self.targets:
            raise GenzooError("mmb has no classifiers loaded: train it with genzoo fit mmb --set classifiers=DIR")
        c = self.config
        logs: dict[str, torch.Tensor] = {}
        total = torch.zeros((), device=self.device)
        drawn = None  # a shared set: the labels, latents and images of k = 0, for every classifier
        for k, target in enumerate(self.targets):
            if target.device != self.device:
                target.to(self.device)
            if c.shared and drawn is not None:
                labels, z, x = drawn
            else:
                labels, z = self._draw(batch["size"])
                x = self.generate(z, labels, k)
                drawn = labels, z, x
            lam_rel = relu_multipliers(self.code_multipliers[k]) if c.codes else self.multipliers(x, labels, k)
            stationarity, q, scale = target.stationarity(x, labels, target.unit * lam_rel, c.relu_slope)
            dual = duality_loss(q, lam_rel)
            total = total + stationarity + c.dual_weight * dual
            suffix = f"_{k}" if len(self.targets) > 1 else ""
            logs.update({f"stationarity{suffix}": stationarity.detach(), f"dual{suffix}": dual.detach(),
                         f"margin{suffix}": q.detach().mean(), f"feasible{suffix}": (q.detach() >= 1).float().mean(),
                         f"lambda{suffix}": (scale * lam_rel).detach().mean()})
            if c.mode_seeking > 0 and (k == 0 or not c.shared):
                seen = first_layer_view(target) if c.mode_space == "first-layer" else None
                ratio = mode_seeking_ratio(x, z, labels, seen)
                total = total - c.mode_seeking * ratio
                logs[f"mode_seeking{suffix}"] = ratio.detach()
        return {"loss": total, **logs}

    def _draw(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(labels, latents) of one step: the whole code book, or ``size`` balanced labels and Gaussian latents."""
        c = self.config
        if c.codes:
            return self.code_labels, sphere(self.codes)
        # balanced labels with a random offset: the training set is class-balanced
        labels = (torch.arange(size) + torch.randint(c.num_classes, ())).remainder(c.num_classes).to(self.device)
        return labels, torch.randn(size, c.latent, device=self.device)

    def prepare_export(self) -> None:
        """Code book: fit each label's Gaussian over its codes (on the sphere), which sampling draws from."""
        if not self.config.codes:
            return
        a = self.config.code_shrinkage
        with torch.no_grad():
            codes = sphere(self.codes.detach()).double()
            for label in range(self.config.num_classes):
                members = codes[self.code_labels == label]
                mean = members.mean(0)
                centred = members - mean
                cov = centred.T @ centred / max(1, len(members) - 1)
                cov = (1 - a) * cov + a * torch.diag(torch.diagonal(cov)) + 1e-6 * torch.eye(len(mean), dtype=cov.dtype)
                self.code_mean[label].copy_(mean.float())
                self.code_factor[label].copy_(torch.linalg.cholesky(cov).float())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.config.lr)


def first_layer_view(target: KKTTarget) -> Callable[[torch.Tensor], torch.Tensor]:
    """x -> W1 x / ||W1||_F * sqrt(d): the classifier's first (linear or conv) layer, bias-free.

    The scaling keeps distances those of pixels for a layer whose weights spread evenly over the
    d input values (E ||W dx||^2 = ||W||_F^2 ||dx||^2 / d), so a mode-seeking weight means about
    the same in either space; directions the layer does not weigh count for less.
    """
    net = target.classifier.net
    layer = net.layers[0] if hasattr(net, "layers") else net.convs[0]
    weight = layer.weight.detach()
    if isinstance(layer, nn.Linear):
        scale = math.sqrt(weight.shape[1]) / weight.norm()
        return lambda x: F.linear(x.flatten(1), weight) * scale
    # a k x k stride-s conv sees each pixel in about k^2 / s^2 of its C k^2-long patches
    scale = math.sqrt(layer.in_channels * layer.stride[0] * layer.stride[1]) / weight.norm()
    return lambda x: F.conv2d(x, weight, stride=layer.stride, padding=layer.padding) * scale


def mode_seeking_ratio(x: torch.Tensor, z: torch.Tensor, labels: torch.Tensor,
                       view: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """Mean over same-label pairs of ||v(G(z1)) - v(G(z2))|| / ||z1 - z2|| (Mao et al. 2019).

    v is the identity (pixels) or ``view``; the image distance is divided by sqrt(the number of
    input values), so that it is a per-pixel figure either way. A batch with no two images of one
    label (fewer images than labels) has no pair to spread: the ratio is 0, not the mean of nothing.
    """
    same = (labels[:, None] == labels[None]) & ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    if not same.any():
        return x.new_zeros(())
    flat = (view(x) if view is not None else x).flatten(1)
    image = torch.cdist(flat, flat)[same] / math.sqrt(x[0].numel())
    latent = torch.cdist(z, z)[same].clamp_min(1e-6)
    return (image / latent).mean()
