"""DCGAN-like encoder-decoder f for IGN, for 28x28, 32x32 and 64x64 images.

28x28 (MNIST): conv 4x4/2 C->64 (28->14), conv 4x4/2 64->128 (14->7), conv 7x7 valid 128->bottleneck,
mirrored by transposed convs, tanh output. 32x32 and 64x64 add 4x4/2 stages (256, 512 channels)
and end in a 4x4 valid conv. The first encoder layer has no normalisation (DCGAN).
Faster exact forms of some layers on CPU are swapped in by genzoo.blocks.fastconv; batch norm is
genzoo.blocks.batchnorm's, with statistics per source.
"""

from __future__ import annotations

from torch import nn

from genzoo.blocks.batchnorm import SourceBatchNorm2d

STAGES = {28: ((64, 128), 7), 32: ((64, 128, 256), 4), 64: ((64, 128, 256, 512), 4)}


def norm_layer(kind: str, channels: int) -> nn.Module:
    if kind == "group":
        return nn.GroupNorm(min(32, channels // 4), channels)
    if kind == "batch":
        return SourceBatchNorm2d(channels)
    return nn.Identity()


def upsampling(kind: str, c_in: int, c_out: int) -> list[nn.Module]:
    """One decoder stage that doubles the resolution: a 4x4/2 transposed conv, or nearest resize + 3x3 conv
    (every output pixel sees the same number of taps, so no checkerboard pattern; Odena et al. 2016)."""
    if kind == "resize":
        return [nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(c_in, c_out, 3, 1, 1)]
    return [nn.ConvTranspose2d(c_in, c_out, 4, 2, 1)]


def build_network(channels: int, image_size: int, bottleneck: int, width: int, norm: str,
                  *, decoder: str = "transposed") -> nn.Sequential:
    """f: images in [-1, 1] -> images in [-1, 1], same shape. ``decoder``: how each stage upsamples
    ("transposed" or "resize")."""
    widths, last_kernel = STAGES[image_size]
    widths = tuple(w * width // 64 for w in widths)
    encoder: list[nn.Module] = []
    previous = channels
    for i, w in enumerate(widths):
        encoder.append(nn.Conv2d(previous, w, 4, 2, 1))
        if i > 0:
            encoder.append(norm_layer(norm, w))
        encoder.append(nn.LeakyReLU(0.2))
        previous = w
    encoder.append(nn.Conv2d(previous, bottleneck, last_kernel))
    layers: list[nn.Module] = [nn.ConvTranspose2d(bottleneck, widths[-1], last_kernel), norm_layer(norm, widths[-1]),
                               nn.ReLU()]
    for w_in, w_out in zip(widths[::-1], widths[::-1][1:]):
        layers += [*upsampling(decoder, w_in, w_out), norm_layer(norm, w_out), nn.ReLU()]
    layers += [*upsampling(decoder, widths[0], channels), nn.Tanh()]
    net = nn.Sequential(nn.Sequential(*encoder), nn.Sequential(*layers))
    for module in net.modules():
        if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(module.weight, 0.0, 0.02)  # DCGAN init
            nn.init.zeros_(module.bias)
        elif isinstance(module, (nn.GroupNorm, SourceBatchNorm2d)):
            nn.init.normal_(module.weight, 1.0, 0.02)
            nn.init.zeros_(module.bias)
    return net
