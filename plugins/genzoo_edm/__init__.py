"""Built-in plugin: diffusion models with EDM's design (Karras et al., NeurIPS 2022)."""

import genzoo

from .model import EDM, EDMConfig

__all__ = ["EDM", "EDMConfig"]


@genzoo.hookimpl
def register_methods(register):
    register(EDM)
