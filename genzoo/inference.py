"""The one path a model's images take, for sample and refine alike: the request checked once (options typed,
range-checked and checked by the method, labels defaulted, the batch size), then the batches, each image seeded
by its own index, at the precision asked for, in eval mode without gradients, with progress, and what the method
returns checked.

``Method.sample`` and ``Method.refine`` are thin over :func:`sample` and :func:`refine`; ``genzoo sample``,
``refine``, ``eval`` and ``push`` reach them through those.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Iterator

import torch

from .configs import coerce_value, config_to_dict
from .errors import GenzooError
from .precision import autocast, check_precision, resolve_precision, timed
from .progress import progress_bar
from .seeding import Noise, random_seed


class CheckedOptions(dict):
    """Options :func:`checked_options` passed: the runner takes them as they are (an option is checked once)."""

    def __init__(self, values: dict[str, Any], steps: int | None):
        super().__init__(values)
        self.steps = steps


def checked_options(model: Any, verb: str, options: dict[str, Any], steps: int | None = None) -> CheckedOptions:
    """``options`` of ``verb`` typed and range-checked by what the method declares (``sample_options``,
    ``refine_options``), then checked against the model by the method itself (``Method.check_options``)."""
    if isinstance(options, CheckedOptions) and options.steps == steps:
        return options
    declared = getattr(model, f"{verb}_options")
    unknown = sorted(set(options) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise GenzooError(f"{model.name} {verb} has no option(s) {unknown}; its options: {known}")
    typed = {key: value if value is None else coerce_value(value, declared[key], f"{model.name} {verb} option {key}")
             for key, value in options.items()}
    if verb == "refine" and steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 0):
        raise GenzooError(f"steps must be an integer >= 0, got {steps!r}")
    model.check_options(verb, typed, steps)
    return CheckedOptions(typed, steps)


def sample(model: Any, n: int, *, labels: Any, seed: int | None, start: int, generator: torch.Generator | None,
           batch_size: int, device: torch.device | str | None, precision: str, progress: bool,
           options: dict[str, Any]) -> torch.Tensor:
    """``n`` images of ``model`` (see ``Method.sample``)."""
    model.require("sample")
    options = checked_options(model, "sample", options)
    if n < 0:
        raise GenzooError(f"n must be >= 0, got {n}")
    if start < 0:
        raise GenzooError(f"start must be >= 0, got {start}")
    _check_batch_size(batch_size)
    seed = random_seed(generator) if seed is None else int(seed)
    label_tensor = model.labels_for(n, labels, first=start)
    device = _move(model, device)
    if n == 0:
        return torch.empty(0, *_shape_or_empty(model))

    def batch(lo: int, hi: int, labels: torch.Tensor | None) -> torch.Tensor:
        return model.sample_batch(Noise(seed, start + lo, start + hi), labels, **options)

    return _in_batches(model, "sample", n, batch, label_tensor, batch_size, device, precision, progress)


def refine(model: Any, x: torch.Tensor, *, labels: Any, steps: int | None, seed: int | None,
           generator: torch.Generator | None, batch_size: int, device: torch.device | str | None, precision: str,
           progress: bool, options: dict[str, Any]) -> torch.Tensor:
    """``x`` refined by ``model`` (see ``Method.refine``)."""
    model.require("refine")
    options = checked_options(model, "refine", options, steps)
    x = model.check_input_images(x)
    _check_batch_size(batch_size)
    seed = random_seed(generator) if seed is None else int(seed)
    n = x.shape[0]
    label_tensor = model.labels_for(n, labels, default=False)
    device = _move(model, device)
    if n == 0:
        return x.clone()

    def batch(lo: int, hi: int, labels: torch.Tensor | None) -> torch.Tensor:
        return model.refine_batch(x[lo:hi].to(device), labels, Noise(seed, lo, hi, "refine"), steps, **options)

    return _in_batches(model, "refine", n, batch, label_tensor, batch_size, device, precision, progress)


def _in_batches(model: Any, verb: str, n: int, batch: Callable[[int, int, torch.Tensor | None], torch.Tensor],
                labels: torch.Tensor | None, batch_size: int, device: torch.device, precision: str,
                progress: bool) -> torch.Tensor:
    """``batch(lo, hi, labels)`` over images 0..n-1 in batches, in eval mode without gradients, at the precision
    asked for (``auto`` times the first batch both ways); the images checked, on the CPU."""
    hook = f"{verb}_batch"

    def labels_of(lo: int, hi: int) -> torch.Tensor | None:
        return None if labels is None else labels[lo:hi].to(device)

    out = []
    with _inference(model):
        first = min(n, batch_size)
        precision = _precision(model, precision, device, verb, lambda: batch(0, first, labels_of(0, first)))
        for lo, hi in _batches(n, batch_size, progress, "sampling" if verb == "sample" else "refining"):
            with autocast(precision, device), _showing_steps(model, progress):
                images = batch(lo, hi, labels_of(lo, hi))
            out.append(_checked_images(model, images, hi - lo, hook).cpu())
    return torch.cat(out)


def _precision(model: Any, requested: str, device: torch.device, verb: str, work: Callable[[], object]) -> str:
    """The precision to run a verb in; for ``auto`` on a native-bf16 CPU, one batch is timed both ways."""
    if check_precision(requested) != "auto":
        return resolve_precision(requested, device)

    def probe(precision: str) -> float:
        def run() -> None:
            with autocast(precision, device):
                work()
        return timed(run)

    key = f"{verb}:{model.name}:{sorted(config_to_dict(model.config).items())}"
    return resolve_precision("auto", device, probe, key)


@contextlib.contextmanager
def _showing_steps(model: Any, progress: bool) -> Iterator[None]:
    """While a batch runs, ``Method.track`` shows the method's own steps (when progress is shown)."""
    model._steps_shown = progress
    try:
        yield
    finally:
        model._steps_shown = False


@contextlib.contextmanager
def _inference(model: Any) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def _checked_images(model: Any, images: torch.Tensor, n: int, hook: str) -> torch.Tensor:
    if images.ndim != 4 or images.shape[0] != n:
        raise GenzooError(f"{model.name}.{hook} returned shape {tuple(images.shape)}, expected {n} x C x H x W")
    return images.float().clamp(0, 1)


def _move(model: Any, device: torch.device | str | None) -> torch.device:
    if device is not None:
        model.to(device)
    return model.device


def _shape_or_empty(model: Any) -> tuple[int, ...]:
    try:
        return model.image_shape
    except GenzooError:
        return (0, 0, 0)


def _check_batch_size(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise GenzooError(f"batch_size must be a positive integer, got {batch_size!r}")


def _batches(n: int, batch_size: int, progress: bool, desc: str) -> Iterable[tuple[int, int]]:
    starts = range(0, n, batch_size)
    for start in progress_bar(starts, progress, desc=desc, unit="batch", total=len(starts), leave=False):
        yield start, min(n, start + batch_size)


__all__ = ["checked_options", "refine", "sample"]
