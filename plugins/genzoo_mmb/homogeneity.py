"""Quasi-homogeneity of a classifier, found without data (Kunin et al., ICLR 2023).

A network is Lambda-quasi-homogeneous when Phi(exp(alpha Lambda) theta; x) = exp(alpha) Phi(theta; x)
for every alpha and x, with one value Lambda_k per parameter tensor theta_k. Differentiating at
alpha = 0 gives, for every input x and logit c,

    sum_k Lambda_k <grad_{theta_k} Phi_c(x), theta_k> = Phi_c(x),                      (Euler)

one linear equation per (x, c). Stacked over random inputs they fix Lambda up to the null space of
the system (a bias-free MLP satisfies it for any per-layer values summing to 1); we take the
minimum-norm least-squares solution, which is 1/L per layer for a bias-free L-layer MLP.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn
from torch.func import functional_call

from genzoo import GenzooError

MAX_BLOCK_TOLERANCE = 1e-6


def estimate_lambda(net: nn.Module, input_shape: tuple[int, ...], *, inputs: int = 64, seed: int = 0,
                    rcond: float = 1e-10) -> dict[str, float]:
    """Minimum-norm Lambda (one value per parameter tensor) of ``net`` from random inputs.

    The system is built and solved in float64, so that columns equal in exact arithmetic (the
    layers of a bias-free MLP) are equal to rounding and the null space is detected reliably.
    """
    net64 = copy.deepcopy(net).double().eval()
    names = [name for name, _ in net64.named_parameters()]
    params = tuple(p.detach() for _, p in net64.named_parameters())
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(inputs, *input_shape, generator=generator, dtype=torch.float64)

    def logits(*p: torch.Tensor) -> torch.Tensor:
        return functional_call(net64, dict(zip(names, p)), (x,))

    with torch.no_grad():
        b = logits(*params).flatten()  # right-hand side Phi_c(x), one entry per (x, c)
    a = _euler_columns(logits, params)
    solution = torch.linalg.lstsq(a, b[:, None], rcond=rcond, driver="gelsd").solution[:, 0]
    residual = (a @ solution - b).norm() / b.norm().clamp_min(1e-300)
    if residual > 1e-6:
        raise GenzooError(
            f"this network is not quasi-homogeneous: the Euler identity leaves a relative residual of "
            f"{residual:.2g}; use a ReLU network without normalisation layers or smooth activations"
        )
    return {name: float(value) for name, value in zip(names, solution)}


def _euler_columns(logits, params: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The matrix of <grad_{theta_k} Phi_c(x), theta_k>, one row per (x, c) and one column per tensor k.

    Column k is d Phi / d s_k at s = 1 for theta_k scaled by s_k. It is found by reverse mode twice:
    g = J^T u, then the gradient of g_k in u is J's column k. (Forward mode would do it in one pass,
    but torch compiles its forward-mode rules with the deprecated TorchScript, which warns.)
    """
    scales = torch.ones(len(params), dtype=torch.float64, requires_grad=True)
    with torch.enable_grad():
        out = logits(*(p * scales[k] for k, p in enumerate(params))).flatten()
        u = torch.zeros_like(out, requires_grad=True)
        (g,) = torch.autograd.grad(out @ u, scales, create_graph=True)
        columns = []
        for k in range(len(params)):
            (column,) = torch.autograd.grad(g[k], u, retain_graph=True, allow_unused=True)
            columns.append(torch.zeros_like(out) if column is None else column)
    return torch.stack(columns, 1).detach()


def max_block(lam: dict[str, float], tol: float = MAX_BLOCK_TOLERANCE) -> list[str]:
    """The parameter tensors with the largest Lambda: the only ones in the max-margin objective."""
    top = max(lam.values())
    return [name for name, value in lam.items() if value >= top - tol]


def scale_parameters(params: dict[str, torch.Tensor], lam: dict[str, float], alpha: float) -> dict[str, torch.Tensor]:
    """exp(alpha Lambda) theta, tensor by tensor (computed in float64, returned in each dtype)."""
    return {name: (p.double() * math.exp(alpha * lam[name])).to(p.dtype) for name, p in params.items()}


@torch.no_grad()
def scaling_error(net: nn.Module, lam: dict[str, float], alpha: float, x: torch.Tensor) -> float:
    """Relative error of Phi(exp(alpha Lambda) theta; x) = exp(alpha) Phi(theta; x) on inputs ``x``."""
    params = {name: p.detach() for name, p in net.named_parameters()}
    scaled = functional_call(net, scale_parameters(params, lam, alpha), (x,))
    expected = math.exp(alpha) * net(x)
    return float((scaled - expected).norm() / expected.norm())
