"""The distance consistency training pulls two outputs together with: the pseudo-Huber distance of "Improved
Techniques for Training Consistency Models" (Song and Dhariwal, ICLR 2024), whose 1 / (sigma_{i+1} - sigma_i)
weighting the model applies.
"""

from __future__ import annotations

import torch


def pseudo_huber(a: torch.Tensor, b: torch.Tensor, c: float) -> torch.Tensor:
    """sqrt(||a - b||^2 + c^2) - c per sample: L2 far away, a scaled squared L2 near zero."""
    return ((a - b).flatten(1).square().sum(1) + c * c).sqrt() - c

