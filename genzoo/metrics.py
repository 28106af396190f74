"""Scores for generated images: FID, KID, precision/recall, memorisation, class accuracy and coverage.

Features come from a feature network registered by a plugin (for MNIST, genzoo's own CNN: Inception
weights cannot be downloaded offline). They are extracted once per image set and handed to
torchmetrics' FID and KID through an identity ``feature=`` module, and reused for precision/recall
and nearest-neighbour distances, so every number is measured in the same space.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch import nn

from ._version import __version__
from .errors import GenzooError

METRICS = ("fid", "kid", "precision", "recall", "memorization", "accuracy")
DEFAULT_METRICS = ("fid", "kid", "precision", "recall", "accuracy")
REFERENCE_SEED = 0  # the fixed permutation that draws reference and memorisation subsets


@dataclass
class FeatureSpace:
    """A loaded feature network and what identifies it in reports."""

    name: str
    module: nn.Module
    sha256: str | None

    @property
    def num_features(self) -> int:
        return int(self.module.num_features)

    def can_classify(self) -> bool:
        return hasattr(self.module, "classify")


class _Precomputed(nn.Module):
    """Identity 'feature network' for torchmetrics: the inputs already are features."""

    def __init__(self, num_features: int):
        super().__init__()
        self.num_features = num_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


# -- feature networks ------------------------------------------------------------------------


def feature_space(name: str | None = None, *, dataset: str | None = None, device: torch.device | str = "cpu") -> FeatureSpace:
    """The feature network called ``name``, or the one registered for ``dataset``."""
    from .plugins import get_host

    if name == "inception":
        return _inception(device)
    host = get_host()
    records = host.feature_extractors
    if name is None:
        matches = [r for r in records.values() if dataset in r.datasets]
        if not matches:
            known = ", ".join(f"{r.name} ({', '.join(r.datasets)})" for r in records.values()) or "none"
            raise GenzooError(
                f"no feature network is registered for dataset {dataset!r} (available: {known}); pass --features NAME"
            )
        record = matches[0]
    elif name in records:
        record = records[name]
    else:
        known = ", ".join(sorted(records)) or "none"
        raise GenzooError(f"unknown feature network {name!r}; available: {known}, inception (online only)")
    module = record.factory().to(device).eval().requires_grad_(False)
    if not isinstance(getattr(module, "num_features", None), int):
        raise GenzooError(f"feature network {record.name!r} must have an integer num_features attribute")
    sha = None
    model_entry = host.all_models().get(record.name)
    if model_entry is not None:
        sha = model_entry.files.get("model.safetensors")
    return FeatureSpace(record.name, module, sha)


def _inception(device) -> FeatureSpace:
    try:
        from torchmetrics.image.fid import NoTrainInceptionV3

        net = NoTrainInceptionV3(name="inception-v3-compat", features_list=["2048"])
    except ModuleNotFoundError:
        raise GenzooError("--features inception needs torch-fidelity: pip install torch-fidelity") from None
    except Exception as exc:
        raise GenzooError(
            f"--features inception could not load the Inception weights ({str(exc).splitlines()[0][:100]}); "
            f"they are downloaded on first use, so run once online or use genzoo's own features"
        ) from None

    class Inception(nn.Module):
        num_features = 2048

        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            x = x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x
            return self.net(torch.round(x.clamp(0, 1) * 255).to(torch.uint8)).reshape(x.shape[0], -1)

    return FeatureSpace("inception", Inception().to(device).eval(), None)


@torch.no_grad()
def extract(space: FeatureSpace, images: torch.Tensor, *, batch_size: int = 500, progress: bool = False,
            desc: str = "features") -> tuple[torch.Tensor, torch.Tensor | None]:
    """Features (N, D) and, if the network classifies, class probabilities (N, C), on the CPU."""
    from tqdm.auto import tqdm

    device = next(space.module.parameters(), torch.empty(0)).device
    feats, probs = [], []
    for start in tqdm(range(0, len(images), batch_size), desc=desc, disable=not progress, leave=False):
        batch = images[start:start + batch_size].to(device).float()
        f = space.module(batch)
        feats.append(f.float().cpu())
        if space.can_classify():
            probs.append(torch.softmax(space.module.classify(batch).float(), 1).cpu())
    return torch.cat(feats), (torch.cat(probs) if probs else None)


# -- the metrics -----------------------------------------------------------------------------


def fid(real: torch.Tensor, fake: torch.Tensor) -> float:
    """Fréchet distance between two feature sets, computed by torchmetrics."""
    from torchmetrics.image.fid import FrechetInceptionDistance

    metric = FrechetInceptionDistance(feature=_Precomputed(real.shape[1]), normalize=False)
    metric.update(real.double(), real=True)
    metric.update(fake.double(), real=False)
    return float(metric.compute())


def kid(real: torch.Tensor, fake: torch.Tensor, *, subset_size: int = 1000, subsets: int = 100, seed: int = 0) -> tuple[float, float]:
    """Kernel Inception Distance (mean, std over subsets), computed by torchmetrics."""
    from torchmetrics.image.kid import KernelInceptionDistance

    smallest = min(len(real), len(fake))
    if smallest < subset_size:
        raise GenzooError(
            f"KID needs at least subset_size={subset_size} images in each set, got {smallest}; "
            f"generate more (-n) or lower --kid-subset-size"
        )
    with warnings.catch_warnings():  # its note about keeping features in memory: we hand it features anyway
        warnings.simplefilter("ignore", UserWarning)
        metric = KernelInceptionDistance(feature=_Precomputed(real.shape[1]), subset_size=subset_size,
                                         subsets=subsets, normalize=False)
    metric.update(real, real=True)
    metric.update(fake, real=False)
    with _seeded(seed):
        mean, std = metric.compute()
    return float(mean), float(std)


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


def nearest_feature_distance(generated: torch.Tensor, train: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """For each generated feature vector, the L2 distance to the nearest training feature vector."""
    return torch.cat([torch.cdist(generated[s:s + chunk], train).min(1).values for s in range(0, len(generated), chunk)])


@contextlib.contextmanager
def _seeded(seed: int):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


# -- the whole evaluation -----------------------------------------------------------------------


def _parse_metrics(metrics: str | Sequence[str]) -> list[str]:
    names = [m.strip() for m in (metrics.split(",") if isinstance(metrics, str) else metrics) if m.strip()]
    names = ["memorization" if m == "memorisation" else m for m in names]
    unknown = sorted(set(names) - set(METRICS))
    if unknown:
        raise GenzooError(f"unknown metric(s) {unknown}; choose from {', '.join(METRICS)}")
    return names


def load_source(source: Any, n: int, *, seed: int, labels: torch.Tensor | None = None, refine: Any = None,
                apply: int = 1, refine_steps: int | None = None, refine_options: dict[str, Any] | None = None,
                batch_size: int = 256, device=None, progress: bool = False) -> tuple[torch.Tensor, torch.Tensor | None, str]:
    """Images to score: from a model (name, directory, hf://, or a Method), or npz:/folder: files."""
    from .data import load_dataset
    from .generate import generate
    from .method import Method
    from .weights import load

    if isinstance(source, torch.Tensor):
        return source.float(), labels, "tensor"
    if isinstance(source, str) and source.split(":", 1)[0] in ("npz", "folder"):
        data = load_dataset(source)
        images = data.floats()
        if len(images) < n:
            raise GenzooError(f"{source} holds {len(images)} images, fewer than -n {n}; lower -n")
        index = torch.arange(n)
        return images[index], (data.labels[index] if data.labels is not None else labels), source
    model = source if isinstance(source, Method) else load(source, device=device)
    refiner = load(refine, device=device) if isinstance(refine, str) else refine
    if refine_options and refiner is None:
        raise GenzooError("refine options need a refiner: pass refine=MODEL (--refine)")
    images, used = generate(model, n, seed=seed, labels=labels, apply=apply, refiner=refiner,
                            refine_steps=refine_steps, refine_options=refine_options,
                            batch_size=batch_size, device=device, progress=progress)
    name = source if isinstance(source, str) else model.name
    return images, used, str(name)


def evaluate(
    source: Any,
    *,
    n: int = 10000,
    ref: str = "mnist:test",
    metrics: str | Sequence[str] = DEFAULT_METRICS,
    features: str | None = None,
    refine: Any = None,
    apply: int = 1,
    refine_steps: int | None = None,
    refine_options: dict[str, Any] | None = None,
    labels: torch.Tensor | None = None,
    seed: int = 0,
    data_root: str | None = None,
    train: str | None = None,
    memorization_n: int = 1000,
    memorization_candidates: int = 64,
    kid_subset_size: int = 1000,
    kid_subsets: int = 100,
    k: int = 3,
    n_ref: int | None = None,
    batch_size: int = 256,
    device: torch.device | str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Score ``n`` images from ``source`` against the reference split ``ref``; returns a JSON-ready dict.

    ``source`` is anything ``genzoo.load`` resolves (then ``refine``/``apply`` compose as in
    ``genzoo sample``), ``npz:PATH``/``folder:PATH``, a Method, or a tensor of images in [0, 1].
    Memorisation compares a fixed random subset of ``memorization_n`` generated images with
    ``train`` (default: the training split of ``ref``'s dataset).
    """
    from .data import fixed_permutation, load_dataset

    names = _parse_metrics(metrics)
    if n < 2:
        raise GenzooError(f"-n must be at least 2, got {n}")
    timings: dict[str, float] = {}
    t0 = time.time()
    dev = torch.device(device) if device is not None else torch.device("cpu")
    dataset_name = ref.split(":", 1)[0]
    space = feature_space(features, dataset=dataset_name, device=dev)

    reference = load_dataset(ref, data_root, default_split="test")
    ref_count = min(len(reference), n_ref or n)
    ref_index = fixed_permutation(len(reference), REFERENCE_SEED)[:ref_count]
    ref_images = reference.floats(ref_index)

    images, used_labels, source_name = load_source(source, n, seed=seed, labels=labels, refine=refine, apply=apply,
                                                   refine_steps=refine_steps, refine_options=refine_options,
                                                   batch_size=batch_size, device=device, progress=progress)
    if tuple(images.shape[1:]) != tuple(ref_images.shape[1:]):
        raise GenzooError(
            f"generated images have shape {tuple(images.shape[1:])} but the reference {ref} has "
            f"{tuple(ref_images.shape[1:])}; evaluate against a reference of the same size"
        )
    timings["generate"] = time.time() - t0

    t1 = time.time()
    real_f, _ = extract(space, ref_images, progress=progress, desc="reference features")
    fake_f, fake_p = extract(space, images, progress=progress, desc="sample features")
    timings["features"] = time.time() - t1

    results: dict[str, Any] = {}
    t2 = time.time()
    if "fid" in names:
        results["fid"] = fid(real_f, fake_f)
    if "kid" in names:
        mean, std = kid(real_f, fake_f, subset_size=kid_subset_size, subsets=kid_subsets, seed=seed)
        results["kid"] = {"mean": mean, "std": std, "subset_size": kid_subset_size, "subsets": kid_subsets}
    if "precision" in names or "recall" in names:
        p, r = precision_recall(real_f, fake_f, k=k)
        if "precision" in names:
            results["precision"] = p
        if "recall" in names:
            results["recall"] = r
    timings["fid_kid_pr"] = time.time() - t2
    if fake_p is not None:
        results["classes"] = class_statistics(fake_p, used_labels)
        if "accuracy" in names and used_labels is not None:
            results["accuracy"] = results["classes"].pop("accuracy")
            results["accuracy_per_label"] = results["classes"].pop("accuracy_per_label")
        results["classes"].pop("accuracy", None)
        results["classes"].pop("accuracy_per_label", None)
    elif "accuracy" in names:
        raise GenzooError(f"feature network {space.name!r} cannot classify, so 'accuracy' is unavailable; drop it")
    if "memorization" in names:
        t3 = time.time()
        train_spec = train or f"{dataset_name}:train"
        train_data = train if not isinstance(train, str) and train is not None else load_dataset(train_spec, data_root)
        train_images = train_data.floats()
        subset = fixed_permutation(len(images), REFERENCE_SEED)[:min(memorization_n, len(images))]
        gen = images[subset]
        train_f, _ = extract(space, train_images, progress=progress, desc="training-set features")
        results["memorization"] = {
            "max_ssim_mean": float(max_ssim(gen, train_images, candidates=memorization_candidates).mean()),
            "nn_feature_distance_mean": float(nearest_feature_distance(fake_f[subset], train_f).mean()),
            "n_generated": len(gen),
            "train": getattr(train_data, "name", train_spec),
            "n_train": len(train_images),
            "ssim_candidates": memorization_candidates,
        }
        timings["memorization"] = time.time() - t3
    return {
        "genzoo_version": __version__,
        "source": source_name,
        "refine": refine if isinstance(refine, str) or refine is None else getattr(refine, "name", str(refine)),
        "apply": apply,
        "refine_steps": refine_steps,
        "refine_options": dict(refine_options or {}),
        "n": len(images),
        "seed": seed,
        "reference": {"spec": ref, "n": ref_count, "drawn_with": f"fixed permutation, seed {REFERENCE_SEED}"},
        "features": {"name": space.name, "sha256": space.sha256, "num_features": space.num_features},
        "labels": "given" if used_labels is not None else None,
        "metrics": results,
        "seconds": {k: round(v, 2) for k, v in timings.items()},
    }
