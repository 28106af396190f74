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


def hermitian_fourier_noise(white: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Map white Gaussian images (N, C, H, W) to real images whose Fourier coefficients have the data's
    per-component mean and std.

    The FFT of a real white image is Hermitian (X[-k] = conj(X[k])), so rescaling its real and
    imaginary parts per frequency by the data's statistics (which are Hermitian too) keeps it Hermitian
    and its inverse is real: nothing is lost to taking the real part, and each pixel's variance matches
    the data's, where ``fourier_noise`` keeps about half of it.
    """
    h, w = white.shape[-2:]
    coef = torch.view_as_real(torch.fft.fft2(white))
    # std of the white image's coefficients: sqrt(HW / 2) per component; self-conjugate bins are real, std sqrt(HW)
    white_std = torch.full((h, w, 2), (h * w / 2) ** 0.5, dtype=white.dtype, device=white.device)
    rows = [0, h // 2] if h % 2 == 0 else [0]
    cols = [0, w // 2] if w % 2 == 0 else [0]
    for r in rows:
        for c in cols:
            white_std[r, c, 0] = (h * w) ** 0.5
            white_std[r, c, 1] = float("inf")  # imaginary part is 0 there, and so is the data's
    shaped = mean + std * (coef / white_std)
    return torch.fft.ifft2(torch.view_as_complex(shaped.contiguous())).real
