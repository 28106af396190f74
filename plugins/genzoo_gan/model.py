"""A DCGAN (Radford, Metz and Chintala, ICLR 2016) on IGN's own network, the comparison the IGN paper makes.

Each optimisation step is one GAN iteration: a discriminator update on real images and generated ones,
then a generator update through the frozen discriminator (the non-saturating loss). The method owns its
update (``update``), so both networks train the same on one process or several. The EMA averages the
generator only; sample = G(z). Refining is not supported: the discriminator says how real an image
looks, not how to move it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import torch
import torch.nn.functional as F

import genzoo
from genzoo.blocks import calibrate, speed_up, to_signed, to_unit
from genzoo.blocks.dcgan import STAGES
from genzoo.configs import OptimiserConfig, Positive, UnitOpen

from .networks import discriminator, generator

PAPER = """@inproceedings{radford2016unsupervised,
  title     = {Unsupervised Representation Learning with Deep Convolutional Generative Adversarial Networks},
  author    = {Radford, Alec and Metz, Luke and Chintala, Soumith},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2016}
}"""

CALIBRATION_IMAGES = 4096  # generated images whose batch statistics become the generator's population statistics


@dataclass
class GANConfig(OptimiserConfig):  # beta2, ema_decay and grad_clip: OptimiserConfig's
    channels: Annotated[int, Positive] = 1
    image_size: int = 28  # 28, 32 or 64
    width: Annotated[int, Positive] = 64  # channels of the first stage (a multiple of 4)
    bottleneck: Annotated[int, Positive] = 100  # the generator's input: z of bottleneck x 1 x 1
    norm: Literal["batch", "group", "none"] = "batch"
    lr_g: Annotated[float, Positive] = 2e-4
    lr_d: Annotated[float, Positive] = 2e-4
    beta1: Annotated[float, UnitOpen] = 0.5  # DCGAN's

    def __post_init__(self) -> None:
        if self.image_size not in STAGES:
            raise ValueError(f"image_size must be one of {sorted(STAGES)}, got {self.image_size}")
        if self.width % 4:
            raise ValueError(f"width must be a multiple of 4, got {self.width}")
        if self.norm == "group" and self.width % 16:
            raise ValueError(f"norm=group needs a width divisible by 16, got {self.width}")


class GAN(genzoo.Method):
    name = "gan"
    summary = "DCGAN on IGN's network: the generator is IGN's decoder, the discriminator its encoder"
    Config = GANConfig
    capabilities = frozenset({"fit", "sample"})
    default_model = "gan-mnist"
    paper = PAPER
    ema_modules = ("generator",)
    sampling_modules = ("generator",)  # export and push leave the discriminator out

    def __init__(self, config=None):
        super().__init__(config)
        c = self.config
        self.generator = generator(c.channels, c.image_size, c.width, c.bottleneck, c.norm)
        self.discriminator = discriminator(c.channels, c.image_size, c.width, c.norm)
        speed_up(self.generator)  # exact matrix-product forms of the bottleneck layers (genzoo.blocks.fastconv)
        speed_up(self.discriminator)

    def generate(self, z: torch.Tensor) -> torch.Tensor:
        """Images in [-1, 1] from z of shape (n, bottleneck, 1, 1)."""
        return self.generator(z)

    def sample_batch(self, noise, labels):
        z = noise.randn(self.config.bottleneck, 1, 1, device=self.device)
        return to_unit(self.generate(z))

    # -- training ----------------------------------------------------------------------------

    def update(self, step):
        d_opt, g_opt = step.optimizers
        loss_d = step.accumulate(self.discriminator_loss)
        step.step(d_opt)
        with step.frozen(self.discriminator):
            loss_g = step.accumulate(self.generator_loss)
        step.step(g_opt)
        return {"loss_d": loss_d, "loss_g": loss_g}

    def discriminator_loss(self, batch) -> torch.Tensor:
        """BCE of real images as real and of generated ones (held fixed) as fake."""
        real = to_signed(batch["x"])
        with torch.no_grad():
            fake = self.generate(self._z(real.shape[0], real.device))
        real_logits, fake_logits = self.discriminator(real), self.discriminator(fake)
        return (F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))
                + F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits)))

    def generator_loss(self, batch) -> torch.Tensor:
        """The non-saturating loss: BCE of generated images as real."""
        logits = self.discriminator(self.generate(self._z(batch["size"], self.device)))
        return F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))

    def _z(self, n: int, device) -> torch.Tensor:
        return torch.randn(n, self.config.bottleneck, 1, 1, device=device)

    def configure_optimizers(self):
        c = self.config
        betas = (c.beta1, c.beta2)
        return [torch.optim.Adam(self.discriminator.parameters(), lr=c.lr_d, betas=betas),
                torch.optim.Adam(self.generator.parameters(), lr=c.lr_g, betas=betas)]

    @torch.no_grad()
    def prepare_export(self) -> None:
        """The generator's batch-norm population statistics, recomputed on generated batches (genzoo.blocks.batchnorm).

        Training normalises with batch statistics; sampling one image at a time needs fixed ones. The
        draws come from a generator of their own, so the global RNG (and an exact resume) is untouched.
        """

        def draw(count: int, generator: torch.Generator) -> torch.Tensor:
            return torch.randn(count, self.config.bottleneck, 1, 1, generator=generator).to(self.device)

        calibrate(self.generator, draw, count=CALIBRATION_IMAGES)
