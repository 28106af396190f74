"""Whether a request to generate, refine or score images fits in memory, judged from shapes before any of it is
allocated (:func:`check_images_fit`).

The estimate is a lower bound, so it never refuses a request that would have fitted: the images themselves
(float32, in and out) and, where the network's first layer reads the image, that layer's output at full
resolution, for one batch; plus the ``n`` images the call returns. A config whose ``image_size`` was edited
to 40000 on the same tensors (a convolutional network loads at any size) is refused here in one sentence,
instead of by an allocation deep inside the first batch.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from .errors import ArgumentError, GenzooError
from .weights import machine_memory

FLOAT32 = 4
REDUCED = 2  # bf16 and fp16: the smallest a precision other than fp32 can make an activation


def image_bytes(shape: Sequence[int]) -> int:
    """One float32 image of ``shape`` (C, H, W)."""
    channels, height, width = shape
    return FLOAT32 * channels * height * width


def first_layer_values(model: nn.Module, shape: Sequence[int]) -> int:
    """How many values the network's first convolution writes for one image of ``shape`` (C, H, W), when it reads
    the image; 0 when the network starts elsewhere (a generator from a latent vector)."""
    channels, height, width = shape
    first = next((m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d))), None)
    if not isinstance(first, nn.Conv2d) or first.in_channels != channels:
        return 0
    rows, columns = first.stride
    return int(first.out_channels) * -(-height // rows) * -(-width // columns)


def per_image_bytes(model: Any, precision: str = "fp32") -> int:
    """The least one image takes during a forward pass of ``model``: the image in and out (float32) and the
    output of a first layer that reads it."""
    activation = FLOAT32 if precision == "fp32" else REDUCED
    return 2 * image_bytes(model.image_shape) + first_layer_values(model, model.image_shape) * activation


def device_memory(device: torch.device | str | None) -> int | None:
    """Bytes of memory on ``device`` (a GPU's own, else this machine's), or None where it is not known."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type == "cuda" and torch.cuda.is_available():
        return int(torch.cuda.get_device_properties(device).total_memory)
    return machine_memory()


def gib(size: int) -> str:
    return f"{size / 2**30:,.1f} GiB"


def check_images_fit(models: Sequence[Any], n: int, *, batch_size: int, device: torch.device | str | None = None,
                     precision: str = "fp32", verb: str = "sampling", where: str | None = None) -> None:
    """Refuse, in one sentence naming the fix, a request whose least memory exceeds what the machine has.

    ``models``: the networks each batch runs through (a generator, a refiner); ``n`` images are made (or
    refined, ``verb`` "refining") ``batch_size`` at a time on ``device`` and returned on the CPU; ``where``
    names the model as the user did. Raises :class:`ArgumentError` for ``batch_size`` or ``n`` where a
    smaller value fits, :class:`GenzooError` where one image alone does not.
    """
    models = [m for m in models if m is not None]
    if not models or n < 1:
        return
    device = torch.device(device) if device is not None else models[0].device
    gpu = device.type == "cuda"
    on_device, on_host = device_memory(device), machine_memory()
    heaviest = max(models, key=lambda m: per_image_bytes(m, precision))
    one = per_image_bytes(heaviest, precision)
    shape = " x ".join(map(str, heaviest.image_shape))
    name = where or heaviest.name
    if on_device is not None and one > on_device:
        raise GenzooError(f"{name} works on {shape} images (C x H x W): {verb} even one at a time takes at least "
                          f"{gib(one)}, more than the {gib(on_device)} of memory here; its config's image_size is "
                          f"damaged, or the model needs a larger machine")
    kept = n * image_bytes(heaviest.image_shape)  # the images the call returns, on the CPU
    if on_host is not None and kept + (0 if gpu else one) > on_host:
        if verb == "refining":
            raise GenzooError(f"refining {n:,} images of {shape} keeps at least {gib(kept)} of them in memory, more "
                              f"than the {gib(on_host)} here; refine fewer images a call")
        raise ArgumentError("n", f"{verb} {n:,} images of {shape} keeps at least {gib(kept)} of them in memory, more "
                            f"than the {gib(on_host)} here; lower {{arg}}, and make the rest in further calls with "
                            f"other seeds")
    batch = min(n, batch_size)
    room = on_device - (0 if gpu else kept) if on_device is not None else None
    if room is not None and batch * one > room:
        raise ArgumentError("batch_size", f"{verb} {name}'s {shape} images {batch:,} at a time takes at least "
                            f"{gib(batch * one)}, more than the {gib(room)} of memory left here; lower {{arg}} to "
                            f"{max(1, room // one):,} or less")
