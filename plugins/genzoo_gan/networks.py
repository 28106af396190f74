"""IGN's network split in two for a DCGAN (genzoo.blocks.dcgan): the generator is IGN's decoder, the discriminator
IGN's encoder with a one-channel bottleneck (its logit). Batch norm is torch's, with running statistics.
"""

from __future__ import annotations

from torch import nn

from genzoo.blocks import dcgan


def discriminator(channels: int, image_size: int, width: int, norm: str) -> nn.Sequential:
    """Images in [-1, 1] -> one logit per image."""
    net = dcgan.encoder(channels, image_size, width, 1, norm)
    net.append(nn.Flatten())
    return dcgan.initialise(net)


def generator(channels: int, image_size: int, width: int, bottleneck: int, norm: str) -> nn.Sequential:
    """z of shape (n, bottleneck, 1, 1) -> images in [-1, 1]."""
    return dcgan.initialise(dcgan.decoder(channels, image_size, width, bottleneck, norm))
