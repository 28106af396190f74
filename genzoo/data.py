"""Datasets for fit and eval: MNIST, CIFAR-10, CelebA (through torchvision), folders and .npz files.

Every dataset is held in memory as uint8 NCHW images plus optional int64 labels, which keeps the
training loop's batches cheap and its order exactly reproducible. Spec strings:

    mnist[:train|test]   cifar10[:train|test]   cifar10-exact[:train|test]
    celeba64[:train|test|all]   celeba[:train|valid|test]   folder:PATH   npz:PATH[:SPLIT]

Named datasets are rows of a table (:class:`DatasetEntry`); `genzoo datasets` lists them.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from .errors import GenzooError

DATA_ROOT_ENV = "GENZOO_DATA_ROOT"
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

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "summary": self.summary, "shape": list(self.shape), "num_classes": self.num_classes,
                "splits": dict(self.splits), "files": self.files, "default_split": self.default_split,
                "license": self.license, "source": self.source}


def file_dataset(spec: str) -> ImageData | None:
    """``folder:PATH`` or ``npz:PATH[:SPLIT]`` read at once; None for a named dataset."""
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
    return None


def choose_split(entry: DatasetEntry, split: str, preferred: str | None = None) -> str:
    """The split a spec asks for (``split``, else ``preferred`` if the dataset has it, else its default)."""
    split = split or (preferred if preferred in entry.splits else entry.default_split)
    if split not in entry.splits:
        raise GenzooError(f"{entry.name} splits are {', '.join(entry.splits)}; got {split!r}")
    return split


def _split_npz_spec(rest: str) -> tuple[Path, str | None]:
    if Path(rest).expanduser().is_file():
        return Path(rest).expanduser(), None
    path, sep, split = rest.rpartition(":")
    if sep and Path(path).expanduser().is_file():
        return Path(path).expanduser(), split
    raise GenzooError(f"npz file {rest!r} does not exist; write npz:PATH[:SPLIT] with an existing file")


NPZ_ACCEPTED = ("an .npz written by numpy.savez with images under key x (uint8 N x H x W, N x H x W x C or "
                "N x C x H x W, or floats in [0, 1]) and optional int labels under y")


def load_npz(path: str | os.PathLike, split: str | None = None) -> ImageData:
    """Images from an .npz: keys ``x``/``y`` or ``x_SPLIT``/``y_SPLIT``; uint8 NHW/NHWC/NCHW or float [0, 1].

    Never unpickles: a file that is not a plain-array .npz is refused with what genzoo accepts.
    """
    path = Path(path)
    x_key, y_key = ("x", "y") if split is None else (f"x_{split}", f"y_{split}")
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise ValueError("a single .npy array, not an .npz archive")
            if x_key not in data.files:
                splits = sorted(k[2:] for k in data.files if k.startswith("x_"))
                hint = f"; it has splits {splits} (write npz:{path}:SPLIT)" if splits and split is None else ""
                raise GenzooError(f"{path} has no array {x_key!r} (arrays: {', '.join(data.files) or 'none'}){hint}")
            x = data[x_key]
            y = data[y_key] if y_key in data.files else None
    except GenzooError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError):
        why = "it holds object arrays, which genzoo never loads" if zipfile.is_zipfile(path) else \
            "it is not an .npz archive"
        raise GenzooError(f"{path} is not an image array genzoo can read ({why}); give {NPZ_ACCEPTED}") from None
    images = images_to_uint8_nchw(x, str(path))
    if y is not None and not np.issubdtype(np.asarray(y).dtype, np.integer):
        raise GenzooError(f"{path}: labels {y_key!r} must be integers, got {np.asarray(y).dtype}")
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


def read_image_files(files: Sequence[Path]) -> torch.Tensor:
    """PNG/JPEG files of one size -> uint8 N x C x H x W (grayscale stays 1 channel).

    A grid written by genzoo (``genzoo sample -o grid.png``) carries its layout in the PNG and is
    split back into its images.
    """
    from PIL import Image, UnidentifiedImageError

    if not files:
        raise GenzooError("no image files found")
    arrays = []
    for f in files:
        try:
            with Image.open(f) as im:
                layout = im.info.get(GRID_KEY)
                if im.mode not in ("L", "RGB"):
                    im = im.convert("RGB" if im.mode in ("RGBA", "P", "CMYK") else "L")
                a = np.asarray(im)
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
            raise GenzooError(f"{f} is not an image genzoo can read; give PNG or JPEG files, a folder of them, "
                              f"or {NPZ_ACCEPTED}") from None
        a = a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
        arrays.extend(split_grid(a, layout, f) if layout else [a])
        if arrays[-1].shape != arrays[0].shape:
            raise GenzooError(f"{f} has shape {arrays[-1].shape} (C, H, W), but {files[0]} has {arrays[0].shape}; give images of one size")
    return torch.from_numpy(np.stack(arrays))


GRID_KEY = "genzoo-grid"  # PNG text chunk: the layout of a grid genzoo wrote, so it can be read back


def grid_layout(count: int, nrow: int, padding: int, shape: tuple[int, int, int]) -> dict[str, int]:
    """How :func:`genzoo.images.make_grid` lays out ``count`` images of ``shape`` (C, H, W)."""
    return {"count": count, "columns": min(nrow, count), "padding": padding, "channels": shape[0],
            "height": shape[1], "width": shape[2]}


def split_grid(grid: np.ndarray, layout_text: str, where: Path) -> list[np.ndarray]:
    """The images of a genzoo grid (C x H x W uint8), from the layout stored beside it."""
    import json

    try:
        layout = {k: int(v) for k, v in json.loads(layout_text).items()}
        count, columns, pad = layout["count"], layout["columns"], layout["padding"]
        c, h, w = layout["channels"], layout["height"], layout["width"]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise GenzooError(f"{where} carries a damaged {GRID_KEY} layout; pass the images themselves "
                          f"(genzoo sample --format png-dir or npz)") from None
    rows = -(-count // columns)
    if grid.shape[1:] != (rows * (h + pad) + pad, columns * (w + pad) + pad):
        raise GenzooError(f"{where} is {grid.shape[2]}x{grid.shape[1]} pixels, not the grid its {GRID_KEY} layout "
                          f"describes; pass the images themselves (genzoo sample --format png-dir or npz)")
    images = []
    for k in range(count):
        top, left = (k // columns) * (h + pad) + pad, (k % columns) * (w + pad) + pad
        images.append(np.ascontiguousarray(grid[:c, top:top + h, left:left + w]))
    return images


def _load_folder(path: Path) -> ImageData:
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
    """Build a torchvision dataset from local files, downloading only when they are absent.

    A failed download removes every folder it created, so a wrong ``--data-root`` leaves nothing behind.
    """
    try:
        return make(download=False)
    except (RuntimeError, FileNotFoundError):
        pass
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("GENZOO_OFFLINE") == "1":
        raise _missing(name, root, files, None)
    created = _first_missing(root.resolve())
    before = _entries(root)
    try:
        return make(download=True)
    except BaseException as exc:
        _remove_new(created, root, before)
        if isinstance(exc, Exception):
            raise _missing(name, root, files, exc) from None
        raise


def _first_missing(path: Path) -> Path | None:
    """The highest ancestor of ``path`` (or itself) that does not exist yet; None if it exists."""
    missing = None
    while not path.exists():
        missing = path
        if path.parent == path:
            break
        path = path.parent
    return missing


def _entries(root: Path, depth: int = 2) -> set[Path]:
    """Files and folders up to ``depth`` levels below ``root`` (where torchvision downloads to)."""
    found: set[Path] = set()
    level = [root] if root.is_dir() else []
    for _ in range(depth):
        level = [child for folder in level if folder.is_dir() for child in folder.iterdir()]
        found.update(level)
    return found


def _remove_new(created: Path | None, root: Path, before: set[Path]) -> None:
    """Remove what a failed download made: the folders it created, or the new entries under ``root``."""
    import shutil

    if created is not None:
        shutil.rmtree(created, ignore_errors=True)
        return
    for path in sorted(_entries(root) - before, key=lambda p: len(p.parts)):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()


def _load_torchvision_mnist(root: Path, split: str) -> ImageData:
    from torchvision.datasets import MNIST

    train = split == "train"
    ds = _torchvision(lambda download: MNIST(str(root), train=train, download=download), "MNIST", root, "MNIST/raw/*-ubyte")
    return ImageData(ds.data.unsqueeze(1).contiguous(), ds.targets.long(), f"mnist:{split}")


def _load_cifar10(root: Path, split: str) -> ImageData:
    """The subset genzoo ships for offline machines when present, else torchvision's full CIFAR-10."""
    subset = root / CIFAR10_SUBSET
    if subset.is_file() and not (root / "cifar-10-batches-py").is_dir():
        data = load_npz(subset, split)
        return ImageData(data.images, data.labels, f"cifar10:{split} ({CIFAR10_SUBSET})")
    from torchvision.datasets import CIFAR10

    files = f"{CIFAR10_SUBSET} or cifar-10-batches-py"
    ds = _torchvision(lambda download: CIFAR10(str(root), train=split == "train", download=download), "CIFAR-10",
                      root, files)
    images = torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous()
    return ImageData(images, torch.tensor(ds.targets, dtype=torch.long), f"cifar10:{split}")


def _load_cifar10_exact(root: Path, split: str) -> ImageData:
    path = _require_file(root, CIFAR10_EXACT, "cifar10-exact")
    data = load_npz(path, split)
    return ImageData(data.images, data.labels, f"cifar10-exact:{split}")


def _load_celeba64(root: Path, split: str) -> ImageData:
    path = _require_file(root, CELEBA64, "celeba64")
    with np.load(path, allow_pickle=False) as arrays:
        x = arrays["x"]
    rows = {"train": slice(0, CELEBA64_TRAIN), "test": slice(CELEBA64_TRAIN, None), "all": slice(None)}[split]
    return ImageData(images_to_uint8_nchw(x[rows], str(path)), None, f"celeba64:{split}")


def _require_file(root: Path, relative: str, name: str) -> Path:
    path = root / relative
    if not path.is_file():
        raise GenzooError(f"{name} needs {path}, which does not exist; pass --data-root DIR (or set {DATA_ROOT_ENV}) "
                          f"to the folder that holds {relative}")
    return path


def _load_torchvision_celeba(root: Path, split: str, size: int = 64) -> ImageData:
    from torchvision import transforms
    from torchvision.datasets import CelebA

    tf = transforms.Compose([transforms.Resize(size), transforms.CenterCrop(size), transforms.PILToTensor()])
    ds = _torchvision(lambda download: CelebA(str(root), split=split, transform=tf, download=download), "CelebA", root, "celeba/img_align_celeba")
    images = torch.stack([ds[i][0] for i in range(len(ds))])
    return ImageData(images, None, f"celeba:{split}")


CIFAR10_SUBSET = "cifar10/cifar10_jpeg.npz"
CIFAR10_EXACT = "cifar10/cifar10_exact_5k.npz"
CELEBA64 = "celeba/celeba64_5k.npz"
CELEBA64_TRAIN = 4000  # faces 1-4,000 train (models, the CelebA feature network); 4,001-5,000 are held out
MNIST_LICENSE = "CC BY-SA 3.0 (LeCun and Cortes)"
CIFAR10_LICENSE = "CIFAR-10 (Krizhevsky, 2009): free to use, cite the tech report"
CELEBA_LICENSE = "CelebA: non-commercial research use only"

BUILTIN_DATASETS: dict[str, DatasetEntry] = {e.name: e for e in (
    DatasetEntry("mnist", "handwritten digits (torchvision's layout; downloaded when online)", (1, 28, 28), 10,
                 {"train": 60000, "test": 10000}, "MNIST/raw/*-ubyte", _load_torchvision_mnist, license=MNIST_LICENSE),
    DatasetEntry("cifar10", "CIFAR-10: genzoo's JPEG-decoded subset when present (10,000 train + 10,000 test), "
                 "else torchvision's full set (50,000 + 10,000)", (3, 32, 32), 10, {"train": None, "test": None},
                 f"{CIFAR10_SUBSET} or cifar-10-batches-py", _load_cifar10, license=CIFAR10_LICENSE),
    DatasetEntry("cifar10-exact", "CIFAR-10 training images 0-3,999 and test images 0-999, lossless", (3, 32, 32), 10,
                 {"train": 4000, "test": 1000}, CIFAR10_EXACT, _load_cifar10_exact, license=CIFAR10_LICENSE),
    DatasetEntry("celeba64", "5,000 aligned CelebA faces at 64x64 (train: faces 1-4,000; test: 4,001-5,000)",
                 (3, 64, 64), 0, {"train": CELEBA64_TRAIN, "test": 5000 - CELEBA64_TRAIN, "all": 5000}, CELEBA64,
                 _load_celeba64, license=CELEBA_LICENSE),
    DatasetEntry("celeba", "CelebA aligned faces through torchvision, resized and cropped to 64x64", (3, 64, 64), 0,
                 {"train": None, "valid": None, "test": None, "all": None}, "celeba/img_align_celeba",
                 _load_torchvision_celeba, license=CELEBA_LICENSE),
)}


def fixed_permutation(n: int, seed: int = 0) -> torch.Tensor:
    """A permutation of range(n) that depends only on (n, seed): how references are drawn."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))
