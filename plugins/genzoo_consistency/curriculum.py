"""Which noise levels consistency training uses: the discretisation curriculum and the lognormal draw of a pair.

Consistency Models (Song, Dhariwal, Chen and Sutskever, ICML 2023) with the changes of "Improved
Techniques for Training Consistency Models" (Song and Dhariwal, ICLR 2024), written from the papers:
the doubling discretisation curriculum over Karras et al.'s noise levels, and lognormal sampling of
the noise level. The distance between the two outputs is in losses.py.
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

