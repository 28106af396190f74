"""Options and parsing shared by several verbs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import torch

from ..configs import coerce_value, parse_assignments
from ..errors import GenzooError


def device_option(f):
    return click.option(
        "--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"]),
        help="Where to run: auto picks cuda when available.",
    )(f)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise GenzooError("--device cuda was asked for, but torch sees no CUDA device; use --device cpu")
    return torch.device(name)


def parse_labels(text: str | None) -> torch.Tensor | None:
    """``--labels``: a comma list (``0,1,2``) or a file of integers (text, or .npy)."""
    if text is None:
        return None
    path = Path(text)
    try:
        is_file = path.is_file()
    except OSError:  # e.g. a comma list longer than a file name may be
        is_file = False
    if is_file:
        if path.suffix == ".npy":
            import numpy as np

            return torch.from_numpy(np.load(path, allow_pickle=False).astype("int64")).flatten()
        text = path.read_text().replace("\n", ",").replace(" ", ",")
    try:
        return torch.tensor([int(part) for part in text.split(",") if part.strip()], dtype=torch.long)
    except ValueError:
        raise GenzooError(f"--labels expects integers separated by commas or a file of them, got {text[:50]!r}") from None


def parse_refine_options(pairs: tuple[str, ...], steps: int | None, refiner_ref: str | None,
                         refiner: Any = None) -> dict[str, Any]:
    """``--refine-opt key=value`` typed by what the refiner declares (loaded from ``refiner_ref`` if not given)."""
    if (pairs or steps is not None) and not refiner_ref:
        raise click.UsageError("--refine-opt and --refine-steps need --refine MODEL")
    if not pairs:
        return {}
    if refiner is None:
        from ..weights import load

        refiner = load(refiner_ref)
    return parse_options(pairs, refiner.refine_options, f"{refiner.name} refine")


def parse_options(pairs: tuple[str, ...], declared: dict[str, type], where: str) -> dict[str, Any]:
    """``--opt key=value`` typed by what the method declares."""
    raw = parse_assignments(pairs, "--opt")
    unknown = sorted(set(raw) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise GenzooError(f"{where} has no option(s) {unknown}; its options: {known}")
    return {key: coerce_value(value, declared[key], f"--opt {key}") for key, value in raw.items()}


def output_options(f):
    f = click.option("--float", "as_float", is_flag=True, help="With --format npz: store floats in [0, 1], not uint8.")(f)
    f = click.option("--nrow", type=int, default=None, help="Images per grid row (default: square).")(f)
    f = click.option(
        "--format", "fmt", default="grid", show_default=True, type=click.Choice(["grid", "npz", "png-dir"]),
        help="grid: one PNG; npz: arrays x (uint8 NCHW) and y; png-dir: one PNG per image.",
    )(f)
    return f
