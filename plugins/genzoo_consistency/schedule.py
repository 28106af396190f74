"""The noise levels, curriculum and loss of consistency training.

Consistency Models (Song, Dhariwal, Chen and Sutskever, ICML 2023) with the changes of "Improved
Techniques for Training Consistency Models" (Song and Dhariwal, ICLR 2024), written from the papers:
Karras et al.'s noise levels, the EDM parameterisation with the boundary condition f(x, sigma_min) = x,
the doubling discretisation curriculum, lognormal sampling of the noise level, the 1 / (sigma_{i+1} -
sigma_i) weighting and the pseudo-Huber distance.
"""

from __future__ import annotations

import math

import torch


def curriculum(step: int, total: int, s0: int, s1: int) -> int:
    """N(k) = min(s0 * 2^floor(k / K'), s1) + 1 with K' = floor(K / (log2(s1 / s0) + 1)): the number of
    noise levels at training step k of K, doubling from s0 + 1 to s1 + 1 in equal stages."""
    stages = int(math.floor(math.log2(s1 / s0))) + 1
    stage_length = max(1, total // stages)
    return min(s0 * 2 ** (step // stage_length), s1) + 1


def lognormal_weights(sigmas: torch.Tensor, p_mean: float, p_std: float) -> torch.Tensor:
    """Probability of each adjacent pair (sigma_i, sigma_{i+1}): the lognormal mass between them
    (ln sigma ~ N(p_mean, p_std^2)), normalised."""
    cdf = torch.erf((sigmas.log() - p_mean) / (math.sqrt(2) * p_std))
    mass = cdf[1:] - cdf[:-1]
    return mass / mass.sum()


def pseudo_huber(a: torch.Tensor, b: torch.Tensor, c: float) -> torch.Tensor:
    """sqrt(||a - b||^2 + c^2) - c per sample: L2 far away, a scaled squared L2 near zero."""
    return ((a - b).flatten(1).square().sum(1) + c * c).sqrt() - c

