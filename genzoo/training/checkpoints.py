"""Training checkpoints, pickle-free and self-verifying: the one owner of their file layout.

A checkpoint holds what an exact resume needs: model, EMA, optimiser and scheduler state, the
step, and each process's RNG states (torch, CUDA, Python, NumPy). Tensors go to safetensors, the
rest to JSON. It is written to a staging folder and renamed; its ``state.json`` is written last and
atomically, and lists the size and sha256 of every other file, so a checkpoint is either whole and
verified or refused by name. Checkpoints are training files; ``genzoo.load`` reads model directories
only.

    RUN/checkpoints/step-XXXXXXXX/
      state.json                      step, elapsed seconds, process count, optimiser count, and the
                                      size and sha256 of each file below (written last)
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

from ..errors import GenzooError
from ..tensorfile import write_tensors
from ..weights import method_config, read_checked, sha256_file
from .record import segments_until

STATE_FILE = "state.json"
FOLDER = "checkpoints"


@dataclass
class TrainState:
    """Everything that changes while a run trains, in one place (what a checkpoint stores)."""

    model: torch.nn.Module  # the method, unwrapped
    ema: Any  # genzoo.ema.EMA or None
    optimizers: list[torch.optim.Optimizer]
    schedulers: list[Any] = field(default_factory=list)
    step: int = 0
    elapsed: float = 0.0  # training seconds before this process started


class DamagedCheckpoint(GenzooError):
    """A checkpoint whose files are missing, truncated or altered."""


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}"


def complete_checkpoints(run: Path) -> list[Path]:
    """The run's checkpoints that finished writing (have state.json), oldest first; none verified yet."""
    directory = Path(run) / FOLDER
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("step-*") if (p / STATE_FILE).is_file())


def read_state(checkpoint: Path) -> dict[str, Any]:
    try:
        document = json.loads((checkpoint / STATE_FILE).read_text())
        if not isinstance(document, dict) or not isinstance(document.get("step"), int):
            raise ValueError("no step")
        return document
    except (OSError, ValueError) as exc:
        raise DamagedCheckpoint(f"checkpoint {checkpoint.name}: {STATE_FILE} is damaged ({type(exc).__name__})") from None


def verify(checkpoint: Path) -> dict[str, Any]:
    """state.json of ``checkpoint`` after checking every file it lists (size, then sha256); raises
    DamagedCheckpoint naming the first file that is missing or differs."""
    state = read_state(checkpoint)
    files = state.get("files")
    if not isinstance(files, dict) or not files:
        raise DamagedCheckpoint(f"checkpoint {checkpoint.name} lists no files in its {STATE_FILE}")
    for name, expected in sorted(files.items()):
        path = checkpoint / name
        if not path.is_file():
            raise DamagedCheckpoint(f"checkpoint {checkpoint.name}: {name} is missing")
        if path.stat().st_size != expected.get("size"):
            raise DamagedCheckpoint(f"checkpoint {checkpoint.name}: {name} has {path.stat().st_size} bytes, "
                                    f"{expected.get('size')} were written")
        if sha256_file(path) != expected.get("sha256"):
            raise DamagedCheckpoint(f"checkpoint {checkpoint.name}: {name} is altered (its sha256 differs from "
                                    f"the one written)")
    return state


def latest_verified(run: Path) -> tuple[Path | None, list[str]]:
    """The newest checkpoint of ``run`` that verifies, and a sentence for each newer one that did not."""
    problems = []
    for checkpoint in reversed(complete_checkpoints(run)):
        try:
            verify(checkpoint)
            return checkpoint, problems
        except DamagedCheckpoint as exc:
            problems.append(str(exc))
    return None, problems


def latest_checkpoint(run: Path) -> Path | None:
    """The newest complete checkpoint of ``run`` (complete = has state.json; not verified)."""
    done = complete_checkpoints(run)
    return done[-1] if done else None


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


def finish_checkpoint(staging: Path, step: int, info: dict[str, Any], keep: int = 2) -> Path:
    """List every file of ``staging`` with its size and sha256 in state.json (written last, atomically),
    move the folder into place and drop older checkpoints beyond ``keep``."""
    files = {p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)} for p in sorted(staging.iterdir())
             if p.is_file() and p.name != STATE_FILE}
    tmp = staging / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps({"step": step, **info, "files": files}, indent=2))
    os.replace(tmp, staging / STATE_FILE)
    final = staging.parent / checkpoint_name(step)
    if final.exists():
        shutil.rmtree(final)
    os.replace(staging, final)
    older = [p for p in complete_checkpoints(final.parent.parent) if p.name < final.name]
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
    """Fill ``state`` from a verified ``checkpoint`` (weights, EMA, optimisers, schedulers, step)."""
    info = read_state(checkpoint)
    if info.get("processes", 1) != processes:
        raise GenzooError(
            f"--resume: checkpoint {checkpoint.name} was written by {info.get('processes')} process(es), this run has "
            f"{processes}; an exact resume needs the same number"
        )
    saved_optimizers = info.get("optimizers", len(list(checkpoint.glob("optimizer-*.json"))))
    if saved_optimizers != len(state.optimizers):
        raise GenzooError(f"--resume: checkpoint {checkpoint.name} holds {saved_optimizers} optimiser(s), the method "
                          f"now configures {len(state.optimizers)}; resume with the code that wrote it, or start a new "
                          f"run from its weights with --init")
    with _read_errors(checkpoint):
        state.model.load_state_dict(_tensors(checkpoint / "model.safetensors"), strict=True)
        if state.ema is not None:
            state.ema.load_state_dict(_tensors(checkpoint / "ema.safetensors"))
        for i, opt in enumerate(state.optimizers):
            _optimizer_from_files(opt, checkpoint / f"optimizer-{i}")
        for i, scheduler in enumerate(state.schedulers):
            path = checkpoint / f"scheduler-{i}.json"
            if not path.is_file():
                raise GenzooError(f"--resume: {checkpoint.name} has no {path.name}; it was written without this scheduler")
            scheduler.load_state_dict(json.loads(path.read_text()))
    state.step = int(info["step"])
    state.elapsed = float(info.get("elapsed_seconds", 0.0))
    return info


def load_rng(checkpoint: Path, rank: int) -> None:
    stem = checkpoint / f"rng-rank{rank}"
    with _read_errors(checkpoint):
        tensors = _tensors(stem.with_suffix(".safetensors"))
        document = json.loads(stem.with_suffix(".json").read_text())
        torch.set_rng_state(tensors["torch"])
        cuda = [tensors[k] for k in sorted(k for k in tensors if k.startswith("cuda."))]
        if cuda and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(cuda)
        name, keys, pos, has_gauss, cached = document["numpy"]
        np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
        version, internal, gauss = document["python"]
        random.setstate((version, tuple(internal), gauss))


class _read_errors:
    """Turn any failure to read a checkpoint's files into one sentence naming the checkpoint."""

    def __init__(self, checkpoint: Path):
        self.checkpoint = checkpoint

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None or isinstance(exc, GenzooError) or not isinstance(exc, Exception):
            return False
        if isinstance(exc, RuntimeError) and "state_dict" in str(exc):
            first = str(exc).strip().splitlines()[-1].strip()
            raise GenzooError(f"checkpoint {self.checkpoint.name} does not fit this method's network ({first}); "
                              f"resume with the settings that wrote it") from None
        name = getattr(exc, "filename", None)
        where = f"{Path(name).name} of " if name else ""
        raise DamagedCheckpoint(f"{where}checkpoint {self.checkpoint.name} cannot be read ({type(exc).__name__}: "
                                f"{str(exc).splitlines()[0][:120] if str(exc) else 'no detail'})") from None


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    if not path.is_file():
        raise FileNotFoundError(2, "missing", str(path))
    return load_file(str(path))


def _optimizer_from_files(optimizer: torch.optim.Optimizer, stem: Path) -> None:
    tensors = _tensors(stem.with_suffix(".safetensors"))
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


def model_from_checkpoint(run: str | os.PathLike, step: int, weights: str | None = None
                          ) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The model a run held at ``step`` (its EMA weights when it keeps an EMA), ready to sample.

    ``weights="raw"`` takes the optimised weights instead, ``"ema"`` insists on the EMA.

    Returns the method and the provenance to save with it: the run's, with that step's count and
    training time. The loop is deterministic, so these are the weights ``--steps STEP`` would end with.
    """
    run = Path(run)
    folder = run / FOLDER / checkpoint_name(step)
    if not (folder / STATE_FILE).is_file():
        kept = sorted(p.name for p in (run / FOLDER).glob("step-*")) if (run / FOLDER).is_dir() else []
        raise GenzooError(f"{run} has no complete checkpoint at step {step}; it keeps: {', '.join(kept) or 'none'}")
    info = verify(folder)
    cls, config, document = method_config(run)
    model = cls(config)
    ema = folder / "ema.safetensors"
    if weights not in (None, "ema", "raw"):
        raise GenzooError(f"weights must be 'ema' or 'raw', got {weights!r}")
    if weights == "ema" and not ema.is_file():
        raise GenzooError(f"{folder} keeps no EMA weights (the method trains without one); ask for the raw weights")
    source = ema if ema.is_file() and weights != "raw" else folder / "model.safetensors"
    model.load_state_dict(read_checked(source, model.state_dict(), None), strict=True)
    model.eval()
    model.prepare_export()
    provenance = dict(document.get("provenance") or {})
    provenance.update(steps=int(info["step"]), training_seconds=round(float(info.get("elapsed_seconds", 0.0)), 1),
                      weights="ema" if source == ema else "raw", checkpoint=folder.name)
    if "segments" in provenance:  # the parts of the run that trained up to this step
        provenance["segments"] = segments_until(provenance["segments"], step)
    return model, provenance
