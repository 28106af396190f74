"""The plugin host: finds plugins, calls their hooks, isolates their failures, and owns every lookup.

Every method, the built-in ones included, arrives through the ``genzoo`` entry-point group. The
core's own datasets and metrics arrive through the same hooks, from the core's built-in plugins
(``BUILTIN_PLUGINS``, always loaded, first), so a plugin adds a dataset or a metric exactly as the
core does. Then the entry points load: genzoo's own first, then the others, each in name order; of
two plugins that register the same name, the later one fails with an error naming both, so an
outside plugin never replaces a built-in method. A plugin that fails to import or to register
(whatever it raises, ``sys.exit`` included; only Ctrl-C passes) is recorded with its error (``genzoo
plugins`` shows it) and everything else keeps working. Registrations of a plugin whose hook raises
are dropped as a whole. Its commands (``register_commands``) are collected as it loads, and join the
``genzoo`` command when a verb is not one of genzoo's own; of two plugins that add the same verb, the first keeps
it, the later adds none of its commands, and both are recorded with an error naming the other and the verb.

What plugins register lives here, one :class:`genzoo.table.Table` per kind (the models merged
with registry.yaml), and is looked up here only: methods and models by name or alias (a method
name also finds its default model), datasets, metrics and feature networks by name. Every register
callback makes a checked row of its arguments (:mod:`genzoo.registrars`; the rows are
:mod:`genzoo.entries`'), stages it, and the host adds a hook's rows together once the hook has returned.
"""

from __future__ import annotations

import importlib
import importlib.metadata as importlib_metadata
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

import click
import pluggy

from . import hookspecs
from .entries import DatasetEntry, FeatureEntry, MethodEntry, MetricEntry
from .errors import GenzooError
from .registrars import REGISTRARS
from .registry import ModelEntry, load_registry_file
from .table import Table

ENTRY_POINT_GROUP = "genzoo"
OWN_DISTRIBUTION = "genzoo"  # its entry points (the built-in methods) load before any other distribution's
# The core's own plugins (module names), loaded before any entry point and whatever GENZOO_LOAD_PLUGINS says.
BUILTIN_PLUGINS = ("genzoo.datasets.builtin", "genzoo.metrics.builtin")
ALLOW_ENV = "GENZOO_LOAD_PLUGINS"
HOOK_NAMES = ("register_methods", "register_models", "register_commands", "register_feature_extractors",
              "register_datasets", "register_metrics")


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


def allowed_plugins() -> set[str] | None:
    """The allow-list from GENZOO_LOAD_PLUGINS: None means all; an empty string means none."""
    value = os.environ.get(ALLOW_ENV)
    if value is None:
        return None
    return {part.strip() for part in value.split(",") if part.strip()}


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class PluginHost:
    """Loads plugins and holds what they registered, merged with the core's own tables."""

    def __init__(self, *, load_entry_points: bool = True):
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: dict[str, PluginInfo] = {}
        self.builtins: dict[str, PluginInfo] = {}
        self._commands: dict[str, dict[str, click.Command]] = {}  # plugin -> the commands its register_commands added
        self.methods: Table[MethodEntry] = Table(
            "method", hint="install the plugin that provides it, or run `genzoo plugins` to see load errors")
        self.models: Table[ModelEntry] = Table("model", hint="pass a model name, a model directory or hf://ORG/NAME")
        self.datasets: Table[DatasetEntry] = Table(
            "dataset", hint="write NAME[:SPLIT], folder:PATH or npz:PATH[:SPLIT] (`genzoo datasets` lists them)")
        self.metrics: Table[MetricEntry] = Table(
            "metric", hint="name them in --metrics (`genzoo datasets --metrics` lists them)")
        self.feature_extractors: Table[FeatureEntry] = Table(
            "feature network", hint="pass --features NAME, or --features inception (online only)")
        for entry in load_registry_file():
            self.models.add(entry)
        for module_name in BUILTIN_PLUGINS:
            self.add(importlib.import_module(module_name), name=module_name, builtin=True)
        if load_entry_points:
            self._load_entry_points()

    # -- discovery -------------------------------------------------------------------------

    def _load_entry_points(self) -> None:
        allow = allowed_plugins()
        eps = sorted(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP),
                     key=lambda ep: (_distribution(ep) != OWN_DISTRIBUTION, ep.name))
        seen: set[str] = set()
        for ep in eps:
            if ep.name in seen or (allow is not None and ep.name not in allow):
                continue
            seen.add(ep.name)
            dist = getattr(ep, "dist", None)
            info = PluginInfo(name=ep.name, module=ep.value, distribution=_distribution(ep),
                              version=dist.version if dist is not None else None)
            try:
                module = ep.load()
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # a broken plugin, even one that exits, must not take genzoo down
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
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            info.errors.append(f"failed to register: {_one_line(exc)}")
            return info
        info.hooks = sorted(impl.name for impl in self.pm.get_hookcallers(plugin) or [] if impl.name in HOOK_NAMES)
        for hook_name in REGISTRARS:
            self._run_hook(plugin, info, hook_name)
        self._collect_commands(plugin, info)
        return info

    def _run_hook(self, plugin: Any, info: PluginInfo, hook_name: str) -> None:
        """Call one register hook of ``plugin``; its rows are added only if every call succeeds."""
        impl = self._impl(plugin, hook_name)
        if impl is None:
            return
        kind, make_row = REGISTRARS[hook_name]
        table: Table = getattr(self, kind)
        staged = Table(table.kind, hint=table.hint)

        def register(*args: Any, **kwargs: Any) -> None:
            row = make_row(info.name, info.source, *args, **kwargs)
            table.check_free(row)
            staged.add(row)

        try:
            impl(register)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            info.errors.append(f"{hook_name} failed: {_one_line(exc)}")
            return
        for row in staged.values():
            table.add(row)
            if isinstance(row, MethodEntry):
                row.cls.plugin_name = info.distribution or info.name
        getattr(info, kind).extend(staged)

    def _impl(self, plugin: Any, hook_name: str):
        caller = getattr(self.pm.hook, hook_name)
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin:
                return impl.function
        return None

    def _collect_commands(self, plugin: Any, info: PluginInfo) -> None:
        """Run ``plugin``'s register_commands on a group of its own, so a failing plugin leaves nothing behind.

        A verb a plugin loaded earlier added stays that plugin's: this one adds none of its commands, and both
        plugins are recorded with an error naming the other and the verb."""
        impl = self._impl(plugin, "register_commands")
        if impl is None:
            return
        own = click.Group(info.name)
        try:
            impl(own)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            info.errors.append(f"register_commands failed: {_one_line(exc)}")
            return
        taken = self._verbs_taken(own.commands)
        if taken:
            self._record_verb_clashes(info, taken)
            return
        self._commands[info.name] = dict(own.commands)
        info.commands = sorted(own.commands)

    def _verbs_taken(self, names: Iterable[str]) -> dict[str, list[str]]:
        """Of ``names``, those a loaded plugin already adds, by the name of that plugin."""
        taken = {owner: sorted(set(names) & set(commands)) for owner, commands in self._commands.items()}
        return {owner: verbs for owner, verbs in taken.items() if verbs}

    def _record_verb_clashes(self, late: PluginInfo, taken: dict[str, list[str]]) -> None:
        """Tell both sides of each clash: ``late`` gets none of its commands, each plugin in ``taken`` keeps its."""
        fix = f"give one plugin's commands other names, or leave one plugin out of {ALLOW_ENV}"
        for owner, verbs in taken.items():
            self._info(owner).errors.append(f"plugin {late.name!r} also adds the {_verbs(verbs)}, which this plugin "
                                            f"keeps (it loads first), so plugin {late.name!r} adds none of its "
                                            f"commands; {fix}")
        kept = " and ".join(f"plugin {owner!r} loads first and keeps the {_verbs(verbs)}"
                            for owner, verbs in taken.items())
        late.errors.append(f"register_commands failed: {kept}, so this plugin adds none of its commands; {fix}")

    def _info(self, name: str) -> PluginInfo:
        return self.plugins.get(name) or self.builtins[name]

    def commands(self, reserved: Iterable[str] = ()) -> dict[str, click.Command]:
        """The commands the plugins add, by name. A plugin whose commands would take a name in ``reserved`` (the
        verbs of genzoo's own) adds none, and is recorded with the error."""
        reserved = set(reserved)
        found: dict[str, click.Command] = {}
        for name, commands in self._commands.items():
            clash = sorted(set(commands) & reserved)
            if clash:
                info = self._info(name)
                error = (f"register_commands failed: it tried to replace the command(s) {clash}; "
                         f"give its commands other names")
                if error not in info.errors:
                    info.errors.append(error)
                info.commands = []
                continue
            found.update(commands)
        return found

    def add_commands(self, cli: click.Group, reserved: Iterable[str] = ()) -> None:
        """Add the plugins' commands to ``cli``, but none of a plugin that would take a name of ``cli`` or
        ``reserved`` (recorded with its error)."""
        for name, command in self.commands({*cli.list_commands(click.Context(cli)), *reserved}).items():
            cli.add_command(command, name)

    # -- lookups ------------------------------------------------------------------------------

    def all_models(self) -> Table[ModelEntry]:
        return self.models

    def has_method(self, name: str) -> bool:
        return self.methods.find(name) is not None

    def method_record(self, name: str) -> MethodEntry:
        """The registration of the method called ``name`` or one of its aliases (in any case)."""
        record = self.methods.find(name)
        if record is not None:
            return record
        model = self.models.find(name)
        note = (f"{model.name!r} is a model of method {model.method!r}: to train from its weights, write them with "
                f"`genzoo export {model.name} DIR`, then run `genzoo fit {model.method} --init DIR ...`"
                if model is not None else "")
        raise self.methods.unknown(name, note=note)

    def method(self, name: str) -> type:
        """The Method class registered under ``name`` or one of its aliases."""
        return self.method_record(name).cls

    def model(self, name: str) -> ModelEntry:
        """A model by name, by alias, or by method name (the method's default model), in any case."""
        entry = self.models.find(name)
        if entry is not None:
            return entry
        record = self.methods.find(name)
        if record is not None:
            cls = record.cls
            if cls.default_model and cls.default_model in self.models:
                return self.models[cls.default_model]
            raise GenzooError(
                f"method {cls.name!r} has no pretrained default model; train one with "
                f"`genzoo fit {cls.name} ...` and pass its output directory instead"
            )
        note = "" if self.methods else "no method plugin is loaded: run `genzoo plugins` to see why"
        raise self.models.unknown(name, also=self.methods.names(), note=note)

    def dataset(self, name: str) -> DatasetEntry:
        return self.datasets.lookup(name)

    def metric(self, name: str) -> MetricEntry:
        return self.metrics.lookup(name)

    def feature_extractor(self, name: str | None = None, *, dataset: str | None = None) -> FeatureEntry:
        """The feature network called ``name``, or the first one registered for ``dataset``."""
        if name is not None:
            return self.feature_extractors.lookup(name)
        matches = [r for r in self.feature_extractors.values() if dataset in r.datasets]
        if matches:
            return matches[0]
        known = ", ".join(f"{r.name} ({', '.join(r.datasets)})" for r in self.feature_extractors.values()) or "none"
        raise GenzooError(f"no feature network is registered for dataset {dataset!r} (available: {known}); "
                          f"pass --features NAME")


def _verbs(names: list[str]) -> str:
    """``command 'a'`` or ``commands 'a', 'b'``."""
    return ("command " if len(names) == 1 else "commands ") + ", ".join(map(repr, names))


def _distribution(ep: importlib_metadata.EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    return dist.metadata["Name"] if dist is not None else None


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
