"""Datasets by spec string, looked up in the plugin host's table (built-ins and ``register_datasets``).

    mnist[:train|test]   cifar10[:train|test]   cifar10-exact[:train|test]
    celeba64[:train|test|all]   celeba[:train|valid|test|all]   folder:PATH   npz:PATH[:SPLIT]
"""

from __future__ import annotations

import os
from pathlib import Path

from .data import DatasetEntry, ImageData, choose_split, default_root, file_dataset
from .errors import GenzooError
from .plugins import get_host


def dataset_entry(spec: str) -> DatasetEntry | None:
    """The table row a spec names; None for ``folder:``/``npz:`` specs."""
    kind = spec.partition(":")[0].lower()
    return None if kind in ("folder", "npz") else get_host().dataset(kind)


def load_dataset(spec: str, root: str | os.PathLike | None = None, *, default_split: str | None = None) -> ImageData:
    """Load the dataset a spec names (``NAME[:SPLIT]``, ``folder:PATH`` or ``npz:PATH[:SPLIT]``).

    ``root`` is the data root (default: ``$GENZOO_DATA_ROOT`` or ``./data``); ``default_split`` is
    used when the spec names no split and the dataset has it (else the dataset's own default).
    """
    data = file_dataset(spec)
    if data is not None:
        return data
    entry = dataset_entry(spec)
    split = choose_split(entry, spec.partition(":")[2], default_split)
    data = entry.load(Path(root).expanduser() if root is not None else default_root(), split)
    _check_declared(entry, data)
    return data


def _check_declared(entry: DatasetEntry, data: ImageData) -> None:
    """A dataset's images and labels are what its table row says (a plugin's loader may drift from it)."""
    where = f"dataset {entry.name!r} ({entry.source})"
    if tuple(data.image_shape) != tuple(entry.shape):
        raise GenzooError(f"{where} is declared as {entry.shape} (C, H, W) images but its files hold "
                          f"{tuple(data.image_shape)}; fix the files under the data root or the declaration")
    if entry.num_classes and data.labels is None:
        raise GenzooError(f"{where} is declared with {entry.num_classes} classes but its loader returned no labels")
    if data.labels is not None and len(data.labels) and not (0 <= int(data.labels.min()) and
                                                             int(data.labels.max()) < max(entry.num_classes, 1)):
        raise GenzooError(f"{where} has labels in [{int(data.labels.min())}, {int(data.labels.max())}] but is declared "
                          f"with {entry.num_classes} classes")


def known_datasets() -> list[DatasetEntry]:
    """Every named dataset, sorted by name."""
    return [entry for _, entry in sorted(get_host().datasets.items())]
