"""Config dataclasses: typed, range-checked overrides from ``--set key=value`` and from config.json.

A field's type is its annotation; a range is added with ``typing.Annotated``::

    from typing import Annotated
    from genzoo.configs import Positive, Probability

    @dataclass
    class MyConfig:
        width: Annotated[int, Positive] = 64
        dropout: Annotated[float, Probability] = 0.1

Fields the core reads (``channels``, ``image_size``, ``num_classes``, ``ema_decay``, ``grad_clip``)
are range-checked even without an annotation, and every float must be finite. A Config that trains with
Adam inherits :class:`OptimiserConfig` (the betas, ``ema_decay`` and ``grad_clip``). Values from a file
(config.json) are read ``strict``: JSON has types, so a string where a number belongs is refused,
not converted.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from .errors import GenzooError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Range:
    """An allowed interval for a number: ``low``/``high`` (None: unbounded), each end closed unless ``*_open``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        if self.high is not None and (value > self.high or (self.high_open and value == self.high)):
            return False
        return True

    def describe(self) -> str:
        if self.low == 0 and self.low_open and self.high is None:
            return "positive"
        if self.low == 0 and not self.low_open and self.high is None:
            return "zero or more"
        if self.low is not None and self.high is None:
            return f"{'above' if self.low_open else 'at least'} {self.low:g}"
        left = "(" if self.low_open else "["
        right = ")" if self.high_open else "]"
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        return f"in {left}{low}, {high}{right}"


Positive = Range(0, None, low_open=True)
NonNegative = Range(0, None)
Probability = Range(0, 1)
UnitOpen = Range(0, 1, high_open=True)  # e.g. a decay or momentum: 0 <= b < 1

# Fields with meaning to the core, checked whatever their annotation says.
CORE_RANGES = {"channels": Range(1), "image_size": Range(1), "num_classes": NonNegative, "ema_decay": UnitOpen,
               "grad_clip": NonNegative}


@dataclass
class OptimiserConfig:
    """Adam's betas and the shared loop's moving average and gradient clipping, as Config fields.

    A method's Config inherits them, so config.json holds them beside its own fields, and declares one
    again for another default; the learning rate stays with each method (its name and default differ).
    """

    beta1: Annotated[float, UnitOpen] = 0.9
    beta2: Annotated[float, UnitOpen] = 0.999
    ema_decay: Annotated[float, UnitOpen] = 0.999
    grad_clip: Annotated[float, Positive] | None = None  # max gradient norm per optimiser step; None: no clipping


def _field_types(config_cls: type) -> dict[str, Any]:
    return typing.get_type_hints(config_cls, include_extras=True)


def coerce_value(value: Any, hint: Any, where: str, *, strict: bool = False) -> Any:
    """Convert ``value`` (a CLI string or a JSON value) to the type ``hint``, or raise clearly.

    ``Annotated[T, Range(...)]`` hints are converted to T, then checked against each range. With
    ``strict`` (a value from a file), a value must already have its type: nothing is parsed from a
    string, and an int stands for a float, nothing else for anything.
    """
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin is typing.Annotated:
        coerced = coerce_value(value, args[0], where, strict=strict)
        for rule in args[1:]:
            if isinstance(rule, Range):
                _check_range(coerced, rule, where)
        return coerced
    if origin in (Union, types.UnionType):
        if value is None or (not strict and isinstance(value, str) and value.lower() in {"none", "null"}):
            if type(None) in args:
                return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce_value(value, arg, where, strict=strict)
            except GenzooError as exc:
                errors.append(str(exc))
        raise GenzooError(errors[0] if errors else f"{where}: cannot use {value!r}")
    if origin is Literal:
        for choice in args:
            if (value == choice and (not strict or type(value) is type(choice))) or \
                    (not strict and isinstance(value, str) and str(choice) == value):
                return choice
        raise GenzooError(f"{where} must be one of {list(args)}, got {quoted(value) if strict else repr(value)}")
    if origin in (tuple, list):
        items = value
        if isinstance(value, str) and not strict:
            items = [part.strip() for part in value.split(",") if part.strip()] if value.strip() else []
        if not isinstance(items, (list, tuple)):
            raise GenzooError(f"{where} must be a list, got {quoted(value)}" if strict else
                              f"{where} must be a list (comma-separated on the command line), got {value!r}")
        item_hint = args[0] if args else Any
        coerced = [coerce_value(item, item_hint, where, strict=strict) for item in items]
        return tuple(coerced) if origin is tuple else coerced
    if strict:
        _check_json_type(value, hint, where)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise GenzooError(f"{where} must be a mapping, got {value!r}")
        return dict(value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise GenzooError(f"{where} must be true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool):
            raise GenzooError(f"{where} must be an integer, got {value!r}")
        if isinstance(value, int):
            return value
        try:
            return int(str(value))
        except ValueError:
            raise GenzooError(f"{where} must be an integer, got {value!r}") from None
    if hint is float:
        if isinstance(value, bool):
            raise GenzooError(f"{where} must be a number, got {value!r}")
        try:
            number = float(value) if isinstance(value, (int, float)) else float(str(value))
        except ValueError:
            raise GenzooError(f"{where} must be a number, got {value!r}") from None
        if not math.isfinite(number):
            raise GenzooError(f"{where} must be a finite number, got {value!r}")
        return number
    if hint is str:
        if isinstance(value, str):
            return value
        raise GenzooError(f"{where} must be a string, got {value!r}")
    return value


_JSON_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _check_json_type(value: Any, hint: Any, where: str) -> None:
    """A file's value must have the type itself: ``"64"`` is no integer, ``64.0`` no integer, ``true`` no number."""
    if hint not in _JSON_KINDS:
        return
    fits = isinstance(value, hint) and not (hint is not bool and isinstance(value, bool))
    if hint is float:
        fits = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not fits:
        raise GenzooError(f"{where} must be {_JSON_KINDS[hint]}, got {quoted(value)}")


def quoted(value: Any, limit: int = 60, *, kind: bool = True) -> str:
    """Untrusted ``value`` (from a file) as one line of text, never a command: its repr cut to ``limit`` characters,
    with its JSON kind when that may be what is wrong."""
    text = repr(value)
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    kinds = {str: "a string", list: "a list", dict: "a mapping", bool: "a boolean", float: "a number", type(None): "null"}
    named = kinds.get(type(value)) if kind else None
    return f"{text} ({named})" if named else text


def parse_assignments(pairs: typing.Iterable[str], flag: str = "--set") -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``, refusing anything without ``=``."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise GenzooError(f"{flag} expects key=value, got {pair!r}")
        out[key.strip()] = value
    return out


def build_config(config_cls: type, values: dict[str, Any], *, where: str = "config", strict: bool = False) -> Any:
    """An instance of ``config_cls`` from ``values``; missing fields take their defaults.

    Unknown keys and values of the wrong type are refused with the field name and what it takes;
    ``strict`` for values read from a file (see :func:`coerce_value`).
    """
    if not dataclasses.is_dataclass(config_cls):
        raise GenzooError(f"{config_cls!r} is not a dataclass")
    hints = _field_types(config_cls)
    names = [f.name for f in dataclasses.fields(config_cls) if f.init]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise GenzooError(f"{where}: unknown field(s) {unknown}; known fields: {', '.join(names)}")
    kwargs = {key: coerce_value(value, hints[key], f"{where} field {key!r}", strict=strict)
              for key, value in values.items()}
    for key, rule in CORE_RANGES.items():
        if key in names and _is_number(kwargs.get(key)):
            _check_range(kwargs[key], rule, f"{where} field {key!r}")
    try:
        config = config_cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise GenzooError(f"{where}: {exc}") from None
    for key in set(names) - set(kwargs):  # the defaults too: a plugin's default can be out of its own range
        coerce_value(getattr(config, key), hints[key], f"{where} field {key!r} (its default)")
    return config


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_range(value: Any, rule: Range, where: str) -> None:
    if _is_number(value) and not rule.contains(value):
        raise GenzooError(f"{where} must be {rule.describe()}, got {value!r}")


def option(default: Any = dataclasses.MISSING, *, help: str = "", flags: tuple[str, ...] = (),
           cli: bool = True, metavar: str | None = None, min: int | None = None,
           default_factory: Any = dataclasses.MISSING) -> Any:
    """A field of a verb's options dataclass, with what its command-line option needs.

    One dataclass per verb (``FitOptions``, ``EvalOptions``, ``SampleOptions``, ``RefineOptions``)
    holds every default once; the CLI builds its click options from these fields
    (``genzoo.cli.options``), so the two never drift apart. ``flags`` defaults to ``--field-name``;
    ``cli=False`` keeps a field out of the command line; ``min`` is the smallest integer the command
    line accepts.
    """
    metadata = {"help": help, "flags": tuple(flags), "cli": cli, "metavar": metavar, "min": min}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def check_keywords(function: str, given: typing.Iterable[str], options_cls: type) -> None:
    """Refuse keyword arguments of the Python function ``function`` that are no field of its options dataclass,
    naming them and every field it takes."""
    known = [f.name for f in dataclasses.fields(options_cls)]
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise GenzooError(f"{function}() got unknown argument(s) {unknown}; it takes: {', '.join(known)}")


def config_to_dict(config: Any) -> dict[str, Any]:
    """JSON-ready dict of a config dataclass (tuples become lists)."""
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def replace_config(config: Any, overrides: dict[str, Any], *, where: str = "config") -> Any:
    values = config_to_dict(config)
    values.update(overrides)
    return build_config(type(config), values, where=where)
