"""Noise for IGN: plain Gaussian, or Gaussian in the Fourier domain with the training set's statistics."""

from __future__ import annotations

import torch


def fourier_statistics(images: torch.Tensor, batch: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-frequency mean and std of the 2D FFT of images in [-1, 1].

    Returns two (C, H, W, 2) tensors (real and imaginary parts), computed once from the training set.
    """
    total = torch.zeros(*images.shape[1:], 2, dtype=torch.float64)
    total_sq = torch.zeros_like(total)
    for start in range(0, images.shape[0], batch):
        coef = torch.view_as_real(torch.fft.fft2(images[start:start + batch].double()))
        total += coef.sum(0)
        total_sq += coef.square().sum(0)
    n = images.shape[0]
    mean = total / n
    std = (total_sq / n - mean.square()).clamp_min(0).sqrt()
    return mean.float(), std.float()


def fourier_noise(standard: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Map standard normal draws of shape (N, C, H, W, 2) to images: Re(ifft2(mean + std * eps))."""
    coef = torch.view_as_complex((mean + std * standard).contiguous())
    return torch.fft.ifft2(coef).real
