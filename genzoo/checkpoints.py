"""Training checkpoints, pickle-free: tensors in safetensors, everything else in JSON.

A checkpoint holds what an exact resume needs: model, EMA and optimiser state, the step, and each
process's RNG states (torch, CUDA, Python, NumPy). It is written to a temporary folder and
renamed, so a crash mid-write leaves the previous checkpoint intact. Checkpoints are training
files; ``genzoo.load`` reads model directories only.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from .errors import GenzooError

STATE_FILE = "state.json"


def save_tensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(path))


def optimizer_to_files(optimizer: torch.optim.Optimizer, stem: Path) -> None:
    """Split an optimiser's state_dict into ``stem.safetensors`` (tensors) and ``stem.json`` (the rest)."""
    state_dict = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, entry in state_dict["state"].items():
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{index}.{key}"] = value
            else:
                scalars.setdefault(str(index), {})[key] = value
    save_tensors(tensors, stem.with_suffix(".safetensors"))
    document = {"param_groups": state_dict["param_groups"], "scalars": scalars, "indices": [str(i) for i in state_dict["state"]]}
    stem.with_suffix(".json").write_text(json.dumps(document))


def optimizer_from_files(optimizer: torch.optim.Optimizer, stem: Path) -> None:
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


def rng_to_files(stem: Path) -> None:
    tensors = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"cuda.{i}"] = s
    save_tensors(tensors, stem.with_suffix(".safetensors"))
    np_state = np.random.get_state()
    py_state = random.getstate()
    document = {
        "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])],
        "python": [py_state[0], list(py_state[1]), py_state[2]],
    }
    stem.with_suffix(".json").write_text(json.dumps(document))


def rng_from_files(stem: Path) -> None:
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


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}"


def latest_checkpoint(directory: Path) -> Path | None:
    """The newest complete checkpoint under ``directory`` (complete = has state.json)."""
    if not directory.is_dir():
        return None
    done = sorted(p for p in directory.glob("step-*") if (p / STATE_FILE).is_file())
    return done[-1] if done else None


def read_state(checkpoint: Path) -> dict[str, Any]:
    try:
        return json.loads((checkpoint / STATE_FILE).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise GenzooError(f"checkpoint {checkpoint} is unreadable ({exc}); delete it to resume from the one before") from None


def finish_checkpoint(staging: Path, final: Path, state: dict[str, Any], keep: int = 1) -> None:
    """Mark ``staging`` complete, move it to ``final`` and drop older checkpoints beyond ``keep``."""
    (staging / STATE_FILE).write_text(json.dumps(state, indent=2))
    if final.exists():
        shutil.rmtree(final)
    os.replace(staging, final)
    older = sorted(p for p in final.parent.glob("step-*") if p != final and p.name < final.name)
    for old in older[: max(0, len(older) - (keep - 1))]:
        shutil.rmtree(old, ignore_errors=True)


def model_from_checkpoint(run: str | os.PathLike, step: int) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The model a run held at ``step`` (its EMA weights when it keeps an EMA), ready to sample.

    Returns the method and the provenance to save with it: the run's, with that step's count and
    training time. The loop is deterministic, so these are the weights ``--steps STEP`` would end with.
    """
    from .weights import _read_checked, method_config

    run = Path(run)
    folder = run / "checkpoints" / checkpoint_name(step)
    if not (folder / STATE_FILE).is_file():
        kept = sorted(p.name for p in (run / "checkpoints").glob("step-*")) if (run / "checkpoints").is_dir() else []
        raise GenzooError(f"{run} has no complete checkpoint at step {step}; it keeps: {', '.join(kept) or 'none'}")
    cls, config, document = method_config(run)
    model = cls(config)
    ema = folder / "ema.safetensors"
    source = ema if ema.is_file() else folder / "model.safetensors"
    model.load_state_dict(_read_checked(source, model.state_dict(), None), strict=True)
    model.eval()
    model.prepare_export()
    state = read_state(folder)
    provenance = dict(document.get("provenance") or {})
    provenance.update(steps=int(state["step"]), training_seconds=round(float(state.get("elapsed_seconds", 0.0)), 1),
                      weights="ema" if source == ema else "raw", checkpoint=folder.name)
    return model, provenance
