"""Heun's method on EDM's probability-flow ODE, deterministic (EDM, Algorithm 1) or with churn (Algorithm 2).

With churn, each step first raises the noise level from sigma to sigma (1 + gamma) by adding fresh noise,
gamma = min(S_churn / N, sqrt(2) - 1) for levels in [S_tmin, S_tmax] and 0 elsewhere, then takes the Heun
step from the raised level: the added noise corrects errors of earlier steps at the price of a little detail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable

import torch

from genzoo import Noise

Denoiser = Callable[[torch.Tensor, float], torch.Tensor]


@dataclass(frozen=True)
class Churn:
    """EDM's S_churn, S_tmin, S_tmax and S_noise; the default (no churn) is the deterministic sampler."""

    amount: float = 0.0
    tmin: float = 0.05
    tmax: float = 50.0
    noise: float = 1.003

    def gamma(self, sigma: float, steps: int) -> float:
        if self.amount == 0 or not self.tmin <= sigma <= self.tmax:
            return 0.0
        return min(self.amount / steps, math.sqrt(2) - 1)


def heun(denoise: Denoiser, x: torch.Tensor, sigmas: list[float], churn: Churn = Churn(),
         noise: Noise | None = None, track: Callable[[Iterable], Iterable] = iter) -> torch.Tensor:
    """Solve from ``sigmas[0]`` through ``sigmas`` (descending, ending at 0); the last step is a plain Euler step.

    Churn draws step i's fresh noise from ``noise.child(str(i))``, so an image's sample depends only on its
    own seed, whatever the batch.
    """
    steps = len(sigmas) - 1
    for i in track(range(steps)):
        sigma, following = sigmas[i], sigmas[i + 1]
        gamma = churn.gamma(sigma, steps)
        if gamma > 0:
            if noise is None:
                raise ValueError("a sampler with churn needs a noise source")
            raised = sigma * (1 + gamma)
            fresh = noise.child(str(i)).randn(*x.shape[1:], device=x.device, dtype=x.dtype)
            x = x + math.sqrt(raised ** 2 - sigma ** 2) * churn.noise * fresh
            sigma = raised
        slope = (x - denoise(x, sigma)) / sigma
        euler = x + (following - sigma) * slope
        if following > 0:  # the second-order correction
            slope = (slope + (euler - denoise(euler, following)) / following) / 2
            euler = x + (following - sigma) * slope
        x = euler
    return x
