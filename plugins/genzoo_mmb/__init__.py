"""Built-in plugin: MMB, a generator born from a classifier (Yu and Wang, NeurIPS 2023).

Three methods: ``mmb-classifier`` (the classifier to learn from, trained into the max-margin
regime), ``mmb`` (the generator trained from classifiers without training images; it does see each
classifier's stored mean image) and ``mmb-reconstruct`` (Haim et al.'s per-image
reconstruction baseline), and the ``genzoo mmb`` command group.
"""

import genzoo

from .classifier import MMBClassifier
from .generator import MMBGenerator
from .reconstruct import MMBReconstruct

__all__ = ["MMBClassifier", "MMBGenerator", "MMBReconstruct"]


@genzoo.hookimpl
def register_methods(register):
    register(MMBClassifier)
    register(MMBGenerator)
    register(MMBReconstruct)


@genzoo.hookimpl
def register_commands(cli):
    from .cli import group

    cli.add_command(group)
