"""What a run writes at its checkpoints: the checkpoint itself (every process's part), then, on the main
process, the model directory, the sample grid and the loss plot of that step.

A grid and a model directory of one step share one ``prepare_export`` (IGN calibrates its batch-norm
statistics there, on 8,192 forward passes). A grid holds ``--grid-size`` images; left at its default,
as many as the method's ``preview_images`` (64 when it declares none; a slow sampler declares fewer).
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import torch

from . import checkpoints as ckpt
from ..errors import GenzooError
from ..hardware import device_name
from ..images import save_grid
from ..method import Method
from ..plots import plot_losses
from .options import FitOptions
from .record import RunRecord
from ..weights import read_config, save_pretrained

GRID_SEED = 0
DEFAULT_GRID_SIZE = next(f.default for f in dataclasses.fields(FitOptions) if f.name == "grid_size")


class RunSaver:
    """Checkpoints, model directories and grids of the run in ``out``."""

    def __init__(self, out: Path, accelerator: Any, record: RunRecord, grid_size: int, keep: int):
        self.out, self.acc, self.record = Path(out), accelerator, record
        self.grid_size, self.keep = grid_size, keep
        self.model_step: int | None = None  # the step whose model the directory holds

    def checkpoint(self, state: ckpt.TrainState, elapsed: float, model: bool = True, grid: bool = False) -> None:
        """A checkpoint of ``state``; with ``model``, the model directory (and ``grid``) of its step too.

        Stopping on Ctrl-C writes the checkpoint alone, which is quick.
        """
        acc = self.acc
        if acc.num_processes > 1:
            check_processes_agree(acc, state.model, state.step)
        staging = ckpt.staging_folder(self.out, state.step)
        try:
            if acc.is_main_process:
                ckpt.start_checkpoint(self.out, state.step)
            acc.wait_for_everyone()
            ckpt.save_rng(staging, acc.process_index)
            if acc.is_main_process:
                ckpt.save_training_state(staging, state)
            acc.wait_for_everyone()
            if acc.is_main_process:
                info = {"elapsed_seconds": elapsed, "processes": acc.num_processes,
                        "optimizers": len(state.optimizers)}
                ckpt.finish_checkpoint(staging, state.step, info, keep=self.keep)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)  # a refused write (a full disk) leaves no half checkpoint
            raise
        if acc.is_main_process:
            self.record.reach(state.step, acc.num_processes, self.hardware())
            if model:
                self.model(state, elapsed, grid)
            elif grid:
                self.grid(state)
        acc.wait_for_everyone()

    def model(self, state: ckpt.TrainState, elapsed: float, grid: bool = False) -> None:
        """The model directory of ``state`` (its EMA when there is one), with the grid if asked, and the loss plot."""
        model = self._exported(state)
        if grid:
            self.grid(state, model)
        provenance = self.record.provenance(state.step, elapsed, "ema" if state.ema is not None else "raw",
                                            self.hardware(), self.acc.num_processes)
        save_pretrained(model, self.out, provenance=provenance)
        plot_losses(self.out)
        self.model_step = state.step

    def grid(self, state: ckpt.TrainState, model: Method | None = None) -> None:
        count = self.grid_count(type(state.model))
        if "sample" not in type(state.model).capabilities or not count:
            return
        model = model or self._exported(state)
        images = model.sample(count, seed=GRID_SEED, batch_size=count)
        save_grid(images, self.out / "samples" / f"{ckpt.checkpoint_name(state.step)}.png")

    def grid_count(self, method_cls: type) -> int:
        """``--grid-size`` as given; at its default, the method's ``preview_images``."""
        if self.grid_size != DEFAULT_GRID_SIZE:
            return self.grid_size
        from ..pushing import preview_images

        return preview_images(method_cls)

    def holds_model_of(self, step: int) -> bool:
        """Whether the model directory holds the model of ``step`` (written now, or before a no-op --resume)."""
        if self.model_step == step:
            return True
        try:
            return (read_config(self.out).get("provenance") or {}).get("steps") == step
        except GenzooError:
            return False

    def hardware(self) -> str:
        return device_name(self.acc.device)

    @staticmethod
    def _exported(state: ckpt.TrainState) -> Method:
        model = state.ema.model if state.ema is not None else state.model
        model.prepare_export()
        return model


def check_processes_agree(acc: Any, model: torch.nn.Module, step: int) -> None:
    """Every process must hold the same weights; a fingerprint of each parameter is compared."""
    from accelerate.utils import gather_object

    with torch.no_grad():
        fingerprint = [float(p.double().sum()) + float(p.double().abs().sum()) for p in model.parameters()]
    prints = gather_object([fingerprint])
    names = [n for n, _ in model.named_parameters()]
    for rank, other in enumerate(prints[1:], start=1):
        for name, a, b in zip(names, prints[0], other):
            if a != b:
                raise GenzooError(f"at step {step} process {rank} holds other weights than process 0 (first in "
                                  f"{name}); every process must make the same update: randomness that must agree "
                                  f"across processes cannot come from a process's own RNG")


__all__ = ["DEFAULT_GRID_SIZE", "GRID_SEED", "RunSaver", "check_processes_agree"]
