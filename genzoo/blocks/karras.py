"""Karras et al.'s noise levels and preconditioning (EDM, NeurIPS 2022), for diffusion and consistency models.

Images live in [-1, 1]; a noisy image at level sigma is x + sigma n with n ~ N(0, I).
"""

from __future__ import annotations

import torch


def karras_sigmas(count: int, sigma_min: float, sigma_max: float, rho: float) -> torch.Tensor:
    """``count`` noise levels from sigma_min up to sigma_max, evenly spaced in sigma^(1/rho) (ascending); one level
    is sigma_max alone (where a one-step sampler starts)."""
    if count == 1:
        return torch.tensor([float(sigma_max)], dtype=torch.float64)
    ramp = torch.linspace(0, 1, count, dtype=torch.float64)
    low, high = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
    return (low + ramp * (high - low)) ** rho


def edm_scalings(sigma: torch.Tensor, sigma_data: float, sigma_min: float = 0.0
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """c_skip, c_out, c_in of D(x, sigma) = c_skip x + c_out F(c_in x, c_noise) (EDM, Table 1).

    With ``sigma_min`` > 0, the consistency models' boundary shift: c_skip(sigma_min) = 1 and
    c_out(sigma_min) = 0, so D(x, sigma_min) = x by construction; with 0, EDM's own scalings.
    """
    c_skip = sigma_data ** 2 / ((sigma - sigma_min) ** 2 + sigma_data ** 2)
    c_out = sigma_data * (sigma - sigma_min) / (sigma_data ** 2 + sigma ** 2).sqrt()
    c_in = 1 / (sigma ** 2 + sigma_data ** 2).sqrt()
    return c_skip, c_out, c_in


def c_noise(sigma: torch.Tensor) -> torch.Tensor:
    """The network's noise input, ln(sigma) / 4 (EDM, Table 1)."""
    return sigma.log() / 4
