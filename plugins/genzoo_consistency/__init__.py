"""Built-in plugin: consistency models trained from scratch (Song et al. 2023; Song and Dhariwal 2024)."""

import genzoo

from .model import Consistency, ConsistencyConfig

__all__ = ["Consistency", "ConsistencyConfig"]


@genzoo.hookimpl
def register_methods(register):
    register(Consistency)
