"""The score functions: FID, KID, precision/recall, class statistics, memorisation, within-label diversity.

Every function here works on features (or images) it is given; :func:`genzoo.evaluate` extracts
them once and runs the metrics named in ``--metrics`` (the rows of :mod:`genzoo.metrics.builtin`
and of plugins). FID and KID are torchmetrics' code, handed the features through an identity
``feature=`` module.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any

import torch
from torch import nn

from ..errors import GenzooError


class _Precomputed(nn.Module):
    """Identity 'feature network' for torchmetrics: the inputs already are features."""

    def __init__(self, num_features: int):
        super().__init__()
        self.num_features = num_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


KID_SUBSET_SIZE = 1000  # images per KID subset, unless the smaller set holds fewer


def fid(real: torch.Tensor, fake: torch.Tensor) -> float:
    """Fréchet distance between two feature sets, computed by torchmetrics."""
    from torchmetrics.image.fid import FrechetInceptionDistance

    metric = FrechetInceptionDistance(feature=_Precomputed(real.shape[1]), normalize=False)
    metric.update(real.double(), real=True)
    metric.update(fake.double(), real=False)
    return float(metric.compute())


def kid(real: torch.Tensor, fake: torch.Tensor, *, subset_size: int = KID_SUBSET_SIZE, subsets: int = 100,
        seed: int = 0) -> tuple[float, float | None]:
    """Kernel Inception Distance (mean, std over subsets), computed by torchmetrics.

    The raw unbiased estimate of MMD^2 (cubic polynomial kernel), with no factor applied: being unbiased, it can
    fall below 0 when the two sets are very close. When a subset takes every image of both sets, every subset is
    the same set: KID is computed once and its std is None (a spread over copies of one value would mean nothing).
    """
    from torchmetrics.image.kid import KernelInceptionDistance

    smallest = min(len(real), len(fake))
    if smallest < subset_size:
        raise GenzooError(
            f"KID needs at least subset_size={subset_size} images in each set, got {smallest}; "
            f"generate more (-n) or lower --kid-subset-size"
        )
    every_image = subset_size >= max(len(real), len(fake))
    with warnings.catch_warnings():  # its note about keeping features in memory: we hand it features anyway
        warnings.simplefilter("ignore", UserWarning)
        metric = KernelInceptionDistance(feature=_Precomputed(real.shape[1]), subset_size=subset_size,
                                         subsets=1 if every_image else subsets, normalize=False)
    metric.update(real, real=True)
    metric.update(fake, real=False)
    with _seeded(seed):
        mean, std = metric.compute()
    return float(mean), None if every_image else float(std)


def _kth_neighbour_radii(x: torch.Tensor, k: int, chunk: int = 2048) -> torch.Tensor:
    """Distance from each row of x to its k-th nearest other row."""
    radii = []
    for start in range(0, len(x), chunk):
        d = torch.cdist(x[start:start + chunk], x)
        radii.append(d.kthvalue(k + 1, dim=1).values)  # +1: the point itself is at distance 0
    return torch.cat(radii)


def _coverage(points: torch.Tensor, centres: torch.Tensor, radii: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
    """For each point: does it lie inside some ball (centre_j, radius_j)?"""
    inside = []
    for start in range(0, len(points), chunk):
        d = torch.cdist(points[start:start + chunk], centres)
        inside.append((d <= radii[None]).any(dim=1))
    return torch.cat(inside)


def precision_recall(real: torch.Tensor, fake: torch.Tensor, k: int = 3) -> tuple[float, float]:
    """Improved precision and recall (Kynkäänniemi et al., 2019) with k-NN manifolds."""
    if min(len(real), len(fake)) <= k:
        raise GenzooError(f"precision/recall with k={k} needs more than {k} images in each set")
    real, fake = real.double(), fake.double()
    precision = _coverage(fake, real, _kth_neighbour_radii(real, k)).double().mean()
    recall = _coverage(real, fake, _kth_neighbour_radii(fake, k)).double().mean()
    return float(precision), float(recall)


def class_statistics(probs: torch.Tensor, labels: torch.Tensor | None) -> dict[str, Any]:
    """Histogram of predicted classes, its normalised entropy, mean confidence, and accuracy."""
    num_classes = probs.shape[1]
    predicted = probs.argmax(1)
    hist = torch.bincount(predicted, minlength=num_classes).double() / len(predicted)
    nonzero = hist[hist > 0]
    entropy = float(-(nonzero * nonzero.log()).sum() / math.log(num_classes))
    out: dict[str, Any] = {
        "histogram": [round(float(h), 5) for h in hist],
        "entropy": round(entropy, 5),
        "confidence": round(float(probs.max(1).values.mean()), 5),
    }
    if labels is not None:
        labels = labels.cpu()
        correct = (predicted == labels).double()
        out["accuracy"] = float(correct.mean())
        # per requested label (None where a label was never requested): "all digits, not just some"
        out["accuracy_per_label"] = [round(float(correct[labels == c].mean()), 5) if (labels == c).any() else None
                                     for c in range(num_classes)]
    return out


def max_ssim(generated: torch.Tensor, train: torch.Tensor, *, candidates: int = 64, chunk: int = 64) -> torch.Tensor:
    """For each generated image, the maximum SSIM to the training images.

    SSIM is torchmetrics' default (Gaussian window 11, sigma 1.5, data range 1). Only the
    ``candidates`` nearest training images in pixel L2 are scored (a prefilter; 0 scores all).
    """
    from torchmetrics.functional.image import structural_similarity_index_measure as ssim

    flat_train = train.flatten(1)
    best = []
    for start in range(0, len(generated), chunk):
        g = generated[start:start + chunk]
        if candidates and candidates < len(train):
            index = torch.cdist(g.flatten(1), flat_train).topk(candidates, largest=False).indices
        else:
            index = torch.arange(len(train)).expand(len(g), -1)
        pairs_g = g.repeat_interleave(index.shape[1], 0)
        pairs_t = train[index.flatten()]
        scores = ssim(pairs_g, pairs_t, data_range=1.0, reduction="none").view(len(g), -1)
        best.append(scores.max(1).values)
    return torch.cat(best)


def within_class_distance(features: torch.Tensor, labels: torch.Tensor, *, per_class: int = 500,
                          seed: int = 0) -> tuple[float, list[float | None]]:
    """Mean pairwise feature distance among images of one label, averaged over labels (and per label).

    At most ``per_class`` images of each label (a fixed random subset) enter, so the cost stays
    quadratic in ``per_class`` only. A collapsed generator scores about 0; real images set the scale.
    """
    generator = torch.Generator().manual_seed(seed)
    per_label: list[float | None] = []
    for c in range(int(labels.max()) + 1 if len(labels) else 0):
        members = (labels == c).nonzero()[:, 0]
        if len(members) < 2:
            per_label.append(None)
            continue
        members = members[torch.randperm(len(members), generator=generator)[:per_class]]
        f = features[members].double()
        d = torch.cdist(f, f)
        per_label.append(float(d.sum() / (len(f) * (len(f) - 1))))
    present = [v for v in per_label if v is not None]
    return (sum(present) / len(present) if present else float("nan")), per_label


def nearest_feature_distance(generated: torch.Tensor, train: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """For each generated feature vector, the L2 distance to the nearest training feature vector."""
    return torch.cat([torch.cdist(generated[s:s + chunk], train).min(1).values for s in range(0, len(generated), chunk)])


@contextlib.contextmanager
def _seeded(seed: int):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
