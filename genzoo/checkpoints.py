"""Training checkpoints, pickle-free: the one owner of their file layout.

A checkpoint holds what an exact resume needs: model, EMA, optimiser and scheduler state, the
step, and each process's RNG states (torch, CUDA, Python, NumPy). Tensors go to safetensors, the
rest to JSON. It is written to a staging folder and renamed, so a crash mid-write leaves the
previous checkpoint intact. Checkpoints are training files; ``genzoo.load`` reads model
directories only.

    RUN/checkpoints/step-XXXXXXXX/
      state.json                      step, elapsed seconds, process count (written last: marks it complete)
      model.safetensors               the raw weights
      ema.safetensors                 the EMA weights (methods with ema_decay > 0)
      optimizer-I.safetensors/.json   optimiser I's tensors / its hyperparameters and scalars
      scheduler-I.json                learning-rate scheduler I's state
      rng-rankR.safetensors/.json     process R's torch (and CUDA) / Python and NumPy RNG states
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file

from .errors import GenzooError
from .tensorfile import write_tensors
from .weights import method_config, read_checked

STATE_FILE = "state.json"
FOLDER = "checkpoints"


@dataclass
class TrainState:
    """Everything that changes while a run trains, in one place (what a checkpoint stores)."""

    model: torch.nn.Module  # the method, unwrapped
    ema: torch.nn.Module | None
    optimizers: list[torch.optim.Optimizer]
    schedulers: list[Any] = field(default_factory=list)
    step: int = 0
    elapsed: float = 0.0  # training seconds before this process started


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}"


def latest_checkpoint(run: Path) -> Path | None:
    """The newest complete checkpoint of run directory ``run`` (complete = has state.json)."""
    directory = Path(run) / FOLDER
    if not directory.is_dir():
        return None
    done = sorted(p for p in directory.glob("step-*") if (p / STATE_FILE).is_file())
    return done[-1] if done else None


def read_state(checkpoint: Path) -> dict[str, Any]:
    try:
        return json.loads((checkpoint / STATE_FILE).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise GenzooError(f"checkpoint {checkpoint} is unreadable ({exc}); delete it to resume from the one before") from None


# -- saving --------------------------------------------------------------------------------------


def staging_folder(run: Path, step: int) -> Path:
    return Path(run) / FOLDER / f".staging-{checkpoint_name(step)}"


def start_checkpoint(run: Path, step: int) -> Path:
    """An empty staging folder for the checkpoint of ``step`` (main process only)."""
    staging = staging_folder(run, step)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    return staging


def save_rng(staging: Path, rank: int) -> None:
    """This process's RNG states (every process calls it)."""
    stem = staging / f"rng-rank{rank}"
    tensors = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"cuda.{i}"] = s
    write_tensors(tensors, stem.with_suffix(".safetensors"))
    np_state = np.random.get_state()
    py_state = random.getstate()
    document = {
        "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])],
        "python": [py_state[0], list(py_state[1]), py_state[2]],
    }
    stem.with_suffix(".json").write_text(json.dumps(document))


def save_training_state(staging: Path, state: TrainState) -> None:
    """Weights, EMA, optimisers and schedulers (main process only)."""
    write_tensors(_cpu(state.model.state_dict()), staging / "model.safetensors")
    if state.ema is not None:
        write_tensors(_cpu(state.ema.state_dict()), staging / "ema.safetensors")
    for i, opt in enumerate(state.optimizers):
        _optimizer_to_files(opt, staging / f"optimizer-{i}")
    for i, scheduler in enumerate(state.schedulers):
        try:
            text = json.dumps(scheduler.state_dict())
        except TypeError:
            raise GenzooError(f"scheduler {i} ({type(scheduler).__name__}) has state that is not JSON; use a "
                              f"torch.optim.lr_scheduler class or genzoo.schedules.warmup_cosine") from None
        (staging / f"scheduler-{i}.json").write_text(text)


def finish_checkpoint(staging: Path, step: int, info: dict[str, Any], keep: int = 1) -> Path:
    """Mark ``staging`` complete, move it into place and drop older checkpoints beyond ``keep``."""
    (staging / STATE_FILE).write_text(json.dumps({"step": step, **info}, indent=2))
    final = staging.parent / checkpoint_name(step)
    if final.exists():
        shutil.rmtree(final)
    os.replace(staging, final)
    older = sorted(p for p in final.parent.glob("step-*") if p != final and p.name < final.name)
    for old in older[: max(0, len(older) - (keep - 1))]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _cpu(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu() for k, v in tensors.items()}


def _optimizer_to_files(optimizer: torch.optim.Optimizer, stem: Path) -> None:
    """An optimiser's state_dict as ``stem.safetensors`` (tensors) and ``stem.json`` (the rest)."""
    state_dict = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, entry in state_dict["state"].items():
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{index}.{key}"] = value
            else:
                scalars.setdefault(str(index), {})[key] = value
    write_tensors(_cpu(tensors), stem.with_suffix(".safetensors"))
    document = {"param_groups": state_dict["param_groups"], "scalars": scalars, "indices": [str(i) for i in state_dict["state"]]}
    stem.with_suffix(".json").write_text(json.dumps(document))


# -- loading -------------------------------------------------------------------------------------


def load_training_state(checkpoint: Path, state: TrainState, processes: int) -> dict[str, Any]:
    """Fill ``state`` from ``checkpoint`` (weights, EMA, optimisers, schedulers, step); returns its state.json."""
    info = read_state(checkpoint)
    if info.get("processes", 1) != processes:
        raise GenzooError(
            f"--resume: checkpoint {checkpoint.name} was written by {info.get('processes')} process(es), this run has "
            f"{processes}; an exact resume needs the same number"
        )
    state.model.load_state_dict(load_file(str(checkpoint / "model.safetensors")), strict=True)
    if state.ema is not None:
        state.ema.load_state_dict(load_file(str(checkpoint / "ema.safetensors")), strict=True)
    for i, opt in enumerate(state.optimizers):
        _optimizer_from_files(opt, checkpoint / f"optimizer-{i}")
    for i, scheduler in enumerate(state.schedulers):
        path = checkpoint / f"scheduler-{i}.json"
        if not path.is_file():
            raise GenzooError(f"--resume: {checkpoint} has no {path.name}; it was written without this scheduler")
        scheduler.load_state_dict(json.loads(path.read_text()))
    state.step = int(info["step"])
    state.elapsed = float(info.get("elapsed_seconds", 0.0))
    return info


def load_rng(checkpoint: Path, rank: int) -> None:
    stem = checkpoint / f"rng-rank{rank}"
    tensors = load_file(str(stem.with_suffix(".safetensors")))
    torch.set_rng_state(tensors["torch"])
    cuda = [tensors[k] for k in sorted(k for k in tensors if k.startswith("cuda."))]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    document = json.loads(stem.with_suffix(".json").read_text())
    name, keys, pos, has_gauss, cached = document["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    version, internal, gauss = document["python"]
    random.setstate((version, tuple(internal), gauss))


def _optimizer_from_files(optimizer: torch.optim.Optimizer, stem: Path) -> None:
    tensors = load_file(str(stem.with_suffix(".safetensors")))
    document = json.loads(stem.with_suffix(".json").read_text())
    state: dict[int, dict[str, Any]] = {int(i): {} for i in document["indices"]}
    for name, value in tensors.items():
        index, _, key = name.partition(".")
        state[int(index)][key] = value
    for index, entry in document["scalars"].items():
        state[int(index)].update(entry)
    groups = document["param_groups"]
    for group in groups:
        if isinstance(group.get("betas"), list):
            group["betas"] = tuple(group["betas"])
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def model_from_checkpoint(run: str | os.PathLike, step: int) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The model a run held at ``step`` (its EMA weights when it keeps an EMA), ready to sample.

    Returns the method and the provenance to save with it: the run's, with that step's count and
    training time. The loop is deterministic, so these are the weights ``--steps STEP`` would end with.
    """
    run = Path(run)
    folder = run / FOLDER / checkpoint_name(step)
    if not (folder / STATE_FILE).is_file():
        kept = sorted(p.name for p in (run / FOLDER).glob("step-*")) if (run / FOLDER).is_dir() else []
        raise GenzooError(f"{run} has no complete checkpoint at step {step}; it keeps: {', '.join(kept) or 'none'}")
    cls, config, document = method_config(run)
    model = cls(config)
    ema = folder / "ema.safetensors"
    source = ema if ema.is_file() else folder / "model.safetensors"
    model.load_state_dict(read_checked(source, model.state_dict(), None), strict=True)
    model.eval()
    model.prepare_export()
    info = read_state(folder)
    provenance = dict(document.get("provenance") or {})
    provenance.update(steps=int(info["step"]), training_seconds=round(float(info.get("elapsed_seconds", 0.0)), 1),
                      weights="ema" if source == ema else "raw", checkpoint=folder.name)
    if "segments" in provenance:  # the parts of the run that trained up to this step
        provenance["segments"] = [{**s, "steps": [s["steps"][0], min(s["steps"][1], step)]}
                                  for s in provenance["segments"] if s["steps"][0] < step]
    return model, provenance
