"""Checking what a Method subclass declares when a plugin registers it: a name, a Config dataclass, known
capabilities with their hooks, and options that the hooks accept."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any

from .configs import Range
from .errors import GenzooError

VERBS = ("fit", "sample", "refine")


def check_declaration(cls: type, base: type) -> None:
    """Raise if ``cls``, a subclass of ``base`` (:class:`genzoo.Method`), declares too little to be registered: a hook
    it declares is still ``base``'s."""
    if not cls.name or not isinstance(cls.name, str):
        raise GenzooError(f"{cls.__qualname__} must set a non-empty class attribute 'name'")
    if not dataclasses.is_dataclass(cls.Config):
        raise GenzooError(f"method {cls.name!r} must set 'Config' to a dataclass")
    unknown = set(cls.capabilities) - set(VERBS)
    if unknown:
        raise GenzooError(f"method {cls.name!r} declares unknown capabilities {sorted(unknown)}; use {VERBS}")
    for verb, hook in (("sample", "sample_batch"), ("refine", "refine_batch")):
        if verb in cls.capabilities and getattr(cls, hook) is getattr(base, hook):
            raise GenzooError(f"method {cls.name!r} declares {verb!r} but does not implement {hook}()")
    if "fit" in cls.capabilities and not cls.owns_update() and cls.training_step is base.training_step:
        raise GenzooError(f"method {cls.name!r} declares 'fit' but implements neither training_step() nor update()")
    if "fit" in cls.capabilities and cls.configure_optimizers is base.configure_optimizers:
        raise GenzooError(f"method {cls.name!r} declares 'fit' but does not implement configure_optimizers()")
    for attr, hook in (("sample_options", "sample_batch"), ("refine_options", "refine_batch")):
        _check_options_declaration(cls, attr, hook)
    if cls.default_model is not None and not isinstance(cls.default_model, str):
        raise GenzooError(f"method {cls.name!r}: default_model must be a model name or None")


def _check_options_declaration(cls: type, attr: str, hook: str) -> None:
    """``sample_options``/``refine_options``: a dict of keyword -> type (or ``Annotated[type, Range]``), each a
    keyword of the hook."""
    declared = getattr(cls, attr)
    if not isinstance(declared, dict) or not all(isinstance(k, str) and _is_option_type(t) for k, t in declared.items()):
        raise GenzooError(f"method {cls.name!r}: {attr} must map option names to types, e.g. {{'temperature': float}} "
                          f"or {{'temperature': Annotated[float, Positive]}}")
    if not declared:
        return
    parameters = inspect.signature(getattr(cls, hook)).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    missing = sorted(set(declared) - set(parameters))
    if missing:
        raise GenzooError(f"method {cls.name!r} declares {attr} {missing} that {hook}() does not accept as keywords")


def _is_option_type(hint: Any) -> bool:
    """A plain type, or ``Annotated[type, Range, ...]`` (the ranges are checked on every call)."""
    if typing.get_origin(hint) is typing.Annotated:
        base, *rules = typing.get_args(hint)
        return isinstance(base, type) and all(isinstance(rule, Range) for rule in rules)
    return isinstance(hint, type)
