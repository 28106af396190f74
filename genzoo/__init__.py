"""genzoo: a zoo of generative models behind one interface, built on plugins.

    import genzoo
    model = genzoo.load("ign")                 # a registry name, alias, directory or hf://ORG/NAME
    images = model.sample(64, seed=0)          # float NCHW in [0, 1]
"""

from typing import Any

from . import schedules
from ._version import __version__
from .datasets import ImageData, load_dataset
from .errors import ArgumentError, GenzooError, UnsupportedVerb, WeightsError
from .hookspecs import hookimpl
from .loading import load
from .method import Method
from .plugins import find_model, get_host
from .registry import ModelEntry
from .seeding import Noise
from .weights import save_pretrained

__all__ = [
    "__version__",
    "ArgumentError",
    "GenzooError",
    "ImageData",
    "Method",
    "ModelEntry",
    "Noise",
    "UnsupportedVerb",
    "WeightsError",
    "evaluate",
    "find_model",
    "fit",
    "hookimpl",
    "list_models",
    "load",
    "load_dataset",
    "push_to_hub",
    "save_pretrained",
    "schedules",
]


def list_models() -> list[ModelEntry]:
    """Every model in the catalogue (registry.yaml and plugins), sorted by name."""
    return [entry for _, entry in sorted(get_host().all_models().items())]


def __getattr__(name: str) -> Any:
    # Training, metrics and Hub code are imported only when asked for, so `genzoo.load` and
    # sampling stay light.
    if name == "fit":
        from .train import fit

        return fit
    if name == "evaluate":
        from .metrics.evaluation import evaluate

        return evaluate
    if name == "push_to_hub":
        from .pushing import push_to_hub

        return push_to_hub
    raise AttributeError(f"module 'genzoo' has no attribute {name!r}")
