"""Datasets for fit and eval, named by spec strings:

    mnist[:train|test]   cifar10[:train|test]   cifar10-exact[:train|test]   cifar10-full[:train|test]
    celeba64[:train|test|all]   celeba[:train|valid|test|all]   folder:PATH   npz:PATH[:SPLIT]

Each name means one dataset whatever files are on disk; a name whose files are missing says which
file it needs (``cifar10``: genzoo's JPEG-decoded subset; ``cifar10-full``: torchvision's).

Every dataset is held in memory as uint8 NCHW images plus optional int64 labels
(:class:`ImageData`), which keeps the training loop's batches cheap and its order exactly
reproducible. Named datasets are rows of the plugin host's table (:class:`DatasetEntry`); the
built-in ones are registered through ``register_datasets`` as a plugin's are. ``genzoo datasets``
lists them.

- ``builtin``: the built-in named datasets (their loaders and registrations)
- ``files``: ``npz:`` and ``folder:`` datasets, and refine's input images
- ``download``: torchvision datasets from local files, downloaded when absent and online
- ``specs``: ``load_dataset(spec)``

- ``imagedata``: images in memory (ImageData) and what a loader's result becomes

A dataset's row of the plugin host's table is :class:`genzoo.entries.DatasetEntry`: the host
holds the rows without importing this package, whose ``specs`` looks names up in the host.
"""

from ..entries import DatasetEntry
from .imagedata import DATA_ROOT_ENV, ImageData, default_root, fixed_permutation
from .files import load_images, load_npz
from .specs import dataset_entry, known_datasets, load_dataset

__all__ = ["DATA_ROOT_ENV", "DatasetEntry", "ImageData", "dataset_entry", "default_root", "fixed_permutation",
           "known_datasets", "load_dataset", "load_images", "load_npz"]
