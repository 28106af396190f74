"""The catalogue that ``genzoo list`` and ``genzoo info`` read: registry.yaml merged with what the plugins register.

It holds the models and a summary of each method. Loading the plugins imports torch and every method's code (seconds on a
busy machine), so a process that has not loaded them yet reads a snapshot kept in genzoo's cache
folder (``catalogue.json``), written by the last process that loaded them; the snapshot is
current while genzoo's files, the installed plugins (their entry points, versions and files),
registry.yaml and ``GENZOO_LOAD_PLUGINS`` are as they were when it was written.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ._version import __version__
from .errors import GenzooError
from .registry import ModelEntry, package_folders, registry_path
from .table import Entry, Table

# Names that genzoo.plugins and genzoo.precision own; they are repeated here because importing those modules
# imports torch, which a current snapshot spares (a test keeps them equal).
ENTRY_POINT_GROUP = "genzoo"
ALLOW_ENV = "GENZOO_LOAD_PLUGINS"
CACHE_ENV = "GENZOO_CACHE"
SNAPSHOT_FILE = "catalogue.json"
SNAPSHOT_FORMAT = 1


@dataclass
class MethodSummary(Entry):
    """What the catalogue says of an installed method: its names, plugin, one-line summary, verbs and paper."""

    name: str
    plugin: str
    summary: str = ""
    aliases: list[str] = field(default_factory=list)
    capabilities: list[str] = field(default_factory=list)
    paper: str | None = ""
    default_model: str | None = None
    needs_data: bool = True
    source: str = ""


@dataclass
class Catalogue:
    """The models of registry.yaml and of the plugins, and a summary of every installed method."""

    models: Table[ModelEntry]
    methods: Table[MethodSummary]

    @classmethod
    def from_host(cls, host: Any) -> "Catalogue":
        """The catalogue of a loaded plugin host (:class:`genzoo.plugins.PluginHost`)."""
        methods: Table[MethodSummary] = Table("method", hint="")
        for record in host.methods.values():
            method = record.cls
            methods.add(MethodSummary(name=method.name, plugin=record.plugin, summary=method.summary,
                                      aliases=list(record.aliases), capabilities=sorted(method.capabilities),
                                      paper=method.paper, default_model=method.default_model,
                                      needs_data=bool(method.needs_data), source=record.source))
        models: Table[ModelEntry] = Table("model", hint="")
        for entry in host.all_models().values():
            models.add(entry)
        return cls(models, methods)

    def has_method(self, name: str) -> bool:
        return self.methods.find(name) is not None

    def method(self, name: str) -> MethodSummary | None:
        """The method called ``name`` or one of its aliases, in any case; None if it is not installed."""
        return self.methods.find(name)

    def find_model(self, name: str) -> ModelEntry | None:
        """A model by name or alias, or a method's default model; None when there is none (the plugin host then
        says why, :func:`genzoo.plugins.find_model`)."""
        entry = self.models.find(name)
        if entry is not None:
            return entry
        method = self.methods.find(name)
        return self.models.get(method.default_model) if method is not None and method.default_model else None

    def methods_without_models(self) -> list[MethodSummary]:
        """The installed methods no catalogue model uses, by name."""
        used = {self.methods.find(e.method).name for e in self.models.values() if self.has_method(e.method)}
        return [method for name, method in sorted(self.methods.items()) if name not in used]

    def to_json(self) -> dict[str, Any]:
        return {"models": [entry.as_dict() for entry in self.models.values()],
                "methods": [asdict(method) for method in self.methods.values()]}

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> "Catalogue":
        models: Table[ModelEntry] = Table("model", hint="")
        for data in document["models"]:
            data = dict(data)
            name, source = data.pop("name"), data.pop("source")
            models.add(ModelEntry.from_dict(name, data, source=source))
        methods: Table[MethodSummary] = Table("method", hint="")
        for data in document["methods"]:
            methods.add(MethodSummary(**data))
        return cls(models, methods)


def catalogue() -> Catalogue:
    """The catalogue the installed plugins make: from the loaded plugin host when this process has one (or has
    imported torch, so loading one is quick), else from the snapshot when it is current, else from a freshly
    loaded host, whose catalogue is then saved as the snapshot (unless a plugin failed to load)."""
    plugins = sys.modules.get("genzoo.plugins")
    if "torch" in sys.modules or (plugins is not None and getattr(plugins, "_HOST", None) is not None):
        from .plugins import get_host

        return Catalogue.from_host(get_host())
    key = snapshot_key()
    snapshot = read_snapshot(key)
    if snapshot is not None:
        return snapshot
    from .plugins import get_host

    host = get_host()
    loaded = Catalogue.from_host(host)
    if not any(info.errors for info in host.plugins.values()):
        write_snapshot(key, loaded)
    return loaded


def snapshot_path() -> Path:
    """Where the catalogue snapshot is kept: genzoo's cache folder ($GENZOO_CACHE, else ~/.cache/genzoo)."""
    folder = os.environ.get(CACHE_ENV) or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                        os.path.expanduser("~/.cache"), "genzoo")
    return Path(folder) / SNAPSHOT_FILE


def snapshot_key() -> str:
    """A digest of everything the catalogue depends on: genzoo's version and files, registry.yaml, Python,
    GENZOO_LOAD_PLUGINS, and each installed plugin's entry point, distribution, version and files."""
    parts: list[Any] = [SNAPSHOT_FORMAT, __version__, sys.version, os.environ.get(ALLOW_ENV),
                        _files_stamp(Path(__file__).parent), _files_stamp(registry_path())]
    for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: (ep.name, ep.value)):
        dist = getattr(ep, "dist", None)
        module = ep.value.partition(":")[0].partition(".")[0]
        parts.append([ep.name, ep.value, dist.metadata["Name"] if dist is not None else None,
                      dist.version if dist is not None else None,
                      [_files_stamp(folder) for folder in package_folders(module)]])
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _files_stamp(path: Path) -> list[Any]:
    """The name, size and modification time of ``path`` or of every file under it (bytecode caches left out)."""
    if path.is_file():
        stat = path.stat()
        return [[path.name, stat.st_size, stat.st_mtime_ns]]
    stamps = []
    for folder, subfolders, files in os.walk(path):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__" and not d.startswith("."))
        for name in sorted(files):
            stat = os.stat(os.path.join(folder, name))
            stamps.append([os.path.relpath(os.path.join(folder, name), path), stat.st_size, stat.st_mtime_ns])
    return stamps


def read_snapshot(key: str) -> Catalogue | None:
    """The saved catalogue if it was saved under ``key``; None when there is none, it is stale or unreadable."""
    try:
        document = json.loads(snapshot_path().read_text(encoding="utf-8"))
        if document.get("key") != key:
            return None
        return Catalogue.from_json(document)
    except (OSError, ValueError, KeyError, TypeError, GenzooError):
        return None


def write_snapshot(key: str, catalogue: Catalogue) -> None:
    """Save ``catalogue`` under ``key``, whole or not at all; a folder that cannot be written is left alone."""
    path = snapshot_path()
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging.write_text(json.dumps({"key": key, **catalogue.to_json()}, default=str), encoding="utf-8")
        os.replace(staging, path)
    except OSError:
        with contextlib.suppress(OSError):
            staging.unlink(missing_ok=True)
