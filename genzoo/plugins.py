"""The plugin host: finds plugins through entry points, calls their hooks, isolates their failures.

Every method, the built-in ones included, arrives through the ``genzoo`` entry-point group. A plugin
that fails to import or to register is recorded with its error (``genzoo plugins`` shows it) and
everything else keeps working. Registrations of a plugin whose hook raises are dropped as a whole.
"""

from __future__ import annotations

import importlib.metadata as importlib_metadata
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import pluggy

from . import hookspecs
from .errors import GenzooError

ENTRY_POINT_GROUP = "genzoo"
ALLOW_ENV = "GENZOO_LOAD_PLUGINS"
HOOK_NAMES = ("register_methods", "register_models", "register_commands", "register_feature_extractors")


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
    commands: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        return "; ".join(self.errors) or None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "module": self.module,
            "distribution": self.distribution,
            "version": self.version,
            "hooks": self.hooks,
            "methods": self.methods,
            "models": self.models,
            "feature_extractors": self.feature_extractors,
            "commands": self.commands,
            "error": self.error,
        }


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
    """Loads plugins and holds what they registered: methods, models, feature extractors."""

    def __init__(self, *, load_entry_points: bool = True):
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: dict[str, PluginInfo] = {}
        self.methods: dict[str, MethodRecord] = {}
        self.method_aliases: dict[str, str] = {}
        self.models: dict[str, Any] = {}  # name -> registry.ModelEntry
        self.feature_extractors: dict[str, FeatureExtractorRecord] = {}
        self._registry_loaded = False
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
            info = PluginInfo(
                name=ep.name,
                module=ep.value,
                distribution=dist.metadata["Name"] if dist is not None else None,
                version=dist.version if dist is not None else None,
            )
            try:
                module = ep.load()
            except Exception as exc:  # a broken plugin must not take genzoo down
                info.errors.append(f"failed to import {ep.value}: {_one_line(exc)}")
                self.plugins[ep.name] = info
                continue
            self.add(module, name=ep.name, info=info)

    def add(self, plugin: Any, name: str | None = None, info: PluginInfo | None = None) -> PluginInfo:
        """Register a plugin object or module (as ``pm.register`` would) and run its hooks now."""
        name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        if name in self.plugins:
            raise GenzooError(f"a plugin named {name!r} is already loaded; give the new one another name")
        info = info or PluginInfo(name=name, module=getattr(plugin, "__name__", type(plugin).__name__))
        self.plugins[name] = info
        try:
            self.pm.register(plugin, name=name)
        except Exception as exc:
            info.errors.append(f"failed to register: {_one_line(exc)}")
            return info
        info.hooks = sorted(
            impl.name for impl in self.pm.get_hookcallers(plugin) or [] if impl.name in HOOK_NAMES
        )
        self._run_hook(plugin, info, "register_methods", self._method_registrar)
        self._run_hook(plugin, info, "register_models", self._model_registrar)
        self._run_hook(plugin, info, "register_feature_extractors", self._feature_registrar)
        return info

    def _run_hook(self, plugin: Any, info: PluginInfo, hook_name: str, make_registrar) -> None:
        impl = self._impl(plugin, hook_name)
        if impl is None:
            return
        staged: list[Callable[[], None]] = []
        try:
            impl(make_registrar(info, staged))
            for commit in staged:
                commit()
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
        from .method import Method

        def register(cls: type, aliases: tuple[str, ...] | list[str] = ()) -> None:
            if not (isinstance(cls, type) and issubclass(cls, Method)):
                raise GenzooError(f"register_methods expects a genzoo.Method subclass, got {cls!r}")
            cls.check_declaration()
            names = (cls.name, *aliases)
            for n in names:
                owner = self._method_owner(n)
                if owner is not None:
                    raise GenzooError(
                        f"method name {n!r} from plugin {info.name!r} is already registered by plugin {owner!r}"
                    )

            def commit() -> None:
                cls.plugin_name = info.distribution or info.name
                self.methods[cls.name] = MethodRecord(cls, info.name, tuple(aliases))
                for alias in aliases:
                    self.method_aliases[alias] = cls.name
                info.methods.append(cls.name)

            staged.append(commit)

        return register

    def _method_owner(self, name: str) -> str | None:
        if name in self.methods:
            return self.methods[name].plugin
        if name in self.method_aliases:
            return self.methods[self.method_aliases[name]].plugin
        return None

    def _model_registrar(self, info: PluginInfo, staged: list):
        from .registry import ModelEntry

        def register(name: str, **fields: Any) -> None:
            entry = ModelEntry.from_dict(name, fields, source=f"plugin {info.name!r}", package=None)
            self._check_model_name(entry)

            def commit() -> None:
                self.models[entry.name] = entry
                info.models.append(entry.name)

            staged.append(commit)

        return register

    def _check_model_name(self, entry) -> None:
        self._ensure_registry()
        for n in (entry.name, *entry.aliases):
            for other in self.models.values():
                if n == other.name or n in other.aliases:
                    raise GenzooError(f"model name {n!r} from {entry.source} is already registered by {other.source}")

    def _feature_registrar(self, info: PluginInfo, staged: list):
        def register(name: str, factory: Callable[[], Any], datasets=(), summary: str = "") -> None:
            if name in self.feature_extractors:
                other = self.feature_extractors[name].plugin
                raise GenzooError(
                    f"feature extractor {name!r} from plugin {info.name!r} is already registered by plugin {other!r}"
                )
            if not callable(factory):
                raise GenzooError(f"feature extractor {name!r}: factory must be callable, got {factory!r}")

            def commit() -> None:
                self.feature_extractors[name] = FeatureExtractorRecord(name, factory, info.name, tuple(datasets), summary)
                info.feature_extractors.append(name)

            staged.append(commit)

        return register

    def add_commands(self, cli) -> None:
        """Let every plugin add click commands; a failing plugin is recorded, not fatal."""
        for name, info in self.plugins.items():
            plugin = self.pm.get_plugin(name)
            impl = self._impl(plugin, "register_commands") if plugin is not None else None
            if impl is None:
                continue
            before = set(cli.commands)
            try:
                impl(cli)
            except Exception as exc:
                info.errors.append(f"register_commands failed: {_one_line(exc)}")
                for added in set(cli.commands) - before:
                    cli.commands.pop(added)
                continue
            info.commands = sorted(set(cli.commands) - before)

    # -- the catalogue --------------------------------------------------------------------------

    def _ensure_registry(self) -> None:
        if self._registry_loaded:
            return
        self._registry_loaded = True
        from .registry import load_registry_file

        for entry in load_registry_file():
            self.models.setdefault(entry.name, entry)

    def all_models(self) -> dict[str, Any]:
        self._ensure_registry()
        return self.models

    def method(self, name: str) -> type:
        """The Method class registered under ``name`` or one of its aliases."""
        canonical = self.method_aliases.get(name, name)
        if canonical in self.methods:
            return self.methods[canonical].cls
        known = ", ".join(sorted(self.methods)) or "none"
        raise GenzooError(
            f"no plugin provides method {name!r} (installed methods: {known}); "
            f"install the plugin that provides it, or run `genzoo plugins` to see load errors"
        )


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
