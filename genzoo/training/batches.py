"""Which images each process trains on at each step: a pure function of (seed, step).

The global batch of step t is a slice of a permutation of the dataset seeded by the epoch; it is cut
into ``grad_accum`` micro-batches, and each micro-batch into one part per process. With mirroring,
whether an image is flipped is a coin drawn from (seed, t) for the whole step, so neither the
accumulation nor the number of processes changes which images a step sees. A resumed run therefore
sees exactly the batches an uninterrupted one would. :func:`data_fingerprint` is what a run remembers of
its data, so that --resume notices other images behind the same name.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import torch

from ..datasets import ImageData
from ..seeding import image_seed


class BatchSampler:
    """The micro-batches of one process: ``micro_batches(step)`` gives that step's ``grad_accum`` of them."""

    def __init__(self, data: ImageData | None, *, seed: int, batch_size: int, grad_accum: int = 1,
                 processes: int = 1, rank: int = 0, hflip: bool = False, total_steps: int | None = None):
        if batch_size % processes:
            raise ValueError(f"batch size {batch_size} is not divisible by {processes} processes")
        self.data, self.seed, self.hflip, self.total_steps = data, seed, hflip, total_steps
        self.batch_size, self.grad_accum, self.rank = batch_size, grad_accum, rank
        self.local = batch_size // processes  # images of one micro-batch on this process
        self._epoch: int | None = None
        self._perm = torch.empty(0, dtype=torch.long)

    @property
    def per_step(self) -> int:
        return self.batch_size * self.grad_accum

    def micro_batches(self, step: int, device: torch.device | str = "cpu") -> list[dict[str, Any]]:
        return [self.batch(step, micro, device) for micro in range(self.grad_accum)]

    def batch(self, step: int, micro: int = 0, device: torch.device | str = "cpu") -> dict[str, Any]:
        """Micro-batch ``micro`` of step ``step`` for this process: ``{"x", "y", "size", "step", "steps"}``
        (``steps``: the run's total)."""
        if self.data is None:
            return {"x": None, "y": None, "size": self.local, "step": step, "steps": self.total_steps}
        n = len(self.data)
        epoch, position = divmod(step, n // self.per_step)
        if self._epoch != epoch:
            generator = torch.Generator().manual_seed(image_seed(self.seed, epoch, "data"))
            self._perm = torch.randperm(n, generator=generator)
            self._epoch = epoch
        offset = micro * self.batch_size + self.rank * self.local
        start = position * self.per_step + offset
        index = self._perm[start:start + self.local]
        x = self.data.floats(index)
        if self.hflip:
            x = mirrored_half(x, image_seed(self.seed, step, "hflip"), offset, self.per_step)
        y = self.data.labels[index].to(device) if self.data.labels is not None else None
        return {"x": x.to(device), "y": y, "size": self.local, "step": step, "steps": self.total_steps}


FINGERPRINT_IMAGES = 4096  # images hashed at most: evenly spaced over the set


def data_fingerprint(data: ImageData | None) -> dict[str, Any] | None:
    """The image count and shape, and a sha256 of up to 4,096 evenly spaced images and every label: cheap
    for a large set, blind to how the data was named (a relative or absolute path, a link), and changed
    by other images behind the same name."""
    if data is None:
        return None
    n = len(data)
    index = torch.linspace(0, n - 1, min(n, FINGERPRINT_IMAGES)).round().long().unique()
    digest = hashlib.sha256(json.dumps([n, list(data.images.shape[1:])]).encode())
    digest.update(data.images[index].contiguous().numpy().tobytes())
    if data.labels is not None:
        digest.update(data.labels.contiguous().numpy().tobytes())
    return {"images": n, "shape": list(data.images.shape[1:]), "sha256": digest.hexdigest()[:16]}


def describe_fingerprint(fingerprint: dict[str, Any] | None) -> str:
    if not fingerprint:
        return "no data"
    return f"{fingerprint['images']} images of {'x'.join(map(str, fingerprint['shape']))}, sha256 {fingerprint['sha256']}"


def mirrored_half(x: torch.Tensor, seed: int, offset: int, per_step: int) -> torch.Tensor:
    """``x`` (rows ``offset``... of a step's ``per_step`` images) with each image mirrored left-right with
    probability 1/2; the coin of every image of the step comes from ``seed``, so which images are
    mirrored does not depend on how the step is split over processes or accumulated micro-batches."""
    coins = torch.rand(per_step, generator=torch.Generator().manual_seed(seed))[offset:offset + len(x)] < 0.5
    return torch.where(coins[:, None, None, None], x.flip(-1), x)


__all__ = ["BatchSampler", "data_fingerprint", "describe_fingerprint", "mirrored_half"]
