"""What the code runs on: the CPU or GPU model, named the same way in provenance and benchmarks."""

from __future__ import annotations

import functools
import platform

import torch

# CPU flags (as /proc/cpuinfo spells them) that mean bf16 matrix arithmetic runs natively
BF16_FLAGS = {"amx_bf16": "AMX-BF16", "avx512_bf16": "AVX512-BF16"}


@functools.lru_cache(maxsize=None)
def _cpuinfo() -> tuple[str, frozenset[str]]:
    name, flags = "", frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and not name:
                    name = value.strip()
                elif key.strip() in ("flags", "Features") and not flags:
                    flags = frozenset(value.split())
                if name and flags:
                    break
    except OSError:
        pass
    return name or platform.processor() or platform.machine() or "unknown CPU", flags


def cpu_bf16_flags() -> list[str]:
    """The native-bf16 instruction sets this CPU reports (empty where bf16 would be emulated)."""
    flags = _cpuinfo()[1]
    return [label for flag, label in BF16_FLAGS.items() if flag in flags]


def cpu_name() -> str:
    """The CPU model with its thread count, torch's vector capability and any native bf16 units."""
    name = _cpuinfo()[0]
    extras = [f"{torch.get_num_threads()} threads", torch.backends.cpu.get_cpu_capability(), *cpu_bf16_flags()]
    return f"{name} ({', '.join(extras)})"


def device_name(device: torch.device | str) -> str:
    """A readable name of ``device``: the GPU model for cuda, the CPU model otherwise."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return f"Apple GPU (mps) on {platform.machine()}"
    return cpu_name()


DEVICE_CHOICES = "auto, cpu, cuda, cuda:N or mps"


def resolve_device(name: str | torch.device | None) -> torch.device:
    """``auto`` (cuda, then mps, then cpu), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``, checked against what torch sees.

    Raises ArgumentError("device", ...) naming what is available.
    """
    from .errors import ArgumentError

    if isinstance(name, torch.device):
        name = str(name)
    text = (name or "auto").strip().lower()
    if text == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if text == "cpu":
        return torch.device("cpu")
    if text == "mps":
        if not _mps_available():
            raise ArgumentError("device", "{arg} mps was asked for, but torch sees no Apple GPU (MPS) here; "
                                "use {arg} cpu or auto")
        return torch.device("mps")
    kind, _, index = text.partition(":")
    if kind == "cuda" and (not index or index.isdigit()):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ArgumentError("device", f"{{arg}} {text} was asked for, but torch sees no CUDA device; use {{arg}} cpu")
        if index and int(index) >= count:
            raise ArgumentError("device", f"{{arg}} {text} was asked for, but torch sees {count} CUDA device(s) "
                                f"(cuda:0..cuda:{count - 1}); pick one of those")
        return torch.device(text)
    raise ArgumentError("device", f"{{arg}} must be one of {DEVICE_CHOICES}, got {name!r}")


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())
