"""What a metric is to genzoo: a row of the metric table (:class:`MetricEntry`) and what it is given (:class:`Scoring`).

Built-in rows and plugins' rows both come in through ``register_metrics``;
:func:`registered_metric` checks a registration the same way for both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..errors import GenzooError
from .scores import precision_recall

METRIC_NEEDS = ("classes", "train")


@dataclass
class TrainingSet:
    """The training images a memorisation metric compares with, and their features."""

    name: str
    images: torch.Tensor
    features: torch.Tensor


@dataclass
class Scoring:
    """What a metric's ``compute`` receives: features of both sets and what else the evaluation has.

    ``real``/``fake``: reference and sample features (N, D); ``probs``: the feature network's class
    probabilities of the samples (None if it cannot classify); ``labels``: the labels the samples
    were made for (None if unconditional); ``images``: the samples, float NCHW in [0, 1];
    ``options``: the evaluation's settings (:class:`genzoo.metrics.EvalOptions`);
    ``real_images``: the reference images themselves, for metrics computed on pixels.
    """

    real: torch.Tensor
    fake: torch.Tensor
    probs: torch.Tensor | None
    labels: torch.Tensor | None
    images: torch.Tensor
    options: Any
    load_train: Callable[[], TrainingSet] | None = None
    cache: dict[str, Any] = field(default_factory=dict)
    real_images: torch.Tensor | None = None

    def precision_recall(self) -> tuple[float, float]:
        if "precision_recall" not in self.cache:
            self.cache["precision_recall"] = precision_recall(self.real, self.fake, k=self.options.k)
        return self.cache["precision_recall"]

    def train(self) -> TrainingSet:
        if "train" not in self.cache:
            if self.load_train is None:
                raise GenzooError("this metric needs training images, which the evaluation did not load")
            self.cache["train"] = self.load_train()
        return self.cache["train"]


@dataclass(frozen=True)
class MetricEntry:
    """One metric ``--metrics`` can name: ``compute(scoring)`` returns a number or a dict of results.

    ``check(options, n_ref)``, if given, refuses bad settings before any image is generated.
    """

    name: str
    compute: Callable[[Scoring], Any]
    summary: str = ""
    needs: frozenset[str] = frozenset()
    check: Callable[[Any, int], None] | None = None
    source: str = "genzoo"

    def run(self, scoring: Scoring) -> dict[str, Any]:
        value = self.compute(scoring)
        return value if isinstance(value, dict) else {self.name: value}


def registered_metric(name: str, compute: Callable[[Scoring], Any], *, summary: str = "", needs: tuple[str, ...] = (),
                      check: Callable[[Any, int], None] | None = None, source: str) -> MetricEntry:
    """The row a ``register_metrics`` call describes, checked (the arguments are the hook's)."""
    if not callable(compute):
        raise GenzooError(f"metric {name!r}: compute must be callable, got {compute!r}")
    if check is not None and not callable(check):
        raise GenzooError(f"metric {name!r}: check must be callable or None, got {check!r}")
    unknown = sorted(set(needs) - set(METRIC_NEEDS))
    if unknown:
        raise GenzooError(f"metric {name!r}: unknown needs {unknown}; choose from {', '.join(METRIC_NEEDS)}")
    return MetricEntry(name, compute, summary, frozenset(needs), check, source)
