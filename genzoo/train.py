"""The training loop every method shares, on one Accelerator (CPU, GPU, several of either).

One step, from data to optimiser (:meth:`Trainer.step`): the batch sampler gives this process's
micro-batches of step t; a method with the single-loss contract has ``training_step(batch)`` run on
each (wrapped in DistributedDataParallel across processes), its ``loss`` backpropagated, and every
optimiser stepped; a method that owns its update gets a :class:`~genzoo.trainstep.TrainStep` and
does its own backward and optimiser steps (a GAN). Then the EMA moves and the schedulers step.

Layout of an output directory (``--out DIR``):

    DIR/config.json, DIR/model.safetensors    the model (EMA weights when the method keeps an EMA),
                                              rewritten at every checkpoint: DIR is loadable at once
    DIR/fit.json                              the run's settings, commands and segments (runrecord.py)
    DIR/metrics.jsonl                         one JSON line of logged values (and learning rates) per step
    DIR/losses.png                            those curves, drawn at every checkpoint and at the end
    DIR/samples/step-XXXXXXXX.png             sample grids
    DIR/checkpoints/step-XXXXXXXX/            the last checkpoints, self-verifying (checkpoints.py)
    DIR/trackers/                             what --log-with trackers write (e.g. TensorBoard events)
    DIR/.lock                                 held while a run trains (runlock.py)

Everything random is a function of the seed: the data order (batches.py), and per process the
method's randomness, whose RNG states each checkpoint saves. So a resumed run ends with the weights
of an uninterrupted one. Checkpoints hold whole steps only: Ctrl-C lets the step in progress finish,
saves it and stops.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from . import checkpoints as ckpt
from .batches import BatchSampler
from .configs import build_config, config_to_dict
from .datasets import load_dataset
from .errors import ArgumentError, GenzooError
from .fitoptions import FitOptions
from .fitsetup import (agreed_precision, build_state, init_history, load_init, make_accelerator, make_writable,
                       os_errors, resume_point, seed_everything, split_optimizers)
from .hardware import resolve_device
from .method import Method
from .plugins import get_host
from .precision import PRECISIONS, autocast
from .runlock import RunLock
from .runrecord import RunRecord
from .runsaver import RunSaver
from .seeding import image_seed
from .trainstep import SingleLossStep, TrainStep, broadcast_buffers


def fit(method: str | type, *, steps: int, out: str | os.PathLike, config: dict[str, Any] | None = None,
        **options: Any) -> Path:
    """Train ``method`` (a name or Method class) and return the output model directory.

    Keyword arguments are the fields of :class:`~genzoo.fitoptions.FitOptions`; ``config`` overrides
    Config fields.
    """
    cls = get_host().method(method) if isinstance(method, str) else method
    cls.require("fit")
    unknown = sorted(set(options) - {f for f in FitOptions.__dataclass_fields__} - {"overrides"})
    if unknown:
        raise GenzooError(f"fit() got unknown argument(s) {unknown}; it takes: {', '.join(FitOptions.__dataclass_fields__)}")
    opts = FitOptions(steps=steps, out=str(out), overrides=dict(config or {}), **options)
    return Trainer(cls, opts).run()


class _TrainingStep(nn.Module):
    """What DistributedDataParallel wraps for a single-loss method: its training step, so ``forward`` stays its own."""

    def __init__(self, method: Method):
        super().__init__()
        self.method = method

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        return self.method.training_step(batch)


class Trainer:
    """One run of ``genzoo fit``: settings checked in ``__init__``, everything that changes in a TrainState."""

    def __init__(self, cls: type, opts: FitOptions):
        opts.check(cls)
        self.cls, self.opts, self.out = cls, opts, Path(opts.out)
        self.config = build_config(cls.Config, opts.overrides, where=f"{cls.name} --set")
        self.device = resolve_device(opts.device)
        self.owns_update = cls.owns_update()
        self.record = RunRecord(self.out, opts)
        self.state: ckpt.TrainState | None = None
        self.precision = "fp32"
        self.init_sha: str | None = None
        self.init_commands: list[str] = []
        self.scaler: Any = None  # fp16 loss scaling of a method that owns its update
        self.single_loss: SingleLossStep | None = None

    def run(self) -> Path:
        o = self.opts
        acc = self.accelerator = make_accelerator(o, self.device, self.owns_update)
        self.saver = RunSaver(self.out, acc, self.record, o.grid_size, o.keep_checkpoints)
        with os_errors(), contextlib.ExitStack() as cleanup:
            data = load_dataset(o.dataset, o.data_root) if self.cls.needs_data else None
            if data is not None and len(data) < o.batch_size * o.grad_accum:
                raise ArgumentError("batch_size", f"dataset {data.name} has {len(data)} images, fewer than one step's "
                                    f"{o.batch_size * o.grad_accum} ({{arg}} x --grad-accum)")
            if o.batch_size % acc.num_processes:
                raise ArgumentError("batch_size", f"{{arg}} {o.batch_size} must be divisible by the number of "
                                    f"processes ({acc.num_processes})")
            if acc.is_main_process:
                make_writable(self.out)
                lock = RunLock(self.out)
                lock.acquire()
                cleanup.callback(lock.release)
            checkpoint = _shared(acc, resume_point(self.out, o, self.record) if acc.is_main_process else None)
            sampler = BatchSampler(data, seed=o.seed, batch_size=o.batch_size, grad_accum=o.grad_accum,
                                   processes=acc.num_processes, rank=acc.process_index, hflip=o.hflip)
            state = self.state = build_state(self.cls, self.config, o, data)
            if o.init:
                self.init_sha, self.init_commands = init_history(o.init)
                if checkpoint is None:
                    load_init(state, o.init, self.cls)
            choice = agreed_precision(acc, o, self.record, state, sampler, self.owns_update)
            self.precision = choice.precision
            changes = self._resume(state, Path(checkpoint)) if checkpoint else []
            acc.print(f"precision: {choice.describe()}")
            self._prepare(state, checkpoint)
            settings = self._settings()
            if acc.is_main_process:
                self.record.start(state.step, settings, choice.to_dict(), self.saver.hardware(), acc.num_processes,
                                  self.init_commands, changes)
                cleanup.callback(self.record.close)
            if o.trackers():
                acc.init_trackers(self.out.name or "genzoo", config=_flat_config(settings))
                cleanup.callback(acc.end_training)
            acc.wait_for_everyone()
            if state.step >= o.steps:
                acc.print(f"{self.out} is already at step {state.step} >= --steps {o.steps}; nothing to do")
            else:
                self._loop(state, sampler)
            if acc.is_main_process and not self.saver.holds_model_of(state.step):
                self.record.reach(state.step, acc.num_processes, self.saver.hardware())
                self.saver.model(state, state.elapsed)
        acc.wait_for_everyone()
        return self.out

    def _settings(self) -> dict[str, Any]:
        return self.opts.settings(self.cls.name, config_to_dict(self.config), self.precision, self.init_sha)

    def _resume(self, state: ckpt.TrainState, checkpoint: Path) -> list[str]:
        """Load ``checkpoint`` into ``state`` after checking the settings; returns the settings changed."""
        changes = self.record.check_resume(self._settings(), self.opts.allow_changes)
        saved_steps = self.record.saved_steps()
        if state.schedulers and saved_steps is not None and saved_steps != self.opts.steps:
            raise ArgumentError("steps", f"the run in {self.out} follows a learning-rate schedule over {{arg}} "
                                f"{saved_steps}; resume it with {{arg}} {saved_steps} (a schedule cannot be "
                                f"stretched), or start a new run from it with --init")
        ckpt.load_training_state(checkpoint, state, self.accelerator.num_processes)
        self.accelerator.print(f"resuming {self.out} from step {state.step}")
        return changes

    def _prepare(self, state: ckpt.TrainState, checkpoint: Any) -> None:
        """Per-process randomness, devices, and for a single-loss method the DistributedDataParallel wrapper."""
        acc = self.accelerator
        seed_everything(image_seed(self.opts.seed, acc.process_index, "train"))
        if checkpoint is not None:
            ckpt.load_rng(Path(checkpoint), acc.process_index)
        if state.ema is not None:
            state.ema.model.to(acc.device)
        if self.owns_update:
            state.model.to(acc.device)
            if self.precision == "fp16":
                self.scaler = torch.amp.GradScaler(acc.device.type)
            return
        prepared = acc.prepare(_TrainingStep(state.model), *state.optimizers)
        wrapped, state.optimizers = prepared[0], list(prepared[1:])
        state.model = acc.unwrap_model(wrapped).method
        self.single_loss = SingleLossStep(acc, wrapped, state.model, self.precision,
                                          getattr(self.config, "grad_clip", None))

    def _loop(self, state: ckpt.TrainState, sampler: BatchSampler) -> None:
        from tqdm.auto import tqdm

        o, acc = self.opts, self.accelerator
        state.model.train()
        bar = tqdm(total=o.steps, initial=state.step, desc=f"fit {self.cls.name}", unit="step",  # None: a terminal only
                   disable=None if acc.is_main_process and o.progress else True, dynamic_ncols=True)
        t0 = time.time()
        stop = _StopRequest(acc.num_processes == 1)
        try:
            while state.step < o.steps:
                scalars = self.step(state, sampler)
                state.step += 1
                step, done = state.step, state.step == o.steps
                if acc.is_main_process:
                    self.record.log(step, scalars)
                    if step % 10 == 0 or done:
                        bar.set_postfix({k: f"{v:.4g}" for k, v in list(scalars.items())[:4]}, refresh=False)
                if o.trackers():
                    acc.log(scalars, step=step)
                bar.update(1)
                checkpoint = (o.checkpoint_every and step % o.checkpoint_every == 0) or done
                grid = bool(o.sample_every) and (step % o.sample_every == 0 or done)
                if checkpoint or stop.requested:
                    model = not (stop.requested and not done)
                    self.saver.checkpoint(state, state.elapsed + time.time() - t0, model=model, grid=grid)
                elif grid and acc.is_main_process:
                    self.saver.grid(state)
                if stop.requested and not done:
                    stop.saved = True
                    bar.close()
                    acc.print(f"interrupted: checkpoint saved at step {step}; continue with --resume, or write "
                              f"that step's model with: genzoo export {self.out} DEST --checkpoint {step}")
                    raise KeyboardInterrupt
        except KeyboardInterrupt:
            if not stop.saved:  # a second Ctrl-C (or several processes): the step in progress is lost
                latest = ckpt.latest_checkpoint(self.out)
                acc.print(f"\ninterrupted mid-step, nothing saved; --resume continues from "
                          f"{latest.name if latest else 'the start (no checkpoint yet)'}")
            raise
        finally:
            stop.restore()
            bar.close()
        state.elapsed += time.time() - t0

    def step(self, state: ckpt.TrainState, sampler: BatchSampler) -> dict[str, float]:
        """One optimisation step of ``--grad-accum`` micro-batches; returns the logged values (their mean)."""
        acc, t = self.accelerator, state.step
        batches = sampler.micro_batches(t, acc.device)
        for opt in state.optimizers:
            opt.zero_grad(set_to_none=True)
        if self.owns_update:
            update = TrainStep(state.model, t, batches, state.optimizers, processes=acc.num_processes,
                               grad_clip=getattr(self.config, "grad_clip", None), scaler=self.scaler)
            with autocast(self.precision, acc.device):
                logged = state.model.update(update)
            totals = update.finish(logged)
            if acc.num_processes > 1:
                broadcast_buffers(state.model)
        else:
            totals = self.single_loss(batches, state.optimizers)
        scalars = {k: acc.reduce(v.to(acc.device), "mean").item() for k, v in totals.items()}
        _check_finite(scalars, t + 1, self.out)
        if state.schedulers:  # the learning rate this step used
            for i, opt in enumerate(state.optimizers):
                scalars["lr" if len(state.optimizers) == 1 else f"lr_{i}"] = float(opt.param_groups[0]["lr"])
        for scheduler in state.schedulers:
            scheduler.step()
        if state.ema is not None:
            state.ema.update(state.model, t)
        return scalars


class _StopRequest:
    """Ctrl-C during fit: the first one lets the step in progress finish, so the checkpoint saved then
    holds a whole step (weights, optimiser, EMA and RNG agree) and --resume stays exact; a second one
    interrupts at once. Only in the main thread of a single-process run (processes must stop together)."""

    def __init__(self, enabled: bool):
        self.requested = self.saved = False
        self._previous: Any = None
        if enabled and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True
        self.restore()  # a second Ctrl-C takes the default path: KeyboardInterrupt at once
        print("\nCtrl-C: stopping after this step and saving a checkpoint (Ctrl-C again to stop at once, "
              "without it)", file=sys.stderr, flush=True)

    def restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


def _check_finite(scalars: dict[str, float], step: int, out: Path) -> None:
    """A non-finite logged value stops the run before anything of its step is saved."""
    bad = [key for key, value in scalars.items() if not math.isfinite(value)]
    if not bad:
        return
    latest = ckpt.latest_checkpoint(out)
    kept = f"the checkpoint of step {int(latest.name.split('-')[1])} is kept" if latest else "no checkpoint was written yet"
    raise GenzooError(f"step {step}: {bad[0]} is {scalars[bad[0]]} (not finite), so training stopped without saving "
                      f"that step; {kept}: continue from it with a changed setting (genzoo fit ... --resume "
                      f"--allow-changes --set lr=...), or see metrics.jsonl for where the values grew")


def _shared(acc, value: Any) -> Any:
    """The main process's ``value``, in every process."""
    if acc.num_processes == 1:
        return value
    from accelerate.utils import broadcast_object_list

    box = [value]
    broadcast_object_list(box, from_process=0)
    return box[0]


def _flat_config(settings: dict[str, Any]) -> dict[str, Any]:
    """Settings as the flat scalar dict trackers accept."""
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            for k, v in value.items():
                flat[f"{key}.{k}"] = v if isinstance(v, (int, float, str, bool)) else str(v)
        else:
            flat[key] = value if isinstance(value, (int, float, str, bool)) else str(value)
    return flat


__all__ = ["FitOptions", "PRECISIONS", "Trainer", "fit", "split_optimizers"]
