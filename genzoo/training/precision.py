"""The precision a run trains in: decided once (a fresh run's choice, or a resumed run's recorded one),
refused in one sentence where this machine cannot run it, and then applied by one object.

:class:`RunPrecision` is built from the agreed :class:`~genzoo.precision.PrecisionChoice` and is the
only place that turns it into work: the autocast every update runs in (single-loss or owned) and,
for fp16, the loss scaler the engine (``training.step.TrainStep``) scales, unscales and steps with.
So what fit.json records is what the steps ran.
"""

from __future__ import annotations

import copy
import hashlib
import json
import warnings
from typing import Any, ContextManager

import torch

from ..configs import config_to_dict
from ..errors import GenzooError
from ..hardware import device_name
from ..method import Method
from ..precision import PrecisionChoice, autocast, cpu_has_native_bf16, decide_precision, timed, warn_emulated_bf16
from .batches import BatchSampler
from .step import TrainStep, optimizers_of, single_loss_update


class RunPrecision:
    """Autocast and fp16 loss scaling of a run, from its agreed choice."""

    def __init__(self, choice: PrecisionChoice, device: torch.device):
        self.choice, self.name, self.device = choice, choice.precision, device
        self.scaler = torch.amp.GradScaler(device.type) if self.name == "fp16" else None

    def autocast(self) -> ContextManager[None]:
        return autocast(self.name, self.device)

    def describe(self) -> str:
        return self.choice.describe()


def decide(opts_precision: str, saved: dict[str, Any] | None, model: Method, sampler: BatchSampler,
           device: torch.device) -> PrecisionChoice:
    """The run's precision: a resumed run keeps the one it started with (never timed again) unless another
    is asked for; ``auto`` may time the actual step."""
    if saved and opts_precision in ("auto", saved.get("precision")):
        return PrecisionChoice.from_dict(saved)
    if model.fp32_training and opts_precision == "auto":
        return PrecisionChoice("fp32", "auto", f"{model.name} trains in fp32: {model.fp32_training}")
    if model.fp32_training and opts_precision in ("bf16", "fp16"):
        warnings.warn(f"--precision {opts_precision} for {model.name}, which should train in fp32: "
                      f"{model.fp32_training}; use --precision fp32 or auto", stacklevel=2)
    config = config_to_dict(model.config)
    key = f"fit:{model.name}:{_digest(config)}:batch{sampler.local}"
    return decide_precision(opts_precision, device, StepProbe(model, sampler, device), key)


def check_runnable(choice: PrecisionChoice, device: torch.device, out: Any) -> None:
    """Refuse, in one sentence, a resumed run's recorded precision that this machine cannot run."""
    if choice.precision == "fp16" and device.type == "cpu":
        raise GenzooError(f"--resume: the run in {out} trains in fp16, which runs on GPUs only; resume it on a GPU, "
                          f"or continue in another precision with --precision fp32 --allow-changes (recorded in "
                          f"fit.json)")
    if choice.precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise GenzooError(f"--resume: the run in {out} trains in bf16, which {device_name(device)} does not support; "
                          f"resume it on a GPU with bf16, or continue with --precision fp32 --allow-changes")
    if choice.precision == "bf16" and device.type == "cpu" and not cpu_has_native_bf16():
        warn_emulated_bf16()


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
                model.update(step) if model.owns_update() else single_loss_update(model, step)

        return timed(one_step, calls=None)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


__all__ = ["RunPrecision", "StepProbe", "check_runnable", "decide"]
