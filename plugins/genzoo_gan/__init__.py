"""Built-in plugin: a DCGAN on IGN's own network (Radford et al., ICLR 2016), the example of a method that
owns its update."""

import genzoo

from .model import GAN, GANConfig

__all__ = ["GAN", "GANConfig"]


@genzoo.hookimpl
def register_methods(register):
    register(GAN)
