"""Hook specifications for genzoo plugins.

A plugin is a module with functions marked ``@genzoo.hookimpl`` published under the ``genzoo``
entry-point group. Each hook hands the plugin a ``register`` callback so the core can validate
what it is given and report which plugin gave it. The core registers its own datasets and metrics
through these hooks too (``genzoo.datasets.builtin``, ``genzoo.metrics.builtin``).
"""

import pluggy

PROJECT = "genzoo"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_methods(register):
    """Register Method subclasses: ``register(MethodClass, aliases=("other-name",))``."""


@hookspec
def register_models(register):
    """Register named pretrained models: ``register(name, **fields)``, fields as in registry.yaml."""


@hookspec
def register_commands(cli):
    """Add click commands to the ``genzoo`` command group: ``cli.add_command(command)``."""


@hookspec
def register_feature_extractors(register):
    """Register feature networks for the metrics: ``register(name, factory, datasets=(...), summary=...)``.

    ``factory()`` returns an ``nn.Module`` mapping float NCHW images in [0, 1] to an (N, D) tensor of
    features, with a ``num_features`` attribute equal to D and, optionally, a ``classify(x)``
    method returning class logits.
    """


@hookspec
def register_datasets(register):
    """Register datasets for ``--dataset NAME[:SPLIT]``: ``register(name, load, shape=(C, H, W), ...)``.

    ``load(root, split)`` reads the files under the data root (a ``pathlib.Path``) and returns a
    ``genzoo.ImageData`` or a pair ``(images, labels)``: images uint8 (N, H, W), (N, H, W, C) or
    (N, C, H, W), or float in [0, 1]; labels int (N,) or None. Other fields: ``summary``,
    ``num_classes`` (0 = no labels), ``splits`` ({split: size or None}), ``files`` (what must be
    under the root, for error messages and ``genzoo datasets``), ``default_split``, ``license``,
    ``default_metrics`` (what ``genzoo eval`` scores first when ``--metrics`` is not given, e.g.
    "swd,fid" where the feature network is blind to something the data needs).
    """


@hookspec
def register_metrics(register):
    """Register metrics for ``genzoo eval --metrics``: ``register(name, compute, summary=..., needs=(...))``.

    ``compute(scoring)`` receives a ``genzoo.metrics.Scoring`` (reference and sample features, class
    probabilities, labels, images, options) and returns a number (reported under ``name``) or a
    dict of results. ``needs`` may hold "classes" (a feature network that classifies) and "train"
    (the training images, loaded once for every metric that asks). ``check(options, n_ref)``, if
    given, refuses bad settings (raise ``genzoo.ArgumentError``) before any image is generated.
    """
