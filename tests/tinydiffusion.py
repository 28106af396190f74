"""A tiny many-step method for the tests and docs/plugins.md: DDPM training, DDIM sampling, SDEdit refining.

An MLP predicts the noise eps in x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) eps (Ho et al. 2020,
eq. 14) over ``timesteps`` noise levels. Sampling runs DDIM's deterministic update (Song et al.
2021, eq. 12 with eta = 0) over ``sample_steps`` evenly spaced levels. Refining is SDEdit (Meng et
al. 2022): noise the input to a level of that same schedule, then denoise from there.

``steps`` in refine counts sampler steps: ``refine(x, steps=k)`` noises x to the level the sampler
reaches k steps before the end (strength k / sample_steps) and runs those k steps back.
``steps=0`` returns x; ``steps=sample_steps`` starts from pure noise (a fresh sample).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

import torch
import torch.nn.functional as F
from torch import nn

import genzoo
from genzoo.configs import NonNegative, Positive


@dataclass
class TinyDiffusionConfig:
    channels: int = 1
    image_size: int = 8
    width: Annotated[int, Positive] = 64
    timesteps: Annotated[int, Positive] = 100  # noise levels of training (DDPM's T)
    sample_steps: Annotated[int, Positive] = 10  # DDIM steps of one sample
    refine_steps: Annotated[int, NonNegative] = 3  # SDEdit's default: strength 3/10
    lr: Annotated[float, Positive] = 2e-3
    ema_decay: float = 0.0


class TinyDiffusion(genzoo.Method):
    name = "tiny-diffusion"
    summary = "a tiny DDPM with DDIM sampling and SDEdit refining (a many-step example)"
    Config = TinyDiffusionConfig
    capabilities = frozenset({"fit", "sample", "refine"})
    # Ten DDIM steps each feed the last one's rounding into the next network call, and oneDNN
    # rounds differently for different batch sizes: allow 1e-4 (the default is 1e-5).
    image_tolerance = 1e-4

    def __init__(self, config=None):
        super().__init__(config)
        c = self.config
        d = c.channels * c.image_size**2
        self.net = nn.Sequential(nn.Linear(d + 2, c.width), nn.SiLU(), nn.Linear(c.width, c.width), nn.SiLU(),
                                 nn.Linear(c.width, d))
        # cosine schedule of abar_t (Nichol and Dhariwal 2021, eq. 17), t = 0 .. T-1
        s = 0.008
        t = torch.arange(c.timesteps + 1, dtype=torch.float64) / c.timesteps
        f = torch.cos((t + s) / (1 + s) * math.pi / 2).square()
        self.register_buffer("alpha_bar", (f[1:] / f[0]).clamp(1e-5, 1).float(), persistent=False)

    def eps(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The predicted noise of x_t (NCHW in [-1, 1] space) at integer levels t (N,)."""
        phase = t.float()[:, None] / self.config.timesteps * math.pi
        h = torch.cat([x.flatten(1), phase.sin(), phase.cos()], 1)
        return self.net(h).view_as(x)

    def levels(self) -> list[int]:
        """The sampler's noise levels, from pure noise (T-1) down to the last step's (0)."""
        c = self.config
        return [round(i * (c.timesteps - 1) / max(c.sample_steps - 1, 1)) for i in range(c.sample_steps)][::-1]

    def denoise(self, x: torch.Tensor, levels: list[int]) -> torch.Tensor:
        """DDIM (eta = 0) from levels[0] through each later level, then to the clean image."""
        for i in self.track(range(len(levels)), "denoising"):
            t = torch.full((x.shape[0],), levels[i], device=x.device)
            a = self.alpha_bar[levels[i]]
            a_next = self.alpha_bar[levels[i + 1]] if i + 1 < len(levels) else torch.ones_like(a)
            eps = self.eps(x, t)
            x0 = ((x - (1 - a).sqrt() * eps) / a.sqrt()).clamp(-1, 1)
            x = a_next.sqrt() * x0 + (1 - a_next).sqrt() * eps
        return x

    def sample_batch(self, noise, labels):
        x = noise.randn(*self.image_shape, device=self.device)
        return (self.denoise(x, self.levels()) + 1) / 2

    def refine_batch(self, x, labels, noise, steps):
        c = self.config
        steps = c.refine_steps if steps is None else steps
        if steps == 0:
            return x
        if steps > c.sample_steps:
            raise genzoo.GenzooError(f"{self.name} refines with at most sample_steps={c.sample_steps} steps "
                                     f"(that many start from pure noise), got steps={steps}")
        levels = self.levels()[-steps:]  # the sampler's last `steps` steps: strength steps / sample_steps
        a = self.alpha_bar[levels[0]]
        y = a.sqrt() * (x * 2 - 1) + (1 - a).sqrt() * noise.randn(*self.image_shape, device=self.device)
        return (self.denoise(y, levels) + 1) / 2

    def training_step(self, batch):
        x0 = batch["x"] * 2 - 1
        t = torch.randint(0, self.config.timesteps, (x0.shape[0],), device=x0.device)
        eps = torch.randn_like(x0)
        a = self.alpha_bar[t].view(-1, 1, 1, 1)
        loss = F.mse_loss(self.eps(a.sqrt() * x0 + (1 - a).sqrt() * eps, t), eps)
        return {"loss": loss}

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.config.lr)
