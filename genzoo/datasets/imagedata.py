"""Images in memory (:class:`ImageData`): what every dataset is to genzoo once read, whoever's loader read it.

A named dataset's row of the plugin host's table is :class:`genzoo.entries.DatasetEntry`; its
loader may return ImageData or ``(images, labels)``, which :func:`as_image_data` turns into ImageData.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import GenzooError

DATA_ROOT_ENV = "GENZOO_DATA_ROOT"


@dataclass
class ImageData:
    """Images as uint8 N x C x H x W, labels as int64 N (or None), and where they came from."""

    images: torch.Tensor
    labels: torch.Tensor | None
    name: str
    class_names: tuple[str, ...] = ()  # what each label means, when the dataset names its classes

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
        return ImageData(self.images[index], labels, name or self.name, self.class_names)


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


def as_image_data(result: Any, name: str, split: str) -> ImageData:
    """What dataset ``name``'s loader returned for ``split`` (ImageData, or a pair (images, labels)) as ImageData."""
    if isinstance(result, ImageData):
        return result
    if not (isinstance(result, tuple) and len(result) == 2):
        raise GenzooError(f"dataset {name!r}: its loader must return ImageData or (images, labels), got "
                          f"{type(result).__name__}")
    images, labels = result
    images = images.numpy() if isinstance(images, torch.Tensor) else images
    labels = None if labels is None else torch.as_tensor(labels, dtype=torch.long)
    return ImageData(images_to_uint8_nchw(images, f"dataset {name}"), labels, f"{name}:{split}")
