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
    register("features-cifar10", functools.partial(extractor, "features-cifar10"), datasets=("cifar10", "cifar10-exact"),
             summary="penultimate layer (256-d) of a CNN trained on the 10k CIFAR-10 training images (70.9% test accuracy)")
    register("features-celeba64", functools.partial(extractor, "features-celeba64"), datasets=("celeba64",),
             summary="penultimate layer (256-d) of a rotation-prediction CNN trained on CelebA faces 1-4,000 only "
                     "(the FID reference, faces 4,001-5,000, unseen)")
