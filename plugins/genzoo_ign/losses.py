"""IGN's three losses with their gradient routing (Shocher et al., ICLR 2024, eqs. for L_rec, L_idem, L_tight)."""

from __future__ import annotations

import torch
from torch import nn


def distance(a: torch.Tensor, b: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-sample distance D, averaged over pixels: shape (N,)."""
    diff = a - b
    per_pixel = diff.abs() if kind == "l1" else diff.square()
    return per_pixel.flatten(1).mean(1)


def smooth_clamp(value: torch.Tensor, scale: torch.Tensor, a: float) -> torch.Tensor:
    """tanh(value / (a s)) * a s: about ``value`` when small, bounded by a*s (s detached by the caller)."""
    bound = a * scale.clamp_min(1e-8)
    return torch.tanh(value / bound) * bound


class _TwoRoutes(torch.autograd.Function):
    """f(u) once, as two outputs of equal value whose gradients go different ways.

    L_idem needs f'(f(z)) (gradient to the input only: f' is frozen) and L_tight needs f(y) with
    y = f(z) detached (gradient to the parameters only). Both are f of the same values under the same
    parameters, so one forward serves both; the backward runs the saved graph twice, once for each
    route. Three forwards of f per step instead of four, the same losses and gradients.
    """

    @staticmethod
    def forward(ctx, net: nn.Module, u: torch.Tensor, *params: torch.Tensor):
        with torch.enable_grad():
            leaf = u.detach().requires_grad_(True)
            out = net(leaf)
        ctx.leaf, ctx.out, ctx.params = leaf, out, params
        value = out.detach()
        return value, value.clone()

    @staticmethod
    def backward(ctx, grad_to_input: torch.Tensor, grad_to_params: torch.Tensor):
        (grad_u,) = torch.autograd.grad(ctx.out, ctx.leaf, grad_to_input, retain_graph=True)
        grads = torch.autograd.grad(ctx.out, ctx.params, grad_to_params, allow_unused=True)
        ctx.leaf = ctx.out = ctx.params = None
        return (None, grad_u, *grads)


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
    if torch.is_grad_enabled():
        params = [p for p in net.parameters() if p.requires_grad]
        f_fz, fy = _TwoRoutes.apply(net, fz, *params)  # f'(f(z)) and f(y): one forward
    else:
        f_fz = fy = net(fz)
    y = fz.detach()
    rec = distance(fx, x, kind)
    idem = distance(f_fz, fz, kind)
    tight = -distance(fy, y, kind)
    if clamp > 0:
        scale = rec if clamp_scale == "rec" else distance(fz, z, kind)
        tight = smooth_clamp(tight, scale.detach(), clamp)
    return {"rec": rec, "idem": idem, "tight": tight}
