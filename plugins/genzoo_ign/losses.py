"""IGN's three losses with their gradient routing (Shocher et al., ICLR 2024, eqs. for L_rec, L_idem, L_tight)."""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call


def distance(a: torch.Tensor, b: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-sample distance D, averaged over pixels: shape (N,)."""
    diff = a - b
    per_pixel = diff.abs() if kind == "l1" else diff.square()
    return per_pixel.flatten(1).mean(1)


def smooth_clamp(value: torch.Tensor, scale: torch.Tensor, a: float) -> torch.Tensor:
    """tanh(value / (a s)) * a s: about ``value`` when small, bounded by a*s (s detached by the caller)."""
    bound = a * scale.clamp_min(1e-8)
    return torch.tanh(value / bound) * bound


def ign_losses(
    net: nn.Module,
    x: torch.Tensor,
    z: torch.Tensor,
    *,
    kind: str = "l1",
    clamp: float = 1.5,
    clamp_scale: str = "rec",
) -> dict[str, torch.Tensor]:
    """Per-sample L_rec, L_idem and L_tight for real images x and noise z (both in [-1, 1] space).

    L_rec   = D(f(x), x)
    L_idem  = D(f'(f(z)), f(z)), f' = f with frozen parameters: gradient reaches theta only
              through the inner application f(z)
    L_tight = -D(f(y), y), y = f(z) detached: gradient reaches theta only through the outer f
    """
    fx = net(x)  # separate passes: with batch norm, real and noise batches keep their own statistics
    fz = net(z)
    frozen = {name: p.detach() for name, p in net.named_parameters()}
    f_fz = functional_call(net, frozen, (fz,))  # the frozen copy: no parameter receives gradient here
    y = fz.detach()
    fy = net(y)
    rec = distance(fx, x, kind)
    idem = distance(f_fz, fz, kind)
    tight = -distance(fy, y, kind)
    if clamp > 0:
        scale = rec if clamp_scale == "rec" else distance(fz, z, kind)
        tight = smooth_clamp(tight, scale.detach(), clamp)
    return {"rec": rec, "idem": idem, "tight": tight}
