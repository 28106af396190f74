"""A run's record: ``fit.json`` (its settings, commands and segments), ``metrics.jsonl`` and the provenance
its model directories carry. Only the main process writes it.

A segment is one invocation of ``genzoo fit`` that trained the run: its steps, precision, hardware,
process count and command. Resuming from an older checkpoint cuts the segments (and the log lines)
past it, so the record always reads as one run.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import GenzooError
from .options import FitOptions

FIT_FILE = "fit.json"
METRICS_FILE = "metrics.jsonl"
PROVENANCE_SEGMENT = ("steps", "precision", "hardware", "processes")  # of fit.json's segments


class RunRecord:
    """fit.json and metrics.jsonl of the run in ``out``."""

    def __init__(self, out: Path, opts: FitOptions, saved: dict[str, Any] | None = None):
        """``saved``: the run's fit.json as :func:`read_run_file` read it (empty for a new run)."""
        self.out, self.opts, self.saved = Path(out), opts, dict(saved or {})
        self.commands: list[str] = []
        self.init_commands: list[str] = []
        self.segments: list[dict[str, Any]] = []
        self.settings: dict[str, Any] = {}
        self.precision: dict[str, Any] = {}
        self._log = None

    # -- writing ------------------------------------------------------------------------------

    def start(self, step: int, settings: dict[str, Any], precision: dict[str, Any], hardware: str, processes: int,
              init_commands: list[str], changes: list[str]) -> None:
        """Record this invocation: its command, and a segment starting at ``step``; past segments are cut there."""
        previous = self.saved if self.opts.resume else {}
        self.init_commands = previous.get("init_commands", init_commands)
        self.commands = previous.get("commands", []) + [self.opts.command or " ".join(sys.argv)]
        self.settings, self.precision = settings, precision
        kept = segments_until(previous.get("segments", []), step)
        segment = {"steps": [step, step], "precision": precision["precision"], "precision_requested":
                   precision.get("requested", precision["precision"]), "precision_reason": precision.get("reason", ""),
                   "hardware": hardware, "processes": processes,
                   "command": self.commands[-1], "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        if changes:
            segment["changed"] = changes
        self.segments = kept + [segment]
        self.write(processes, hardware)
        self._trim_metrics(step)

    def note_compile(self, compiled: str) -> None:
        """Whether this segment trains compiled, and why (written with the next checkpoint)."""
        if self.segments:
            self.segments[-1]["compile"] = compiled

    def reach(self, step: int, processes: int, hardware: str) -> None:
        """The current segment now reaches ``step``; fit.json rewritten."""
        self.segments[-1]["steps"][1] = step
        self.write(processes, hardware)

    def trained_segments(self) -> list[dict[str, Any]]:
        """The segments that trained (a no-op --resume has none)."""
        return [s for s in self.segments if s["steps"][0] < s["steps"][1]]

    def write(self, processes: int, hardware: str) -> None:
        document = {"settings": self.settings, "options": asdict(self.opts), "processes": processes,
                    "hardware": hardware, "commands": self.commands,
                    "init_commands": self.init_commands, "segments": self.trained_segments()}
        write_json_atomic(self.out / FIT_FILE, document)

    def log(self, step: int, scalars: dict[str, float]) -> None:
        if self._log is None:
            self._log = open(self.out / METRICS_FILE, "a", encoding="utf-8", buffering=1)
        self._log.write(json.dumps({"step": step, **{k: float(f"{v:.7g}") for k, v in scalars.items()}}) + "\n")

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def _trim_metrics(self, step: int) -> None:
        """On resume, drop log lines past the checkpoint so the log reads as one run."""
        path = self.out / METRICS_FILE
        if not path.is_file():
            return
        kept = []
        for line in path.read_text().splitlines():
            try:
                if line and json.loads(line)["step"] <= step:
                    kept.append(line)
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a kill
        path.write_text("".join(line + "\n" for line in kept))

    # -- provenance ---------------------------------------------------------------------------

    def provenance(self, step: int, elapsed: float, weights: str, hardware: str, processes: int) -> dict[str, Any]:
        """What a model directory written at ``step`` says about how it was made."""
        o = self.opts
        return {
            "genzoo_version": __version__,
            "genzoo_commit": git_commit(),
            "torch_version": _torch_version(),
            "python_version": platform.python_version(),
            "dataset": o.dataset,
            "seed": o.seed,
            "steps": step,
            "batch_size": o.batch_size,
            "grad_accum": o.grad_accum,
            "hflip": o.hflip,
            "precision": self.precision.get("precision"),
            "hardware": hardware,
            "processes": processes,
            "training_seconds": round(elapsed, 1),
            "weights": weights,
            "commands": self.trained_commands(),
            "segments": [{key: s[key] for key in PROVENANCE_SEGMENT} for s in self.trained_segments()],
        }

    def trained_commands(self) -> list[str]:
        """Every command that trained the weights: an --init model's history, then this run's segments'."""
        trained = [s["command"] for s in self.trained_segments()]
        return list(self.init_commands) + (trained or self.commands[-1:])


def read_run_file(out: Path) -> dict[str, Any]:
    """The run's fit.json (empty when there is none); refused in one sentence when unreadable."""
    path = Path(out) / FIT_FILE
    if not path.is_file():
        return {}
    try:
        document = json.loads(path.read_text())
        if not isinstance(document, dict) or not isinstance(document.get("settings"), dict):
            raise ValueError("no settings")
        return document
    except (OSError, ValueError) as exc:
        raise GenzooError(f"{path} is damaged ({type(exc).__name__}); the run's settings cannot be checked: start "
                          f"a new run in another --out, or delete {path.name} to start this one again") from None


def segments_until(segments: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
    """The segments that started before ``step``, each cut to end there at the latest: what trained the weights of
    that step (a run resumed from it, a model taken from its checkpoint)."""
    return [{**s, "steps": [s["steps"][0], min(s["steps"][1], step)]} for s in segments if s["steps"][0] < step]


CHANGEABLE = ("data",)  # settings besides Config fields (and the precision) that --allow-changes may change


def recorded_precision(saved: dict[str, Any]) -> dict[str, Any] | None:
    """The precision a run last trained in, as its fit.json records it: its last segment's (precision, requested,
    reason); a fit.json of an earlier genzoo kept it at the top level."""
    segments = saved.get("segments") or []
    if segments and "precision" in segments[-1]:
        last = segments[-1]
        return {"precision": last["precision"], "requested": last.get("precision_requested", last["precision"]),
                "reason": last.get("precision_reason", "")}
    return saved.get("precision") if isinstance(saved.get("precision"), dict) else None


def compare_settings(out: Path, saved: dict[str, Any], now: dict[str, Any], allow_changes: bool) -> list[str]:
    """Compare ``now`` with a run's saved settings: one sentence naming the first difference, or (with
    ``allow_changes``, for Config fields, the precision and the data's content) the changed names."""
    now = json.loads(json.dumps(now, default=str))
    changed = []
    if saved.get("data") != now.get("data") and "data" in saved:
        changed.append("data")
        if not allow_changes:
            from .batches import describe_fingerprint

            raise GenzooError(f"--resume: the training data differs from the run in {out} (was "
                              f"{describe_fingerprint(saved['data'])}, now {describe_fingerprint(now.get('data'))}); "
                              f"resume on the data it started with, or pass --allow-changes to continue on this data")
    for key in now:
        if key == "data" or (key == "dataset" and saved.get("data") == now.get("data") and "data" in saved):
            continue  # the data compared by content above, not by how its path is spelled
        if key == "config":
            for field in now[key]:
                before = (saved.get("config") or {}).get(field, now[key][field])
                if before != now[key][field]:
                    changed.append(f"config.{field}")
                    _refuse_unless(out, allow_changes, f"Config field {field!r}", before, now[key][field])
        elif key not in saved and key in CHANGEABLE:
            continue  # recorded by a newer genzoo than the one that started the run
        elif saved.get(key) != now[key]:
            if key in CHANGEABLE:
                changed.append(key)
            _refuse_unless(out, allow_changes and key in CHANGEABLE, key, saved.get(key), now[key])
    return changed


def _refuse_unless(out: Path, allowed: bool, what: str, before: Any, after: Any) -> None:
    if allowed:
        return
    fix = " or pass --allow-changes to continue with the new value" if what.startswith("Config") or \
        what in CHANGEABLE else ""
    raise GenzooError(f"--resume: {what} differs from the run in {out} (was {before!r}, now {after!r}); resume with "
                      f"the original value{fix}, or choose a new --out")


def write_json_atomic(path: Path, document: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2, default=str))
    os.replace(tmp, path)


def git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parent.parent
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _torch_version() -> str:
    import torch

    return torch.__version__


__all__ = ["FIT_FILE", "METRICS_FILE", "PROVENANCE_SEGMENT", "RunRecord", "compare_settings", "git_commit",
           "read_run_file", "recorded_precision", "segments_until", "write_json_atomic"]
