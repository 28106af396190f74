"""Datasets by spec string: a row of the plugin host's table (``NAME[:SPLIT]``) or files (``npz:``, ``folder:``)."""

from __future__ import annotations

import os
from pathlib import Path

from ..entries import SPEC_PREFIXES, DatasetEntry
from ..plugins import get_host
from .files import file_dataset
from .imagedata import ImageData, as_image_data, default_root


def dataset_entry(spec: str) -> DatasetEntry | None:
    """The table row a spec names; None for ``folder:``/``npz:`` specs."""
    kind = spec.partition(":")[0].lower()
    return None if kind in SPEC_PREFIXES else get_host().dataset(kind)


def load_dataset(spec: str, root: str | os.PathLike | None = None, *, default_split: str | None = None) -> ImageData:
    """Load the dataset a spec names (``NAME[:SPLIT]``, ``folder:PATH`` or ``npz:PATH[:SPLIT]``).

    ``root`` is the data root (default: ``$GENZOO_DATA_ROOT`` or ``./data``); ``default_split`` is
    used when the spec names no split and the dataset has it (else the dataset's own default).
    """
    data = file_dataset(spec)
    if data is not None:
        return data
    entry = dataset_entry(spec)
    split = entry.choose_split(spec.partition(":")[2], default_split)
    data = as_image_data(entry.load(Path(root).expanduser() if root is not None else default_root(), split),
                         entry.name, split)
    entry.check(data)
    if entry.class_names and not data.class_names:
        data = ImageData(data.images, data.labels, data.name, entry.class_names)
    return data


def known_datasets() -> list[DatasetEntry]:
    """Every named dataset, sorted by name."""
    return [entry for _, entry in sorted(get_host().datasets.items())]


def files_found(entry: DatasetEntry, root: str | os.PathLike) -> bool | None:
    """Whether ``root`` holds what ``entry.files`` names (a path or glob pattern under the data root); None when
    ``files`` describes the files in words rather than naming a path (a plugin's may), so nothing can be checked."""
    pattern = entry.files.strip()
    if not pattern or " " in pattern:
        return None
    return any(Path(root).expanduser().glob(pattern))
