"""What a dataset is to genzoo: images in memory (:class:`ImageData`) and a row of the dataset table.

A row (:class:`DatasetEntry`) says what a named dataset holds, where its files are expected and
how to read them. Built-in rows and plugins' rows both come in through ``register_datasets``;
:func:`registered_entry` checks a registration the same way for both.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from .errors import GenzooError

DATA_ROOT_ENV = "GENZOO_DATA_ROOT"
SPEC_PREFIXES = ("folder", "npz")  # spec kinds that name files, not a row of the table


@dataclass
class ImageData:
    """Images as uint8 N x C x H x W, labels as int64 N (or None), and where they came from."""

    images: torch.Tensor
    labels: torch.Tensor | None
    name: str

    def __post_init__(self) -> None:
        if self.images.dtype != torch.uint8 or self.images.ndim != 4:
            raise GenzooError(f"{self.name}: expected uint8 N x C x H x W images, got {self.images.dtype} {tuple(self.images.shape)}")
        if self.labels is not None and len(self.labels) != len(self.images):
            raise GenzooError(f"{self.name}: {len(self.labels)} labels for {len(self.images)} images")

    def __len__(self) -> int:
        return self.images.shape[0]

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.images.shape[1:])  # type: ignore[return-value]

    @property
    def num_classes(self) -> int:
        return int(self.labels.max()) + 1 if self.labels is not None and len(self.labels) else 0

    def floats(self, index: torch.Tensor | slice | None = None) -> torch.Tensor:
        """Images (all, or ``index``) as float NCHW in [0, 1]."""
        images = self.images if index is None else self.images[index]
        return images.float().div_(255)

    def subset(self, index: torch.Tensor, name: str | None = None) -> "ImageData":
        labels = None if self.labels is None else self.labels[index]
        return ImageData(self.images[index], labels, name or self.name)


def images_to_uint8_nchw(x: np.ndarray, where: str) -> torch.Tensor:
    """Accept NHW, NHWC or NCHW arrays, uint8 or float in [0, 1]; return uint8 NCHW."""
    x = np.asarray(x)
    if x.dtype != np.uint8:
        if not np.issubdtype(x.dtype, np.floating):
            raise GenzooError(f"{where}: images must be uint8 or float in [0, 1], got {x.dtype}")
        if x.size and (x.min() < 0 or x.max() > 1):
            raise GenzooError(f"{where}: float images must lie in [0, 1], got [{x.min():.3g}, {x.max():.3g}]")
        x = np.rint(x * 255).astype(np.uint8)
    if x.ndim == 3:
        x = x[:, None]
    elif x.ndim == 4 and x.shape[-1] in (1, 3) and x.shape[1] not in (1, 3):
        x = x.transpose(0, 3, 1, 2)
    elif x.ndim != 4:
        raise GenzooError(f"{where}: expected images as N x H x W, N x H x W x C or N x C x H x W, got shape {x.shape}")
    return torch.from_numpy(np.ascontiguousarray(x))


def default_root() -> Path:
    """Where datasets live unless ``--data-root`` says otherwise: ``$GENZOO_DATA_ROOT``, else ``./data``."""
    return Path(os.environ.get(DATA_ROOT_ENV, "data")).expanduser()


def fixed_permutation(n: int, seed: int = 0) -> torch.Tensor:
    """A permutation of range(n) that depends only on (n, seed): how references are drawn."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))


@dataclass(frozen=True)
class DatasetEntry:
    """A dataset known by name: what it holds, where its files are expected, and how to read them.

    ``load(root, split)`` returns an :class:`ImageData`; ``splits`` maps each split to its size
    (None where it depends on the files found); ``files`` says, relative to the data root, what
    must be there.
    """

    name: str
    summary: str
    shape: tuple[int, int, int]
    num_classes: int  # 0: no labels
    splits: dict[str, int | None]
    files: str
    load: Callable[[Path, str], ImageData]
    default_split: str = "train"
    license: str = ""
    source: str = "genzoo"
    default_metrics: str = ""  # what `genzoo eval` scores when --metrics is not given ("": genzoo's default)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "summary": self.summary, "shape": list(self.shape), "num_classes": self.num_classes,
                "splits": dict(self.splits), "files": self.files, "default_split": self.default_split,
                "license": self.license, "source": self.source, "default_metrics": self.default_metrics}

    def choose_split(self, split: str, preferred: str | None = None) -> str:
        """The split a spec asks for (``split``, else ``preferred`` if this dataset has it, else its default)."""
        split = split or (preferred if preferred in self.splits else self.default_split)
        if split not in self.splits:
            raise GenzooError(f"{self.name} splits are {', '.join(self.splits)}; got {split!r}")
        return split

    def check(self, data: ImageData) -> None:
        """Refuse data that is not what this row declares (a plugin's loader may drift from it)."""
        where = f"dataset {self.name!r} ({self.source})"
        if tuple(data.image_shape) != tuple(self.shape):
            raise GenzooError(f"{where} is declared as {self.shape} (C, H, W) images but its files hold "
                              f"{tuple(data.image_shape)}; fix the files under the data root or the declaration")
        if self.num_classes and data.labels is None:
            raise GenzooError(f"{where} is declared with {self.num_classes} classes but its loader returned no labels")
        if data.labels is not None and len(data.labels) and not (0 <= int(data.labels.min()) and
                                                                int(data.labels.max()) < max(self.num_classes, 1)):
            raise GenzooError(f"{where} has labels in [{int(data.labels.min())}, {int(data.labels.max())}] but is "
                              f"declared with {self.num_classes} classes")


def registered_entry(name: str, load: Callable[[Path, str], Any], *, shape: tuple[int, int, int], summary: str = "",
                     num_classes: int = 0, splits: dict[str, int | None] | None = None, files: str = "",
                     default_split: str = "train", license: str = "", default_metrics: str = "",
                     source: str) -> DatasetEntry:
    """The row a ``register_datasets`` call describes, checked (the arguments are the hook's)."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name or ""):
        raise GenzooError(f"dataset name {name!r} must be lower-case letters, digits, '.', '-' or '_' "
                          f"(it is written --dataset NAME[:SPLIT])")
    if name in SPEC_PREFIXES:
        raise GenzooError(f"dataset name {name!r} is a spec prefix of genzoo ({name}:PATH); choose another name")
    if not callable(load):
        raise GenzooError(f"dataset {name!r}: load must be callable, got {load!r}")
    splits = dict(splits or {default_split: None})
    if default_split not in splits:
        raise GenzooError(f"dataset {name!r}: default_split {default_split!r} is not one of its splits {list(splits)}")
    return DatasetEntry(name, summary, tuple(shape), int(num_classes), splits, files, _as_image_data(name, load),
                        default_split, license, source, default_metrics)


def _as_image_data(name: str, load: Callable[[Path, str], Any]) -> Callable[[Path, str], ImageData]:
    """A loader whose result becomes ImageData (it may return ImageData or (images, labels))."""

    def wrapped(root: Path, split: str) -> ImageData:
        result = load(root, split)
        if isinstance(result, ImageData):
            return result
        if not (isinstance(result, tuple) and len(result) == 2):
            raise GenzooError(f"dataset {name!r}: its loader must return ImageData or (images, labels), got "
                              f"{type(result).__name__}")
        images, labels = result
        images = images.numpy() if isinstance(images, torch.Tensor) else images
        labels = None if labels is None else torch.as_tensor(labels, dtype=torch.long)
        return ImageData(images_to_uint8_nchw(images, f"dataset {name}"), labels, f"{name}:{split}")

    return wrapped
