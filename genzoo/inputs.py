"""What a method's verbs take from their caller, checked: images to refine and the labels of a request
(integers or class names, defaulted to ``i mod num_classes``)."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from .errors import GenzooError


def check_input_images(model: Any, x: torch.Tensor) -> torch.Tensor:
    """Validate images for refine: float NCHW in [0, 1] of this method's shape."""
    if not isinstance(x, torch.Tensor):
        raise GenzooError(f"expected a tensor of images, got {type(x).__name__}")
    if x.dtype == torch.uint8:
        x = x.float() / 255
    if x.ndim != 4:
        raise GenzooError(f"expected images as N x C x H x W, got shape {tuple(x.shape)}")
    try:
        expected = model.image_shape
    except GenzooError:
        expected = None
    if expected is not None and tuple(x.shape[1:]) != expected:
        raise GenzooError(
            f"{model.name} works on images of shape {expected} (C, H, W), got {tuple(x.shape[1:])}; "
            f"resize or convert the input first"
        )
    if x.numel() and (x.min() < 0 or x.max() > 1):
        raise GenzooError(f"images must be floats in [0, 1], got values in [{x.min():.3g}, {x.max():.3g}]")
    return x.float()

def labels_for(model: Any, n: int, labels: Any, *, default: bool = True, first: int = 0) -> torch.Tensor | None:
    """The labels of ``n`` images as a tensor: given ones (integers or class names, k < n of them repeating in
    turn) checked against the classes; none given, ``i mod num_classes`` from image ``first`` on (with
    ``default``) or None."""
    if labels is None:
        if default and model.num_classes:
            return torch.arange(first, first + n) % model.num_classes
        return None
    if not model.num_classes:
        raise GenzooError(f"method {model.name!r} is unconditional; it takes no labels (drop --labels)")
    if isinstance(labels, (list, tuple)) and any(isinstance(label, str) for label in labels):
        labels = label_indices(model, labels)
    labels = torch.as_tensor(labels, dtype=torch.long).flatten()
    if labels.numel() > n or (n and not labels.numel()):
        raise GenzooError(f"got {labels.numel()} labels for {n} images; give from one to one per image (fewer "
                          f"repeat in turn)")
    if 0 < labels.numel() < n:  # image i takes label i mod k, as the default labels are i mod num_classes
        labels = labels.repeat(-(-n // labels.numel()))[:n]
    if labels.numel() and (labels.min() < 0 or labels.max() >= model.num_classes):
        raise GenzooError(
            f"labels must be in 0..{model.num_classes - 1}, got values in [{labels.min()}, {labels.max()}]"
        )
    return labels

def label_indices(model: Any, labels: Sequence[int | str]) -> list[int]:
    """Class names (and integers) as label indices; an unknown name is refused, naming the classes."""
    names = model.class_names
    index = {name: i for i, name in enumerate(names)}
    unknown = [label for label in labels if isinstance(label, str) and label not in index]
    if unknown:
        known = f"its classes are {', '.join(names)}" if names else \
            f"it names no classes; give labels as integers 0..{model.num_classes - 1}"
        raise GenzooError(f"{model.name} has no class {unknown[0]!r}; {known}")
    return [index[label] if isinstance(label, str) else int(label) for label in labels]


def per_class_labels(model: Any, k: int) -> torch.Tensor:
    """Each class of a conditional ``model`` k times in turn (class 0 k times, then class 1, ...): the labels of
    ``genzoo sample --per-class K`` and of a conditional model's push preview."""
    return torch.arange(model.num_classes).repeat_interleave(k)
