"""Setting up a training run: the output folder, the Accelerator, the method with its optimisers and EMA
(from the seed or --init's weights), and the run's plan: what the folder holds, the checkpoint to
resume from, the precision and the settings, decided once on the main process (:func:`plan_run`)
and shared with every process (:func:`agree`)."""

from __future__ import annotations

import dataclasses
import errno
import os
import random
import shutil
import sys
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from ..configs import replace_config
from ..destinations import os_reason, prove_writable
from ..errors import ArgumentError, GenzooError
from ..precision import PrecisionChoice, check_runnable, decide_precision, decide_run_precision
from ..weights import WEIGHTS_FILE, load_model_dir, read_config, sha256_file
from . import checkpoints as ckpt
from .batches import BatchSampler
from .ema import EMA
from .options import FitOptions
from .precision import StepProbe, workload_key
from .record import FIT_FILE, METRICS_FILE, compare_settings, read_run_file, recorded_precision
from .step import optimizers_of

RUN_FILES = (FIT_FILE, METRICS_FILE, "losses.png", "samples", ckpt.FOLDER, "trackers", "config.json", WEIGHTS_FILE)


def make_accelerator(opts: FitOptions, device: torch.device):
    """The processes and the trackers. Precision and gradient averaging are the engine's (training.step)."""
    from datetime import timedelta

    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs

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
        mixed_precision="no",
        log_with=trackers or None,
        project_dir=str(Path(opts.out) / "trackers") if trackers else None,
        # the heartbeat names a stuck process at --collective-timeout; torch's own time-out is the fallback
        kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(minutes=opts.collective_timeout, seconds=60))],
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


@dataclass(frozen=True)
class RunPlan:
    """Where a run starts, decided once (on the main process) and the same in every process."""

    saved: dict[str, Any]  # the run's fit.json as read, once ({} for a new run)
    checkpoint: Path | None  # the verified checkpoint to continue from (None: step 0)
    step: int  # the step the run starts at
    precision: PrecisionChoice  # the recorded one on --resume (unless another is asked for), else decided now
    settings: dict[str, Any]  # what fit.json records and a --resume must match
    changes: list[str] = field(default_factory=list)  # the settings --allow-changes accepted


def plan_run(out: Path, opts: FitOptions, state: ckpt.TrainState, sampler: BatchSampler, device: torch.device,
             settings_of: Callable[[], dict[str, Any]]) -> RunPlan:
    """Read what ``out`` holds (fit.json once, the newest verified checkpoint), agree the precision and
    check the settings against the saved ones; refuses in one sentence. ``settings_of()``: the run's settings."""
    saved = read_run_file(out)
    checkpoint = resume_point(out, opts, saved)
    if checkpoint is None and not opts.resume:
        saved = {}
    recorded = recorded_precision(saved) if opts.resume else None
    model = state.model
    choice = decide_run_precision(opts.precision, recorded, model.name, model.fp32_training, device,
                                  StepProbe(model, sampler, device), workload_key(model, sampler))
    settings = settings_of()
    if checkpoint is None:
        return RunPlan(saved, None, 0, choice, settings)
    changes = compare_settings(out, saved["settings"], settings, opts.allow_changes)
    if recorded and recorded["precision"] != choice.precision:
        if not opts.allow_changes:
            raise GenzooError(f"--resume: precision differs from the run in {out} (was {recorded['precision']!r}, now "
                              f"{choice.precision!r}); resume with the original value or pass --allow-changes to "
                              f"continue with the new value, or choose a new --out")
        changes.append("precision")
    saved_steps = (saved.get("options") or {}).get("steps")
    follows = "a learning-rate schedule" if state.schedulers else state.model.follows_total_steps()
    if follows and saved_steps is not None and saved_steps != opts.steps:
        raise ArgumentError("steps", f"the run in {out} follows {follows} over {{arg}} {saved_steps}; resume it with "
                            f"{{arg}} {saved_steps} (it cannot be stretched), or start a new run from it with --init")
    step = ckpt.read_state(checkpoint)["step"]
    if step < opts.steps:
        check_runnable(choice, device, out)
    return RunPlan(saved, checkpoint, step, choice, settings, changes)


def agree(acc: Any, make: Callable[[], Any]) -> Any:
    """``make()`` on the main process, its value in every process; a refusal there is raised in every process
    (so no process waits for one that has stopped)."""
    value, error = None, None
    if acc.is_main_process:
        try:
            value = make()
        except GenzooError as exc:
            if acc.num_processes == 1:
                raise
            error = exc
    if acc.num_processes == 1:
        return value
    from accelerate.utils import broadcast_object_list

    box = [value, str(error) if error is not None else None]
    broadcast_object_list(box, from_process=0)
    if error is not None:
        raise error
    if box[1] is not None:
        raise GenzooError(box[1])
    return box[0]


def resume_point(out: Path, opts: FitOptions, saved: dict[str, Any]) -> Path | None:
    """The verified checkpoint to resume from (None: start at step 0), after checking what ``out`` holds."""
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


def config_for_data(config: Any, overrides: dict[str, Any], data: Any, where: str) -> Any:
    """``config`` with the fields the training data determines, where ``--set`` did not give them: ``channels``
    and ``image_size`` from its images, ``class_names`` from a dataset that names its ``num_classes`` classes."""
    if data is None:
        return config
    fields = {f.name for f in dataclasses.fields(config)}
    channels, height, width = data.image_shape
    found: dict[str, Any] = {"channels": channels}
    if height == width:
        found["image_size"] = height
    if data.class_names and getattr(config, "num_classes", 0) == len(data.class_names):
        found["class_names"] = tuple(data.class_names)
    changed = {key: value for key, value in found.items()
               if key in fields and key not in overrides and getattr(config, key) != value}
    return replace_config(config, changed, where=where) if changed else config


def build_state(cls: type, config: Any, opts: FitOptions, data: Any) -> ckpt.TrainState:
    """The method, its EMA, optimisers and schedulers, from the seed."""
    seed_everything(opts.seed)  # the same initial weights in every process
    model = cls(config)
    model.setup_fit(data)
    optimizers, schedulers = optimizers_of(model, opts.steps)
    return ckpt.TrainState(model, EMA.of(model), optimizers, schedulers)


def init_folder(init: str) -> Path:
    """The model directory --init names: a directory, or a catalogue model's (bundled or downloaded) files."""
    from ..loading import resolve

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
