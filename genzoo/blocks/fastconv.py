"""Faster forms of convolution layers on CPU, each the same function to float rounding, swapped in by one call.

``speed_up(net)`` swaps, in place, every layer of ``net`` that has a faster exact form: a conv whose kernel
covers its whole input and a transposed conv of a 1x1 input (a bottleneck's two layers) run as matrix
products. The parameters stay the same objects, so training, the optimiser and the saved tensors see no
difference. ``speed_up(net, frozen=True, image_size=S)`` is for a copy whose weights no longer change (a
network folded for sampling): on top, a 4x4 stride-2 transposed conv to at most 4 channels (an image's last
layer) runs as a 3x3 conv and a pixel shuffle (the sub-pixel form), and from 32x32 images up the network
runs channels-last. docs/lab/ign-speed.md has the measurements behind each form.
"""

from __future__ import annotations

from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import nn

CHANNELS_LAST_FROM = 32  # image size from which a frozen network runs channels-last


def speed_up(net: nn.Module, *, frozen: bool = False, image_size: int | None = None) -> nn.Module:
    """Swap ``net``'s layers, in place, for their faster exact forms (see the module's docstring); returns ``net``.

    ``frozen``: the weights will not change (the sub-pixel form copies them), and from ``image_size``
    32 up the network runs channels-last.
    """
    for module in list(net.modules()):
        for name, child in module.named_children():
            faster = _faster(child, frozen)
            if faster is not child:
                setattr(module, name, faster)
    if frozen and channels_last_pays(image_size):
        net.to(memory_format=torch.channels_last)
        net.register_forward_hook(_contiguous_output)
    return net


def channels_last_pays(image_size: int | None) -> bool:
    """Whether a frozen network for images of this size runs channels-last."""
    return image_size is not None and image_size >= CHANNELS_LAST_FROM


def _contiguous_output(module: nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
    return output.contiguous()


def _faster(layer: nn.Module, frozen: bool) -> nn.Module:
    if type(layer) is nn.Conv2d and _plain_geometry(layer):
        return DenseConv2d.sharing(layer)
    if type(layer) is nn.ConvTranspose2d and _plain_geometry(layer) and layer.output_padding == (0, 0):
        return DenseConvTranspose2d.sharing(layer)
    if frozen and type(layer) is nn.ConvTranspose2d and SubpixelTransposedConv.fits(layer):
        return SubpixelTransposedConv(layer)
    return layer


def _plain_geometry(conv: nn.Module) -> bool:
    return conv.stride == (1, 1) and conv.padding == (0, 0) and conv.dilation == (1, 1) and conv.groups == 1 \
        and conv.bias is not None


def _sharing(cls: type, layer: nn.Module) -> nn.Module:
    """An instance of ``cls`` (a subclass of ``layer``'s class) with ``layer``'s geometry and its very parameters."""
    swapped = nn.utils.skip_init(cls, layer.in_channels, layer.out_channels, layer.kernel_size,
                                 device=layer.weight.device, dtype=layer.weight.dtype)  # no init, no RNG drawn
    swapped.weight, swapped.bias = layer.weight, layer.bias
    swapped.train(layer.training)
    return swapped


class DenseConv2d(nn.Conv2d):
    """Conv2d (stride 1, no padding) that, when its kernel covers the whole input (output 1x1), runs as one
    matrix product."""

    @classmethod
    def sharing(cls, layer: nn.Conv2d) -> DenseConv2d:
        return _sharing(cls, layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[2:] == self.weight.shape[2:]:
            out = torch.addmm(self.bias, x.flatten(1), self.weight.flatten(1).t())
            return out.view(x.shape[0], -1, 1, 1)
        return self._conv_forward(x, self.weight, self.bias)


class DenseConvTranspose2d(nn.ConvTranspose2d):
    """ConvTranspose2d (stride 1, no padding) that, on a 1x1 input, runs as one matrix product (x W + b, reshaped)."""

    @classmethod
    def sharing(cls, layer: nn.ConvTranspose2d) -> DenseConvTranspose2d:
        return _sharing(cls, layer)

    def forward(self, x: torch.Tensor, output_size: Optional[List[int]] = None) -> torch.Tensor:
        if output_size is None and x.shape[2] == 1 and x.shape[3] == 1:
            c_in, c_out, kh, kw = self.weight.shape
            out = torch.addmm(self.bias.repeat_interleave(kh * kw), x.flatten(1),
                              self.weight.reshape(c_in, c_out * kh * kw))
            return out.view(x.shape[0], c_out, kh, kw)
        return super().forward(x, output_size)


class SubpixelTransposedConv(nn.Module):
    """ConvTranspose2d(k=4, s=2, p=1) as conv3x3 to 4 C channels + pixel_shuffle(2), the same function.

    Output row 2a + r takes input rows a (kernel row 1 for r = 0, 2 for r = 1) and a - 1 (row 3,
    r = 0) or a + 1 (row 0, r = 1); columns likewise. So the 3x3 kernel at offset u = d + 1 of the
    sub-pixel (r, s) holds the transposed kernel's tap ``TAP[r][u]`` (None: no tap). The weights are
    copied: for frozen layers only.
    """

    TAP = ((3, 1, None), (None, 2, 0))

    @staticmethod
    def fits(layer: nn.ConvTranspose2d) -> bool:
        """Whether ``layer`` has the geometry this form computes, and few enough outputs to gain from it."""
        geometry = (layer.kernel_size, layer.stride, layer.padding, layer.output_padding, layer.dilation, layer.groups)
        return geometry == ((4, 4), (2, 2), (1, 1), (0, 0), (1, 1), 1) and layer.out_channels <= 4

    def __init__(self, layer: nn.ConvTranspose2d):
        super().__init__()
        weight = layer.weight.detach()
        c_in, c_out = weight.shape[:2]
        # pixel_shuffle reads channel c * 4 + r * 2 + s as sub-pixel (r, s) of channel c
        kernel = weight.new_zeros(c_out, 2, 2, c_in, 3, 3)
        for r in range(2):
            for s in range(2):
                for u, ky in enumerate(self.TAP[r]):
                    for v, kx in enumerate(self.TAP[s]):
                        if ky is not None and kx is not None:
                            kernel[:, r, s, :, u, v] = weight[:, :, ky, kx].t()
        self.register_buffer("kernel", kernel.reshape(4 * c_out, c_in, 3, 3))
        bias = layer.bias.detach() if layer.bias is not None else weight.new_zeros(c_out)
        self.register_buffer("subpixel_bias", bias.repeat_interleave(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.conv2d(x, self.kernel.to(x.dtype), self.subpixel_bias.to(x.dtype), padding=1)
        return F.pixel_shuffle(out, 2)
