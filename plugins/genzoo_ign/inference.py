"""f as sampling and refining run it: batch norm folded into the convolution before it, cached per source.

At inference a calibrated batch norm is an affine map per channel, y = g (x - m) / sqrt(v + eps) + b,
so it can be folded into the weights and bias of the (transposed) convolution that feeds it; the
folded network computes the same function (to float rounding) with one pass less over each
activation. It is built per source ("noise", "image"), in float64 and then cast, brought to its
fastest exact form (genzoo.blocks.fastconv), and rebuilt whenever a parameter or statistic changes
(training, loading, calibration).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from genzoo.blocks.batchnorm import SourceBatchNorm2d
from genzoo.blocks.fastconv import speed_up


def fold_batchnorm(net: nn.Module, source: str) -> nn.Module:
    """A copy of ``net`` in eval mode with every SourceBatchNorm2d (``source``'s statistics) folded into
    the convolution before it; every other layer as it is."""
    folded = copy.deepcopy(net).eval().requires_grad_(False)
    for module in list(folded.modules()):
        if isinstance(module, nn.Sequential):
            _fold_sequence(module, source)
    return folded


def _fold_sequence(seq: nn.Sequential, source: str) -> None:
    names = list(seq._modules)
    for before, name in zip(names, names[1:]):
        norm, conv = seq._modules[name], seq._modules[before]
        if isinstance(norm, SourceBatchNorm2d) and isinstance(conv, (nn.Conv2d, nn.ConvTranspose2d)):
            _fold_into(conv, norm, source)
            seq._modules[name] = nn.Identity()


@torch.no_grad()
def _fold_into(conv: nn.Module, norm: SourceBatchNorm2d, source: str) -> None:
    mean = getattr(norm, f"{source}_mean").double()
    var = getattr(norm, f"{source}_var").double()
    scale = norm.weight.double() / torch.sqrt(var + norm.eps)
    bias = conv.bias.double() if conv.bias is not None else torch.zeros_like(mean)
    # output channels are dim 0 of a Conv2d weight and dim 1 of a ConvTranspose2d weight
    shape = (-1, 1, 1, 1) if isinstance(conv, nn.Conv2d) else (1, -1, 1, 1)
    conv.weight.copy_((conv.weight.double() * scale.view(shape)).to(conv.weight.dtype))
    new_bias = (bias - mean) * scale + norm.bias.double()
    if conv.bias is None:
        conv.bias = nn.Parameter(new_bias.to(conv.weight.dtype), requires_grad=False)
    else:
        conv.bias.copy_(new_bias.to(conv.bias.dtype))


class FoldedCache:
    """The folded network of each source in its fastest form, rebuilt when any of the trained network's
    tensors has changed."""

    def __init__(self):
        self._nets: dict[str, tuple[tuple, nn.Module]] = {}

    def get(self, net: nn.Module, source: str, image_size: int) -> nn.Module:
        key = tuple((t.data_ptr(), t._version, t.device.type) for t in net.state_dict().values())
        cached = self._nets.get(source)
        if cached is None or cached[0] != key:
            cached = (key, speed_up(fold_batchnorm(net, source), frozen=True, image_size=image_size))
            self._nets[source] = cached
        return cached[1]
