"""Metrics: how genzoo scores images against reference data (``genzoo eval``, :func:`genzoo.evaluate`).

- ``scores``: the score functions (FID, KID, precision/recall, class statistics, memorisation, diversity)
- ``scoring``: what a metric's ``compute`` receives (Scoring); a metric's row of the plugin host's
  table is ``genzoo.entries.MetricEntry``
- ``builtin``: the built-in metrics, registered through ``register_metrics`` as a plugin's are
- ``features``: the feature networks the scores are computed in (``feature_space``, ``extract``)
- ``evaluation``: the whole evaluation and its settings (``evaluate``, ``EvalOptions``)

The plugin host loads this package to hold the table, so it imports only the light modules;
``features`` and ``evaluation`` are imported where they are used.
"""

from ..entries import MetricEntry
from .scores import (class_statistics, fid, kid, max_ssim, nearest_feature_distance, precision_recall,
                     within_class_distance)
from .scoring import Scoring, TrainingSet

__all__ = ["MetricEntry", "Scoring", "TrainingSet", "class_statistics", "fid", "kid", "max_ssim",
           "nearest_feature_distance", "precision_recall", "within_class_distance"]
