"""The metrics genzoo knows by name, registered through ``register_metrics`` as any plugin's are.

A new metric is a score function (:mod:`genzoo.metrics.scores`), a ``compute(scoring)`` here and
one ``register(...)`` line below (plus a test); a setting it needs is a field of
:class:`genzoo.metrics.EvalOptions`, which gives ``genzoo eval`` its flag.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import ArgumentError
from ..hookspecs import hookimpl
from .scores import (KID_SUBSET_SIZE, class_statistics, fid, kid, max_ssim, nearest_feature_distance,
                     within_class_distance)
from .swd import swd
from .scoring import Scoring


def _fid(s: Scoring) -> float:
    return fid(s.real, s.fake)


def _kid(s: Scoring) -> dict[str, Any]:
    o = s.options
    size = kid_subset_size(o.kid_subset_size, min(len(s.real), len(s.fake)))
    mean, std = kid(s.real, s.fake, subset_size=size, subsets=o.kid_subsets, seed=o.seed)
    result = {"mean": mean, "std": std, "subset_size": size, "subsets": o.kid_subsets if std is not None else 1}
    if o.kid_subset_size is None and size < KID_SUBSET_SIZE:  # said in the report: the default did not fit
        result["default_subset_size"] = KID_SUBSET_SIZE
    return {"kid": result}


def kid_subset_size(asked: int | None, smallest: int) -> int:
    """The KID subset size: the one asked for, else the default, or every image of the smaller set if it holds fewer."""
    return asked if asked is not None else min(KID_SUBSET_SIZE, smallest)


def _check_kid(o: Any, n_ref: int) -> None:
    if o.kid_subsets < 1:
        raise ArgumentError("kid_subsets", f"{{arg}} must be at least 1, got {o.kid_subsets}")
    smallest = min(o.n, n_ref)
    size = kid_subset_size(o.kid_subset_size, smallest)
    if not 2 <= size <= smallest:
        raise ArgumentError("kid_subset_size", f"KID draws subsets of {{arg}}={size} images from each "
                            f"set, but the smaller set has {smallest} (n={o.n}, reference {n_ref}); lower {{arg}} "
                            f"(or leave it out: it then fits the smaller set) or generate more images")


def _check_k(o: Any, n_ref: int) -> None:
    if o.k < 1 or o.k >= min(o.n, n_ref):
        raise ArgumentError("k", f"precision/recall use the {{arg}}-th nearest neighbour, which needs 1 <= {{arg}} < "
                            f"{min(o.n, n_ref)} (the smaller set); got {o.k}")


def _accuracy(s: Scoring) -> dict[str, Any]:
    if s.labels is None:
        return {}
    stats = class_statistics(s.probs, s.labels)
    return {"accuracy": stats["accuracy"], "accuracy_per_label": stats["accuracy_per_label"]}


def _diversity(s: Scoring) -> dict[str, Any]:
    if s.labels is None:
        return {}
    mean, per_label = within_class_distance(s.fake, s.labels.cpu())
    return {"diversity": mean, "diversity_per_label": [None if v is None else round(v, 4) for v in per_label]}


def _memorization(s: Scoring) -> dict[str, Any]:
    o = s.options
    train = s.train()
    subset = torch.randperm(len(s.images), generator=torch.Generator().manual_seed(0))[:min(o.memorization_n, len(s.images))]
    scores = {
        "max_ssim_mean": float(max_ssim(s.images[subset], train.images, candidates=o.memorization_candidates).mean()),
        "nn_feature_distance_mean": float(nearest_feature_distance(s.fake[subset], train.features).mean()),
        "n_generated": len(subset), "train": train.name, "n_train": len(train.images),
        "ssim_candidates": o.memorization_candidates,
    }
    if s.real_images is not None:  # held-out images (the reference) scored alike: what no memorising gives
        held = torch.randperm(len(s.real_images), generator=torch.Generator().manual_seed(0))[:len(subset)]
        scores |= {
            "held_out_max_ssim_mean": float(max_ssim(s.real_images[held], train.images,
                                                     candidates=o.memorization_candidates).mean()),
            "held_out_nn_feature_distance_mean": float(nearest_feature_distance(s.real[held], train.features).mean()),
            "n_held_out": len(held),
        }
    return {"memorization": scores}


def _check_memorization(o: Any, n_ref: int) -> None:
    if o.memorization_n < 1:
        raise ArgumentError("memorization_n", f"{{arg}} must be at least 1, got {o.memorization_n}")
    if o.memorization_candidates < 0:
        raise ArgumentError("memorization_candidates", f"{{arg}} must be 0 (all) or more, got {o.memorization_candidates}")


def _swd(s: Scoring) -> dict[str, Any]:
    if s.real_images is None:
        raise ArgumentError("metrics", "swd compares pixels and needs the reference images, which this evaluation "
                            "did not keep")
    scores = swd(s.real_images, s.images)  # fixed patch places and directions: a figure repeats exactly
    return {"swd": scores["swd"], "swd_per_level": {k: v for k, v in scores.items() if k != "swd"}}


@hookimpl
def register_metrics(register):
    register("fid", _fid, summary="Frechet distance between the feature distributions (torchmetrics)")
    register("kid", _kid, check=_check_kid,
             summary="kernel distance: the raw unbiased MMD^2 estimate, no factor (it can fall below 0), mean and "
                     "std over subsets (torchmetrics)")
    register("precision", lambda s: s.precision_recall()[0], check=_check_k,
             summary="share of samples inside the reference's k-NN manifold (Kynkaanniemi et al. 2019)")
    register("recall", lambda s: s.precision_recall()[1], check=_check_k,
             summary="share of reference images inside the samples' k-NN manifold")
    register("accuracy", _accuracy, needs=("classes",),
             summary="agreement of the feature classifier with the requested labels, overall and per label "
                     "(class-conditional sources)")
    register("diversity", _diversity,
             summary="mean pairwise feature distance among images of one label, averaged over labels "
                     "(labelled sources; real images of the reference set the scale)")
    register("swd", _swd,
             summary="sliced Wasserstein distance x1e3 of 7x7 patches per Laplacian-pyramid level, on pixels "
                     "(Karras et al. 2018); per level and mean; no feature network involved")
    register("memorization", _memorization, needs=("train",), check=_check_memorization,
             summary="mean max-SSIM and nearest-neighbour feature distance of a fixed subset of samples to the "
                     "training images, beside the same figures of as many held-out reference images (held_out_*)")
