"""The cheapest exact form of f for sampling and refining: batch norm folded into the convolution before it.

At inference a calibrated batch norm is an affine map per channel, y = g (x - m) / sqrt(v + eps) + b,
so it can be folded into the weights and bias of the (transposed) convolution that feeds it; the
folded network computes the same function (to float rounding) with one pass less over each
activation. It is built per source ("noise", "image"), in float64 and then cast, and rebuilt
whenever a parameter or statistic changes (training, loading, calibration).

One more exact rewrite, measured faster in oneDNN on a 2-core Xeon (docs/results.md, Speed; the
bottleneck's layers are matrix products in the network itself, genzoo_ign.network):
- the last transposed convolution (4x4, stride 2, padding 1, to the image's few channels) is a 3x3
  convolution to 4x the channels followed by a pixel shuffle (the sub-pixel form). For wide outputs
  the sub-pixel form was slower, so only layers to at most 4 channels are rewritten
  (benchmarks/transposed_forms.py compares the forms layer by layer).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from .batchnorm import SourceBatchNorm2d


def fold(net: nn.Module, source: str) -> nn.Module:
    """A copy of ``net`` in eval mode with every SourceBatchNorm2d (using ``source``'s statistics) folded
    away and the transposed convolutions in their cheaper exact forms: what sampling and refining run."""
    folded = fold_batchnorm(net, source)
    for module in list(folded.modules()):
        if isinstance(module, nn.Sequential):
            for name, child in module._modules.items():
                module._modules[name] = _cheaper(child)
    return folded


def fold_batchnorm(net: nn.Module, source: str) -> nn.Module:
    """A copy of ``net`` in eval mode with every SourceBatchNorm2d (``source``'s statistics) folded into
    the convolution before it; every other layer as it is."""
    folded = copy.deepcopy(net).eval().requires_grad_(False)
    for module in list(folded.modules()):
        if isinstance(module, nn.Sequential):
            _fold_sequence(module, source)
    return folded


def _cheaper(layer: nn.Module) -> nn.Module:
    if not isinstance(layer, nn.ConvTranspose2d) or layer.groups != 1 or layer.dilation != (1, 1):
        return layer
    if (layer.kernel_size, layer.stride, layer.padding, layer.output_padding) == ((4, 4), (2, 2), (1, 1), (0, 0)) \
            and layer.out_channels <= 4:
        return SubpixelTransposedConv(layer)
    return layer


class SubpixelTransposedConv(nn.Module):
    """ConvTranspose2d(k=4, s=2, p=1) as conv3x3 to 4 C channels + pixel_shuffle(2), the same function.

    Output row 2a + r takes input rows a (kernel row 1 for r = 0, 2 for r = 1) and a - 1 (row 3,
    r = 0) or a + 1 (row 0, r = 1); columns likewise. So the 3x3 kernel at offset u = d + 1 of the
    sub-pixel (r, s) holds the transposed kernel's tap ``TAP[r][u]`` (None: no tap).
    """

    TAP = ((3, 1, None), (None, 2, 0))

    def __init__(self, layer: nn.ConvTranspose2d):
        super().__init__()
        weight = layer.weight.detach()
        c_in, c_out = weight.shape[:2]
        # pixel_shuffle reads channel c * 4 + r * 2 + s as sub-pixel (r, s) of channel c
        kernel = phase_kernels(weight, self.TAP).permute(2, 0, 1, 3, 4, 5)
        self.register_buffer("kernel", kernel.reshape(4 * c_out, c_in, 3, 3))
        bias = layer.bias.detach() if layer.bias is not None else weight.new_zeros(c_out)
        self.register_buffer("subpixel_bias", bias.repeat_interleave(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.conv2d(x, self.kernel.to(x.dtype), self.subpixel_bias.to(x.dtype), padding=1)
        return F.pixel_shuffle(out, 2)


def phase_kernels(weight: torch.Tensor, taps: tuple[tuple[int | None, ...], ...]) -> torch.Tensor:
    """The ordinary-convolution kernels of each output phase of a stride-2 transposed conv.

    ``weight`` is the ConvTranspose2d's (C_in, C_out, 4, 4); ``taps[r][u]`` is the kernel row (and,
    for columns, the kernel column) that window offset u of phase r reads, None for none. Returns
    (2, 2, C_out, C_in, k, k) with k = len(taps[0]), indexed by the phase (r, s) first.
    """
    c_in, c_out = weight.shape[:2]
    k = len(taps[0])
    kernel = weight.new_zeros(2, 2, c_out, c_in, k, k)
    for r in range(2):
        for s in range(2):
            for u, ky in enumerate(taps[r]):
                for v, kx in enumerate(taps[s]):
                    if ky is not None and kx is not None:
                        kernel[r, s, :, :, u, v] = weight[:, :, ky, kx].t()
    return kernel


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
    """Folded copies of a network, one per source (optionally channels-last), rebuilt when any of its
    tensors or the layout asked for has changed."""

    def __init__(self):
        self._nets: dict[str, tuple[tuple, nn.Module]] = {}

    def get(self, net: nn.Module, source: str, *, channels_last: bool = False) -> nn.Module:
        key = (channels_last, *((t.data_ptr(), t._version, t.device.type) for t in net.state_dict().values()))
        cached = self._nets.get(source)
        if cached is None or cached[0] != key:
            folded = fold(net, source)
            cached = (key, folded.to(memory_format=torch.channels_last) if channels_last else folded)
            self._nets[source] = cached
        return cached[1]
