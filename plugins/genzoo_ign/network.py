"""DCGAN-like encoder-decoder f for IGN, for 28x28, 32x32 and 64x64 images.

28x28 (MNIST): conv 4x4/2 C->64 (28->14), conv 4x4/2 64->128 (14->7), conv 7x7 valid 128->bottleneck,
mirrored by transposed convs, tanh output. 32x32 and 64x64 add 4x4/2 stages (256, 512 channels)
and end in a 4x4 valid conv. The first encoder layer has no normalisation (DCGAN).

The bottleneck's two layers (the conv whose kernel covers its whole input, and the transposed conv
of its 1x1 output) are computed as matrix products: the same function and parameters (a model
saved with plain convolutions loads unchanged). oneDNN's convolutions of those shapes are slow
forward + backward on CPU: a training step at batch 256 on a 2-core Xeon was 8-9% faster in fp32
and 16-42% in bf16 with the matrix products (benchmarks/ign_speed.py, ``train_256_paired``).
"""

from __future__ import annotations

from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .batchnorm import SourceBatchNorm2d

STAGES = {28: ((64, 128), 7), 32: ((64, 128, 256), 4), 64: ((64, 128, 256, 512), 4)}


class DenseConv2d(nn.Conv2d):
    """Conv2d that, when its kernel covers the whole input (output 1x1), runs as one matrix product."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.dense = _plain_geometry(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = self.bias
        if self.dense and bias is not None and x.shape[2] == self.weight.shape[2] and x.shape[3] == self.weight.shape[3]:
            out = torch.addmm(bias, x.flatten(1), self.weight.flatten(1).t())
            return out.view(x.shape[0], -1, 1, 1)
        return self._conv_forward(x, self.weight, self.bias)


class DenseConvTranspose2d(nn.ConvTranspose2d):
    """ConvTranspose2d that, on a 1x1 input, runs as one matrix product (out = x W + b, reshaped)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.dense = _plain_geometry(self) and self.output_padding == (0, 0)

    def forward(self, x: torch.Tensor, output_size: Optional[List[int]] = None) -> torch.Tensor:
        bias = self.bias
        if self.dense and bias is not None and output_size is None and x.shape[2] == 1 and x.shape[3] == 1:
            c_in, c_out, kh, kw = self.weight.shape
            out = torch.addmm(bias.repeat_interleave(kh * kw), x.flatten(1), self.weight.reshape(c_in, c_out * kh * kw))
            return out.view(x.shape[0], c_out, kh, kw)
        output_padding = self._output_padding(x, output_size, self.stride, self.padding, self.kernel_size, 2,
                                              self.dilation)
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups,
                                  self.dilation)


def _plain_geometry(conv: nn.Module) -> bool:
    return conv.stride == (1, 1) and conv.padding == (0, 0) and conv.dilation == (1, 1) and conv.groups == 1


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
                  *, decoder: str = "transposed", dense_bottleneck: bool = True) -> nn.Sequential:
    """f: images in [-1, 1] -> images in [-1, 1], same shape. ``decoder``: how each stage upsamples
    ("transposed" or "resize"). ``dense_bottleneck=False``: the bottleneck's layers as plain
    nn.Conv2d / nn.ConvTranspose2d (the same parameters; for benchmarks)."""
    conv, deconv = (DenseConv2d, DenseConvTranspose2d) if dense_bottleneck else (nn.Conv2d, nn.ConvTranspose2d)
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
    encoder.append(conv(previous, bottleneck, last_kernel))
    layers: list[nn.Module] = [deconv(bottleneck, widths[-1], last_kernel), norm_layer(norm, widths[-1]), nn.ReLU()]
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
