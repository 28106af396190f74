"""The rows of the plugin host's tables besides the catalogue's models (:class:`genzoo.registry.ModelEntry`):
methods, feature networks, datasets and metrics.

Each is a :class:`genzoo.table.Entry`: a ``name``, a ``source`` (who registered it) and, where it has
other names, ``aliases``. :mod:`genzoo.registrars` makes them from a ``register`` callback's arguments,
checked the same way for the core's own registrations and a plugin's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .errors import GenzooError
from .table import Entry

SPEC_PREFIXES = ("folder", "npz")  # dataset spec kinds that name files, not a row of the table
METRIC_NEEDS = ("classes", "train")  # what a metric may ask the evaluation for


@dataclass
class MethodEntry(Entry):
    """A registered method: its class, the plugin that registered it, and its other names."""

    cls: type
    plugin: str
    aliases: tuple[str, ...] = ()
    source: str = ""

    def __post_init__(self) -> None:
        self.source = self.source or f"plugin {self.plugin!r}"

    @property
    def name(self) -> str:
        return self.cls.name


@dataclass
class FeatureEntry(Entry):
    """A registered feature network: ``factory()`` builds it; ``datasets`` are those it is the default for."""

    name: str
    factory: Callable[[], Any]
    plugin: str
    datasets: tuple[str, ...] = ()
    summary: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        self.source = self.source or f"plugin {self.plugin!r}"


@dataclass(frozen=True)
class DatasetEntry(Entry):
    """A dataset known by name: what it holds, where its files are expected, and how to read them.

    ``load(root, split)`` reads the files under the data root and returns a ``genzoo.ImageData`` or a
    pair ``(images, labels)`` (``genzoo.datasets.load_dataset`` makes ImageData of either); ``splits``
    maps each split to its size (None where it depends on the files found); ``files`` says, relative
    to the data root, what must be there.
    """

    name: str
    summary: str
    shape: tuple[int, int, int]
    num_classes: int  # 0: no labels
    splits: dict[str, int | None]
    files: str
    load: Callable[[Path, str], Any]
    default_split: str = "train"
    license: str = ""
    source: str = "genzoo"
    default_metrics: str = ""  # what `genzoo eval` scores when --metrics is not given ("": genzoo's default)
    class_names: tuple[str, ...] = ()  # what each label means, in label order (empty: not named)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "summary": self.summary, "shape": list(self.shape), "num_classes": self.num_classes,
                "class_names": list(self.class_names), "splits": dict(self.splits), "files": self.files,
                "default_split": self.default_split, "license": self.license, "source": self.source,
                "default_metrics": self.default_metrics}

    def choose_split(self, split: str, preferred: str | None = None) -> str:
        """The split a spec asks for (``split``, else ``preferred`` if this dataset has it, else its default)."""
        split = split or (preferred if preferred in self.splits else self.default_split)
        if split not in self.splits:
            raise GenzooError(f"{self.name} splits are {', '.join(self.splits)}; got {split!r}")
        return split

    def check(self, data: Any) -> None:
        """Refuse ImageData that is not what this row declares (a plugin's loader may drift from it)."""
        where = f"dataset {self.name!r} ({self.source})"
        if tuple(data.image_shape) != tuple(self.shape):
            raise GenzooError(f"{where} is declared as {self.shape} (C, H, W) images but its files hold "
                              f"{tuple(data.image_shape)}; fix the files under the data root or the declaration")
        if self.num_classes and data.labels is None:
            raise GenzooError(f"{where} is declared with {self.num_classes} classes but its loader returned no labels")
        if data.labels is not None and len(data.labels) and not (0 <= int(data.labels.min()) and
                                                                int(data.labels.max()) < max(self.num_classes, 1)):
            raise GenzooError(f"{where} has labels in [{int(data.labels.min())}, {int(data.labels.max())}] but is "
                              f"declared with {self.num_classes} classes")


@dataclass(frozen=True)
class MetricEntry(Entry):
    """One metric ``--metrics`` can name: ``compute(scoring)`` returns a number or a dict of results.

    ``scoring`` is a :class:`genzoo.metrics.Scoring`; ``check(options, n_ref)``, if given, refuses bad
    settings before any image is generated.
    """

    name: str
    compute: Callable[[Any], Any]
    summary: str = ""
    needs: frozenset[str] = frozenset()
    check: Callable[[Any, int], None] | None = None
    source: str = "genzoo"

    def run(self, scoring: Any) -> dict[str, Any]:
        value = self.compute(scoring)
        return value if isinstance(value, dict) else {self.name: value}
