"""The precision a run trains in, applied: decided by :func:`genzoo.precision.decide_run_precision` (a fresh
run's choice, timed on :class:`StepProbe` where ``auto`` asks, or a resumed run's recorded one), then applied
by one object.

:class:`RunPrecision` is built from the agreed :class:`~genzoo.precision.PrecisionChoice` and is the
only place that turns it into work: the autocast every update runs in (single-loss or owned) and,
for fp16, the loss scaler the engine (``training.step.TrainStep``) scales, unscales and steps with.
So what fit.json records is what the steps ran.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any, ContextManager

import torch

from ..configs import config_to_dict
from ..method import Method
from ..precision import PrecisionChoice, autocast, timed
from .batches import BatchSampler
from .step import TrainStep, optimizers_of, run_update


class RunPrecision:
    """Autocast and fp16 loss scaling of a run, from its agreed choice."""

    def __init__(self, choice: PrecisionChoice, device: torch.device):
        self.choice, self.name, self.device = choice, choice.precision, device
        self.scaler = torch.amp.GradScaler(device.type) if self.name == "fp16" else None

    def autocast(self) -> ContextManager[None]:
        return autocast(self.name, self.device)

    def describe(self) -> str:
        return self.choice.describe()


def workload_key(model: Method, sampler: BatchSampler) -> str:
    """What ``--precision auto``'s cached verdict is for: the method, its config and the batch of one process."""
    return f"fit:{model.name}:{_digest(config_to_dict(model.config))}:batch{sampler.local}"


class StepProbe:
    """One training step of a copy of the method, for ``--precision auto`` to time in fp32 and bf16."""

    def __init__(self, model: Method, sampler: BatchSampler, device: torch.device):
        self.model, self.sampler, self.device = model, sampler, device

    def __call__(self, precision: str) -> float:
        model = copy.deepcopy(self.model).to(self.device).train()
        optimizers, _ = optimizers_of(model, self.sampler.total_steps or 1)
        batches = self.sampler.micro_batches(0, self.device)[:1]

        def one_step() -> None:
            step = TrainStep(model, 0, batches, optimizers)
            with autocast(precision, self.device):
                run_update(model, step)

        return timed(one_step, calls=None)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


__all__ = ["RunPrecision", "StepProbe", "workload_key"]
