"""Images in and out: grids, PNG files and folders, .npz arrays; loading inputs for refine."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from .errors import GenzooError

FORMATS = ("grid", "npz", "png-dir")


def to_uint8(images: torch.Tensor) -> torch.Tensor:
    """Float [0, 1] -> uint8 by rounding (never truncation)."""
    return images.detach().cpu().clamp(0, 1).mul(255).round().to(torch.uint8)


def make_grid(images: torch.Tensor, nrow: int | None = None, padding: int = 2) -> torch.Tensor:
    """A C x H x W float grid of N images, ``nrow`` per row (default: as square as possible)."""
    from torchvision.utils import make_grid as tv_make_grid

    n = images.shape[0]
    nrow = nrow or max(1, math.ceil(math.sqrt(n)))
    return tv_make_grid(images.detach().cpu().float().clamp(0, 1), nrow=nrow, padding=padding, pad_value=1.0)


def save_png(image: torch.Tensor, path: str | os.PathLike) -> Path:
    """Write one C x H x W float image to PNG, atomically (temp file, then rename)."""
    from PIL import Image

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    array = to_uint8(image).permute(1, 2, 0).numpy()
    pil = Image.fromarray(array[:, :, 0] if array.shape[2] == 1 else array)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        pil.save(tmp, format="PNG")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def save_grid(images: torch.Tensor, path: str | os.PathLike, nrow: int | None = None) -> Path:
    return save_png(make_grid(images, nrow=nrow), path)


def save_images(
    images: torch.Tensor,
    out: str | os.PathLike,
    fmt: str = "grid",
    *,
    labels: torch.Tensor | None = None,
    as_float: bool = False,
    nrow: int | None = None,
) -> Path:
    """Write images as a grid PNG, an .npz (key x, uint8 NCHW or float with ``as_float``; y) or a PNG folder."""
    out = Path(out)
    if fmt == "grid":
        return save_grid(images, out, nrow=nrow)
    if fmt == "npz":
        arrays = {"x": images.detach().cpu().float().clamp(0, 1).numpy() if as_float else to_uint8(images).numpy()}
        if labels is not None:
            arrays["y"] = labels.cpu().numpy().astype(np.int64)
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".npz", dir=out.parent)
        os.close(fd)
        try:
            np.savez_compressed(tmp, **arrays)
            os.replace(tmp, out)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return out
    if fmt == "png-dir":
        out.mkdir(parents=True, exist_ok=True)
        width = max(5, len(str(len(images))))
        for i, image in enumerate(images):
            save_png(image, out / f"{i:0{width}d}.png")
        return out
    raise GenzooError(f"unknown output format {fmt!r}; use one of {', '.join(FORMATS)}")


def read_image_files(files: Sequence[Path]) -> torch.Tensor:
    """PNG/JPEG files of one size -> uint8 N x C x H x W (grayscale stays 1 channel)."""
    from PIL import Image

    if not files:
        raise GenzooError("no image files found")
    arrays = []
    for f in files:
        with Image.open(f) as im:
            if im.mode not in ("L", "RGB"):
                im = im.convert("RGB" if im.mode in ("RGBA", "P", "CMYK") else "L")
            a = np.asarray(im)
        arrays.append(a[None] if a.ndim == 2 else a.transpose(2, 0, 1))
        if arrays[-1].shape != arrays[0].shape:
            raise GenzooError(f"{f} has shape {arrays[-1].shape} (C, H, W), but {files[0]} has {arrays[0].shape}; give images of one size")
    return torch.from_numpy(np.stack(arrays))


def load_images(source: str | os.PathLike) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Images for refine: a PNG/JPEG file, a folder of them, or an .npz (key x, optional y).

    Returns float NCHW in [0, 1] and labels (from the npz's y) or None.
    """
    from .data import load_npz

    path = Path(source).expanduser()
    if not path.exists():
        raise GenzooError(f"input {path} does not exist; give a PNG file, a folder of PNGs or an .npz")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in (".png", ".jpg", ".jpeg", ".bmp", ".webp"))
        if not files:
            raise GenzooError(f"folder {path} holds no PNG or JPEG images")
        return read_image_files(files).float() / 255, None
    if path.suffix.lower() == ".npz":
        data = load_npz(path)
        return data.floats(), data.labels
    return read_image_files([path]).float() / 255, None

