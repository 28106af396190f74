"""Setting up a training run: the output folder, what it already holds, the Accelerator, the method with
its optimisers and EMA (from the seed or --init's weights), and the precision, decided once."""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import checkpoints as ckpt
from .batches import BatchSampler
from .configs import config_to_dict
from .destinations import os_reason, prove_writable
from .ema import EMA
from .errors import ArgumentError, GenzooError
from .fitoptions import FitOptions
from .method import Method
from .precision import PrecisionChoice, autocast, decide_precision, timed
from .runrecord import FIT_FILE, METRICS_FILE, RunRecord
from .trainstep import TrainStep
from .weights import WEIGHTS_FILE, load_model_dir, read_config, sha256_file

RUN_FILES = (FIT_FILE, METRICS_FILE, "losses.png", "samples", ckpt.FOLDER, "trackers", "config.json", WEIGHTS_FILE)


def make_accelerator(opts: FitOptions, device: torch.device, owns_update: bool):
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    if device.type == "cuda" and device.index is not None:
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise ArgumentError("device", "{arg} cuda:N picks one GPU; under accelerate launch each process "
                                "gets its own: use {arg} auto")
        torch.cuda.set_device(device)
    if opts.precision == "fp16" and device.type == "cpu":
        decide_precision("fp16", device)  # refuses, in one sentence
    trackers = opts.trackers()
    return Accelerator(
        cpu=device.type == "cpu",
        mixed_precision="fp16" if opts.precision == "fp16" and not owns_update else "no",
        log_with=trackers or None,
        project_dir=str(Path(opts.out) / "trackers") if trackers else None,
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=False)],
    )


def make_writable(out: Path) -> None:
    """Create ``out`` and prove it writable before any work, or refuse in one sentence naming it."""
    folder = out
    try:
        out.mkdir(parents=True, exist_ok=True)
        for folder in [out] + [out / name for name in ("checkpoints", "samples") if (out / name).is_dir()]:
            prove_writable(folder)
    except OSError as exc:
        raise GenzooError(f"--out {out}: {folder} is not writable ({os_reason(exc)}); choose a folder you can write "
                          f"to, or fix its permissions") from None


def resume_point(out: Path, opts: FitOptions, record: RunRecord) -> Path | None:
    """The verified checkpoint to resume from (None: start at step 0), after checking what ``out`` holds."""
    saved = record.saved()
    latest = ckpt.latest_checkpoint(out)
    if not opts.resume:
        if saved and latest is not None:
            raise GenzooError(f"{out} already holds a run; pass --resume to continue it or choose a new --out")
        if saved:
            print(f"{out} holds a run that stopped before its first checkpoint; nothing of it is kept, so it "
                  f"starts again", file=sys.stderr)
            clear_run(out)
        return None
    if not saved:
        raise GenzooError(f"--resume: {out} holds no run ({FIT_FILE} not found); start it without --resume")
    if latest is None:
        print(f"--resume: {out} has no complete checkpoint yet; the run starts again from step 0", file=sys.stderr)
        return None
    checkpoint, problems = ckpt.latest_verified(out)
    for problem in problems:
        print(f"--resume: {problem}; it is skipped", file=sys.stderr)
    if checkpoint is None:
        raise GenzooError(f"--resume: no checkpoint of {out} is whole ({problems[-1]}); start a new run in another "
                          f"--out")
    return checkpoint


def clear_run(out: Path) -> None:
    """Remove what a run writes in ``out`` (a run that never reached a checkpoint)."""
    for name in RUN_FILES:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def build_state(cls: type, config: Any, opts: FitOptions, data: Any) -> ckpt.TrainState:
    """The method, its EMA, optimisers and schedulers, from the seed."""
    seed_everything(opts.seed)  # the same initial weights in every process
    model = cls(config)
    model.fit_steps = opts.steps
    model.setup_fit(data)
    optimizers, schedulers = split_optimizers(model.configure_optimizers(), cls.name)
    return ckpt.TrainState(model, EMA.of(model), optimizers, schedulers)


def init_folder(init: str) -> Path:
    """The model directory --init names: a directory, or a catalogue model's (bundled or downloaded) files."""
    from .loading import resolve

    return resolve(init)[0]


def load_init(state: ckpt.TrainState, init: str, cls: type) -> None:
    """Start from another model's weights (fine-tuning): fresh optimiser, this run's config."""
    source = load_model_dir(init_folder(init))
    accepted = (cls.name, *getattr(cls, "init_from", ()))
    if source.name not in accepted:
        raise GenzooError(f"--init {init} holds a {source.name!r} model; {cls.name} starts from "
                          f"{' or '.join(repr(a) for a in accepted)} models")
    try:
        state.model.load_state_dict(source.state_dict(), strict=True)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[-1].strip()
        raise GenzooError(f"--init {init} does not fit this config's network ({first}); keep the architecture "
                          f"settings of that model") from None
    if state.ema is not None:
        state.ema.load_state_dict(state.model.state_dict())


def init_history(init: str) -> tuple[str, list[str]]:
    """--init's weights file sha256 and the commands that made it."""
    folder = init_folder(init)
    return sha256_file(folder / WEIGHTS_FILE), (read_config(folder).get("provenance") or {}).get("commands", [])


def agreed_precision(acc, opts: FitOptions, record: RunRecord, state: ckpt.TrainState, sampler: BatchSampler,
                     owns_update: bool) -> PrecisionChoice:
    """The run's precision, decided once and the same in every process: a resumed run keeps the one it
    started with (never timed again) unless another is asked for; ``auto`` may time the actual step."""
    from accelerate.utils import broadcast_object_list

    choice: list[Any] = [None]
    if acc.is_main_process:
        saved = record.saved().get("precision") if opts.resume else None
        if saved and opts.precision in ("auto", saved.get("precision")):
            choice[0] = saved
        else:
            probe = StepProbe(state.model, sampler, acc.device, owns_update)
            config = config_to_dict(state.model.config)
            key = f"fit:{state.model.name}:{_digest(config)}:batch{sampler.local}"
            choice[0] = decide_precision(opts.precision, acc.device, probe, key).to_dict()
    if acc.num_processes > 1:
        broadcast_object_list(choice, from_process=0)
    return PrecisionChoice.from_dict(choice[0])


class StepProbe:
    """One training step of a copy of the method, for ``--precision auto`` to time in fp32 and bf16."""

    def __init__(self, model: Method, sampler: BatchSampler, device: torch.device, owns_update: bool):
        self.model, self.sampler, self.device, self.owns_update = model, sampler, device, owns_update

    def __call__(self, precision: str) -> float:
        model = copy.deepcopy(self.model).to(self.device).train()
        optimizers, _ = split_optimizers(model.configure_optimizers(), model.name)
        batches = self.sampler.micro_batches(0, self.device)[:1]

        def one_step() -> None:
            if self.owns_update:
                with autocast(precision, self.device):
                    model.update(TrainStep(model, 0, batches, optimizers))
                return
            with autocast(precision, self.device):
                losses = model.training_step(batches[0])
            losses["loss"].float().backward()
            model.zero_grad(set_to_none=True)

        return timed(one_step, calls=None)


def split_optimizers(returned: Any, name: str) -> tuple[list[torch.optim.Optimizer], list[Any]]:
    """configure_optimizers' result -> (optimisers, schedulers)."""
    schedulers: list[Any] = []
    if isinstance(returned, tuple) and len(returned) == 2 and isinstance(returned[0], (list, tuple)):
        returned, schedulers = returned
        schedulers = list(schedulers) if isinstance(schedulers, (list, tuple)) else [schedulers]
    optimizers = list(returned) if isinstance(returned, (list, tuple)) else [returned]
    if not optimizers or not all(isinstance(o, torch.optim.Optimizer) for o in optimizers):
        raise GenzooError(f"{name}.configure_optimizers must return an optimiser, a list of them, or "
                          f"(optimizers, schedulers); got {type(returned).__name__}")
    for s in schedulers:
        if not (hasattr(s, "step") and hasattr(s, "state_dict") and hasattr(s, "load_state_dict")):
            raise GenzooError(f"{name}.configure_optimizers returned a scheduler without step/state_dict: {s!r}")
    return optimizers, schedulers


class os_errors:
    """A file system refusal (permissions, a full or read-only disk) during a run: one sentence naming the path."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC,
                                                      errno.EDQUOT):
            where = exc.filename or "the output folder"
            raise GenzooError(f"cannot write {where} ({os_reason(exc)}); the last complete checkpoint is kept: make "
                              f"room or fix the permissions, then continue with --resume") from None
        return False


def seed_everything(seed: int) -> None:
    """Seed torch's, Python's and NumPy's global RNGs (a checkpoint saves all three)."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]
