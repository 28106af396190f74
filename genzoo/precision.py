"""Numeric precision chosen for the hardware: ``auto``, ``fp32``, ``bf16`` or ``fp16``.

``auto`` uses a reduced precision only where it is native and measured faster: on CUDA, bf16 where
the GPU supports it; on a CPU with native bf16 (AMX or AVX512-BF16), bf16 if a short probe of the
actual work (a few training steps or sample batches, in both precisions) is faster, with the
answer cached per machine and workload; everywhere else fp32. Asking for bf16 on a CPU that
would emulate it warns once (about 28x slower was measured on an AVX2-only CPU).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import warnings
from pathlib import Path
from typing import Callable, Iterator

import torch

from .errors import ArgumentError
from .hardware import cpu_bf16_flags, device_name

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
EMULATED_BF16_SLOWDOWN = "an IGN training step took about 28x longer in bf16 than in fp32 on an AVX2-only AMD EPYC"
CACHE_ENV = "GENZOO_CACHE"
FASTER_BY = 0.95  # bf16 must take at most 95% of fp32's time to be chosen
_warned: set[str] = set()


def check_precision(value: str) -> str:
    text = str(value).lower()
    if text not in PRECISIONS:
        raise ArgumentError("precision", f"{{arg}} must be one of {', '.join(PRECISIONS)}, got {value!r}")
    return text


def cpu_has_native_bf16() -> bool:
    return bool(cpu_bf16_flags())


def resolve_precision(requested: str, device: torch.device, probe: Callable[[str], float] | None = None,
                      probe_key: str = "") -> str:
    """The precision to run in on ``device``: ``requested``, or for ``auto`` the fastest native one.

    ``probe(precision)`` returns the seconds one unit of the actual work takes in that precision;
    it is run (and its verdict cached under ``probe_key``) only on CPUs with native bf16.
    """
    requested = check_precision(requested)
    kind = device.type
    if requested == "auto":
        if kind == "cuda":
            return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
        if kind == "cpu" and cpu_has_native_bf16() and probe is not None:
            return _probed(probe, probe_key)
        return "fp32"
    if requested == "fp16" and kind == "cpu":
        raise ArgumentError("precision", "{arg} fp16 is for GPUs; on a CPU use {arg} bf16 (native on AMX or "
                            "AVX512-BF16 CPUs), fp32 or auto")
    if requested == "bf16" and kind == "cuda" and not torch.cuda.is_bf16_supported():
        raise ArgumentError("precision", f"{{arg}} bf16: {device_name(device)} does not support bf16; use {{arg}} "
                            f"fp16, fp32 or auto")
    if requested == "bf16" and kind == "cpu" and not cpu_has_native_bf16():
        warn_emulated_bf16()
    return requested


def warn_emulated_bf16() -> None:
    if "bf16" in _warned:
        return
    _warned.add("bf16")
    warnings.warn(f"bf16 is emulated on this CPU (no AMX or AVX512-BF16), so it runs far slower than fp32 "
                  f"({EMULATED_BF16_SLOWDOWN}): use --precision fp32 or auto", stacklevel=3)


@contextlib.contextmanager
def autocast(precision: str, device: torch.device) -> Iterator[None]:
    """Autocast to ``precision`` (fp32: nothing) on ``device``."""
    if precision == "fp32":
        yield
        return
    with torch.autocast(device_type=device.type, dtype=DTYPES[precision]):
        yield


def _probed(probe: Callable[[str], float], key: str) -> str:
    """bf16 if the probe says it is faster than fp32 here, the verdict cached per machine and ``key``."""
    cache = _cache_file()
    digest = hashlib.sha256(f"{device_name('cpu')}|{torch.__version__}|{key}".encode()).hexdigest()[:24]
    verdicts = _read_cache(cache)
    if digest in verdicts:
        return verdicts[digest]["precision"]
    with torch.random.fork_rng(devices=[]):
        fp32 = probe("fp32")
        bf16 = probe("bf16")
    choice = "bf16" if bf16 <= FASTER_BY * fp32 else "fp32"
    verdicts[digest] = {"precision": choice, "fp32_seconds": round(fp32, 5), "bf16_seconds": round(bf16, 5),
                        "workload": key, "hardware": device_name("cpu"), "measured": time.strftime("%Y-%m-%d %H:%M")}
    _write_cache(cache, verdicts)
    return choice


def _cache_file() -> Path:
    root = os.environ.get(CACHE_ENV) or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                                     "genzoo")
    return Path(root) / "precision.json"


def _read_cache(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_cache(path: Path, verdicts: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(verdicts, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only means probing again next time


def timed(work: Callable[[], object]) -> float:
    """Seconds ``work()`` takes (after one untimed warm-up call)."""
    work()
    start = time.perf_counter()
    work()
    return time.perf_counter() - start
