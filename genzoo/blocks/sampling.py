"""Samplers of EDM's probability-flow ODE as plain functions of a denoiser, a start and a list of levels, and the
guidance that composes denoisers (as k-diffusion's and NVlabs/edm's samplers take a network's denoiser).

A denoiser is ``D(x, sigma) -> clean estimate`` for a batch at one level ``sigma``; a method supplies its own
(with labels bound in, for a conditional network). :func:`heun` solves with it, deterministic (EDM, Algorithm 1)
or with churn (Algorithm 2): each step first raises the noise level from sigma to sigma (1 + gamma) by adding
fresh noise, gamma = min(S_churn / N, sqrt(2) - 1) for levels in [S_tmin, S_tmax] and 0 elsewhere, then takes
the Heun step from the raised level. :func:`guided` mixes two denoisers, which is both autoguidance (the second
a weaker model) and classifier-free guidance (the second the same network without the label).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable

import torch

from ..seeding import Noise

Denoiser = Callable[[torch.Tensor, float], torch.Tensor]


@dataclass(frozen=True)
class Churn:
    """EDM's S_churn, S_tmin, S_tmax and S_noise; the default (no churn) is the deterministic sampler."""

    amount: float = 0.0
    tmin: float = 0.05
    tmax: float = 50.0
    noise: float = 1.003

    def gamma(self, sigma: float, steps: int) -> float:
        """The step's relative noise increase: S_churn / N, capped at sqrt(2) - 1 (so at most doubling the
        variance); EDM pairs S_churn 40 with 256 steps (0.16 per step), while at 18 steps 40 / 18 sits at the cap."""
        if self.amount == 0 or not self.tmin <= sigma <= self.tmax:
            return 0.0
        return min(self.amount / steps, math.sqrt(2) - 1)


def guided(denoise: Denoiser, weaker: Denoiser, weight: float) -> Denoiser:
    """w D(x, sigma) + (1 - w) D_weaker(x, sigma): w = 1 is ``denoise`` itself, w = 0 ``weaker``.

    With ``weaker`` a worse model of the same data this is autoguidance (Karras et al., NeurIPS 2024); with
    ``weaker`` the same conditional network without its label, classifier-free guidance (Ho and Salimans, 2022).
    """
    if weight == 1:
        return denoise

    def mixed(x: torch.Tensor, sigma: float) -> torch.Tensor:
        return torch.lerp(weaker(x, sigma), denoise(x, sigma), weight)
    return mixed


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
