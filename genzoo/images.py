"""Images in and out: grids (PNG or JPEG), PNG folders, .npz arrays; image files read back.

A grid PNG carries its layout (a text chunk), so ``genzoo refine --input grid.png`` reads the
images back rather than one big picture (:func:`read_image_files`, beside :func:`save_grid`). Where an output goes is checked before any image is
made (:func:`output_target`), so a wrong path fails at once and loses no work.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from .destinations import check_destination, first_missing, writing
from .errors import GenzooError

FORMATS = ("grid", "npz", "png-dir")
GRID_SUFFIXES = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG"}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")
PADDING = 2
GRID_KEY = "genzoo-grid"  # PNG text chunk: the layout of a grid genzoo wrote, so it can be read back
NPZ_ACCEPTED = ("an .npz written by numpy.savez with images under key x (uint8 N x H x W, N x H x W x C or "
                "N x C x H x W, or floats in [0, 1]) and optional int labels under y")


def to_uint8(images: torch.Tensor) -> torch.Tensor:
    """Float [0, 1] -> uint8 by rounding (never truncation)."""
    return images.detach().cpu().clamp(0, 1).mul(255).round().to(torch.uint8)


def make_grid(images: torch.Tensor, nrow: int | None = None, padding: int = PADDING) -> torch.Tensor:
    """A C x H x W float grid of N images, ``nrow`` per row (default: as square as possible)."""
    from torchvision.utils import make_grid as tv_make_grid

    if images.shape[0] == 0:
        raise GenzooError("there are no images to put in a grid; ask for at least one (-n 1 or more)")
    return tv_make_grid(images.detach().cpu().float().clamp(0, 1), nrow=_columns(images.shape[0], nrow),
                        padding=padding, pad_value=1.0)


def _columns(n: int, nrow: int | None) -> int:
    return nrow or max(1, math.ceil(math.sqrt(n)))


def _publish(tmp: str, path: Path) -> None:
    """Rename a finished temp file into place with the permissions a plain open() would have given
    it (mkstemp makes files readable by their owner only)."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)
    os.replace(tmp, path)


def save_png(image: torch.Tensor, path: str | os.PathLike, *, text: dict[str, str] | None = None) -> Path:
    """Write one C x H x W float image to PNG (or JPEG, by the suffix), atomically (temp file, then rename)."""
    from PIL import Image, PngImagePlugin

    path = Path(path)
    kind = GRID_SUFFIXES.get(path.suffix.lower(), "PNG")
    path.parent.mkdir(parents=True, exist_ok=True)
    array = to_uint8(image).permute(1, 2, 0).numpy()
    pil = Image.fromarray(array[:, :, 0] if array.shape[2] == 1 else array)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix or ".png", dir=path.parent)
    os.close(fd)
    try:
        if kind == "PNG":
            info = PngImagePlugin.PngInfo()
            for key, value in (text or {}).items():
                info.add_text(key, value)
            pil.save(tmp, format="PNG", pnginfo=info)
        else:
            pil.save(tmp, format="JPEG", quality=95)
        _publish(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def save_grid(images: torch.Tensor, path: str | os.PathLike, nrow: int | None = None) -> Path:
    """A grid of ``images`` as one PNG (with its layout, so it can be read back) or JPEG."""
    c, h, w = images.shape[1:]
    layout = {"count": images.shape[0], "columns": min(_columns(images.shape[0], nrow), images.shape[0]),
              "padding": PADDING, "channels": c, "height": h, "width": w}
    return save_png(make_grid(images, nrow=nrow), path, text={GRID_KEY: json.dumps(layout)})


def class_rows(images: torch.Tensor, labels: torch.Tensor, class_names: Sequence[str], scale: int = 2) -> torch.Tensor:
    """A 3 x H x W float picture of ``images`` in one row per class, each row headed by its class name; images
    are scaled up ``scale`` times (nearest) so small ones stay legible beside the text."""
    from PIL import Image, ImageDraw

    classes = sorted(set(int(y) for y in labels))
    rows = [images[labels == k] for k in classes]
    columns = max(len(row) for row in rows)
    names = [class_names[k] if k < len(class_names) else str(k) for k in classes]
    cells = [make_grid(torch.nn.functional.interpolate(row.float(), scale_factor=scale, mode="nearest"),
                       nrow=columns) for row in rows]
    cells = [cell.expand(3, -1, -1) if cell.shape[0] == 1 else cell for cell in cells]
    margin = 8 + 7 * max(len(name) for name in names)
    width = margin + max(cell.shape[-1] for cell in cells)
    canvas = Image.new("RGB", (width, sum(cell.shape[1] for cell in cells)), "white")
    draw = ImageDraw.Draw(canvas)
    top = 0
    for name, cell in zip(names, cells):
        canvas.paste(Image.fromarray(to_uint8(cell).permute(1, 2, 0).numpy()), (margin, top))
        draw.text((4, top + cell.shape[1] // 2 - 5), name, fill="black")
        top += cell.shape[1]
    return torch.from_numpy(np.asarray(canvas).copy()).permute(2, 0, 1).float() / 255


def read_image_files(files: Sequence[Path]) -> torch.Tensor:
    """PNG/JPEG files of one size -> uint8 N x C x H x W (grayscale stays 1 channel).

    Every mode is scaled to the full range, never clipped (:func:`_pixels`). A grid written by
    :func:`save_grid` carries its layout in the PNG and is split back into its images. An image
    larger than Pillow's guard against decompression bombs allows is refused before it is decoded.
    """
    import warnings

    from PIL import Image, UnidentifiedImageError

    if not files:
        raise GenzooError("no image files found")
    arrays = []
    for f in files:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                with Image.open(f) as im:
                    layout = im.info.get(GRID_KEY)
                    a = _pixels(im, f)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise GenzooError(f"{f} claims more than {Image.MAX_IMAGE_PIXELS:,} pixels, the most Pillow decodes "
                              f"safely (a decompression bomb, or an image far larger than any model's): give images "
                              f"of the model's size") from None
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
            raise GenzooError(f"{f} is not an image genzoo can read; give PNG or JPEG files, a folder of them, "
                              f"or {NPZ_ACCEPTED}") from None
        a = a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
        arrays.extend(_split_grid(a, layout, f) if layout else [a])
        if arrays[-1].shape != arrays[0].shape:
            raise GenzooError(f"{f} has shape {arrays[-1].shape} (C, H, W), but {files[0]} has {arrays[0].shape}; "
                              f"give images of one size")
    return torch.from_numpy(np.stack(arrays))


def _pixels(im, where: Path) -> np.ndarray:
    """A PIL image as uint8 H x W (grayscale modes) or H x W x 3 (colour modes), each mode scaled to 0..255.

    16-bit and 32-bit integer grayscale (``I;16``, ``I``) is read as 0..65535, floating point (``F``) as
    [0, 1]; alpha is dropped, a palette looked up. A value outside its mode's range, NaN or inf is refused.
    """
    mode = im.mode
    if mode in ("L", "RGB"):
        return np.asarray(im)
    if mode.startswith("I") or mode == "F":
        values = np.asarray(im, dtype=np.float64)
        low, high, what = (0.0, 1.0, "floating-point") if mode == "F" else (0.0, 65535.0, "16-bit")
        if not np.isfinite(values).all():
            raise GenzooError(f"{where} holds NaN or infinite pixel values; give images whose every pixel is a number")
        if values.size and (values.min() < low or values.max() > high):
            raise GenzooError(f"{where} is a {what} image ({mode}) with pixel values in [{values.min():g}, "
                              f"{values.max():g}], outside [{low:g}, {high:g}]; save it as 8 or 16-bit PNG")
        return np.rint(values / high * 255).astype(np.uint8)
    if mode in ("1", "LA", "La"):
        return np.asarray(im.convert("L"))
    if mode in ("RGBA", "RGBa", "RGBX", "P", "PA", "CMYK", "YCbCr", "LAB", "HSV"):
        return np.asarray(im.convert("RGB"))
    raise GenzooError(f"{where} has the image mode {mode}, which genzoo does not read; save it as an 8 or 16-bit "
                      f"grayscale or RGB PNG")


def _split_grid(grid: np.ndarray, layout_text: str, where: Path) -> list[np.ndarray]:
    """The images of a genzoo grid (C x H x W uint8), from the layout :func:`save_grid` stored beside it."""
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


def output_target(output: str | os.PathLike | None, fmt: str | None, default_stem: str) -> tuple[Path, str]:
    """Where images go and in which format, checked before any work: (path, format).

    Without ``fmt`` the format follows the suffix (.png/.jpg grid, .npz); a given format must agree
    with the suffix. Refused: a grid or npz path that is a directory, a png-dir path that is a file.
    """
    if fmt is not None and fmt not in FORMATS:
        raise GenzooError(f"unknown output format {fmt!r}; use one of {', '.join(FORMATS)}")
    if output is None:
        fmt = fmt or "grid"
        path = Path({"grid": f"{default_stem}.png", "npz": f"{default_stem}.npz", "png-dir": default_stem}[fmt])
    else:
        path = Path(output).expanduser()
        suffix = path.suffix.lower()
        if path.is_dir() and fmt != "png-dir":
            raise GenzooError(f"-o {output} is a folder: pass --format png-dir to write one PNG per image into "
                              f"it, or name a file ending in .png, .jpg or .npz")
        if fmt is None:
            if suffix in GRID_SUFFIXES:
                fmt = "grid"
            elif suffix == ".npz":
                fmt = "npz"
            else:
                raise GenzooError(f"cannot tell the output format of -o {output} from its name: end it in .png or "
                                  f".jpg (a grid) or .npz, or pass --format png-dir for a folder of PNGs")
        elif fmt == "grid" and suffix not in GRID_SUFFIXES:
            raise GenzooError(f"--format grid writes a .png or .jpg image, but -o {output} ends in "
                              f"{suffix or 'no suffix'}; name it e.g. {path.stem}.png")
        elif fmt == "npz" and suffix != ".npz":
            raise GenzooError(f"--format npz writes an .npz archive, but -o {output} ends in {suffix or 'no suffix'}; "
                              f"name it e.g. {path.stem}.npz")
        elif fmt == "png-dir" and (suffix in GRID_SUFFIXES or suffix == ".npz"):
            raise GenzooError(f"--format png-dir writes a folder, but -o {output} looks like a file name; "
                              f"name the folder without a suffix, or drop --format to write one {suffix} file")
    if fmt == "png-dir" and path.exists() and not path.is_dir():
        raise GenzooError(f"-o {path} is an existing file; --format png-dir needs a folder: choose another path")
    if fmt != "png-dir" and path.is_dir():
        raise GenzooError(f"-o {path} is a folder; a {fmt} is one file: name a file ending in "
                          f"{'.png or .jpg' if fmt == 'grid' else '.npz'}")
    if fmt == "png-dir" and path.is_dir():
        foreign = sorted(p.name for p in path.iterdir() if not _NUMBERED.fullmatch(p.name))
        if foreign:
            raise GenzooError(f"-o {path} holds files genzoo did not write ({', '.join(foreign[:3])}"
                              f"{', ...' if len(foreign) > 3 else ''}); --format png-dir writes into a new or empty "
                              f"folder, or replaces a folder of its own numbered PNGs: choose another folder")
    return check_destination(path, folder=fmt == "png-dir"), fmt


OUTPUT_RULE = ("An existing file is replaced, and the output line says so; a --format png-dir folder is written "
               "whole, replacing one that holds only genzoo's numbered PNGs and refusing one that holds other files.")
_NUMBERED = re.compile(r"[0-9]{5,}\.png")  # the names of a png-dir's images (00000.png, ...)


def replacing(path: Path, fmt: str) -> str:
    """What writing ``path`` replaces, for the line a command prints ("" when nothing): an earlier file, or the
    earlier images of a png-dir (a png-dir is written whole beside the old one, then put in its place)."""
    if fmt != "png-dir":
        return f"replacing the earlier {path.name}" if path.is_file() else ""
    earlier = [p for p in path.iterdir() if _NUMBERED.fullmatch(p.name)] if path.is_dir() else []
    return f"replacing the {len(earlier)} earlier image{'' if len(earlier) == 1 else 's'} there" if earlier else ""


def save_images(
    images: torch.Tensor,
    out: str | os.PathLike,
    fmt: str = "grid",
    *,
    labels: torch.Tensor | None = None,
    as_float: bool = False,
    nrow: int | None = None,
) -> Path:
    """Write images as a grid PNG/JPEG, an .npz (key x, uint8 NCHW or float with ``as_float``; y) or a PNG folder.

    An existing file is replaced (:func:`replacing` says so for the command's output line). A PNG folder
    is written whole into a temporary folder beside ``out`` and then put in its place, so it never mixes
    with earlier images: a folder of genzoo's own numbered PNGs is replaced, one holding other files
    refused (:func:`output_target`). A refused write (permissions, a full disk) is one sentence naming
    ``out``, and leaves nothing behind: no partial file, no half set of PNGs, no folder this call created.
    """
    out, fmt = output_target(out, fmt, "samples")
    created = first_missing(out.parent)
    try:
        with writing(out):
            if fmt == "grid":
                return save_grid(images, out, nrow=nrow)
            if fmt == "npz":
                return _save_npz(images, out, labels=labels, as_float=as_float)
            return _save_png_dir(images, out)
    except BaseException:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise


def _save_png_dir(images: torch.Tensor, out: Path) -> Path:
    """One PNG per image into a new folder beside ``out``, then renamed into place (an earlier one is replaced)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    retired = None
    try:
        width = max(5, len(str(len(images))))
        for i, image in enumerate(images):
            save_png(image, staging / f"{i:0{width}d}.png")
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(staging, 0o777 & ~mask)
        if out.is_dir() and any(out.iterdir()):
            retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.earlier.", dir=out.parent))
            os.replace(out, retired)
        os.replace(staging, out)  # onto a missing or empty folder
    except BaseException:
        if retired is not None and not out.exists():
            os.replace(retired, out)
            retired = None
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if retired is not None:
            shutil.rmtree(retired, ignore_errors=True)
    return out


def _save_npz(images: torch.Tensor, out: Path, *, labels: torch.Tensor | None, as_float: bool) -> Path:
    arrays = {"x": images.detach().cpu().float().clamp(0, 1).numpy() if as_float else to_uint8(images).numpy()}
    if labels is not None:
        arrays["y"] = labels.cpu().numpy().astype(np.int64)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".npz", dir=out.parent)
    os.close(fd)
    try:
        np.savez_compressed(tmp, **arrays)
        _publish(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out
