"""Sliced Wasserstein distance between two image sets on Laplacian-pyramid patches.

A feature-free measure of image statistics at several scales (Karras, Aila, Laine and Lehtinen,
"Progressive Growing of GANs", ICLR 2018, section 5): each image is split into a Laplacian pyramid
(finest level at full resolution, the coarsest a Gaussian level of at least 16 pixels, or 7 for tiny
images); from every level, 7x7 neighbourhoods are cut at random places of every image; each set's
descriptors are normalised per colour channel (mean 0, std 1, over the set); the distance between
the two sets' descriptor distributions is the sliced Wasserstein distance: the mean, over random unit
directions, of the mean absolute difference between the sorted projections. Reported per level
(finest first) and as their mean, times 1e3 as in the paper. Every random choice (patch places,
directions) comes from a fixed seed, so a figure repeats exactly for the same images.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

PATCH = 7
DESCRIPTORS = 2 ** 18  # per level and set: 128 neighbourhoods per image below 2,048 images, fewer above
MAX_PER_IMAGE, MIN_PER_IMAGE = 128, 16
DIRECTIONS = 512
DIRECTION_CHUNK = 128
COARSEST = 16
IMAGE_CHUNK = 1024


def _binomial_kernel(channels: int, dtype: torch.dtype) -> torch.Tensor:
    taps = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0], dtype=dtype)
    kernel = torch.outer(taps, taps) / 256
    return kernel.expand(channels, 1, 5, 5).contiguous()


def _blur_down(x: torch.Tensor) -> torch.Tensor:
    kernel = _binomial_kernel(x.shape[1], x.dtype)
    return F.conv2d(F.pad(x, (2, 2, 2, 2), mode="reflect"), kernel, stride=2, groups=x.shape[1])


def _up(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Upsample by zero insertion and the binomial filter (x4 to keep the mean), cropped to ``size``."""
    n, c, h, w = x.shape
    spread = x.new_zeros(n, c, 2 * h, 2 * w)
    spread[:, :, ::2, ::2] = x * 4
    kernel = _binomial_kernel(c, x.dtype)
    return F.conv2d(F.pad(spread, (2, 2, 2, 2), mode="reflect"), kernel, groups=c)[:, :, :size[0], :size[1]]


def pyramid_levels(size: int) -> int:
    """How many levels a Laplacian pyramid of ``size``-pixel images has: halve while the next level keeps
    at least COARSEST pixels (at least two levels, the coarser of at least PATCH pixels)."""
    levels = 1
    while (size >> levels) >= COARSEST:
        levels += 1
    if levels == 1 and (size >> 1) >= PATCH:
        levels = 2
    return levels


def laplacian_pyramid(images: torch.Tensor, levels: int) -> list[torch.Tensor]:
    """Band-pass levels, finest first; the last is the coarsest Gaussian level itself."""
    out = []
    current = images
    for _ in range(levels - 1):
        lower = _blur_down(current)
        out.append(current - _up(lower, current.shape[-2:]))
        current = lower
    out.append(current)
    return out


def _patches(level: torch.Tensor, per_image: int, generator: torch.Generator) -> torch.Tensor:
    """``per_image`` random PATCH x PATCH neighbourhoods of every image: (N * per_image, C, PATCH, PATCH)."""
    n, c, h, w = level.shape
    ys = torch.randint(0, h - PATCH + 1, (n, per_image), generator=generator)
    xs = torch.randint(0, w - PATCH + 1, (n, per_image), generator=generator)
    offsets = torch.arange(PATCH)
    rows = (ys[..., None] + offsets)[..., :, None].expand(n, per_image, PATCH, PATCH)
    cols = (xs[..., None] + offsets)[..., None, :].expand(n, per_image, PATCH, PATCH)
    flat = level.reshape(n, c, h * w)
    index = (rows * w + cols).reshape(n, 1, -1).expand(n, c, -1)
    picked = flat.gather(2, index).view(n, c, per_image, PATCH, PATCH)
    return picked.permute(0, 2, 1, 3, 4).reshape(n * per_image, c, PATCH, PATCH)


def _normalised(descriptors: torch.Tensor) -> torch.Tensor:
    mean = descriptors.mean(dim=(0, 2, 3), keepdim=True)
    std = descriptors.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-8)
    return ((descriptors - mean) / std).flatten(1)


def _sliced_wasserstein(a: torch.Tensor, b: torch.Tensor, generator: torch.Generator) -> float:
    total, done = 0.0, 0
    while done < DIRECTIONS:
        count = min(DIRECTION_CHUNK, DIRECTIONS - done)
        directions = torch.randn(count, a.shape[1], generator=generator, dtype=a.dtype)
        directions /= directions.norm(dim=1, keepdim=True)
        pa = (directions @ a.t()).sort(dim=1).values  # one row per direction: contiguous sorts
        pb = (directions @ b.t()).sort(dim=1).values
        total += float((pa - pb).abs().mean(dim=1).sum())
        done += count
    return total / DIRECTIONS


def _level_descriptors(images: torch.Tensor, levels: int, per_image: int, seed: int) -> list[torch.Tensor]:
    """Every pyramid level's normalised descriptors of ``images``, computed IMAGE_CHUNK images at a time."""
    generators = [torch.Generator().manual_seed(seed * 1000 + level) for level in range(levels)]
    parts: list[list[torch.Tensor]] = [[] for _ in range(levels)]
    for start in range(0, len(images), IMAGE_CHUNK):
        chunk = images[start:start + IMAGE_CHUNK].float() * 255
        for level, band in enumerate(laplacian_pyramid(chunk, levels)):
            parts[level].append(_patches(band, per_image, generators[level]))
    return [_normalised(torch.cat(p)) for p in parts]


def patches_per_image(count: int, descriptors: int = DESCRIPTORS) -> int:
    """Neighbourhoods cut from each image of a set of ``count``: about ``descriptors`` in all, 16 to 128 each."""
    return max(MIN_PER_IMAGE, min(MAX_PER_IMAGE, -(-descriptors // max(count, 1))))


def swd(real: torch.Tensor, fake: torch.Tensor, *, seed: int = 0, descriptors: int = DESCRIPTORS) -> dict[str, float]:
    """SWD x 1e3 between image sets (float NCHW in [0, 1], the same shape) per pyramid level
    (``swd_<size>``, finest first) and their mean (``swd``). Both sets contribute the same number of
    descriptors (about ``descriptors`` per level): the larger set's images are subsampled with the
    fixed seed. Figures are comparable only at the same number of images and descriptors."""
    if real.shape[1:] != fake.shape[1:]:
        raise ValueError(f"SWD compares images of one shape, got {tuple(real.shape[1:])} and {tuple(fake.shape[1:])}")
    count = min(len(real), len(fake))
    if count == 0:
        raise ValueError("SWD needs at least one image in each set")
    generator = torch.Generator().manual_seed(seed)
    sets = [x if len(x) == count else x[torch.randperm(len(x), generator=generator)[:count]] for x in (real, fake)]
    levels = pyramid_levels(real.shape[-1])
    per_image = patches_per_image(count, descriptors)
    descriptors = [_level_descriptors(x, levels, per_image, seed) for x in sets]
    result: dict[str, float] = {}
    size = real.shape[-1]
    for level, (a, b) in enumerate(zip(*descriptors)):
        direction_gen = torch.Generator().manual_seed(seed * 1000 + 500 + level)
        result[f"swd_{-(-size // 2 ** level)}"] = _sliced_wasserstein(a, b, direction_gen) * 1e3
    result["swd"] = sum(result.values()) / levels
    return result
