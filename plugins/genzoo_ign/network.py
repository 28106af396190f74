"""IGN's f: a DCGAN-like encoder to a bottleneck and its mirrored decoder (genzoo.blocks.dcgan), for 28x28,
32x32 and 64x64 images.

Batch norm is genzoo.blocks.batchnorm's, with statistics per source; faster exact forms of some layers on
CPU are swapped in by genzoo.blocks.fastconv.
"""

from __future__ import annotations

from torch import nn

from genzoo.blocks import dcgan
from genzoo.blocks.batchnorm import SourceBatchNorm2d


def build_network(channels: int, image_size: int, bottleneck: int, width: int, norm: str,
                  *, decoder: str = "transposed") -> nn.Sequential:
    """f: images in [-1, 1] -> images in [-1, 1], same shape: Sequential(encoder, decoder). ``decoder``: how each
    stage upsamples ("transposed" or "resize", genzoo.blocks.dcgan.upsampling)."""
    net = nn.Sequential(
        dcgan.encoder(channels, image_size, width, bottleneck, norm, batch_norm=SourceBatchNorm2d),
        dcgan.decoder(channels, image_size, width, bottleneck, norm, upsample=decoder, batch_norm=SourceBatchNorm2d))
    return dcgan.initialise(net)
