"""Datasets read from files the user names: ``npz:PATH[:SPLIT]``, ``folder:PATH``, and refine's ``--input``.

Never unpickles: an .npz that is not plain arrays is refused with what genzoo accepts.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import torch

from ..errors import GenzooError
from ..images import IMAGE_SUFFIXES, NPZ_ACCEPTED, read_image_files
from .imagedata import ImageData, images_to_uint8_nchw


FILE_SPECS = {  # spec -> (what it reads, the files it needs): the rows `genzoo datasets` lists after the named ones
    "folder:PATH": ("your own images: a folder of PNG or JPEG files of one size, 1 or 3 channels; with one "
                    "sub-folder per class instead, labelled by sub-folder in name order (the names are the classes)",
                    "PATH, read as written (not under the data root)"),
    "npz:PATH[:SPLIT]": ("your own images in an .npz: array x (or x_SPLIT), uint8 N x H x W, N x H x W x C or "
                         "N x C x H x W, or float in [0, 1]; integer labels y (or y_SPLIT), if any",
                         "PATH, read as written (not under the data root); never unpickled"),
}


def file_dataset(spec: str) -> ImageData | None:
    """``folder:PATH`` or ``npz:PATH[:SPLIT]`` read at once; None for a named dataset."""
    kind, _, rest = spec.partition(":")
    kind = kind.lower()
    if kind == "folder":
        if not rest:
            raise GenzooError("folder datasets are written folder:PATH")
        return load_folder(Path(rest).expanduser())
    if kind == "npz":
        if not rest:
            raise GenzooError("npz datasets are written npz:PATH[:SPLIT]")
        path, split = _split_npz_spec(rest)
        return load_npz(path, split)
    return None


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
    x = np.asarray(x)
    if np.issubdtype(x.dtype, np.floating) and x.size and not np.isfinite(x).all():
        bad = int((~np.isfinite(x)).sum())
        raise GenzooError(f"{path}: array {x_key!r} holds {bad:,} NaN or infinite values; images must be numbers in "
                          f"[0, 1] (floats) or 0..255 (uint8)")
    images = images_to_uint8_nchw(x, str(path))
    if len(images) == 0:
        raise GenzooError(f"{path}: array {x_key!r} holds no images (its shape is {x.shape}); give at least one image")
    if images.shape[1] not in (1, 3) or 0 in images.shape[2:]:
        raise GenzooError(f"{path}: array {x_key!r} of shape {x.shape} does not read as images of 1 or 3 channels "
                          f"(it reads as C x H x W = {' x '.join(map(str, images.shape[1:]))}); give {NPZ_ACCEPTED}")
    if y is not None and not np.issubdtype(np.asarray(y).dtype, np.integer):
        raise GenzooError(f"{path}: labels {y_key!r} must be integers, got {np.asarray(y).dtype}")
    labels = torch.from_numpy(np.asarray(y).astype(np.int64)) if y is not None else None
    return ImageData(images, labels, f"npz:{path}" + (f":{split}" if split else ""))


def load_folder(path: Path) -> ImageData:
    """A folder of images; with one sub-folder per class (ImageFolder's layout), labelled by sub-folder."""
    if not path.is_dir():
        raise GenzooError(f"folder {path} does not exist")
    class_dirs = sorted(p for p in path.iterdir() if p.is_dir())
    if class_dirs:
        files, labels = [], []
        for label, class_dir in enumerate(class_dirs):
            found = _image_files(class_dir)
            files += found
            labels += [label] * len(found)
        return ImageData(read_image_files(files), torch.tensor(labels, dtype=torch.long), f"folder:{path}",
                         tuple(d.name for d in class_dirs))
    return ImageData(read_image_files(_image_files(path)), None, f"folder:{path}")


def _image_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def load_images(source: str | os.PathLike) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Images for refine: a PNG/JPEG file (a genzoo grid is split back), a folder of them, or an .npz.

    Returns float NCHW in [0, 1] and labels (from the npz's y) or None.
    """
    path = Path(source).expanduser()
    if not path.exists():
        raise GenzooError(f"input {path} does not exist; give a PNG file, a folder of PNGs or {NPZ_ACCEPTED}")
    if path.is_dir():
        files = _image_files(path)
        if not files:
            raise GenzooError(f"folder {path} holds no PNG or JPEG images")
        return read_image_files(files).float() / 255, None
    if path.suffix.lower() == ".npz":
        data = load_npz(path)
        return data.floats(), data.labels
    return read_image_files([path]).float() / 255, None
