"""Datasets by spec string, looked up in the plugin host's table (built-ins and ``register_datasets``).

    mnist[:train|test]   cifar10[:train|test]   cifar10-exact[:train|test]
    celeba64[:train|test|all]   celeba[:train|valid|test|all]   folder:PATH   npz:PATH[:SPLIT]
"""

from __future__ import annotations

import os
from pathlib import Path

from .data import DatasetEntry, ImageData, choose_split, default_root, file_dataset
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
    return entry.load(Path(root).expanduser() if root is not None else default_root(), split)


def known_datasets() -> list[DatasetEntry]:
    """Every named dataset, sorted by name."""
    return [entry for _, entry in sorted(get_host().datasets.items())]
