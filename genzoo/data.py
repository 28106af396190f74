"""Datasets for fit and eval: MNIST, CIFAR-10, CelebA (through torchvision), folders and .npz files.

Every dataset is held in memory as uint8 NCHW images plus optional int64 labels, which keeps the
training loop's batches cheap and its order exactly reproducible. Spec strings:

    mnist[:train|test]   cifar10[:train|test]   celeba[:train|valid|test]
    folder:PATH          npz:PATH[:SPLIT]
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .errors import GenzooError

DATA_ROOT_ENV = "GENZOO_DATA_ROOT"
BUILTINS = ("mnist", "cifar10", "celeba")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")


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


def default_root() -> Path:
    return Path(os.environ.get(DATA_ROOT_ENV, "data")).expanduser()


def load_dataset(spec: str, root: str | os.PathLike | None = None, *, default_split: str = "train") -> ImageData:
    """Load a dataset named by a spec string (see the module docstring)."""
    root = Path(root).expanduser() if root is not None else default_root()
    kind, _, rest = spec.partition(":")
    kind = kind.lower()
    if kind == "folder":
        if not rest:
            raise GenzooError("folder datasets are written folder:PATH")
        return _load_folder(Path(rest).expanduser())
    if kind == "npz":
        if not rest:
            raise GenzooError("npz datasets are written npz:PATH[:SPLIT]")
        path, split = _split_npz_spec(rest)
        return load_npz(path, split)
    split = rest or default_split
    if kind == "mnist":
        return _load_torchvision_mnist(root, split)
    if kind == "cifar10":
        return _load_torchvision_cifar10(root, split)
    if kind == "celeba":
        return _load_torchvision_celeba(root, split)
    raise GenzooError(
        f"unknown dataset {spec!r}; use one of {', '.join(BUILTINS)} (with :train or :test), folder:PATH or npz:PATH[:SPLIT]"
    )


def _split_npz_spec(rest: str) -> tuple[Path, str | None]:
    if Path(rest).expanduser().is_file():
        return Path(rest).expanduser(), None
    path, sep, split = rest.rpartition(":")
    if sep and Path(path).expanduser().is_file():
        return Path(path).expanduser(), split
    raise GenzooError(f"npz file {rest!r} does not exist; write npz:PATH[:SPLIT] with an existing file")


def load_npz(path: str | os.PathLike, split: str | None = None) -> ImageData:
    """Images from an .npz: keys ``x``/``y`` or ``x_SPLIT``/``y_SPLIT``; uint8 NHW/NHWC/NCHW or float [0, 1]."""
    path = Path(path)
    with np.load(path, allow_pickle=False) as data:
        x_key, y_key = ("x", "y") if split is None else (f"x_{split}", f"y_{split}")
        if x_key not in data.files:
            splits = sorted(k[2:] for k in data.files if k.startswith("x_"))
            hint = f"; it has splits {splits} (write npz:{path}:SPLIT)" if splits and split is None else ""
            raise GenzooError(f"{path} has no array {x_key!r} (arrays: {', '.join(data.files)}){hint}")
        x = data[x_key]
        y = data[y_key] if y_key in data.files else None
    images = images_to_uint8_nchw(x, str(path))
    labels = torch.from_numpy(np.asarray(y).astype(np.int64)) if y is not None else None
    return ImageData(images, labels, f"npz:{path}" + (f":{split}" if split else ""))


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


def _load_folder(path: Path) -> ImageData:
    from .images import read_image_files

    if not path.is_dir():
        raise GenzooError(f"folder {path} does not exist")
    class_dirs = sorted(p for p in path.iterdir() if p.is_dir())
    if class_dirs:  # ImageFolder layout: one sub-folder per class
        files, labels = [], []
        for label, class_dir in enumerate(class_dirs):
            found = sorted(p for p in class_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            files += found
            labels += [label] * len(found)
        images = read_image_files(files)
        return ImageData(images, torch.tensor(labels, dtype=torch.long), f"folder:{path}")
    files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    return ImageData(read_image_files(files), None, f"folder:{path}")


def _missing(name: str, root: Path, files: str, exc: Exception | None) -> GenzooError:
    why = f" and downloading failed ({str(exc).splitlines()[0][:120]})" if exc is not None else ""
    return GenzooError(
        f"{name} is not under {root} (looked for {files}){why}; pass --data-root DIR (or set {DATA_ROOT_ENV}) "
        f"to a folder that holds it"
    )


def _torchvision(make, name: str, root: Path, files: str):
    """Build a torchvision dataset from local files, downloading only when they are absent."""
    try:
        return make(download=False)
    except (RuntimeError, FileNotFoundError):
        pass
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("GENZOO_OFFLINE") == "1":
        raise _missing(name, root, files, None)
    try:
        return make(download=True)
    except Exception as exc:
        raise _missing(name, root, files, exc) from None


def _load_torchvision_mnist(root: Path, split: str) -> ImageData:
    from torchvision.datasets import MNIST

    train = _train_flag(split, "mnist")
    ds = _torchvision(lambda download: MNIST(str(root), train=train, download=download), "MNIST", root, "MNIST/raw/*-ubyte")
    return ImageData(ds.data.unsqueeze(1).contiguous(), ds.targets.long(), f"mnist:{split}")


def _load_torchvision_cifar10(root: Path, split: str) -> ImageData:
    from torchvision.datasets import CIFAR10

    train = _train_flag(split, "cifar10")
    ds = _torchvision(lambda download: CIFAR10(str(root), train=train, download=download), "CIFAR-10", root, "cifar-10-batches-py")
    images = torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous()
    return ImageData(images, torch.tensor(ds.targets, dtype=torch.long), f"cifar10:{split}")


def _load_torchvision_celeba(root: Path, split: str, size: int = 64) -> ImageData:
    from torchvision import transforms
    from torchvision.datasets import CelebA

    if split not in ("train", "valid", "test", "all"):
        raise GenzooError(f"celeba splits are train, valid, test and all; got {split!r}")
    tf = transforms.Compose([transforms.Resize(size), transforms.CenterCrop(size), transforms.PILToTensor()])
    ds = _torchvision(lambda download: CelebA(str(root), split=split, transform=tf, download=download), "CelebA", root, "celeba/img_align_celeba")
    images = torch.stack([ds[i][0] for i in range(len(ds))])
    return ImageData(images, None, f"celeba:{split}")


def _train_flag(split: str, name: str) -> bool:
    if split not in ("train", "test"):
        raise GenzooError(f"{name} splits are train and test; got {split!r}")
    return split == "train"


def fixed_permutation(n: int, seed: int = 0) -> torch.Tensor:
    """A permutation of range(n) that depends only on (n, seed): how references are drawn."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))
