"""The plugin host: finds plugins, calls their hooks, isolates their failures, and owns every lookup.

Every method, the built-in ones included, arrives through the ``genzoo`` entry-point group. The
core's own datasets and metrics arrive through the same hooks, from the core's built-in plugins
(``BUILTIN_PLUGINS``, always loaded, first), so a plugin adds a dataset or a metric exactly as the
core does. A plugin that fails to import or to register is recorded with its error (``genzoo
plugins`` shows it) and everything else keeps working. Registrations of a plugin whose hook raises
are dropped as a whole.

What plugins register lives here, merged with registry.yaml, and is looked up here only: methods
and models by name or alias (a method name also finds its default model), datasets, metrics and
feature networks by name.
"""

from __future__ import annotations

import importlib
import importlib.metadata as importlib_metadata
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pluggy

from . import hookspecs
from .datatable import DatasetEntry, registered_entry
from .errors import GenzooError
from .method import Method
from .metrics.table import MetricEntry, registered_metric
from .registry import ModelEntry, closest_name, load_registry_file

ENTRY_POINT_GROUP = "genzoo"
# The core's own plugins (module names), loaded before any entry point and whatever GENZOO_LOAD_PLUGINS says.
BUILTIN_PLUGINS = ("genzoo.datasets.builtin", "genzoo.metrics.builtin")
ALLOW_ENV = "GENZOO_LOAD_PLUGINS"
HOOK_NAMES = ("register_methods", "register_models", "register_commands", "register_feature_extractors",
              "register_datasets", "register_metrics")
_KINDS = {"register_methods": "methods", "register_models": "models", "register_feature_extractors":
          "feature_extractors", "register_datasets": "datasets", "register_metrics": "metrics"}


@dataclass
class PluginInfo:
    """What genzoo knows about one plugin, for ``genzoo plugins``."""

    name: str
    module: str
    distribution: str | None = None
    version: str | None = None
    hooks: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    feature_extractors: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    builtin: bool = False  # one of the core's own plugins (BUILTIN_PLUGINS)

    @property
    def error(self) -> str | None:
        return "; ".join(self.errors) or None

    @property
    def source(self) -> str:
        """How what it registered is attributed: "genzoo" for the core's plugins, else "plugin 'NAME'"."""
        return "genzoo" if self.builtin else f"plugin {self.name!r}"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "module": self.module, "distribution": self.distribution, "version": self.version,
                "hooks": self.hooks, "methods": self.methods, "models": self.models,
                "feature_extractors": self.feature_extractors, "datasets": self.datasets, "metrics": self.metrics,
                "commands": self.commands, "error": self.error}


@dataclass
class MethodRecord:
    cls: type
    plugin: str
    aliases: tuple[str, ...] = ()


@dataclass
class FeatureExtractorRecord:
    name: str
    factory: Callable[[], Any]
    plugin: str
    datasets: tuple[str, ...] = ()
    summary: str = ""


def allowed_plugins() -> set[str] | None:
    """The allow-list from GENZOO_LOAD_PLUGINS: None means all; an empty string means none."""
    value = os.environ.get(ALLOW_ENV)
    if value is None:
        return None
    return {part.strip() for part in value.split(",") if part.strip()}


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class PluginHost:
    """Loads plugins and holds what they registered, merged with the core's own tables."""

    def __init__(self, *, load_entry_points: bool = True):
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: dict[str, PluginInfo] = {}
        self.builtins: dict[str, PluginInfo] = {}
        self.methods: dict[str, MethodRecord] = {}
        self.method_aliases: dict[str, str] = {}
        self.models: dict[str, ModelEntry] = {entry.name: entry for entry in load_registry_file()}
        self.datasets: dict[str, DatasetEntry] = {}
        self.metrics: dict[str, MetricEntry] = {}
        self.feature_extractors: dict[str, FeatureExtractorRecord] = {}
        for module_name in BUILTIN_PLUGINS:
            self.add(importlib.import_module(module_name), name=module_name, builtin=True)
        if load_entry_points:
            self._load_entry_points()

    # -- discovery -------------------------------------------------------------------------

    def _load_entry_points(self) -> None:
        allow = allowed_plugins()
        eps = sorted(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)
        seen: set[str] = set()
        for ep in eps:
            if ep.name in seen or (allow is not None and ep.name not in allow):
                continue
            seen.add(ep.name)
            dist = getattr(ep, "dist", None)
            info = PluginInfo(name=ep.name, module=ep.value, distribution=dist.metadata["Name"] if dist is not None else None,
                              version=dist.version if dist is not None else None)
            try:
                module = ep.load()
            except Exception as exc:  # a broken plugin must not take genzoo down
                info.errors.append(f"failed to import {ep.value}: {_one_line(exc)}")
                self.plugins[ep.name] = info
                continue
            self.add(module, name=ep.name, info=info)

    def add(self, plugin: Any, name: str | None = None, info: PluginInfo | None = None, *,
            builtin: bool = False) -> PluginInfo:
        """Register a plugin object or module (as ``pm.register`` would) and run its hooks now.

        ``builtin`` marks one of the core's own plugins: ``genzoo plugins`` does not list it and what
        it registers is attributed to genzoo.
        """
        name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        if name in self.plugins or name in self.builtins:
            raise GenzooError(f"a plugin named {name!r} is already loaded; give the new one another name")
        info = info or PluginInfo(name=name, module=getattr(plugin, "__name__", type(plugin).__name__), builtin=builtin)
        (self.builtins if builtin else self.plugins)[name] = info
        try:
            self.pm.register(plugin, name=name)
        except Exception as exc:
            info.errors.append(f"failed to register: {_one_line(exc)}")
            return info
        info.hooks = sorted(impl.name for impl in self.pm.get_hookcallers(plugin) or [] if impl.name in HOOK_NAMES)
        registrars = {"register_methods": self._method_registrar, "register_models": self._model_registrar,
                      "register_feature_extractors": self._feature_registrar,
                      "register_datasets": self._dataset_registrar, "register_metrics": self._metric_registrar}
        for hook_name, make_registrar in registrars.items():
            self._run_hook(plugin, info, hook_name, make_registrar)
        return info

    def _run_hook(self, plugin: Any, info: PluginInfo, hook_name: str, make_registrar) -> None:
        impl = self._impl(plugin, hook_name)
        if impl is None:
            return
        staged: list[tuple[str, Callable[[], None]]] = []
        try:
            impl(make_registrar(info, staged))
            names = [n for n, _ in staged]
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise GenzooError(f"{hook_name} registered {duplicates} twice")
            for registered, commit in staged:
                commit()
                getattr(info, _KINDS[hook_name]).append(registered)
        except Exception as exc:
            info.errors.append(f"{hook_name} failed: {_one_line(exc)}")

    def _impl(self, plugin: Any, hook_name: str):
        caller = getattr(self.pm.hook, hook_name)
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin:
                return impl.function
        return None

    # -- registrars handed to hooks -----------------------------------------------------------

    def _method_registrar(self, info: PluginInfo, staged: list):
        def register(cls: type, aliases: tuple[str, ...] | list[str] = ()) -> None:
            if not (isinstance(cls, type) and issubclass(cls, Method)):
                raise GenzooError(f"register_methods expects a genzoo.Method subclass, got {cls!r}")
            cls.check_declaration()
            for n in (cls.name, *aliases):
                owner = self._method_owner(n)
                if owner is not None:
                    raise GenzooError(f"method name {n!r} from plugin {info.name!r} is already registered by plugin {owner!r}")

            def commit() -> None:
                cls.plugin_name = info.distribution or info.name
                self.methods[cls.name] = MethodRecord(cls, info.name, tuple(aliases))
                for alias in aliases:
                    self.method_aliases[alias] = cls.name

            staged.append((cls.name, commit))

        return register

    def _method_owner(self, name: str) -> str | None:
        canonical = self.method_aliases.get(name, name)
        return self.methods[canonical].plugin if canonical in self.methods else None

    def _model_registrar(self, info: PluginInfo, staged: list):
        def register(name: str, **fields: Any) -> None:
            entry = ModelEntry.from_dict(name, fields, source=f"plugin {info.name!r}")
            for n in (entry.name, *entry.aliases):
                other = self._model_named(n)
                if other is not None:
                    raise GenzooError(f"model name {n!r} from {entry.source} is already registered by {other.source}")

            def commit() -> None:
                self.models[entry.name] = entry

            staged.append((entry.name, commit))

        return register

    def _feature_registrar(self, info: PluginInfo, staged: list):
        def register(name: str, factory: Callable[[], Any], datasets=(), summary: str = "") -> None:
            if name in self.feature_extractors:
                other = self.feature_extractors[name].plugin
                raise GenzooError(f"feature extractor {name!r} from plugin {info.name!r} is already registered by plugin {other!r}")
            if not callable(factory):
                raise GenzooError(f"feature extractor {name!r}: factory must be callable, got {factory!r}")
            record = FeatureExtractorRecord(name, factory, info.name, tuple(datasets), summary)
            staged.append((name, lambda: self.feature_extractors.__setitem__(name, record)))

        return register

    def _dataset_registrar(self, info: PluginInfo, staged: list):
        def register(name: str, load: Callable[[Path, str], Any], **fields: Any) -> None:
            entry = registered_entry(name, load, **fields, source=info.source)
            if name in self.datasets:
                raise GenzooError(f"dataset {name!r} from {info.source} is already registered by "
                                  f"{self.datasets[name].source}")
            staged.append((name, lambda: self.datasets.__setitem__(name, entry)))

        return register

    def _metric_registrar(self, info: PluginInfo, staged: list):
        def register(name: str, compute: Callable[[Any], Any], **fields: Any) -> None:
            entry = registered_metric(name, compute, **fields, source=info.source)
            if name in self.metrics:
                raise GenzooError(f"metric {name!r} from {info.source} is already registered by "
                                  f"{self.metrics[name].source}")
            staged.append((name, lambda: self.metrics.__setitem__(name, entry)))

        return register

    def add_commands(self, cli) -> None:
        """Let every plugin add click commands; a failing plugin is recorded, not fatal."""
        for name, info in self.plugins.items():
            plugin = self.pm.get_plugin(name)
            impl = self._impl(plugin, "register_commands") if plugin is not None else None
            if impl is None:
                continue
            before = dict(cli.commands)
            try:
                impl(cli)
                replaced = sorted(n for n, command in before.items() if cli.commands.get(n) is not command)
                if replaced:
                    raise GenzooError(f"it tried to replace the command(s) {replaced}; give its commands other names")
            except Exception as exc:
                info.errors.append(f"register_commands failed: {_one_line(exc)}")
                cli.commands.clear()
                cli.commands.update(before)
                continue
            info.commands = sorted(set(cli.commands) - set(before))

    # -- lookups ------------------------------------------------------------------------------

    def all_models(self) -> dict[str, ModelEntry]:
        return self.models

    def has_method(self, name: str) -> bool:
        return self.method_aliases.get(name, name) in self.methods

    def method_record(self, name: str) -> MethodRecord:
        """The registration of the method called ``name`` or one of its aliases."""
        canonical = self.method_aliases.get(name, name)
        if canonical in self.methods:
            return self.methods[canonical]
        known = ", ".join(sorted(self.methods)) or "none"
        raise GenzooError(
            f"no plugin provides method {name!r} (installed methods: {known}); "
            f"install the plugin that provides it, or run `genzoo plugins` to see load errors"
        )

    def method(self, name: str) -> type:
        """The Method class registered under ``name`` or one of its aliases."""
        return self.method_record(name).cls

    def _model_named(self, name: str) -> ModelEntry | None:
        if name in self.models:
            return self.models[name]
        return next((entry for entry in self.models.values() if name in entry.aliases), None)

    def model(self, name: str) -> ModelEntry:
        """A model by name, by alias, or by method name (the method's default model)."""
        entry = self._model_named(name)
        if entry is not None:
            return entry
        if self.has_method(name):
            cls = self.method(name)
            if cls.default_model and cls.default_model in self.models:
                return self.models[cls.default_model]
            raise GenzooError(
                f"method {cls.name!r} has no pretrained default model; train one with "
                f"`genzoo fit {cls.name} ...` and pass its output directory instead"
            )
        known = ", ".join(sorted(self.models)) or "none"
        guess = closest_name(name, [*self.models, *(a for e in self.models.values() for a in e.aliases), *self.methods])
        raise GenzooError(
            f"unknown model {name!r}" + (f"; did you mean {guess}?" if guess else "") + f" (known models: {known}); "
            f"pass a model name, a model directory or hf://ORG/NAME"
            + ("" if self.methods else "; no method plugin is loaded: run `genzoo plugins` to see why")
        )

    def dataset(self, name: str) -> DatasetEntry:
        entry = self.datasets.get(name.lower())
        if entry is None:
            raise GenzooError(
                f"unknown dataset {name!r}; use one of {', '.join(sorted(self.datasets))} (with :SPLIT), "
                f"folder:PATH or npz:PATH[:SPLIT] (`genzoo datasets` lists them)"
            )
        return entry

    def metric(self, name: str) -> MetricEntry:
        entry = self.metrics.get(name)
        if entry is None:
            raise GenzooError(f"unknown metric {name!r}; choose from {', '.join(sorted(self.metrics))}")
        return entry

    def feature_extractor(self, name: str | None = None, *, dataset: str | None = None) -> FeatureExtractorRecord:
        """The feature network called ``name``, or the first one registered for ``dataset``."""
        records = self.feature_extractors
        if name is None:
            matches = [r for r in records.values() if dataset in r.datasets]
            if matches:
                return matches[0]
            known = ", ".join(f"{r.name} ({', '.join(r.datasets)})" for r in records.values()) or "none"
            raise GenzooError(f"no feature network is registered for dataset {dataset!r} (available: {known}); "
                              f"pass --features NAME")
        if name in records:
            return records[name]
        known = ", ".join(sorted(records)) or "none"
        raise GenzooError(f"unknown feature network {name!r}; available: {known}, inception (online only)")


_HOST: PluginHost | None = None


def get_host() -> PluginHost:
    """The process-wide plugin host, loaded on first use."""
    global _HOST
    if _HOST is None:
        _HOST = PluginHost()
    return _HOST


def reset_host() -> None:
    """Forget loaded plugins (tests, or after changing GENZOO_LOAD_PLUGINS)."""
    global _HOST
    _HOST = None


def find_model(name: str) -> ModelEntry:
    """Look a model up by name, by alias, or by method name (the method's default model)."""
    return get_host().model(name)
