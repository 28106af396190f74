"""Sampling pipelines: sample, re-apply the model's own refine (``--apply K``), refine with another model."""

from __future__ import annotations

from typing import Any

import torch

from .errors import ArgumentError


def generate(
    model,
    n: int,
    *,
    seed: int,
    labels: torch.Tensor | None = None,
    apply: int = 1,
    refiner=None,
    refine_steps: int | None = None,
    batch_size: int = 256,
    device: torch.device | str | None = None,
    precision: str = "fp32",
    progress: bool = False,
    options: dict[str, Any] | None = None,
    refine_options: dict[str, Any] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``n`` images from ``model`` (and the labels they were made for, if any).

    ``apply=K`` samples, then runs the model's own refine K-1 more times; ``refiner`` (another
    model with refine) then post-processes, with the generator's labels when it has them.
    """
    if apply < 1:
        raise ArgumentError("apply", f"{{arg}} must be >= 1, got {apply}")
    if apply > 1:
        model.require("refine")
    if refiner is not None:
        refiner.require("refine")
    common = {"seed": seed, "batch_size": batch_size, "device": device, "precision": precision, "progress": progress}
    if labels is None and model.num_classes:
        labels = torch.arange(n) % model.num_classes
    images = model.sample(n, labels=labels, **common, **(options or {}))
    if apply > 1:
        images = model.refine(images, labels=labels, steps=apply - 1, **common)
    if refiner is not None:
        images = refiner.refine(images, labels=labels if refiner.num_classes else None, steps=refine_steps,
                                **common, **(refine_options or {}))
    return images, labels
