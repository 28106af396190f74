"""The settings of one training run (``genzoo fit``'s options), checked where they are declared."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..configs import option
from ..errors import ArgumentError
from ..precision import check_precision
from ..progress import HELP as PROGRESS_HELP
from .compiling import check_compile
from ..weights import WEIGHTS_FILE

TRACKERS = {"tensorboard": ("tensorboard", "tensorboardX"), "wandb": ("wandb",), "mlflow": ("mlflow",),
            "comet_ml": ("comet_ml",), "aim": ("aim",), "clearml": ("clearml",), "dvclive": ("dvclive",)}
DEFAULT_KEEP = 2  # a damaged latest checkpoint then still has one to fall back on


@dataclass
class FitOptions:
    """Settings of one training run (the options of ``genzoo fit``)."""

    steps: int = option(help="Total optimisation steps (--resume continues to this total).")
    out: str = option(help="Output directory: the model, logs, sample grids and checkpoints.")
    dataset: str | None = option(None, help="mnist|cifar10|celeba64|...[:SPLIT], folder:PATH or npz:PATH[:SPLIT] "
                                            "(`genzoo datasets` lists them).")
    data_root: str | None = option(None, help="Where datasets live (default: $GENZOO_DATA_ROOT or ./data).")
    batch_size: int = option(64, help="Global batch of one forward pass, split over processes.")
    grad_accum: int = option(1, help="Accumulate gradients over K batches per step: the same as a K-times "
                                            "larger --batch-size, in the memory of one.")
    seed: int = option(0, help="Initial weights, data order and the method's randomness.")
    hflip: bool = option(False, flags=("--hflip/--no-hflip",),
                         help="Mirror a random half of each batch left-right (faces, natural images; not digits).")
    precision: str = option("auto", help="auto (bf16 where native and measured faster, else fp32), fp32, bf16 or "
                                         "fp16 (GPUs).")
    device: str = option("auto", help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps.")
    compile: str = option("auto", help="Train the networks compiled by torch.compile: on, off, or auto (on a long run, "
                                       "timed both ways first and kept if faster; the verdict cached per machine).")
    resume: bool = option(False, help="Continue the run in --out from its last complete checkpoint.")
    allow_changes: bool = option(False, flags=("--allow-changes",),
                                 help="With --resume: accept changed Config fields, precision or training data "
                                      "(recorded in fit.json; the run is then no longer what one uninterrupted run "
                                      "gives).")
    checkpoint_every: int = option(1000, help="Steps between checkpoints (0: only at the end).")
    keep_checkpoints: int = option(DEFAULT_KEEP, help="How many recent checkpoints to keep (2 or more lets "
                                                             "--resume fall back when the newest is damaged).")
    init: str | None = option(None, metavar="MODEL",
                              help="Fine-tune: start from this model's weights (a directory or a model name) with a "
                                   "fresh optimiser.")
    sample_every: int = option(1000, help="Steps between sample grids (0: never).")
    grid_size: int = option(64, help="Images in each sample grid.")
    log_with: str | None = option(None, metavar="TRACKER",
                                  help="Also log to an experiment tracker through Accelerate (tensorboard, wandb, "
                                       "mlflow, ...; comma list), writing under --out/trackers.")
    collective_timeout: float = option(10.0, metavar="MINUTES",
                                       help="Under several processes: how long the others wait for one that stopped "
                                            "answering before the run names it and exits, keeping its last "
                                            "checkpoint.")
    progress: bool = option(True, flags=("--progress/--no-progress",), help=PROGRESS_HELP)
    command: str = option("", cli=False)
    overrides: dict[str, Any] = option(default_factory=dict, cli=False)

    def check(self, method: type) -> None:
        """Refuse bad settings before anything is built or written (``method``: the Method class)."""
        for name, low in (("steps", 1), ("batch_size", 1), ("grad_accum", 1), ("keep_checkpoints", 1),
                          ("checkpoint_every", 0), ("sample_every", 0), ("grid_size", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ArgumentError(name, f"{{arg}} must be an integer >= {low}, got {value!r}")
        check_precision(self.precision)
        check_compile(self.compile)
        if isinstance(self.collective_timeout, bool) or not isinstance(self.collective_timeout, (int, float)) or \
                not self.collective_timeout > 0:
            raise ArgumentError("collective_timeout", f"{{arg}} must be a number of minutes > 0, got "
                                f"{self.collective_timeout!r}")
        if method.needs_data and not self.dataset:
            raise ArgumentError("dataset", f"method {method.name!r} trains on data: pass {{arg}} (e.g. mnist)")
        if not method.needs_data and self.dataset:
            raise ArgumentError("dataset", f"method {method.name!r} trains without data: drop {{arg}}")
        if self.allow_changes and not self.resume:
            raise ArgumentError("allow_changes", "{arg} only applies to --resume")
        out = Path(self.out)
        if out.exists() and not out.is_dir():
            raise ArgumentError("out", f"{{arg}} {out} is a file; give a directory for the run")
        if self.init and _looks_like_a_path(self.init) and not (Path(self.init) / WEIGHTS_FILE).is_file():
            raise ArgumentError("init", f"{{arg}} {self.init}: no {WEIGHTS_FILE} there; pass a model directory "
                                f"written by genzoo fit or genzoo export, or a model name (genzoo list)")
        for tracker in self.trackers():
            if tracker not in TRACKERS:
                raise ArgumentError("log_with", f"{{arg}} {tracker!r} is not a tracker Accelerate knows; use one of "
                                    f"{', '.join(TRACKERS)}")
            if not any(importlib.util.find_spec(module) for module in TRACKERS[tracker]):
                raise ArgumentError("log_with", f"{{arg}} {tracker} needs the {TRACKERS[tracker][0]} package: "
                                    f"pip install {TRACKERS[tracker][0]}")

    def trackers(self) -> list[str]:
        return [part.strip() for part in (self.log_with or "").split(",") if part.strip()]

    def settings(self, method: str, config: dict[str, Any], init_sha: str | None,
                 data: dict[str, Any] | None = None) -> dict[str, Any]:
        """What must match between a run and its --resume (the step count may grow); ``data``: the
        training data's fingerprint (``training.batches.data_fingerprint``)."""
        return {"method": method, "data": data, "dataset": self.dataset, "batch_size": self.batch_size,
                "grad_accum": self.grad_accum, "seed": self.seed, "hflip": self.hflip,
                "config": config, "init": {"path": str(self.init), "sha256": init_sha} if self.init else None}


def _looks_like_a_path(text: str) -> bool:
    return Path(text).exists() or "/" in text or text.startswith(".")


__all__ = ["DEFAULT_KEEP", "FitOptions", "TRACKERS"]
