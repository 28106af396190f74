"""Exporting a model: a clean model directory (config.json + model.safetensors) from a run, a name or the Hub.

What ``genzoo export`` does, as :func:`export`: the directory holds no checkpoints or logs, its
provenance no paths of the training machine, ready to bundle in a package or to push.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path
from typing import Any

from .training.checkpoints import model_from_checkpoint
from .configs import config_to_dict, replace_config
from .destinations import check_destination, first_missing, writing
from .errors import GenzooError
from .loading import resolve
from .provenance import ABSOLUTE_PATH, portable_provenance, read_provenance, run_data_fingerprint
from .weights import load_model_dir, read_config, save_pretrained

STORAGE_DTYPES = ("float32", "float16", "bfloat16")


def export(run: str | os.PathLike, dest: str | os.PathLike, *, checkpoint: int | None = None,
           set: dict[str, Any] | None = None, storage_dtype: str | None = None, recalibrate: bool = False) -> Path:
    """Write the model ``run`` names to ``dest`` as a clean model directory and return ``dest``.

    ``run`` is a training output directory, a model name, a model directory or hf://ORG/NAME.
    ``checkpoint=STEP`` exports the run's kept checkpoint at that step (its statistics recomputed);
    ``recalibrate`` recomputes export-time statistics first (batch-norm statistics, a refiner's
    label offset). ``set`` changes Config fields that leave the tensors as they are (an inference
    default such as a refiner's ``refine_eps``); a field that would change the network is refused.
    ``storage_dtype`` ("float16", "bfloat16"; "float32" or None keeps float32) stores the
    floating-point tensors at that precision. The training commands and dataset in the
    provenance lose the paths of this machine: ``--data-root`` becomes DIR, ``--out`` runs/NAME,
    ``--init PATH`` models/NAME, ``--dataset npz:PATH`` npz:DIR/FILE (``folder:PATH`` folder:DIR/NAME,
    with the fingerprint of the run's images as ``data``) and any other absolute path DIR/NAME. A
    Config field that holds an absolute path is warned about: it stays, as the model needs it.
    """
    if Path(dest).exists() and not Path(dest).is_dir():
        raise GenzooError(f"{dest} is a file; a model is exported to a directory: choose another path")
    if storage_dtype not in (None, *STORAGE_DTYPES):
        raise GenzooError(f"storage_dtype must be one of {', '.join(STORAGE_DTYPES)}, got {storage_dtype!r}")
    check_destination(dest, folder=True)  # before any model is loaded
    if checkpoint is not None:
        model, provenance = model_from_checkpoint(run, checkpoint)
        directory = Path(run)
    else:
        directory, hashes, _ = resolve(run)
        model = load_model_dir(directory, expected_hashes=hashes)
        provenance = read_provenance(read_config(directory)) or None
        if recalibrate:
            model.prepare_export()
            provenance = {**(provenance or {}), "recalibrated_at_export": True}
    provenance = portable_provenance(provenance, data=run_data_fingerprint(directory))
    if set:
        model = with_config(model, set)
        provenance = {**(provenance or {}), "export_set": {key: getattr(model.config, key) for key in set}}
    warn_of_paths_in_config(model.config)
    created = first_missing(Path(dest))
    try:
        with writing(dest):
            return save_pretrained(model, dest, storage_dtype=None if storage_dtype == "float32" else storage_dtype,
                                   provenance=provenance, training_networks=False)
    except GenzooError:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise


def warn_of_paths_in_config(config: Any) -> None:
    """Warn of each Config field that holds an absolute path: the model carries it wherever it is copied."""
    for key, value in config_to_dict(config).items():
        text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        if ABSOLUTE_PATH.search(text):
            warnings.warn(f"Config field {key}={text} names a path of this machine, which the exported model carries "
                          f"(and `genzoo push` refuses to publish): pass --set {key}=NAME, a model name or a "
                          f"path relative to where the model is used")


def with_config(model: Any, overrides: dict[str, Any]) -> Any:
    """The same tensors under a config with ``overrides``; refused if the overrides change any tensor."""
    config = replace_config(model.config, overrides, where=f"{model.name} config")
    rebuilt = type(model)(config)
    old, new = model.state_dict(), rebuilt.state_dict()
    changed = sorted(k for k in old.keys() | new.keys()
                     if k not in old or k not in new or old[k].shape != new[k].shape or old[k].dtype != new[k].dtype)
    if changed:
        keys = ", ".join(sorted(overrides))
        raise GenzooError(f"export --set {keys} changes the network's tensors ({', '.join(changed[:3])}); "
                          f"retrain with genzoo fit --set {keys}=... instead")
    rebuilt.load_state_dict(old, strict=True)
    return rebuilt.eval()
