"""The training loop every method shares, on one Accelerator (CPU, GPU, several of either).

One step, from data to optimiser (:meth:`Trainer.step`): the batch sampler gives this process's
micro-batches of step t; one engine, a :class:`~genzoo.training.step.TrainStep`, takes them: a method
that owns its update (a GAN) calls its backward and optimiser steps itself, a single-loss method has
``training_step(batch)`` run on each micro-batch and every optimiser stepped
(:func:`~genzoo.training.step.single_loss_update`); either inside the run's precision
(:class:`~genzoo.training.precision.RunPrecision`). Then the EMA moves and the schedulers step.

Layout of an output directory (``--out DIR``):

    DIR/config.json, DIR/model.safetensors    the model (EMA weights when the method keeps an EMA),
                                              rewritten at every checkpoint: DIR is loadable at once
    DIR/fit.json                              the run's settings, commands and segments (record.py)
    DIR/metrics.jsonl                         one JSON line of logged values (and learning rates) per step
    DIR/losses.png                            those curves, drawn at every checkpoint and at the end
    DIR/samples/step-XXXXXXXX.png             sample grids
    DIR/checkpoints/step-XXXXXXXX/            the last checkpoints, self-verifying (checkpoints.py)
    DIR/trackers/                             what --log-with trackers write (e.g. TensorBoard events)
    DIR/.lock                                 held while a run trains (lock.py)

Everything random is a function of the seed: the data order (batches.py), and per process the
method's randomness, whose RNG states each checkpoint saves. So a resumed run ends with the weights
of an uninterrupted one. Checkpoints hold whole steps only: Ctrl-C, SIGTERM or SIGUSR1 (a scheduler's
notice) lets the step in progress finish, every process at the same step, saves it and stops.
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

from ..configs import build_config, check_keywords, config_to_dict
from ..datasets import load_dataset
from ..errors import ArgumentError, GenzooError
from ..hardware import resolve_device
from ..plugins import get_host
from ..progress import stage as progress_stage
from ..seeding import image_seed
from . import checkpoints as ckpt
from .compiling import CompilePlan
from .batches import BatchSampler, data_fingerprint
from .heartbeat import Heartbeat
from .lock import RunLock
from .options import FitOptions
from .precision import RunPrecision
from .record import RunRecord
from .saver import RunSaver
from .start import (RunPlan, agree, build_state, config_for_data, init_history, load_init, make_accelerator,
                    make_writable, os_errors, plan_run, seed_everything)
from .step import TrainStep, broadcast_buffers, run_update


def fit(method: str | type, *, steps: int, out: str | os.PathLike, config: dict[str, Any] | None = None,
        **options: Any) -> Path:
    """Train ``method`` (a name or Method class) and return the output model directory.

    Keyword arguments are the fields of :class:`~genzoo.training.options.FitOptions`; ``config``
    overrides Config fields.
    """
    cls = get_host().method(method) if isinstance(method, str) else method
    cls.require("fit")
    check_keywords("fit", options, FitOptions)
    opts = FitOptions(steps=steps, out=str(out), overrides=dict(config or {}), **options)
    return Trainer(cls, opts).run()


class Stopped(KeyboardInterrupt):
    """A run stopped by a signal after saving the step in progress; ``signum`` names the signal."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Trainer:
    """One run of ``genzoo fit``: settings checked in ``__init__``, everything that changes in a TrainState."""

    def __init__(self, cls: type, opts: FitOptions):
        opts.check(cls)
        self.cls, self.opts, self.out = cls, opts, Path(opts.out)
        self.config = build_config(cls.Config, opts.overrides, where=f"{cls.name} --set")
        self.device = resolve_device(opts.device)
        self.state: ckpt.TrainState | None = None
        self.plan: RunPlan | None = None
        self.precision: RunPrecision | None = None
        self.init_sha: str | None = None
        self.init_commands: list[str] = []
        self.fingerprint: dict[str, Any] | None = None

    def run(self) -> Path:
        o = self.opts
        acc = self.accelerator = make_accelerator(o, self.device)
        with os_errors(), contextlib.ExitStack() as cleanup:
            data = load_dataset(o.dataset, o.data_root) if self.cls.needs_data else None
            self.config = config_for_data(self.config, o.overrides, data, f"{self.cls.name} config for {o.dataset}")
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
            sampler = BatchSampler(data, seed=o.seed, batch_size=o.batch_size, grad_accum=o.grad_accum,
                                   processes=acc.num_processes, rank=acc.process_index, hflip=o.hflip,
                                   total_steps=o.steps)
            state = self.state = build_state(self.cls, self.config, o, data)
            self.fingerprint = data_fingerprint(data) if acc.is_main_process else None
            if o.init:
                self.init_sha, self.init_commands = init_history(o.init)
            plan = self.plan = agree(acc, lambda: plan_run(self.out, o, state, sampler, acc.device, self._settings))
            if plan.step >= o.steps:  # nothing to train: nothing on disk changes
                self._say(f"{self.out} is already at step {plan.step} >= --steps {o.steps}; nothing to do")
                return self.out
            if o.init and plan.checkpoint is None:
                load_init(state, o.init, self.cls)
            if plan.checkpoint is not None:
                ckpt.load_training_state(plan.checkpoint, state, acc.num_processes)
                self._say(f"resuming {self.out} from step {state.step}")
            self.precision = RunPrecision(plan.precision, acc.device)
            self._say(f"precision: {plan.precision.describe()}")
            self._prepare(state, plan.checkpoint)
            workload = f"fit:{self.cls.name}:{plan.settings['config']}:batch{sampler.local}:{plan.precision.precision}"
            self.compiling = CompilePlan(o.compile, state.model, workload, o.steps - state.step, acc.num_processes,
                                         say=self._say)
            self.compiling.announce()
            self.record = RunRecord(self.out, o, plan.saved)
            self.saver = RunSaver(self.out, acc, self.record, o.grid_size, o.keep_checkpoints)
            if acc.is_main_process:
                self.record.start(state.step, plan.settings, plan.precision.to_dict(), self.saver.hardware(),
                                  acc.num_processes, self.init_commands, plan.changes)
                self._note_compile()
                cleanup.callback(self.record.close)
            if o.trackers():
                acc.init_trackers(self.out.name or "genzoo", config=_flat_config(plan.settings))
                cleanup.callback(acc.end_training)
            acc.wait_for_everyone()
            self._loop(state, sampler)
            if acc.is_main_process and not self.saver.holds_model_of(state.step):
                self.record.reach(state.step, acc.num_processes, self.saver.hardware())
                self.saver.model(state, state.elapsed)
        acc.wait_for_everyone()
        return self.out

    def _say(self, text: str) -> None:
        """What the run says besides its result, on stderr (stdout carries the result alone), once."""
        if self.accelerator.is_main_process:
            print(text, file=sys.stderr, flush=True)

    def _note_compile(self) -> None:
        choice = self.compiling.choice
        self.record.note_compile(choice.describe() if choice else "auto, timing both ways")

    def _settings(self) -> dict[str, Any]:
        return self.opts.settings(self.cls.name, config_to_dict(self.config), self.init_sha, self.fingerprint)

    def _prepare(self, state: ckpt.TrainState, checkpoint: Path | None) -> None:
        """Per-process randomness and the device."""
        acc = self.accelerator
        seed_everything(image_seed(self.opts.seed, acc.process_index, "train"))
        if checkpoint is not None:
            ckpt.load_rng(checkpoint, acc.process_index)
        state.model.to(acc.device)
        if state.ema is not None:
            state.ema.model.to(acc.device)

    def _loop(self, state: ckpt.TrainState, sampler: BatchSampler) -> None:
        o, acc = self.opts, self.accelerator
        with progress_stage(acc.is_main_process and o.progress, desc=f"fit {self.cls.name}", unit="step",
                            total=o.steps, initial=state.step) as bar:
            self._steps(state, sampler, bar)

    def _steps(self, state: ckpt.TrainState, sampler: BatchSampler, bar: Any) -> None:
        o, acc = self.opts, self.accelerator
        state.model.train()
        t0 = time.time()
        stop = _StopRequest(acc)
        heartbeat = Heartbeat(self.out, acc.process_index, acc.num_processes, 60 * o.collective_timeout)
        if acc.num_processes > 1:
            heartbeat.start(state.step)
        try:
            while state.step < o.steps:
                self.compiling.before_step()
                scalars = self.step(state, sampler)
                self.compiling.after_step()
                if acc.is_main_process and self.compiling.choice is not None:
                    self._note_compile()
                state.step += 1
                heartbeat.finished(state.step)
                step, done = state.step, state.step == o.steps
                if acc.is_main_process:
                    self.record.log(step, scalars)
                    if step % 10 == 0 or done:
                        bar.set_postfix({k: f"{v:.4g}" for k, v in list(scalars.items())[:4]})
                if o.trackers():
                    acc.log(scalars, step=step)
                bar.update(1)
                stopping = stop.agreed() and not done
                checkpoint = (o.checkpoint_every and step % o.checkpoint_every == 0) or done
                grid = bool(o.sample_every) and (step % o.sample_every == 0 or done)
                if checkpoint or stopping:
                    self.saver.checkpoint(state, state.elapsed + time.time() - t0, model=not stopping, grid=grid)
                elif grid and acc.is_main_process:
                    self.saver.grid(state)
                if stopping:
                    stop.saved = True
                    what = "interrupted" if stop.signum == signal.SIGINT else f"stopped by {stop.name}"
                    self._say(f"{what}: checkpoint saved at step {step}; continue with --resume, or write that "
                              f"step's model with: genzoo export {self.out} DEST --checkpoint {step}")
                    raise Stopped(stop.signum)
        except KeyboardInterrupt:
            if not stop.saved:  # a second Ctrl-C: the step in progress is lost
                latest = ckpt.latest_checkpoint(self.out)
                self._say(f"\ninterrupted mid-step, nothing saved; --resume continues from "
                          f"{latest.name if latest else 'the start (no checkpoint yet)'}")
            raise
        finally:
            heartbeat.stop()
            stop.restore()
        state.elapsed += time.time() - t0

    def step(self, state: ckpt.TrainState, sampler: BatchSampler) -> dict[str, float]:
        """One optimisation step of ``--grad-accum`` micro-batches; returns the logged values (their mean)."""
        acc, t = self.accelerator, state.step
        for opt in state.optimizers:
            opt.zero_grad(set_to_none=True)
        update = TrainStep(state.model, t, sampler.micro_batches(t, acc.device), state.optimizers,
                           processes=acc.num_processes, process=acc.process_index, seed=self.opts.seed,
                           grad_clip=getattr(self.config, "grad_clip", None), scaler=self.precision.scaler)
        with self.precision.autocast():
            logged = run_update(state.model, update)
        totals = update.finish(logged)
        if acc.num_processes > 1:
            broadcast_buffers(state.model)
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


STOP_SIGNALS = tuple(s for s in (getattr(signal, name, None) for name in ("SIGINT", "SIGTERM", "SIGUSR1")) if s)


class _StopRequest:
    """Ctrl-C, SIGTERM or SIGUSR1 during fit: the step in progress finishes, so the checkpoint saved then
    holds a whole step (weights, optimiser, EMA and RNG agree) and --resume stays exact. Under several
    processes they agree after each step (a signal to one process stops them all at the same step). A
    second Ctrl-C interrupts at once; a later SIGTERM (a launcher passing the stop on) changes nothing.
    Only in the main thread."""

    def __init__(self, acc: Any):
        self.acc = acc
        self.signum: int | None = None
        self.saved = False
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    def _handle(self, signum: int, frame: Any) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
        if signum == signal.SIGINT and signal.SIGINT in self._previous:
            signal.signal(signal.SIGINT, self._previous.pop(signal.SIGINT))  # a second Ctrl-C: at once
            if first:
                print("\nCtrl-C: stopping after this step and saving a checkpoint (Ctrl-C again to stop at once, "
                      "without it)", file=sys.stderr, flush=True)

    def agreed(self) -> bool:
        """Whether any process was asked to stop (every process gets the same answer)."""
        if self.acc.num_processes == 1:
            return self.signum is not None
        import torch.distributed as dist

        flags = torch.tensor([self.signum or 0, self.signum is not None], dtype=torch.int64, device=self.acc.device)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        if flags[1] and self.signum is None:
            self.signum = int(flags[0])
        return bool(flags[1])

    def restore(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}


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


__all__ = ["Stopped", "Trainer", "fit"]
