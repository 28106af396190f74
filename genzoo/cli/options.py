"""Click options built from the verbs' options dataclasses, and the parsing several verbs share."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, Callable, Union

import click
import torch

from ..configs import parse_assignments
from ..errors import GenzooError
from ..hardware import DEVICE_CHOICES, resolve_device


def options_from(options_cls: type, *, exclude: tuple[str, ...] = ()) -> Callable:
    """Decorate a click command with one option per field of ``options_cls`` (see ``genzoo.configs.option``).

    The option's default, type and help come from the field, so the CLI and the Python API cannot
    disagree; fields declared ``cli=False`` (and ``exclude``) are left out.
    """
    hints = typing.get_type_hints(options_cls)
    decorators = []
    for f in dataclasses.fields(options_cls):
        meta = f.metadata
        if not meta.get("cli", True) or f.name in exclude:
            continue
        flags = meta.get("flags") or (f"--{f.name.replace('_', '-')}",)
        base = _click_type(hints[f.name])
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        kwargs: dict[str, Any] = {"help": meta.get("help", ""), "show_default": not required and f.default not in (None, "")}
        if required:
            kwargs["required"] = True
        else:
            kwargs["default"] = f.default
        if base is bool and "/" not in flags[0]:
            kwargs["is_flag"] = True
            kwargs["show_default"] = False
        elif base is int and meta.get("min") is not None:
            kwargs["type"] = click.IntRange(min=meta["min"])
        elif base is not bool:
            kwargs["type"] = base
        if meta.get("metavar"):
            kwargs["metavar"] = meta["metavar"]
        decorators.append(click.option(*flags, f.name, **kwargs))

    def apply(command: Callable) -> Callable:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


def _click_type(hint: Any) -> Any:
    """The click type of a field: int, float, str or bool; a Literal's choices; K or K1,K2,... for int | tuple[int]."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (Union, types.UnionType):
        if any(typing.get_origin(a) is tuple for a in args):
            return INT_OR_INTS
        hint = next(a for a in args if a is not type(None))
    if typing.get_origin(hint) is typing.Literal:
        return click.Choice([str(a) for a in typing.get_args(hint)])
    return hint if hint in (int, float, str, bool) else str


class IntOrInts(click.ParamType):
    """An integer, or a comma list of integers (a tuple): ``--apply 2`` or ``--apply 1,2,3``."""

    name = "K[,K...]"

    def convert(self, value: Any, param: Any, ctx: Any) -> int | tuple[int, ...]:
        if isinstance(value, int) or (isinstance(value, tuple) and all(isinstance(v, int) for v in value)):
            return value
        try:
            numbers = tuple(int(part) for part in str(value).split(",") if part.strip())
        except ValueError:
            self.fail(f"{value!r} is not an integer or a comma list of integers", param, ctx)
        if not numbers:
            self.fail("give at least one integer", param, ctx)
        return numbers[0] if len(numbers) == 1 else numbers


INT_OR_INTS = IntOrInts()


def device_option(f):
    return click.option(
        "--device", default="auto", show_default=True, metavar="DEVICE",
        help=f"Where to run: {DEVICE_CHOICES} (auto: cuda, then mps, then cpu).",
    )(f)


def device_from(name: str) -> torch.device:
    return resolve_device(name)


def parse_labels(text: str | None) -> torch.Tensor | list[int | str] | None:
    """``--labels``: a comma list (``0,1,2``, or class names: ``cat,ship``) or a file of them (text, or .npy of
    integers). Names stay strings: the model maps them to its classes."""
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

            try:
                array = np.load(path, allow_pickle=False)
            except ValueError:
                raise GenzooError(f"--labels {path} is not a plain .npy array of integers; give one, or a comma list") from None
            return torch.from_numpy(array.astype("int64")).flatten()
        text = path.read_text().replace("\n", ",").replace(" ", ",")
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if all(_is_integer(part) for part in parts):
        return torch.tensor([int(part) for part in parts], dtype=torch.long)
    return [int(part) if _is_integer(part) else part for part in parts]


def _is_integer(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def parse_refine_options(pairs: tuple[str, ...], steps: int | None, refiner_ref: str | None,
                         refiner: Any) -> dict[str, Any]:
    """``--refine-opt key=value`` typed and range-checked by what ``refiner`` declares, and checked by the refiner
    (with ``--refine-steps``) before any image is made."""
    if (pairs or steps is not None) and not refiner_ref:
        raise click.UsageError("--refine-opt and --refine-steps need --refine MODEL")
    if refiner is None:
        return {}
    from ..generate import checked

    return checked(refiner, "refine", parse_assignments(pairs, "--refine-opt"), "refine_opts", steps)


def parse_options(pairs: tuple[str, ...], model: Any, verb: str, argument: str = "opts",
                  flag: str = "--opt") -> dict[str, Any]:
    """``--opt key=value`` typed, range-checked and checked by the method for ``verb`` (sample or refine), once.

    A key it does not declare, or a bad value, is refused naming the flag the user typed (``argument`` is the
    flag's parameter name, which the command group turns into the flag).
    """
    from ..generate import checked

    return checked(model, verb, parse_assignments(pairs, flag), argument)


def output_options(f):
    f = click.option("--float", "as_float", is_flag=True, help="With --format npz: store floats in [0, 1], not uint8.")(f)
    f = click.option("--nrow", type=click.IntRange(min=1), default=None, help="Images per grid row (default: square).")(f)
    f = click.option(
        "--format", "fmt", default=None, type=click.Choice(["grid", "npz", "png-dir"]),
        help="grid: one PNG or JPEG; npz: arrays x (uint8 NCHW) and y; png-dir: one PNG per image "
             "(default: from -o's suffix, a grid for .png/.jpg, npz for .npz).",
    )(f)
    return f
