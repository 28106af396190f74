"""The datasets genzoo knows by name, registered through ``register_datasets`` as any plugin's are.

A new named dataset is a loader here and one ``register(...)`` line below (plus a test).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..errors import ArgumentError
from ..hookspecs import hookimpl
from .download import local_or_download
from .files import load_npz
from .imagedata import DATA_ROOT_ENV, ImageData, images_to_uint8_nchw

CIFAR10_SUBSET = "cifar10/cifar10_jpeg.npz"
CIFAR10_FULL = "cifar-10-batches-py"  # torchvision's layout
CIFAR10_EXACT = "cifar10/cifar10_exact_5k.npz"
CELEBA64 = "celeba/celeba64_5k.npz"
CELEBA64_TRAIN = 4000  # faces 1-4,000 train (models, the CelebA feature network); 4,001-5,000 are held out
# The face feature network (rotation prediction) barely sees sharpness, so faces are scored first
# in pixel statistics (SWD), which ranks blurred faces below real ones.
FACE_METRICS = "swd,fid,kid,precision,recall"
MNIST_LICENSE = "CC BY-SA 3.0 (LeCun and Cortes)"
CIFAR10_LICENSE = "CIFAR-10 (Krizhevsky, 2009): free to use, cite the tech report"
CELEBA_LICENSE = "CelebA: non-commercial research use only"


def load_mnist(root: Path, split: str) -> ImageData:
    from torchvision.datasets import MNIST

    prefix = "train" if split == "train" else "t10k"
    ds = local_or_download(lambda download: MNIST(str(root), train=split == "train", download=download), "MNIST",
                           root, f"MNIST/raw/{prefix}-images-idx3-ubyte and {prefix}-labels-idx1-ubyte")
    return ImageData(ds.data.unsqueeze(1).contiguous(), ds.targets.long(), f"mnist:{split}")


def load_cifar10(root: Path, split: str) -> ImageData:
    """genzoo's CIFAR-10 subset: training images 0-9,999 and the whole test set, decoded from small JPEGs."""
    data = load_npz(_required_file(root, CIFAR10_SUBSET, "cifar10", also="use cifar10-full for torchvision's "
                                   "CIFAR-10 (downloaded when online)"), split)
    return ImageData(data.images, data.labels, f"cifar10:{split}")


def load_cifar10_full(root: Path, split: str) -> ImageData:
    from torchvision.datasets import CIFAR10

    ds = local_or_download(lambda download: CIFAR10(str(root), train=split == "train", download=download),
                           "CIFAR-10", root, CIFAR10_FULL)
    images = torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous()
    return ImageData(images, torch.tensor(ds.targets, dtype=torch.long), f"cifar10-full:{split}")


def load_cifar10_exact(root: Path, split: str) -> ImageData:
    data = load_npz(_required_file(root, CIFAR10_EXACT, "cifar10-exact"), split)
    return ImageData(data.images, data.labels, f"cifar10-exact:{split}")


def load_celeba64(root: Path, split: str) -> ImageData:
    path = _required_file(root, CELEBA64, "celeba64")
    with np.load(path, allow_pickle=False) as arrays:
        x = arrays["x"]
    rows = {"train": slice(0, CELEBA64_TRAIN), "test": slice(CELEBA64_TRAIN, None), "all": slice(None)}[split]
    return ImageData(images_to_uint8_nchw(x[rows], str(path)), None, f"celeba64:{split}")


def load_celeba(root: Path, split: str, size: int = 64) -> ImageData:
    from torchvision import transforms
    from torchvision.datasets import CelebA

    tf = transforms.Compose([transforms.Resize(size), transforms.CenterCrop(size), transforms.PILToTensor()])
    ds = local_or_download(lambda download: CelebA(str(root), split=split, transform=tf, download=download), "CelebA",
                           root, "celeba/img_align_celeba")
    return ImageData(torch.stack([ds[i][0] for i in range(len(ds))]), None, f"celeba:{split}")


def _required_file(root: Path, relative: str, name: str, also: str = "") -> Path:
    path = root / relative
    if not path.is_file():
        said = f"{name} needs {path.resolve()}, which does not exist".replace("{", "{{").replace("}", "}}")
        raise ArgumentError("data_root", f"{said}; pass {{arg}} (the folder that holds {relative}) or set "
                            f"{DATA_ROOT_ENV}" + (f", or {also}" if also else ""))
    return path


DIGITS = tuple(str(d) for d in range(10))
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


@hookimpl
def register_datasets(register):
    register("mnist", load_mnist, shape=(1, 28, 28), num_classes=10, class_names=DIGITS,
             splits={"train": 60000, "test": 10000},
             files="MNIST/raw/*-ubyte", license=MNIST_LICENSE,
             summary="handwritten digits (torchvision's layout; downloaded when online)")
    register("cifar10", load_cifar10, shape=(3, 32, 32), num_classes=10, class_names=CIFAR10_CLASSES,
             splits={"train": 10000, "test": 10000},
             files=CIFAR10_SUBSET, license=CIFAR10_LICENSE,
             summary="genzoo's CIFAR-10 subset: training images 0-9,999 and the 10,000 test images, decoded from "
                     "small JPEGs (what the zoo's CIFAR-10 models were trained and scored on)")
    register("cifar10-full", load_cifar10_full, shape=(3, 32, 32), num_classes=10, class_names=CIFAR10_CLASSES,
             splits={"train": 50000, "test": 10000}, files=CIFAR10_FULL, license=CIFAR10_LICENSE,
             summary="CIFAR-10 in full through torchvision (downloaded when online)")
    register("cifar10-exact", load_cifar10_exact, shape=(3, 32, 32), num_classes=10, class_names=CIFAR10_CLASSES,
             splits={"train": 4000, "test": 1000}, files=CIFAR10_EXACT, license=CIFAR10_LICENSE,
             summary="CIFAR-10 training images 0-3,999 and test images 0-999, lossless")
    register("celeba64", load_celeba64, shape=(3, 64, 64),
             splits={"train": CELEBA64_TRAIN, "test": 5000 - CELEBA64_TRAIN, "all": 5000}, files=CELEBA64,
             license=CELEBA_LICENSE,
             default_metrics=FACE_METRICS,
             summary="5,000 aligned CelebA faces at 64x64 (train: faces 1-4,000; test: 4,001-5,000)")
    register("celeba", load_celeba, shape=(3, 64, 64), splits={"train": None, "valid": None, "test": None, "all": None},
             files="celeba/img_align_celeba", license=CELEBA_LICENSE, default_metrics=FACE_METRICS,
             summary="CelebA aligned faces through torchvision, resized and cropped to 64x64")
