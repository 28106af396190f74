"""DCGAN-like networks (Radford, Metz and Chintala, ICLR 2016) for 28x28, 32x32 and 64x64 images.

An encoder halves the resolution with 4x4/2 convolutions and ends in a convolution that covers what is
left; a decoder mirrors it from a 1x1 input back to an image with a tanh. IGN's f is an encoder to a
bottleneck followed by a decoder; a DCGAN's discriminator is an encoder to one logit, its generator a
decoder. Widths scale with ``width`` / 64; normalisation follows every layer but the encoder's first and
the decoder's last; :func:`initialise` gives DCGAN's N(0, 0.02) weights.

28x28 (MNIST): conv 4x4/2 C->64 (28->14), conv 4x4/2 64->128 (14->7), conv 7x7 valid 128->out, and the
mirror image. 32x32 and 64x64 add 4x4/2 stages (256, 512 channels) and use 4x4 at the bottleneck.
"""

from __future__ import annotations

from typing import Callable

from torch import nn

from .batchnorm import SourceBatchNorm2d

STAGES = {28: ((64, 128), 7), 32: ((64, 128, 256), 4), 64: ((64, 128, 256, 512), 4)}  # widths at 64, last kernel


def stages(image_size: int, width: int) -> tuple[tuple[int, ...], int]:
    """The channels of each stride-2 stage for ``width`` (the first stage's), and the bottleneck's kernel."""
    widths, last_kernel = STAGES[image_size]
    return tuple(w * width // 64 for w in widths), last_kernel


def norm_layer(kind: str, channels: int, batch_norm: Callable[[int], nn.Module] = nn.BatchNorm2d) -> nn.Module:
    """``kind`` "batch" (``batch_norm(channels)``), "group" (min(32, channels / 4) groups) or "none"."""
    if kind == "batch":
        return batch_norm(channels)
    if kind == "group":
        return nn.GroupNorm(min(32, channels // 4), channels)
    return nn.Identity()


def upsampling(kind: str, c_in: int, c_out: int) -> list[nn.Module]:
    """One decoder stage that doubles the resolution: a 4x4/2 transposed conv, or nearest resize + 3x3 conv
    (every output pixel sees the same number of taps, so no checkerboard pattern; Odena et al. 2016)."""
    if kind == "resize":
        return [nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(c_in, c_out, 3, 1, 1)]
    return [nn.ConvTranspose2d(c_in, c_out, 4, 2, 1)]


def encoder(channels: int, image_size: int, width: int, out_channels: int, norm: str, *,
            batch_norm: Callable[[int], nn.Module] = nn.BatchNorm2d) -> nn.Sequential:
    """Images (channels x image_size^2) -> out_channels x 1 x 1: stride-2 convs with leaky ReLUs, then a conv
    that covers the last map."""
    widths, last_kernel = stages(image_size, width)
    layers: list[nn.Module] = []
    previous = channels
    for i, w in enumerate(widths):
        layers += [nn.Conv2d(previous, w, 4, 2, 1), *([norm_layer(norm, w, batch_norm)] if i else []),
                   nn.LeakyReLU(0.2)]
        previous = w
    layers.append(nn.Conv2d(previous, out_channels, last_kernel))
    return nn.Sequential(*layers)


def decoder(channels: int, image_size: int, width: int, in_channels: int, norm: str, *, upsample: str = "transposed",
            batch_norm: Callable[[int], nn.Module] = nn.BatchNorm2d) -> nn.Sequential:
    """in_channels x 1 x 1 -> images in [-1, 1]: the encoder's mirror, each stage upsampling as ``upsample``
    says ("transposed" or "resize", :func:`upsampling`), with ReLUs and a tanh at the end."""
    widths, last_kernel = stages(image_size, width)
    layers: list[nn.Module] = [nn.ConvTranspose2d(in_channels, widths[-1], last_kernel),
                               norm_layer(norm, widths[-1], batch_norm), nn.ReLU()]
    for w_in, w_out in zip(widths[::-1], widths[::-1][1:]):
        layers += [*upsampling(upsample, w_in, w_out), norm_layer(norm, w_out, batch_norm), nn.ReLU()]
    layers += [*upsampling(upsample, widths[0], channels), nn.Tanh()]
    return nn.Sequential(*layers)


def initialise(net: nn.Module) -> nn.Module:
    """DCGAN's initialisation, in place: conv weights ~ N(0, 0.02), norm scales ~ N(1, 0.02), biases 0."""
    for module in net.modules():
        if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(module.weight, 0.0, 0.02)
            nn.init.zeros_(module.bias)
        elif isinstance(module, (nn.GroupNorm, nn.modules.batchnorm._BatchNorm, SourceBatchNorm2d)):
            nn.init.normal_(module.weight, 1.0, 0.02)
            nn.init.zeros_(module.bias)
    return net

