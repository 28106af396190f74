"""Built-in plugin: the feature networks behind genzoo's metrics (MNIST first)."""

import genzoo

from .model import FeatureClassifier, FeatureExtractor

__all__ = ["FeatureClassifier", "FeatureExtractor"]


@genzoo.hookimpl
def register_methods(register):
    register(FeatureClassifier)


def mnist_features() -> FeatureExtractor:
    return FeatureExtractor(genzoo.load("features-mnist"), "features-mnist")


@genzoo.hookimpl
def register_feature_extractors(register):
    register("features-mnist", mnist_features, datasets=("mnist",),
             summary="penultimate layer (128-d) of a CNN trained on the 60k MNIST training digits")
