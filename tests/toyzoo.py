"""A tiny method used by the tests: an 8x8 autoencoder whose decoder samples from noise.

It exercises every part of the contract (fit, sample, refine, labels, options, EMA, randomness in
the training step) in milliseconds.
"""

import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import genzoo


@dataclass
class ToyConfig:
    channels: int = 1
    image_size: int = 8
    latent: int = 4
    num_classes: int = 0
    lr: float = 1e-2
    ema_decay: float = 0.0
    noise_weight: float = 0.1
    schedule: bool = False  # warm-up + cosine over the run's --steps
    host_rng: bool = False  # the training step also draws from Python's and NumPy's global RNGs


class Toy(genzoo.Method):
    name = "toy"
    summary = "tiny autoencoder for tests"
    Config = ToyConfig
    capabilities = frozenset({"fit", "sample", "refine"})
    default_model = "toy-tiny"
    sample_options = {"temperature": float}

    def __init__(self, config=None):
        super().__init__(config)
        c = self.config
        d = c.channels * c.image_size**2
        self.encoder = nn.Linear(d, c.latent)
        self.decoder = nn.Linear(c.latent + c.num_classes, d)
        self.register_buffer("calls", torch.zeros(()))

    def decode(self, z, labels=None):
        if self.config.num_classes:
            z = torch.cat([z, F.one_hot(labels, self.config.num_classes).float()], 1)
        return torch.sigmoid(self.decoder(z)).view(-1, *self.image_shape)

    def sample_batch(self, noise, labels, temperature=1.0):
        z = noise.randn(self.config.latent, device=self.device) * temperature
        return self.decode(z, labels)

    def refine_batch(self, x, labels, noise, steps):
        for _ in range(1 if steps is None else steps):
            z = self.encoder(x.flatten(1))
            x = self.decode(z, labels)
        return x

    def training_step(self, batch):
        x = batch["x"]
        z = self.encoder(x.flatten(1))
        if self.config.host_rng:
            z = z * (1 + 0.1 * random.random()) + 0.01 * float(np.random.randn())
        labels = batch["y"] if self.config.num_classes else None
        recon = self.decode(z + self.config.noise_weight * torch.randn_like(z), labels)
        loss = F.mse_loss(recon, x)
        return {"loss": loss, "latent_norm": z.norm(dim=1).mean()}

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.config.lr)
        if not self.config.schedule:
            return optimizer
        return [optimizer], [genzoo.schedules.warmup_cosine(optimizer, warmup_steps=2, total_steps=self.fit_steps)]


class SampleOnly(genzoo.Method):
    name = "sample-only"
    Config = ToyConfig
    capabilities = frozenset({"sample"})

    def __init__(self, config=None):
        super().__init__(config)
        self.scale = nn.Parameter(torch.ones(()))

    def sample_batch(self, noise, labels):
        return torch.sigmoid(noise.randn(*self.image_shape) * self.scale)


@genzoo.hookimpl
def register_methods(register):
    register(Toy, aliases=["toy-alias"])
    register(SampleOnly)


@genzoo.hookimpl
def register_models(register):
    register("toy-tiny", method="toy", summary="an untrained toy", aliases=["tiny"])


class PixelFeatures(nn.Module):
    """Pixels as features (8x8 images -> 64 numbers)."""

    num_features = 64

    def forward(self, x):
        return x.flatten(1)


@genzoo.hookimpl
def register_feature_extractors(register):
    register("toy-features", PixelFeatures, datasets=("toy",), summary="pixels")


@genzoo.hookimpl
def register_commands(cli):
    import click

    @click.command("toy-hello")
    def hello():
        """Say hello from the toy plugin."""
        click.echo("hello from toy")

    cli.add_command(hello)
