"""genzoo: a zoo of generative models behind one interface, built on plugins.

    import genzoo
    model = genzoo.load("ign")                 # a registry name, alias, directory or hf://ORG/NAME
    images = model.sample(64, seed=0)          # float NCHW in [0, 1]
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .registry import ModelEntry

# Each public name and the module that defines it. A name is imported when first used, so
# `import genzoo` (and the `genzoo` command's start) loads no torch, and sampling no training code.
_HOMES = {
    "ArgumentError": "errors",
    "GenzooError": "errors",
    "UnsupportedVerb": "errors",
    "WeightsError": "errors",
    "ImageData": "datasets.imagedata",
    "load_dataset": "datasets",
    "hookimpl": "hookspecs",
    "load": "loading",
    "Method": "method",
    "find_model": "plugins",
    "get_host": "plugins",
    "ModelEntry": "registry",
    "Noise": "seeding",
    "TrainStep": "training.step",
    "save_pretrained": "weights",
    "schedules": "schedules",
    "fit": "training.loop",
    "evaluate": "metrics.evaluation",
    "export": "exporting",
    "push_to_hub": "pushing",
}

__all__ = ["__version__", "list_models", *sorted(_HOMES, key=str.lower)]


def list_models() -> list[ModelEntry]:
    """Every model in the catalogue (registry.yaml and plugins), sorted by name."""
    from .plugins import get_host

    return [entry for _, entry in sorted(get_host().all_models().items())]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'genzoo' has no attribute {name!r}")
    module = import_module(f".{home}", __name__)
    value = module if name == home else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
