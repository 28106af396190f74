"""A tiny GAN for the tests and docs/plugins.md: an MLP generator and discriminator on 8x8 images.

It owns its update, and alternates on the step's index: even steps update the discriminator, odd
steps the generator (through the frozen discriminator). So one genzoo step here is half a GAN
iteration, on purpose: the schedule depends on the step, which the kit checks across a resume and
under several processes. The EMA averages the generator only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import genzoo


@dataclass
class TinyGANConfig:
    channels: int = 1
    image_size: int = 8
    latent: int = 4
    width: int = 32
    lr: float = 2e-3
    ema_decay: float = 0.9


class TinyGAN(genzoo.Method):
    name = "tiny-gan"
    summary = "a tiny GAN that alternates its two networks step by step (a method that owns its update)"
    Config = TinyGANConfig
    capabilities = frozenset({"fit", "sample"})
    ema_modules = ("generator",)
    sampling_modules = ("generator",)  # export and push leave the discriminator out

    def __init__(self, config=None):
        super().__init__(config)
        c = self.config
        d = c.channels * c.image_size**2
        self.generator = nn.Sequential(nn.Linear(c.latent, c.width), nn.ReLU(), nn.Linear(c.width, d), nn.Tanh())
        self.discriminator = nn.Sequential(nn.Linear(d, c.width), nn.LeakyReLU(0.2), nn.Linear(c.width, 1))

    def sample_batch(self, noise, labels):
        z = noise.randn(self.config.latent, device=self.device)
        return (self.generator(z).view(-1, *self.image_shape) + 1) / 2

    def update(self, step):
        d_opt, g_opt = step.optimizers
        if step.index % 2 == 0:
            loss = step.accumulate(self.discriminator_loss)
            step.step(d_opt)
            return {"loss_d": loss}
        with step.frozen(self.discriminator):
            loss = step.accumulate(self.generator_loss)
        step.step(g_opt)
        return {"loss_g": loss}

    def fake(self, n: int) -> torch.Tensor:
        return self.generator(torch.randn(n, self.config.latent, device=self.device))

    def discriminator_loss(self, batch):
        real = batch["x"].flatten(1) * 2 - 1
        with torch.no_grad():
            fake = self.fake(real.shape[0])
        real_logits, fake_logits = self.discriminator(real), self.discriminator(fake)
        return (F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))
                + F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits)))

    def generator_loss(self, batch):
        logits = self.discriminator(self.fake(batch["size"]))
        return F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))

    def configure_optimizers(self):
        lr = self.config.lr
        return [torch.optim.Adam(self.discriminator.parameters(), lr=lr, betas=(0.5, 0.999)),
                torch.optim.Adam(self.generator.parameters(), lr=lr, betas=(0.5, 0.999))]


@genzoo.hookimpl
def register_methods(register):
    register(TinyGAN)
