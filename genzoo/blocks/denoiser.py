"""What denoisers on a U-Net and Karras noise levels share (EDM, consistency models): their Config fields and
checks, and D(x, sigma) at one level for a whole batch.

A method's Config subclasses :class:`DenoiserConfig` and adds its own fields (or declares a shared one again for
another default); its Method mixes in :class:`LevelDenoiser` beside ``genzoo.Method`` and defines
``denoise(x, sigma)`` with sigma per image.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import torch

from ..configs import NonNegative, OptimiserConfig, Positive, Range
from ..errors import GenzooError
from .unet import NO_LABEL, check_shape


@dataclass
class DenoiserConfig(OptimiserConfig):  # the betas, ema_decay and grad_clip: OptimiserConfig's
    channels: Annotated[int, Positive] = 1
    image_size: Annotated[int, Positive] = 28
    width: Annotated[int, Positive] = 32  # channels at full resolution; twice that below (a multiple of 4)
    levels: Annotated[int, Positive] = 3  # resolutions of the U-Net, each half the previous
    blocks: Annotated[int, Positive] = 1  # residual blocks per resolution on the way down
    attention: bool = False  # self-attention after each block at the lowest resolution and in the middle
    num_classes: Annotated[int, NonNegative] = 0  # a class-conditional network (0: unconditional)
    label_dropout: Annotated[float, Range(0, 1, high_open=True)] = 0.1  # training images shown without their label
    class_names: tuple[str, ...] = ()  # what each label means (fit takes them from the dataset)
    dropout: Annotated[float, Range(0, 1, high_open=True)] = 0.1
    sigma_min: Annotated[float, Positive] = 0.002
    sigma_max: Annotated[float, Positive] = 80.0
    sigma_data: Annotated[float, Positive] = 0.5
    rho: Annotated[float, Positive] = 7.0
    p_mean: float = -1.2  # training levels: ln sigma ~ N(p_mean, p_std^2)
    p_std: Annotated[float, Positive] = 1.2
    refine_sigma: Annotated[float, Positive] = 1.0  # the level refine noises an image to
    lr: Annotated[float, Positive] = 5e-4

    def __post_init__(self) -> None:
        check_shape(self.image_size, self.levels, self.width)
        if self.class_names and len(self.class_names) != self.num_classes:
            raise ValueError(f"class_names names {len(self.class_names)} classes but num_classes is {self.num_classes}")
        if not self.sigma_min < self.sigma_max:
            raise ValueError(f"sigma_min must be below sigma_max, got {self.sigma_min:g} and {self.sigma_max:g}")
        if not self.sigma_min < self.refine_sigma <= self.sigma_max:
            raise ValueError(f"refine_sigma must lie in (sigma_min, sigma_max] = ({self.sigma_min:g}, "
                             f"{self.sigma_max:g}], got {self.refine_sigma:g}")

    def refine_level(self, sigma: float | None, method: str) -> float:
        """The level ``method``'s refine noises to: ``sigma``, else refine_sigma; refused outside (sigma_min, sigma_max]."""
        sigma = self.refine_sigma if sigma is None else float(sigma)
        if not self.sigma_min < sigma <= self.sigma_max:
            raise GenzooError(f"{method} refine: sigma must lie in (sigma_min, sigma_max] = ({self.sigma_min:g}, "
                              f"{self.sigma_max:g}], got {sigma:g}")
        return sigma


class LevelDenoiser:
    """Mixed into a Method that defines ``denoise(x, sigma, labels)`` (sigma a tensor, one level per image)."""

    def denoise_at(self, x: torch.Tensor, sigma: float, labels: torch.Tensor | None = None) -> torch.Tensor:
        """D(x, sigma) with one level ``sigma`` for every image of the batch (and its label, if conditional)."""
        return self.denoise(x, torch.full((x.shape[0],), sigma, device=x.device, dtype=torch.float32), labels)

    def denoiser(self, labels: torch.Tensor | None = None):
        """D(x, sigma) with ``labels`` bound in, as the samplers of :mod:`genzoo.blocks.sampling` take it; a
        conditional network given no labels denoises unconditionally."""
        def denoise(x: torch.Tensor, sigma: float) -> torch.Tensor:
            return self.denoise_at(x, sigma, labels)
        return denoise

    def setup_fit(self, data) -> None:
        """A conditional network trains on labelled data only, with labels within its classes."""
        classes = self.config.num_classes
        if not classes or data is None:
            return
        if data.labels is None:
            raise GenzooError(f"num_classes {classes}: {data.name} has no labels; train an unconditional model "
                              f"(--set num_classes=0) or give labelled data")
        if len(data.labels) and int(data.labels.max()) >= classes:
            raise GenzooError(f"{data.name} has labels up to {int(data.labels.max())}, more than num_classes {classes} "
                              f"allows; --set num_classes={int(data.labels.max()) + 1}")

    def drop_labels(self, labels: torch.Tensor | None, rate: float) -> torch.Tensor | None:
        """Training labels with a fraction ``rate`` replaced by NO_LABEL (label dropout), so that one network
        learns the conditional and the unconditional denoiser; None for an unconditional network."""
        if labels is None or not self.config.num_classes:
            return None
        dropped = torch.rand(labels.shape, device=labels.device) < rate
        return torch.where(dropped, torch.full_like(labels, NO_LABEL), labels)
