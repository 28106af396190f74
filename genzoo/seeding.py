"""Per-image noise: image i of a call with seed s depends only on (s, i), never on n, batch or device."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch


def image_seed(seed: int, index: int, stream: str = "") -> int:
    """A 63-bit seed for image ``index`` of a call with ``seed``; ``stream`` separates uses."""
    digest = hashlib.blake2b(f"{seed}:{index}:{stream}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def random_seed(generator: torch.Generator | None = None) -> int:
    """A fresh base seed, drawn from ``generator`` (or torch's global RNG, so torch.manual_seed works)."""
    return int(torch.randint(0, 2**62, (1,), generator=generator).item())


@dataclass(frozen=True)
class Noise:
    """The noise source for images ``start .. stop-1`` of a seeded call.

    Methods draw everything random through it, so a sample depends only on its own seed and index.
    ``stream`` names independent draws for the same images (e.g. "z" and "langevin").
    """

    seed: int
    start: int
    stop: int
    stream: str = ""

    def __len__(self) -> int:
        return self.stop - self.start

    def child(self, stream: str) -> "Noise":
        return Noise(self.seed, self.start, self.stop, f"{self.stream}/{stream}")

    def generators(self) -> list[torch.Generator]:
        return [torch.Generator().manual_seed(image_seed(self.seed, i, self.stream)) for i in range(self.start, self.stop)]

    def randn(self, *shape: int, device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Standard normal noise of shape (len(self), *shape), drawn on the CPU, then moved."""
        out = torch.stack([torch.randn(shape, generator=g, dtype=dtype) for g in self.generators()])
        return out.to(device) if device is not None else out

    def rand(self, *shape: int, device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Uniform [0, 1) noise of shape (len(self), *shape), drawn like :meth:`randn`."""
        out = torch.stack([torch.rand(shape, generator=g, dtype=dtype) for g in self.generators()])
        return out.to(device) if device is not None else out
