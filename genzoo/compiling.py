"""Compiling a model's networks in place with ``torch.compile``, for training (``genzoo fit --compile``) and for
sampling (``genzoo sample`` and ``eval --compile``).

The networks are compiled in place (``nn.Module.compile``), so their state-dict keys, checkpoints and exports are
an eager model's files. Compiled graphs are cached on disk (under genzoo's cache folder), so a second process
compiling the same networks takes seconds, not minutes.

For sampling, ``auto`` compiles when the request is long enough for the compile (about a minute on a CPU, the
first time) to pay: at least ``AUTO_MIN_IMAGE_CALLS`` images times network calls per image, as the method
counts them (``network_calls``); a method that does not count its calls stays eager. docs/results.md ("Training and
sampling speed") has what compiling measured.
"""

from __future__ import annotations

import inspect
import logging
import os
import shutil
from typing import Any

from torch import nn

from .errors import ArgumentError
from .precision import cache_folder

COMPILE_CHOICES = ("auto", "on", "off")  # fit --compile, sample --compile, eval --compile
AUTO_MIN_IMAGE_CALLS = 100_000  # e.g. 3,000 images of a 35-call sampler: eager takes minutes more than compiling


def compiled_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The networks ``--compile`` compiles: the method's ``compile_modules``, else each child module with
    parameters."""
    names = getattr(model, "compile_modules", None)
    children = dict(model.named_children())
    if names is None:
        return [(name, child) for name, child in children.items() if any(True for _ in child.parameters())]
    return [(name, children[name]) for name in names if name in children]


def compile_in_place(model: nn.Module) -> list[str]:
    """Compile the method's networks in place (their parameters and keys unchanged); returns their names."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_folder() / "inductor"))
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # "No CUDA runtime is found" on a CPU
    done = []
    for name, module in compiled_modules(model):
        module.compile()
        done.append(name)
    return done


def uncompile(model: nn.Module) -> None:
    """Run the method's networks eagerly again."""
    for _, module in compiled_modules(model):
        module._compiled_call_impl = None


def has_cpp_compiler() -> bool:
    """Whether a C++ compiler is on the PATH: torch.compile builds its CPU kernels with one."""
    return any(shutil.which(name) for name in (os.environ.get("CXX", ""), "c++", "g++", "clang++") if name)


def check_compile(value: str) -> str:
    text = str(value).lower()
    if text not in COMPILE_CHOICES:
        raise ArgumentError("compile", f"{{arg}} must be one of {', '.join(COMPILE_CHOICES)}, got {value!r}")
    return text


def network_calls(model: Any, options: dict[str, Any]) -> int | None:
    """Network calls one image costs with these sample options, as the method counts them (``network_calls``
    taking the options it knows by name), or None for a method that does not count them."""
    count = getattr(model, "network_calls", None)
    if count is None:
        return None
    accepted = inspect.signature(count).parameters
    return int(count(**{key: value for key, value in options.items() if key in accepted}))


def compile_for_sampling(model: nn.Module, n: int, options: dict[str, Any], requested: str = "auto") -> str:
    """Compile ``model``'s networks for a request of ``n`` images when ``requested`` says so (``auto``: when n times
    the network calls per image reach AUTO_MIN_IMAGE_CALLS); returns what was decided, in words ("" when the
    networks stay eager under ``auto``, which is the common case and says nothing)."""
    requested = check_compile(requested)
    if requested == "off":
        return ""
    calls = network_calls(model, options)
    if requested == "auto" and (calls is None or n * calls < AUTO_MIN_IMAGE_CALLS or not has_cpp_compiler()):
        return ""
    compile_in_place(model)
    if requested == "on":
        return "compile: on (as asked)"
    return (f"compile: on ({n:,} images x {calls} network calls: compiling takes about a minute the first time "
            f"and saves more; --compile off to skip)")
