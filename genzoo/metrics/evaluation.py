"""The whole evaluation: generate (or read) images, extract features once, run the metrics named.

Every setting and its default lives in :class:`EvalOptions`; ``genzoo eval`` builds its options
from the same dataclass. Every argument is checked before any image is generated. ``apply`` may
name several K (``--apply 1,2,3``): the reference is read and its features extracted once, and
each K gets a report of its own.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass
from typing import Any

import torch

from .._version import __version__
from ..compiling import check_compile, compile_for_sampling, uncompile
from ..configs import option
from ..datasets import ImageData, fixed_permutation, load_dataset
from ..errors import ArgumentError, GenzooError
from ..generate import (COMPILE_HELP, PRECISION_HELP, PROGRESS_HELP, Compile, Precision, check_refine, checked,
                        generate, typed_options)
from ..loading import load
from ..memory import check_images_fit
from ..method import BATCH_SIZE, INFERENCE_PRECISION, Method
from ..plugins import find_model, get_host
from ..progress import progress_bar
from ..registry import RANKED_METRICS
from .features import FeatureSpace, extract, feature_space
from .scores import KID_SUBSET_SIZE, class_statistics
from ..entries import SPEC_PREFIXES, MetricEntry
from .scoring import Scoring, TrainingSet

DEFAULT_METRICS = "fid,kid,precision,recall,accuracy"
PIXEL_METRICS = ("swd",)  # computed on the images alone: they need no feature network
PIXELS = "pixels"  # what a report names as its features when no feature network was used
REFERENCE_SEED = 0  # the fixed permutation that draws reference subsets


@dataclass
class EvalOptions:
    """Settings of one evaluation (the options of ``genzoo eval``)."""

    n: int = option(10000, flags=("-n", "--num"), help="Number of generated images to score.")
    ref: str = option("mnist:test", help="Reference images: a dataset spec (drawn with a fixed permutation).")
    metrics: str | None = option(None, help="Comma list of metrics (`genzoo datasets --metrics` lists them; default: "
                                            "the --ref dataset's own list, else fid,kid,precision,recall, and "
                                            "accuracy where the feature network classifies; swd, on pixels, where "
                                            "there is no feature network).")
    features: str | None = option(None, help="Feature network (default: the one registered for --ref's dataset, none "
                                             "for folder: and npz: references; 'inception' online).")
    refine: str | None = option(None, metavar="MODEL", help="Refine the samples with another model first.")
    refine_steps: int | None = option(None, help="Steps for --refine (default: the refiner's own).")
    refine_options: dict[str, Any] = option(default_factory=dict, cli=False)
    sample_options: dict[str, Any] = option(default_factory=dict, cli=False)  # the generator's, e.g. steps
    apply: int | tuple[int, ...] = option(1, help="Apply the model K times (sample, then refine K-1 times); "
                                                   "K1,K2,... scores each K (one report each).")
    labels: Any = option(None, cli=False)
    seed: int = option(0, help="Image i of the samples depends only on (seed, i).")
    data_root: str | None = option(None, help="Where datasets live (default: $GENZOO_DATA_ROOT or ./data).")
    train: str | None = option(None, help="Training images for memorization (default: the training split of --ref).")
    memorization_n: int = option(1000, help="Generated images (a fixed random subset) scored for memorization.")
    memorization_candidates: int = option(64, help="Pixel-nearest training images scored by SSIM per sample (0: all).")
    kid_subset_size: int | None = option(None, help=f"Images per KID subset (default: every image of the smaller "
                                                    f"set, at most {KID_SUBSET_SIZE:,}).")
    kid_subsets: int = option(100, help="Number of KID subsets.")
    k: int = option(3, help="Neighbour k of the precision/recall manifolds.")
    n_ref: int | None = option(None, help="Reference images to use (default: as many as -n, at most the split).")
    batch_size: int = option(BATCH_SIZE, help="Images per batch when generating and extracting features.")
    device: Any = option(None, cli=False)
    precision: Precision = option(INFERENCE_PRECISION, help=PRECISION_HELP)
    compile: Compile = option("auto", help=COMPILE_HELP)
    progress: bool = option(True, flags=("--progress/--no-progress",), help=PROGRESS_HELP)

    def applies(self) -> tuple[int, ...]:
        """The K of ``apply``, as a tuple."""
        return (self.apply,) if isinstance(self.apply, int) else tuple(self.apply)

    def metric_entries(self, can_classify: bool = True) -> list[MetricEntry]:
        metrics = self.metrics
        host = get_host()
        if metrics is None:
            dataset = host.datasets.get(self.ref.split(":", 1)[0])
            metrics = (dataset.default_metrics if dataset is not None else "") or DEFAULT_METRICS
            if not can_classify:
                metrics = ",".join(m for m in metrics.split(",") if m.strip() != "accuracy")
        names = [m.strip() for m in metrics.split(",") if m.strip()] if isinstance(metrics, str) \
            else [str(m) for m in metrics]
        names = ["memorization" if m == "memorisation" else m for m in names]
        if not names:
            raise ArgumentError("metrics", "{arg} names no metric; give a comma list such as fid,kid")
        unknown = sorted(set(names) - set(host.metrics))
        if unknown:
            raise ArgumentError("metrics", f"{{arg}}: unknown metric(s) {unknown}; choose from {', '.join(sorted(host.metrics))}")
        return [host.metric(name) for name in dict.fromkeys(names)]

    def check(self) -> None:
        """Refuse bad settings that need no data to see."""
        for name, value in (("n", self.n), ("batch_size", self.batch_size), *(("apply", k) for k in self.applies())):
            if value < (2 if name == "n" else 1):
                raise ArgumentError(name, f"{{arg}} must be at least {2 if name == 'n' else 1}, got {value}")
        if not self.applies():
            raise ArgumentError("apply", "{arg} names no K; give one, or a comma list such as 1,2,3")
        check_compile(self.compile)
        if self.n_ref is not None and self.n_ref < 2:
            raise ArgumentError("n_ref", f"{{arg}} must be at least 2, got {self.n_ref}")
        if self.refine_steps is not None and self.refine_steps < 0:
            raise ArgumentError("refine_steps", f"{{arg}} must be >= 0, got {self.refine_steps}")
        if (self.refine_options or self.refine_steps is not None) and self.refine is None:
            raise ArgumentError("refine", "refine options and steps need a refiner: pass {arg}=MODEL")
        self.metric_entries()


def evaluate(source: Any, **options: Any) -> dict[str, Any] | list[dict[str, Any]]:
    """Score ``n`` images from ``source`` against the reference split ``ref``; returns a JSON-ready dict.

    ``source`` is anything ``genzoo.load`` resolves (then ``refine``/``apply`` compose as in
    ``genzoo sample``), ``npz:PATH``/``folder:PATH``, a Method, or a tensor of images in [0, 1].
    Keyword arguments are the fields of :class:`EvalOptions`. Memorisation compares a fixed random
    subset of ``memorization_n`` generated images with ``train`` (default: the training split of
    ``ref``'s dataset). With ``apply`` a sequence of K, the result is a list: one report per K. Against a
    reference no feature network is registered for (``folder:``, ``npz:``) and with no ``features`` named, only
    the metrics on pixels run (swd), and the report's ``notes`` say how to score FID.
    """
    known = {f.name for f in dataclasses.fields(EvalOptions)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise GenzooError(f"evaluate() got unknown argument(s) {unknown}; it takes: {', '.join(sorted(known))}")
    o = EvalOptions(**options)
    o.check()
    t0 = time.time()
    model = _source_model(source, o)  # the model and its options first: a bad option is named before any metric's
    refiner = _refiner(o)  # own precondition, and before any data is read
    if model is not None:
        check_images_fit([model, refiner], o.n, batch_size=o.batch_size, device=o.device, precision=o.precision,
                         where=str(source) if isinstance(source, str) else None)
    dev = torch.device(o.device) if o.device is not None else torch.device("cpu")
    dataset_name = o.ref.split(":", 1)[0]
    pixels_only = o.features is None and not _has_feature_network(dataset_name)
    if pixels_only:
        o.metrics = _pixel_metrics(o)
        space = None
        entries = o.metric_entries(False)
    else:
        space = feature_space(o.features, dataset=dataset_name, device=dev)
        entries = o.metric_entries(space.can_classify())
    if space is not None and any("classes" in e.needs for e in entries) and not space.can_classify():
        needing = ", ".join(e.name for e in entries if "classes" in e.needs)
        raise ArgumentError("metrics", f"feature network {space.name!r} cannot classify, so {needing} is unavailable; "
                            f"drop it from {{arg}}")

    reference = load_dataset(o.ref, o.data_root, default_split="test")
    ref_count = min(len(reference), o.n_ref or o.n)
    for entry in entries:
        if entry.check is not None:
            entry.check(o, ref_count)
    train_data = _training_set(o, dataset_name) if any("train" in e.needs for e in entries) else None
    _check_shapes(model, refiner, reference, train_data)
    given = _given_images(source, o) if model is None else None
    _check_inputs(given, space, reference, o)  # before any network runs
    catalogue = _catalogue_figures(source, o)

    notes = [_features_note(o.ref, reference)] if pixels_only else []

    ref_index = fixed_permutation(len(reference), REFERENCE_SEED)[:ref_count]
    ref_images = reference.floats(ref_index)
    setup_seconds = time.time() - t0
    t1 = time.time()
    real_f = _features(space, ref_images, o, "reference features")[0]
    reference_seconds = time.time() - t1  # counted in the first report, with the setup
    train_features: list[TrainingSet] = []

    def load_train() -> TrainingSet:  # once, for every K
        if not train_features:
            features, _ = extract(space, train_data.floats(), progress=o.progress, desc="training-set features")
            train_features.append(TrainingSet(train_data.name, train_data.floats(), features))
        return train_features[0]

    reports = []
    for k in o.applies():
        t1 = time.time()
        one = dataclasses.replace(o, apply=k)
        images, used_labels, source_name = given or _images(source, model, refiner, one)
        if tuple(images.shape[1:]) != tuple(ref_images.shape[1:]):
            raise GenzooError(f"the images of {source_name} have shape {tuple(images.shape[1:])} but the reference "
                              f"{o.ref} has {tuple(ref_images.shape[1:])}; evaluate against a reference of the same size")
        timings = {"generate": time.time() - t1 + (setup_seconds if not reports else 0.0)}
        t2 = time.time()
        fake_f, fake_p = _features(space, images, o, "sample features")
        timings["features"] = time.time() - t2 + (reference_seconds if not reports else 0.0)
        scoring = Scoring(real_f, fake_f, fake_p, used_labels, images, one,
                          load_train if train_data is not None else None, real_images=ref_images)
        results: dict[str, Any] = {}
        t3 = time.time()
        for entry in progress_bar(entries, o.progress, desc="metrics", unit="metric", leave=False):
            started = time.time()
            results.update(entry.run(scoring))
            timings[entry.name] = time.time() - started
        timings["metrics"] = time.time() - t3
        if fake_p is not None:
            results["classes"] = class_statistics(fake_p, None)
        reports.append({
            "genzoo_version": __version__,
            "source": source_name,
            "refine": o.refine if isinstance(o.refine, str) or o.refine is None else getattr(o.refine, "name", str(o.refine)),
            "apply": k,
            "refine_steps": o.refine_steps,
            "refine_options": dict(o.refine_options or {}),
            "sample_options": dict(o.sample_options or {}),
            "n": len(images),
            "seed": o.seed,
            "reference": {"spec": o.ref, "n": ref_count, "drawn_with": f"fixed permutation, seed {REFERENCE_SEED}"},
            "features": ({"name": space.name, "sha256": space.sha256, "num_features": space.num_features}
                         if space is not None else {"name": PIXELS, "sha256": None, "num_features": 0}),
            "labels": "given" if used_labels is not None else None,
            "metrics": results,
            "catalogue": [figure for figure in catalogue if _same_samples(figure["of"], one)],
            "seconds": {key: round(value, 2) for key, value in timings.items()},
            "notes": notes,
        })
    return reports[0] if isinstance(o.apply, int) else reports


def _has_feature_network(dataset: str) -> bool:
    """Whether a feature network is registered for ``dataset`` (a named dataset; never ``folder`` or ``npz``)."""
    return any(dataset in entry.datasets for entry in get_host().feature_extractors.values())


def _pixel_metrics(o: EvalOptions) -> str:
    """The metrics of an evaluation with no feature network: those asked for, which must all compare pixels, or by
    default every metric that does."""
    if o.metrics is None:
        return ",".join(PIXEL_METRICS)
    entries = o.metric_entries(False)
    needing = [e.name for e in entries if e.name not in PIXEL_METRICS]
    if needing:
        raise ArgumentError("features", f"{', '.join(needing)} compare{'s' if len(needing) == 1 else ''} features, and "
                            f"no feature network is registered for --ref {o.ref}; name one that takes its images with "
                            f"{{arg}} NAME ({_feature_choices()}), or score pixels alone with --metrics "
                            f"{','.join(PIXEL_METRICS)}")
    return o.metrics


def _feature_choices() -> str:
    """The feature networks and the image shape each takes (that of the datasets it is registered for)."""
    host = get_host()
    choices = []
    for entry in host.feature_extractors.values():
        shapes = {tuple(host.datasets[d].shape) for d in entry.datasets if d in host.datasets}
        takes = " or ".join("x".join(map(str, shape)) for shape in sorted(shapes))
        choices.append(f"{entry.name}: {takes} images" if takes else entry.name)
    return "; ".join(choices + ["inception: any size, its weights downloaded on first use"])


def _features_note(ref: str, reference: ImageData) -> str:
    """How to score FID and the other feature metrics against a reference no feature network is registered for."""
    shape = "x".join(map(str, reference.image_shape))
    return (f"no feature network is registered for {ref} ({shape} images), so only pixels were compared; for FID, "
            f"KID, precision and recall pass --features NAME ({_feature_choices()})")


def _features(space: FeatureSpace | None, images: torch.Tensor, o: EvalOptions,
              desc: str) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The features and class probabilities of ``images`` (None, None without a feature network)."""
    if space is None:
        return None, None
    return extract(space, images, progress=o.progress, desc=desc)


def _training_set(o: EvalOptions, dataset_name: str) -> ImageData:
    if o.train is not None and not isinstance(o.train, str):
        return o.train
    if o.train is None and dataset_name in SPEC_PREFIXES:
        raise ArgumentError("train", f"memorization compares samples with training images, and --ref {o.ref} names "
                            f"files, not a dataset with a training split; name them with {{arg}} (a dataset, "
                            f"folder:PATH or npz:PATH)")
    return load_dataset(o.train or f"{dataset_name}:train", o.data_root)


def _source_model(source: Any, o: EvalOptions) -> Method | None:
    """The generator to sample from (None for tensors and npz:/folder: files), loaded before any work."""
    if isinstance(source, torch.Tensor) or (isinstance(source, str) and source.split(":", 1)[0] in ("npz", "folder")):
        if o.refine is not None or o.applies() != (1,):
            raise ArgumentError("refine", f"{{arg}} and apply work on a model's samples, not on the images of {source}")
        if o.sample_options:
            raise ArgumentError("sample_options", f"{{arg}} {sorted(o.sample_options)} are a model's; {source} is images")
        return None
    model = source if isinstance(source, Method) else load(source, device=o.device)
    model.require("sample")
    # typed and range-checked by what the model declares (CLI values arrive as strings)
    o.sample_options = typed_options(o.sample_options or {}, model.sample_options, "sample_options",
                                     f"{model.name} sample")
    return model


def _refiner(o: EvalOptions) -> Method | None:
    """The refiner of ``refine``, loaded, with ``refine_options`` typed and checked by it before any image is made."""
    if o.refine is None:
        return None
    refiner = load(o.refine, device=o.device) if isinstance(o.refine, str) else o.refine
    refiner.require("refine")
    o.refine_options = typed_options(o.refine_options or {}, refiner.refine_options, "refine_options",
                                     f"{refiner.name} refine")
    check_refine(refiner, o.refine_steps, o.refine_options)
    return refiner


def _catalogue_figures(source: Any, o: EvalOptions) -> list[dict[str, Any]]:
    """The catalogue's distances for a catalogue model's own samples, with what they measured (``of``), their n and
    reference: each report keeps those of the samples it scores (:func:`_same_samples`), so a different n or
    reference can be said beside them. None for a refiner's samples or requested labels.
    """
    if not isinstance(source, str) or o.refine is not None or o.labels is not None:
        return []
    try:
        entry = find_model(source)
    except GenzooError:
        return []
    return [{"model": entry.name, "metric": m.metric, "value": m.value, "n": m.n, "reference": m.reference,
             "features": m.features, "of": m.of} for m in entry.metrics if m.metric in RANKED_METRICS and m.n]


def _same_samples(of: str | None, o: EvalOptions) -> bool:
    """Whether a catalogue figure measured the samples ``o`` makes: the model's default ones (no ``of``), or those
    its ``of`` names: every ``--opt KEY=VALUE`` given (``two steps (--opt steps=2)``), or f(f(z)) for ``apply`` 2."""
    (k,) = o.applies()
    if not of:
        return k == 1 and not o.sample_options
    if k > 1 and of != "f(" * k + "z" + ")" * k and f"--apply {k}" not in of:
        return False
    return all(f"--opt {key}={value}" in of for key, value in (o.sample_options or {}).items()) and \
        (bool(o.sample_options) or k > 1)


def _check_shapes(model: Method | None, refiner: Method | None, reference: ImageData, train: ImageData | None) -> None:
    """A model's image shape against the reference's (and the memorisation set's), before sampling."""
    if model is None:
        return
    shape = model.image_shape
    for name, data in (("ref", reference), ("train", train)):
        if data is not None and tuple(data.image_shape) != tuple(shape):
            raise ArgumentError(name, f"{model.name} makes images of shape {shape} but {{arg}} {data.name} holds "
                                f"{tuple(data.image_shape)}; evaluate against data of the same size")


def _given_images(source: Any, o: EvalOptions) -> tuple[torch.Tensor, torch.Tensor | None, str]:
    """The images to score when ``source`` is images (a tensor, or npz:/folder: files), read once and checked."""
    if isinstance(source, torch.Tensor):
        if len(source) < o.n:
            raise ArgumentError("n", f"the tensor holds {len(source)} images, fewer than {{arg}}={o.n}; lower {{arg}}")
        images = source[:o.n].float()
        if not bool(torch.isfinite(images).all()):
            bad = int((~torch.isfinite(images)).sum())
            raise GenzooError(f"the tensor holds {bad:,} NaN or infinite pixel values; images are scored only when "
                              f"every value is a number in [0, 1]")
        return images, o.labels, "tensor"
    data = load_dataset(source)
    if len(data) < o.n:
        raise ArgumentError("n", f"{source} holds {len(data)} images, fewer than {{arg}}={o.n}; lower {{arg}}")
    index = torch.arange(o.n)
    return data.floats(index), (data.labels[index] if data.labels is not None else o.labels), source


def _check_inputs(given: tuple[torch.Tensor, Any, str] | None, space: Any, reference: ImageData,
                  o: EvalOptions) -> None:
    """The reference against the feature network's input, and given images against the reference, by shape."""
    if len(reference) == 0:
        raise ArgumentError("ref", f"{{arg}} {reference.name} holds no images; give a reference with images")
    takes = getattr(space.module, "image_shape", None) if space is not None else None
    if takes is not None and tuple(takes) != tuple(reference.image_shape):
        raise ArgumentError("ref", f"{{arg}} {reference.name} holds images of shape {tuple(reference.image_shape)} "
                            f"(C, H, W), but feature network {space.name} takes {tuple(takes)}; give a reference of "
                            f"that shape, or another --features")
    if given is not None and tuple(given[0].shape[1:]) != tuple(reference.image_shape):
        raise ArgumentError("ref", f"the images of {given[2]} have shape {tuple(given[0].shape[1:])} (C, H, W) but "
                            f"{{arg}} {reference.name} holds {tuple(reference.image_shape)}; evaluate against a "
                            f"reference of the same size")


def _images(source: Any, model: Method | None, refiner: Method | None,
            o: EvalOptions) -> tuple[torch.Tensor, torch.Tensor | None, str]:
    """Images to score from a model."""
    options = checked(model, "sample", o.sample_options, "sample_options")
    said = compile_for_sampling(model, o.n, options, o.compile)
    if said:
        print(said, file=sys.stderr)
    try:
        images, used = generate(model, o.n, seed=o.seed, labels=o.labels, apply=o.apply, refiner=refiner,
                                refine_steps=o.refine_steps, refine_options=o.refine_options, batch_size=o.batch_size,
                                device=o.device, precision=o.precision, progress=o.progress, options=options)
    finally:
        if said:
            uncompile(model)  # a model passed in from Python comes back as it was
    return images, used, str(source) if isinstance(source, str) else model.name
