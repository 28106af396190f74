"""The zoo catalogue's entries: what registry.yaml (and a plugin's ``register_models``) says of a model.

Lookups by name, alias or method default are the plugin host's (:func:`genzoo.plugins.find_model`),
which merges this file with what plugins register.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from .errors import GenzooError

REGISTRY_FILE = "registry.yaml"


@dataclass
class ModelEntry:
    """One named pretrained model: what it is, where its weights are and how it was made."""

    name: str
    method: str
    summary: str = ""
    dataset: str = ""
    aliases: list[str] = field(default_factory=list)
    bundled: str | None = None  # "package:relative/dir", a copy shipped inside a plugin package
    hub: dict[str, str] | None = None  # {"repo_id": "org/name", "revision": "<commit or branch>"}
    files: dict[str, str] = field(default_factory=dict)  # file name -> sha256
    license: str = ""
    command: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    evaluation: str = ""  # how the metrics were measured
    provenance: dict[str, Any] = field(default_factory=dict)
    source: str = "registry.yaml"

    @classmethod
    def from_dict(cls, name: str, data: dict[str, Any], *, source: str) -> "ModelEntry":
        known = {f.name for f in fields(cls)} - {"name", "source"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise GenzooError(f"model {name!r} in {source}: unknown field(s) {unknown}; known fields: {sorted(known)}")
        if "method" not in data:
            raise GenzooError(f"model {name!r} in {source} has no 'method' field; add the method that loads it")
        data = dict(data)
        if data.get("aliases") is None:
            data["aliases"] = []
        if data.get("hub") is not None and "repo_id" not in data["hub"]:
            raise GenzooError(f"model {name!r} in {source}: 'hub' needs a 'repo_id' (and usually a 'revision')")
        return cls(name=name, source=source, **data)

    def bundled_dir(self) -> Path | None:
        """The directory of the bundled copy, if its package is installed and holds it."""
        if not self.bundled:
            return None
        package, _, rel = self.bundled.partition(":")
        if importlib.util.find_spec(package) is None:
            return None
        path = Path(str(importlib.resources.files(package))) / rel
        return path if path.is_dir() else None

    def hub_ref(self) -> str | None:
        """``hf://ORG/NAME[@REVISION]`` of the Hub copy, or None."""
        if not self.hub:
            return None
        revision = self.hub.get("revision")
        return f"hf://{self.hub['repo_id']}" + (f"@{revision}" if revision else "")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def registry_path() -> Path:
    """registry.yaml: inside the installed package (wheel) or at the top of a source checkout."""
    packaged = Path(__file__).with_name(REGISTRY_FILE)
    if packaged.is_file():
        return packaged
    return Path(__file__).resolve().parent.parent / REGISTRY_FILE


def load_registry_file(path: Path | None = None) -> list[ModelEntry]:
    path = path or registry_path()
    if not path.is_file():
        return []
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    models = data.get("models") or {}
    if not isinstance(models, dict):
        raise GenzooError(f"{path}: 'models' must be a mapping of model name to fields")
    return [ModelEntry.from_dict(name, entry or {}, source=REGISTRY_FILE) for name, entry in models.items()]
