"""Hook specifications for genzoo plugins.

A plugin is a module with functions marked ``@genzoo.hookimpl`` published under the ``genzoo``
entry-point group. Each hook hands the plugin a ``register`` callback so the core can validate
what it is given and report which plugin gave it.
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
