"""Built-in plugin: the robust joint classifier-discriminator refiner (Golan, Ganz and Elad, NeurIPS 2024)."""

import genzoo

from .model import RobustConfig, RobustRefiner

__all__ = ["RobustConfig", "RobustRefiner"]


@genzoo.hookimpl
def register_methods(register):
    register(RobustRefiner)
