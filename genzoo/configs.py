"""Config dataclasses: typed overrides from ``--set key=value`` and from config.json."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, Union

from .errors import GenzooError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _field_types(config_cls: type) -> dict[str, Any]:
    return typing.get_type_hints(config_cls)


def coerce_value(value: Any, hint: Any, where: str) -> Any:
    """Convert ``value`` (a CLI string or a JSON value) to the type ``hint``, or raise clearly."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.lower() in {"none", "null"}):
            if type(None) in args:
                return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce_value(value, arg, where)
            except GenzooError as exc:
                errors.append(str(exc))
        raise GenzooError(errors[0] if errors else f"{where}: cannot use {value!r}")
    if origin is Literal:
        for choice in args:
            if value == choice or (isinstance(value, str) and str(choice) == value):
                return choice
        raise GenzooError(f"{where} must be one of {list(args)}, got {value!r}")
    if origin in (tuple, list):
        items = value
        if isinstance(value, str):
            items = [part.strip() for part in value.split(",") if part.strip()] if value.strip() else []
        if not isinstance(items, (list, tuple)):
            raise GenzooError(f"{where} must be a list (comma-separated on the command line), got {value!r}")
        item_hint = args[0] if args else Any
        coerced = [coerce_value(item, item_hint, where) for item in items]
        return tuple(coerced) if origin is tuple else coerced
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
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        try:
            return float(str(value))
        except ValueError:
            raise GenzooError(f"{where} must be a number, got {value!r}") from None
    if hint is str:
        if isinstance(value, str):
            return value
        raise GenzooError(f"{where} must be a string, got {value!r}")
    return value


def parse_assignments(pairs: typing.Iterable[str], flag: str = "--set") -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``, refusing anything without ``=``."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise GenzooError(f"{flag} expects key=value, got {pair!r}")
        out[key.strip()] = value
    return out


def build_config(config_cls: type, values: dict[str, Any], *, where: str = "config") -> Any:
    """An instance of ``config_cls`` from ``values``; missing fields take their defaults.

    Unknown keys and values of the wrong type are refused with the field name and what it takes.
    """
    if not dataclasses.is_dataclass(config_cls):
        raise GenzooError(f"{config_cls!r} is not a dataclass")
    hints = _field_types(config_cls)
    names = [f.name for f in dataclasses.fields(config_cls) if f.init]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise GenzooError(f"{where}: unknown field(s) {unknown}; known fields: {', '.join(names)}")
    kwargs = {key: coerce_value(value, hints[key], f"{where} field {key!r}") for key, value in values.items()}
    try:
        return config_cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise GenzooError(f"{where}: {exc}") from None


def config_to_dict(config: Any) -> dict[str, Any]:
    """JSON-ready dict of a config dataclass (tuples become lists)."""
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def replace_config(config: Any, overrides: dict[str, Any], *, where: str = "config") -> Any:
    values = config_to_dict(config)
    values.update(overrides)
    return build_config(type(config), values, where=where)
