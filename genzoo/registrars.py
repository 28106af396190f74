"""What each ``register`` callback makes of its arguments: a checked row for the plugin host's table of that kind.

One function per hook, the same for the core's own registrations and a plugin's; each takes the
registering plugin's name and source (``"genzoo"`` or ``"plugin 'NAME'"``), then the callback's
arguments. The host adds the rows (:mod:`genzoo.plugins`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from .entries import METRIC_NEEDS, SPEC_PREFIXES, DatasetEntry, FeatureEntry, MethodEntry, MetricEntry
from .errors import GenzooError
from .method import Method
from .registry import ModelEntry


def method_entry(plugin: str, source: str, cls: type, aliases: tuple[str, ...] | list[str] = ()) -> MethodEntry:
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise GenzooError(f"register_methods expects a genzoo.Method subclass, got {cls!r}")
    cls.check_declaration()
    return MethodEntry(cls, plugin, tuple(aliases), source=source)


def model_entry(plugin: str, source: str, name: str, **fields: Any) -> ModelEntry:
    return ModelEntry.from_dict(name, fields, source=source)


def feature_entry(plugin: str, source: str, name: str, factory: Callable[[], Any],
                  datasets: tuple[str, ...] | list[str] = (), summary: str = "") -> FeatureEntry:
    if not callable(factory):
        raise GenzooError(f"feature network {name!r}: factory must be callable, got {factory!r}")
    return FeatureEntry(name, factory, plugin, tuple(datasets), summary, source=source)


def dataset_entry(plugin: str, source: str, name: str, load: Callable[[Path, str], Any], *,
                  shape: tuple[int, int, int], summary: str = "", num_classes: int = 0,
                  splits: dict[str, int | None] | None = None, files: str = "", default_split: str = "train",
                  license: str = "", default_metrics: str = "", class_names: tuple[str, ...] = ()) -> DatasetEntry:
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name or ""):
        raise GenzooError(f"dataset name {name!r} must be lower-case letters, digits, '.', '-' or '_' "
                          f"(it is written --dataset NAME[:SPLIT])")
    if name in SPEC_PREFIXES:
        raise GenzooError(f"dataset name {name!r} is a spec prefix of genzoo ({name}:PATH); choose another name")
    if not callable(load):
        raise GenzooError(f"dataset {name!r}: load must be callable, got {load!r}")
    splits = dict(splits or {default_split: None})
    if default_split not in splits:
        raise GenzooError(f"dataset {name!r}: default_split {default_split!r} is not one of its splits {list(splits)}")
    class_names = tuple(class_names)
    if class_names and (len(class_names) != num_classes or not all(isinstance(c, str) and c for c in class_names)
                        or len(set(class_names)) != len(class_names)):
        raise GenzooError(f"dataset {name!r}: class_names must be {num_classes} distinct non-empty strings, one per "
                          f"class in label order, got {list(class_names)!r}")
    return DatasetEntry(name, summary, tuple(shape), int(num_classes), splits, files, load, default_split, license,
                        source, default_metrics, class_names)


def metric_entry(plugin: str, source: str, name: str, compute: Callable[[Any], Any], *, summary: str = "",
                 needs: tuple[str, ...] = (), check: Callable[[Any, int], None] | None = None) -> MetricEntry:
    if not callable(compute):
        raise GenzooError(f"metric {name!r}: compute must be callable, got {compute!r}")
    if check is not None and not callable(check):
        raise GenzooError(f"metric {name!r}: check must be callable or None, got {check!r}")
    unknown = sorted(set(needs) - set(METRIC_NEEDS))
    if unknown:
        raise GenzooError(f"metric {name!r}: unknown needs {unknown}; choose from {', '.join(METRIC_NEEDS)}")
    return MetricEntry(name, compute, summary, frozenset(needs), check, source)


# hook -> (the host's table and PluginInfo field it fills, the row its register callback makes)
REGISTRARS: dict[str, tuple[str, Callable[..., Any]]] = {
    "register_methods": ("methods", method_entry),
    "register_models": ("models", model_entry),
    "register_feature_extractors": ("feature_extractors", feature_entry),
    "register_datasets": ("datasets", dataset_entry),
    "register_metrics": ("metrics", metric_entry),
}
