"""Whether a run trains with ``torch.compile`` (``genzoo fit --compile auto|on|off``), and compiling in place.

The method's networks are compiled in place (``nn.Module.compile``), so their state-dict keys, checkpoints and
exports are the files an eager run writes, and a run may resume compiled or not. Compiled graphs are cached
on disk (under genzoo's cache folder), so a second run of the same networks compiles in seconds, not minutes.

``auto`` decides by measurement and the run's length: a short run stays eager (compiling takes minutes on a
CPU); a long one times a few eager steps, compiles, times a few compiled steps, keeps whichever is faster and
caches that verdict for this machine and workload, which later runs use without timing again. Under several
processes ``auto`` follows a cached verdict only (the processes must agree), else stays eager.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from ..compiling import COMPILE_CHOICES, check_compile, compile_in_place, compiled_modules, uncompile
from ..hardware import device_name
from ..precision import cache_folder

AUTO_MIN_STEPS = 2000  # below this, auto stays eager: the compile would take a large part of the run
TIMED_STEPS = 3  # steps timed each way by auto, after one untimed step (the eager warm-up, the compile)
FASTER_BY = 0.95  # compiled steps must take at most 95% of eager's time to be kept


@dataclass
class CompileChoice:
    """Whether the run compiles, and why (what fit prints and fit.json records)."""

    compiled: bool
    requested: str
    reason: str
    eager_seconds: float | None = None
    compiled_seconds: float | None = None

    def describe(self) -> str:
        return f"{'on' if self.compiled else 'off'} ({self.reason})"

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in vars(self).items() if value is not None}


class CompilePlan:
    """Applies ``--compile`` to a run's model: at once for ``on`` or a cached verdict, else (``auto`` on a long
    run) by timing the first steps both ways. The loop calls :meth:`before_step` and :meth:`after_step`."""

    def __init__(self, requested: str, model: nn.Module, workload: str, remaining_steps: int, processes: int,
                 say=print):
        self.requested, self.model, self.say = check_compile(requested), model, say
        self.key = hashlib.sha256(f"{device_name('cpu')}|{_torch_version()}|{workload}".encode()).hexdigest()[:24]
        self.times: list[float] = []
        self.phase = "done"
        self.choice: CompileChoice | None = None
        cached = _read_cache().get(self.key)
        if self.requested == "off":
            self._settle(False, "as asked")
        elif self.requested == "on":
            self._settle(True, "as asked")
        elif cached is not None:
            self._settle(cached["compiled"], f"measured {_speed(cached)} before on this machine",
                         cached.get("eager_seconds"), cached.get("compiled_seconds"))
        elif processes > 1:
            self._settle(False, "several processes keep eager unless a single-process run measured compiling")
        elif remaining_steps < AUTO_MIN_STEPS:
            self._settle(False, f"a run of {remaining_steps} steps: compiling takes minutes, more than it saves")
        else:
            self.phase = "eager"

    def _settle(self, compiled: bool, reason: str, eager: float | None = None, compiled_s: float | None = None):
        self.choice = CompileChoice(compiled, self.requested, reason, eager, compiled_s)
        self.phase = "done"
        if compiled:
            compile_in_place(self.model)

    def announce(self) -> None:
        if self.phase == "done":
            self.say(f"compile: {self.choice.describe()}")
        else:
            self.say(f"compile: auto, timing {TIMED_STEPS} eager and {TIMED_STEPS} compiled steps first")

    def before_step(self) -> None:
        self._started = time.perf_counter()

    def after_step(self) -> None:
        if self.phase == "done":
            return
        self.times.append(time.perf_counter() - self._started)
        if self.phase == "eager" and len(self.times) == TIMED_STEPS + 1:
            self.eager = sorted(self.times[1:])[TIMED_STEPS // 2]
            self.times = []
            self.phase = "compiled"
            compile_in_place(self.model)
        elif self.phase == "compiled" and len(self.times) == TIMED_STEPS + 1:
            compiled = sorted(self.times[1:])[TIMED_STEPS // 2]
            keep = compiled <= FASTER_BY * self.eager
            verdict = {"compiled": keep, "eager_seconds": round(self.eager, 5), "compiled_seconds": round(compiled, 5),
                       "compile_seconds": round(self.times[0], 1)}
            _write_cache(self.key, verdict)
            if not keep:
                uncompile(self.model)
            self.choice = CompileChoice(keep, "auto", f"{_speed(verdict)} measured", self.eager, compiled)
            self.phase = "done"
            self.say(f"compile: {self.choice.describe()}")


def _speed(verdict: dict[str, Any]) -> str:
    eager, compiled = verdict.get("eager_seconds"), verdict.get("compiled_seconds")
    if not eager or not compiled:
        return "a verdict"
    return f"compiled steps {eager / compiled:.2g}x the speed of eager"


def _torch_version() -> str:
    import torch

    return torch.__version__


def _cache_file() -> Path:
    return cache_folder() / "compile.json"


def _read_cache() -> dict[str, Any]:
    try:
        return json.loads(_cache_file().read_text())
    except (OSError, ValueError):
        return {}


def _write_cache(key: str, verdict: dict[str, Any]) -> None:
    path = _cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        verdicts = _read_cache()
        verdicts[key] = verdict
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(verdicts, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only means timing again next time


__all__ = ["COMPILE_CHOICES", "CompileChoice", "CompilePlan", "check_compile", "compile_in_place", "compiled_modules",
           "uncompile"]
