"""Numeric precision chosen for the hardware: ``auto``, ``fp32``, ``bf16`` or ``fp16``.

``auto`` uses a reduced precision only where it is native and measured faster: on CUDA, bf16 where
the GPU supports it; on a CPU with native bf16 (AMX or AVX512-BF16), bf16 if a short probe of the
actual work (two training steps, or the first few network calls of a sample batch, in each
precision) is faster, with the answer cached per machine and workload; everywhere else fp32.
:class:`PrecisionChoice` carries the answer with its reason, which ``genzoo fit`` prints and keeps
in fit.json. Asking for bf16 on a CPU that would emulate it warns once, naming the slowdown
(``EMULATED_BF16_SLOWDOWN``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import time
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch

from .errors import ArgumentError, GenzooError
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


@dataclass(frozen=True)
class PrecisionChoice:
    """A precision and why it was chosen; ``fp32_seconds``/``bf16_seconds`` when auto timed both."""

    precision: str
    requested: str
    reason: str
    fp32_seconds: float | None = None
    bf16_seconds: float | None = None

    def describe(self) -> str:
        """``bf16 (native on this CPU, 1.7x faster measured)``."""
        return f"{self.precision} ({self.reason})"

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> "PrecisionChoice":
        return cls(**{f.name: document[f.name] for f in fields(cls) if f.name in document})


def resolve_precision(requested: str, device: torch.device, probe: Callable[[str], float] | None = None,
                      probe_key: str = "") -> str:
    """The precision to run in on ``device``: ``requested``, or for ``auto`` the fastest native one."""
    return decide_precision(requested, device, probe, probe_key).precision


def decide_precision(requested: str, device: torch.device, probe: Callable[[str], float] | None = None,
                     probe_key: str = "") -> PrecisionChoice:
    """Like :func:`resolve_precision`, with the reason for the choice.

    ``probe(precision)`` returns the seconds one unit of the actual work takes in that precision;
    it is run (and its verdict cached under ``probe_key``) only on CPUs with native bf16.
    """
    requested = check_precision(requested)
    kind = device.type
    if requested == "auto":
        if kind == "cuda":
            if torch.cuda.is_bf16_supported():
                return PrecisionChoice("bf16", requested, "native on this GPU")
            return PrecisionChoice("fp32", requested, "this GPU has no bf16")
        if kind == "cpu" and cpu_has_native_bf16():
            if probe is None:
                return PrecisionChoice("fp32", requested, "bf16 is native on this CPU, but this work was not timed")
            return _probed(probe, probe_key)
        if kind == "cpu":
            return PrecisionChoice("fp32", requested, "bf16 would be emulated on this CPU: no AMX or AVX512-BF16")
        return PrecisionChoice("fp32", requested, f"auto keeps fp32 on {kind}")
    if requested == "fp16" and kind == "cpu":
        raise ArgumentError("precision", "{arg} fp16 is for GPUs; on a CPU use {arg} bf16 (native on AMX or "
                            "AVX512-BF16 CPUs), fp32 or auto")
    if requested == "bf16" and kind == "cuda" and not torch.cuda.is_bf16_supported():
        raise ArgumentError("precision", f"{{arg}} bf16: {device_name(device)} does not support bf16; use {{arg}} "
                            f"fp16, fp32 or auto")
    if requested == "bf16" and kind == "cpu" and not cpu_has_native_bf16():
        warn_emulated_bf16()
        return PrecisionChoice(requested, requested, "as asked; emulated on this CPU, far slower than fp32")
    return PrecisionChoice(requested, requested, "as asked")


def decide_run_precision(requested: str, recorded: dict[str, Any] | None, method: str, fp32_training: str,
                         device: torch.device, probe: Callable[[str], float], probe_key: str) -> PrecisionChoice:
    """A training run's precision: a resumed run keeps the one it ``recorded`` (never timed again) unless another is
    asked for; a method that must train in fp32 (``fp32_training``, its reason) keeps it under auto and is warned
    about otherwise; else :func:`decide_precision`, which may time one step both ways with ``probe``."""
    if recorded and requested in ("auto", recorded.get("precision")):
        return PrecisionChoice.from_dict(recorded)
    if fp32_training and requested == "auto":
        return PrecisionChoice("fp32", "auto", f"{method} trains in fp32: {fp32_training}")
    if fp32_training and requested in ("bf16", "fp16"):
        warnings.warn(f"--precision {requested} for {method}, which should train in fp32: {fp32_training}; use "
                      f"--precision fp32 or auto", stacklevel=2)
    return decide_precision(requested, device, probe, probe_key)


def check_runnable(choice: PrecisionChoice, device: torch.device, out: Any) -> None:
    """Refuse, in one sentence, a resumed run's recorded precision that this machine cannot run."""
    if choice.precision == "fp16" and device.type == "cpu":
        raise GenzooError(f"--resume: the run in {out} trains in fp16, which runs on GPUs only; resume it on a GPU, "
                          f"or continue in another precision with --precision fp32 --allow-changes (recorded in "
                          f"fit.json)")
    if choice.precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise GenzooError(f"--resume: the run in {out} trains in bf16, which {device_name(device)} does not support; "
                          f"resume it on a GPU with bf16, or continue with --precision fp32 --allow-changes")
    if choice.precision == "bf16" and device.type == "cpu" and not cpu_has_native_bf16():
        warn_emulated_bf16()


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


def _probed(probe: Callable[[str], float], key: str) -> PrecisionChoice:
    """bf16 if the probe says it is faster than fp32 here, the verdict cached per machine and ``key``."""
    cache = _cache_file()
    digest = hashlib.sha256(f"{device_name('cpu')}|{torch.__version__}|{key}".encode()).hexdigest()[:24]
    verdicts = _read_cache(cache)
    if digest not in verdicts:
        with _rng_untouched():
            fp32 = probe("fp32")
            bf16 = probe("bf16")
        verdicts[digest] = {"precision": "bf16" if bf16 <= FASTER_BY * fp32 else "fp32",
                            "fp32_seconds": round(fp32, 5), "bf16_seconds": round(bf16, 5), "workload": key,
                            "hardware": device_name("cpu"), "measured": time.strftime("%Y-%m-%d %H:%M")}
        _write_cache(cache, verdicts)
    verdict = verdicts[digest]
    fp32, bf16 = verdict.get("fp32_seconds"), verdict.get("bf16_seconds")
    speed = f"{fp32 / bf16:.2g}x" if fp32 and bf16 else "?"
    if verdict["precision"] == "bf16":
        reason = f"native on this CPU, {speed} faster measured"
    else:
        reason = f"bf16 is native on this CPU but measured {speed} the speed of fp32, not faster"
    return PrecisionChoice(verdict["precision"], "auto", reason, fp32, bf16)


@contextlib.contextmanager
def _rng_untouched() -> Iterator[None]:
    """Run a probe without moving torch's, Python's or NumPy's global RNG: a run's randomness must not
    depend on whether its precision was measured now or read from the cache."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


def cache_folder() -> Path:
    """genzoo's cache of measured verdicts and compiled graphs: $GENZOO_CACHE, else ~/.cache/genzoo."""
    return Path(os.environ.get(CACHE_ENV) or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                          os.path.expanduser("~/.cache"), "genzoo"))


def _cache_file() -> Path:
    return cache_folder() / "precision.json"


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


PROBE_CALLS = 3  # network calls timed per run when a probe is bounded


class _Enough(BaseException):
    """Raised at the start of a network call once a bounded probe has timed enough of them."""


class _CallBudget:
    """Stops ``work`` at its ``calls + 1``-th top-level module call (calls nested inside a module are not counted)."""

    def __init__(self, calls: int):
        self.calls, self.count, self.depth = calls, 0, 0

    def _before(self, module: torch.nn.Module, args: Any) -> None:
        if self.depth == 0:
            if self.count == self.calls:
                raise _Enough
            self.count += 1
        self.depth += 1

    def _after(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        self.depth -= 1

    def run(self, work: Callable[[], object]) -> None:
        self.count = self.depth = 0
        handles = [torch.nn.modules.module.register_module_forward_pre_hook(self._before),
                   torch.nn.modules.module.register_module_forward_hook(self._after, always_call=True)]
        try:
            work()
        except _Enough:
            pass
        finally:
            for handle in handles:
                handle.remove()


def timed(work: Callable[[], object], calls: int | None = PROBE_CALLS) -> float:
    """Seconds ``work()`` takes, after one untimed warm-up run.

    With ``calls``, each run stops after that many network calls (top-level ``nn.Module`` calls), so a
    sampler of many steps is timed on a few of them, not on a whole run. ``calls=None`` times all
    of ``work`` (a training step: forward and backward).
    """
    if calls is None:
        work()
        start = time.perf_counter()
        work()
        return time.perf_counter() - start
    budget = _CallBudget(calls)
    budget.run(work)
    start = time.perf_counter()
    budget.run(work)
    return time.perf_counter() - start
