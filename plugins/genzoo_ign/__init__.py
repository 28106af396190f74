"""Built-in plugin: Idempotent Generative Network (Shocher et al., ICLR 2024)."""

import genzoo

from .model import IGN, IGNConfig

__all__ = ["IGN", "IGNConfig"]


@genzoo.hookimpl
def register_methods(register):
    register(IGN)
