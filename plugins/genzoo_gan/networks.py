"""IGN's network, split in two for a DCGAN: the generator is IGN's decoder, the discriminator IGN's encoder
with a one-channel bottleneck (its logit).

28x28: the discriminator is conv 4x4/2 C->64 (28->14), conv 4x4/2 64->128 (14->7), conv 7x7 valid
128->1; the generator mirrors it from a bottleneck-channel 1x1 input with transposed convs to a tanh
image. 32x32 and 64x64 add 4x4/2 stages (256, 512 channels) and use 4x4 at the bottleneck. Widths scale
with ``width`` / 64, as in IGN. Normalisation after every layer but the discriminator's first and the
generator's last (DCGAN); init N(0, 0.02).
"""

from __future__ import annotations

from torch import nn

STAGES = {28: ((64, 128), 7), 32: ((64, 128, 256), 4), 64: ((64, 128, 256, 512), 4)}


def _norm(kind: str, channels: int) -> nn.Module:
    if kind == "batch":
        return nn.BatchNorm2d(channels)
    if kind == "group":
        return nn.GroupNorm(min(32, channels // 4), channels)
    return nn.Identity()


def discriminator(channels: int, image_size: int, width: int, norm: str) -> nn.Sequential:
    widths, last_kernel = _stages(image_size, width)
    layers: list[nn.Module] = []
    previous = channels
    for i, w in enumerate(widths):
        layers += [nn.Conv2d(previous, w, 4, 2, 1), *([_norm(norm, w)] if i else []), nn.LeakyReLU(0.2)]
        previous = w
    layers += [nn.Conv2d(previous, 1, last_kernel), nn.Flatten()]
    return _initialised(nn.Sequential(*layers))


def generator(channels: int, image_size: int, width: int, bottleneck: int, norm: str) -> nn.Sequential:
    widths, last_kernel = _stages(image_size, width)
    layers: list[nn.Module] = [nn.ConvTranspose2d(bottleneck, widths[-1], last_kernel), _norm(norm, widths[-1]),
                               nn.ReLU()]
    for w_in, w_out in zip(widths[::-1], widths[::-1][1:]):
        layers += [nn.ConvTranspose2d(w_in, w_out, 4, 2, 1), _norm(norm, w_out), nn.ReLU()]
    layers += [nn.ConvTranspose2d(widths[0], channels, 4, 2, 1), nn.Tanh()]
    return _initialised(nn.Sequential(*layers))


def _stages(image_size: int, width: int) -> tuple[tuple[int, ...], int]:
    widths, last_kernel = STAGES[image_size]
    return tuple(w * width // 64 for w in widths), last_kernel


def _initialised(net: nn.Sequential) -> nn.Sequential:
    for module in net.modules():
        if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(module.weight, 0.0, 0.02)
            nn.init.zeros_(module.bias)
        elif isinstance(module, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.normal_(module.weight, 1.0, 0.02)
            nn.init.zeros_(module.bias)
    return net
