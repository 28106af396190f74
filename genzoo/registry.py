"""The zoo catalogue's entries: what registry.yaml (and a plugin's ``register_models``) says of a model.

A model entry carries typed metrics (:class:`Metric`: a value, what was scored, in which feature
network, on how many images, against which reference split), and registry.yaml carries the
reference rows of each (feature network, reference split) (:class:`ReferenceSet`: real images and
degraded ones scored the same way), so every distance can be stated beside its scale. How they
are written for people is :mod:`genzoo.reporting`'s.

Lookups by name, alias or method default are the plugin host's (:func:`genzoo.plugins.find_model`),
which merges this file with what plugins register.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from .errors import GenzooError
from .table import Entry

REGISTRY_FILE = "registry.yaml"
STATUSES = ("stable", "experimental")
# Distances (lower is better) that are only meaningful beside reference rows in the same features.
RANKED_METRICS = ("fid", "kid", "swd")


@dataclass(frozen=True)
class Metric:
    """One measured number and how it was measured."""

    metric: str  # fid, kid (the raw unbiased MMD^2 estimate), precision, recall, accuracy, ...
    value: float
    of: str = ""  # what was scored, when not the model's own samples: "f(f(z))", "ign-mnist, unrefined"
    features: str = ""  # the feature network the images were scored in
    n: int = 0  # images scored
    reference: str = ""  # the reference split, e.g. "cifar10:test"
    note: str = ""

    @classmethod
    def parse(cls, data: Any, where: str) -> "Metric":
        if not isinstance(data, dict) or "metric" not in data or "value" not in data:
            raise GenzooError(f"{where}: a metric is a mapping with at least 'metric' and 'value', got {data!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise GenzooError(f"{where}: unknown metric field(s) {unknown}; known fields: {sorted(known)}")
        if isinstance(data["value"], bool) or not isinstance(data["value"], (int, float)):
            raise GenzooError(f"{where}: metric {data['metric']!r} needs a number as its value, got {data['value']!r}")
        return cls(**{**data, "value": float(data["value"]), "n": int(data.get("n") or 0)})

    @property
    def key(self) -> str:
        return self.metric + (f" of {self.of}" if self.of else "")

    @property
    def scale(self) -> tuple[str, int, str]:
        """(feature network, images, reference split): the metrics that share it compare directly."""
        return self.features, self.n, self.reference


@dataclass(frozen=True)
class ReferenceRow:
    """Real or degraded real images scored like a model's samples."""

    images: str  # a short name: real, resize, blur, noise 0.1, ...
    description: str
    values: dict[str, float]


@dataclass(frozen=True)
class ReferenceSet:
    """The reference rows of one (feature network, reference split)."""

    features: str
    reference: str
    n: int  # images in each row
    rows: tuple[ReferenceRow, ...]
    source: str = ""  # how the rows were measured

    @classmethod
    def parse(cls, data: Any, where: str) -> "ReferenceSet":
        try:
            rows = tuple(ReferenceRow(images=str(r.pop("images")), description=str(r.pop("description", "")),
                                      values={k: float(v) for k, v in r.items()})
                         for r in (dict(row) for row in data["rows"]))
            return cls(features=str(data["features"]), reference=str(data["reference"]), n=int(data["n"]), rows=rows,
                       source=str(data.get("source", "")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise GenzooError(f"{where}: a reference set needs features, reference, n and rows of "
                              f"{{images, description, METRIC: value}} ({exc!r})") from None

    def rows_with(self, metric: str) -> list[ReferenceRow]:
        """The rows that have ``metric``, from lowest to highest."""
        return sorted((r for r in self.rows if metric in r.values), key=lambda r: r.values[metric])


def parse_metrics(data: Any, where: str) -> list[Metric]:
    """Typed metrics from a list of mappings, or plain ones from a ``{name: number}`` mapping."""
    if not data:
        return []
    if isinstance(data, dict):
        data = [{"metric": str(name), "value": value} for name, value in data.items()]
    if not isinstance(data, list):
        raise GenzooError(f"{where}: 'metrics' must be a list of metrics or a mapping of name to number")
    return [m if isinstance(m, Metric) else Metric.parse(m, where) for m in data]


@dataclass
class ModelEntry(Entry):
    """One named pretrained model: what it is, how good, where its weights are and how it was made."""

    name: str
    method: str
    summary: str = ""
    dataset: str = ""
    aliases: list[str] = field(default_factory=list)
    status: str = "experimental"  # "stable" once the model meets its method's quality bars
    limitations: str = ""  # one or two sentences: what the model is not good at
    bundled: str | None = None  # "package:relative/dir", a copy shipped inside a plugin package
    hub: dict[str, str] | None = None  # {"repo_id": "org/name", "revision": "<commit or branch>"}
    files: dict[str, str] = field(default_factory=dict)  # file name -> sha256
    license: str = ""
    command: list[str] = field(default_factory=list)  # how to make the model from an installed genzoo
    metrics: list[Metric] = field(default_factory=list)
    evaluation: str = ""  # how the metrics were measured
    provenance: dict[str, Any] = field(default_factory=dict)
    images_seen: int | None = None  # training images behind the weights: steps x batch, --init's runs included
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
        data.setdefault("status", "experimental")
        if data["status"] not in STATUSES:
            raise GenzooError(f"model {name!r} in {source}: status must be one of {', '.join(STATUSES)}, "
                              f"got {data['status']!r}")
        command = data.get("command") or []
        data["command"] = [command] if isinstance(command, str) else [str(c) for c in command]
        data["metrics"] = parse_metrics(data.get("metrics"), f"model {name!r} in {source}")
        seen = data.get("images_seen")
        if seen is not None and (isinstance(seen, bool) or not isinstance(seen, int) or seen < 0):
            raise GenzooError(f"model {name!r} in {source}: 'images_seen' must be a whole number of images "
                              f"(steps x batch), got {seen!r}")
        return cls(name=name, source=source, **data)

    def bundled_dir(self) -> Path | None:
        """The directory of the bundled copy, if its package is installed and holds it (found without
        importing the package)."""
        if not self.bundled:
            return None
        package, _, rel = self.bundled.partition(":")
        for folder in package_folders(package):
            if (folder / rel).is_dir():
                return folder / rel
        return None

    def hub_ref(self) -> str | None:
        """``hf://ORG/NAME[@REVISION]`` of the Hub copy, or None."""
        if not self.hub:
            return None
        revision = self.hub.get("revision")
        return f"hf://{self.hub['repo_id']}" + (f"@{revision}" if revision else "")

    def weights_kind(self) -> str:
        """bundled, hub, missing (a bundled copy whose package is not installed) or unpublished."""
        if self.bundled_dir() is not None:
            return "bundled"
        if self.hub:
            return "hub"
        return "missing" if self.bundled else "unpublished"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def registry_path() -> Path:
    """registry.yaml: inside the installed package (wheel) or at the top of a source checkout."""
    packaged = Path(__file__).with_name(REGISTRY_FILE)
    if packaged.is_file():
        return packaged
    return Path(__file__).resolve().parent.parent / REGISTRY_FILE


def package_folders(package: str) -> list[Path]:
    """The folders that hold ``package``'s files, found without importing it (a dotted name imports its
    parents); [] when it is not installed."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [Path(folder) for folder in spec.submodule_search_locations]
    return [Path(spec.origin).parent] if spec.origin else []


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    with open(path, encoding="utf-8") as fh:  # libyaml's safe loader when installed: the same result, faster
        return yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}


def load_registry_file(path: Path | None = None) -> list[ModelEntry]:
    path = path or registry_path()
    models = _read(path).get("models") or {}
    if not isinstance(models, dict):
        raise GenzooError(f"{path}: 'models' must be a mapping of model name to fields")
    return [ModelEntry.from_dict(name, entry or {}, source=REGISTRY_FILE) for name, entry in models.items()]


def load_reference_sets(path: Path | None = None) -> list[ReferenceSet]:
    """The reference rows of registry.yaml, one set per (feature network, reference split)."""
    path = path or registry_path()
    return [ReferenceSet.parse(data, f"{REGISTRY_FILE} references[{i}]")
            for i, data in enumerate(_read(path).get("references") or [])]


@functools.lru_cache(maxsize=1)
def reference_sets() -> tuple[ReferenceSet, ...]:
    """registry.yaml's reference sets, read once."""
    return tuple(load_reference_sets())


def reference_set(metric: Metric) -> ReferenceSet | None:
    """The reference rows scored in ``metric``'s feature network against its reference split."""
    return next((s for s in reference_sets() if (s.features, s.reference) == (metric.features, metric.reference)), None)
