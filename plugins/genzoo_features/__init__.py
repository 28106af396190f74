"""Built-in plugin: the feature networks behind genzoo's metrics, one per dataset."""

import functools

import genzoo

from .model import ClassifyingFeatureExtractor, FeatureClassifier, FeatureExtractor, extractor

__all__ = ["ClassifyingFeatureExtractor", "FeatureClassifier", "FeatureExtractor", "extractor"]


@genzoo.hookimpl
def register_methods(register):
    register(FeatureClassifier)


@genzoo.hookimpl
def register_feature_extractors(register):
    register("features-mnist", functools.partial(extractor, "features-mnist"), datasets=("mnist",),
             summary="penultimate layer (128-d) of a CNN trained on the 60k MNIST training digits")
