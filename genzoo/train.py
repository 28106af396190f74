"""The training loop every method shares, on one Accelerator (CPU, GPU, several of either).

Layout of an output directory (``--out DIR``):

    DIR/config.json, DIR/model.safetensors    the model (EMA weights when the method keeps an EMA),
                                              rewritten at every checkpoint: DIR is loadable at once
    DIR/fit.json                              the run's settings, checked again on --resume
    DIR/metrics.jsonl                         one JSON line of losses (and learning rates) per step
    DIR/losses.png                            those curves, drawn at every checkpoint and at the end
    DIR/samples/step-XXXXXXXX.png             sample grids
    DIR/checkpoints/step-XXXXXXXX/            the last checkpoint(s) (pickle-free; see checkpoints.py)
    DIR/trackers/                             what --log-with trackers write (e.g. TensorBoard events)

The data order is a pure function of (seed, step): the batch of step t is a slice of a
permutation seeded by the epoch (and with --hflip, which of its images are mirrored is seeded by t). Together with the RNG states in the checkpoint this makes a
resumed run end with the same weights as an uninterrupted one. Checkpoints hold whole steps only:
Ctrl-C lets the step in progress finish, saves it and stops. The precision is decided once per run
(fit.json keeps the decision; --resume reuses it), and fit.json lists the run's segments.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import platform
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from . import checkpoints as ckpt
from ._version import __version__
from .configs import build_config, config_to_dict, option
from .datasets import ImageData, load_dataset
from .errors import ArgumentError, GenzooError
from .hardware import device_name, resolve_device
from .images import save_grid
from .method import Method
from .plots import plot_losses
from .plugins import get_host
from .precision import PRECISIONS, PrecisionChoice, autocast, check_precision, decide_precision, resolve_precision, timed
from .seeding import image_seed
from .weights import WEIGHTS_FILE, load_model_dir, read_config, save_pretrained, sha256_file

GRID_SEED = 0
PROVENANCE_SEGMENT = ("steps", "precision", "hardware", "processes")  # of fit.json's segments (commands are listed apart)
TRACKERS = {"tensorboard": ("tensorboard", "tensorboardX"), "wandb": ("wandb",), "mlflow": ("mlflow",),
            "comet_ml": ("comet_ml",), "aim": ("aim",), "clearml": ("clearml",), "dvclive": ("dvclive",)}


@dataclass
class FitOptions:
    """Settings of one training run (the options of ``genzoo fit``)."""

    steps: int = option(help="Total optimisation steps (--resume continues to this total).")
    out: str = option(help="Output directory: the model, logs, sample grids and checkpoints.")
    dataset: str | None = option(None, help="mnist|cifar10|celeba64|...[:SPLIT], folder:PATH or npz:PATH[:SPLIT] "
                                            "(`genzoo datasets` lists them).")
    data_root: str | None = option(None, help="Where datasets live (default: $GENZOO_DATA_ROOT or ./data).")
    batch_size: int = option(64, help="Global batch of one forward pass, split over processes.")
    grad_accum: int = option(1, help="Accumulate gradients over K batches per step: the same as a K-times larger "
                                     "--batch-size, in the memory of one.")
    seed: int = option(0, help="Initial weights, data order and the method's randomness.")
    hflip: bool = option(False, flags=("--hflip/--no-hflip",),
                         help="Mirror a random half of each batch left-right (faces, natural images; not digits).")
    precision: str = option("auto", help="auto (bf16 where native and measured faster, else fp32), fp32, bf16 or "
                                         "fp16 (GPUs).")
    device: str = option("auto", help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps.")
    resume: bool = option(False, help="Continue the run in --out from its last checkpoint.")
    checkpoint_every: int = option(1000, help="Steps between checkpoints (0: only at the end).")
    keep_checkpoints: int = option(1, help="How many recent checkpoints to keep.")
    init: str | None = option(None, metavar="MODEL_DIR",
                              help="Fine-tune: start from this model directory's weights with a fresh optimiser.")
    sample_every: int = option(1000, help="Steps between sample grids (0: never).")
    grid_size: int = option(64, help="Images in each sample grid.")
    log_with: str | None = option(None, metavar="TRACKER",
                                  help="Also log to an experiment tracker through Accelerate (tensorboard, wandb, "
                                       "mlflow, ...; comma list), writing under --out/trackers.")
    progress: bool = option(True, flags=("--progress/--no-progress",), help="Show a progress bar (hide it for log files).")
    command: str = option("", cli=False)
    overrides: dict[str, Any] = option(default_factory=dict, cli=False)


def fit(method: str | type, *, steps: int, out: str | os.PathLike, config: dict[str, Any] | None = None,
        **options: Any) -> Path:
    """Train ``method`` (a name or Method class) and return the output model directory.

    Keyword arguments are the fields of :class:`FitOptions`; ``config`` overrides Config fields.
    """
    cls = get_host().method(method) if isinstance(method, str) else method
    cls.require("fit")
    unknown = sorted(set(options) - {f for f in FitOptions.__dataclass_fields__} - {"overrides"})
    if unknown:
        raise GenzooError(f"fit() got unknown argument(s) {unknown}; it takes: {', '.join(FitOptions.__dataclass_fields__)}")
    opts = FitOptions(steps=steps, out=str(out), overrides=dict(config or {}), **options)
    return Trainer(cls, opts).run()


def _git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parent.parent
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


class _TrainingStep(nn.Module):
    """What the (possibly DDP-wrapped) module calls: the method's training step, so ``forward`` stays the method's."""

    def __init__(self, method: Method):
        super().__init__()
        self.method = method

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        return self.method.training_step(batch)


class Trainer:
    """One run of ``genzoo fit``: settings checked in ``__init__``, everything that changes in a TrainState."""

    def __init__(self, cls: type, opts: FitOptions):
        self.cls = cls
        self.opts = opts
        self.out = Path(opts.out)
        self._validate()
        self.config = build_config(cls.Config, opts.overrides, where=f"{cls.name} --set")
        self.device = resolve_device(opts.device)
        self.accelerator: Any = None
        self.precision = "fp32"  # resolved in run()
        self.precision_choice: PrecisionChoice | None = None
        self.local_batch = opts.batch_size
        self.commands: list[str] = []
        self.segments: list[dict[str, Any]] = []  # one per invocation that trained this run (fit.json)
        self.init_sha: str | None = None
        self.init_commands: list[str] = []
        self._perm_epoch: int | None = None
        self._perm = torch.empty(0, dtype=torch.long)

    def _validate(self) -> None:
        o = self.opts
        for name, low in (("steps", 1), ("batch_size", 1), ("grad_accum", 1), ("keep_checkpoints", 1),
                          ("checkpoint_every", 0), ("sample_every", 0), ("grid_size", 1)):
            value = getattr(o, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ArgumentError(name, f"{{arg}} must be an integer >= {low}, got {value!r}")
        check_precision(o.precision)
        if self.cls.needs_data and not o.dataset:
            raise ArgumentError("dataset", f"method {self.cls.name!r} trains on data: pass {{arg}} (e.g. mnist)")
        if not self.cls.needs_data and o.dataset:
            raise ArgumentError("dataset", f"method {self.cls.name!r} trains without data: drop {{arg}}")
        if self.out.exists() and not self.out.is_dir():
            raise ArgumentError("out", f"{{arg}} {self.out} is a file; give a directory for the run")
        if o.init and not (Path(o.init) / WEIGHTS_FILE).is_file():
            raise ArgumentError("init", f"{{arg}} {o.init}: no {WEIGHTS_FILE} there; pass a model directory "
                                f"written by genzoo fit or genzoo export")
        for tracker in _trackers(o.log_with):
            if tracker not in TRACKERS:
                raise ArgumentError("log_with", f"{{arg}} {tracker!r} is not a tracker Accelerate knows; use one of "
                                    f"{', '.join(TRACKERS)}")
            if not any(importlib.util.find_spec(module) for module in TRACKERS[tracker]):
                raise ArgumentError("log_with", f"{{arg}} {tracker} needs the {TRACKERS[tracker][0]} package: "
                                    f"pip install {TRACKERS[tracker][0]}")

    # -- setup ----------------------------------------------------------------------------------

    def _settings(self) -> dict[str, Any]:
        """What must match between a run and its --resume (the step count may grow)."""
        o = self.opts
        return {"method": self.cls.name, "dataset": o.dataset, "batch_size": o.batch_size, "grad_accum": o.grad_accum,
                "seed": o.seed, "hflip": o.hflip, "precision": self.precision, "config": config_to_dict(self.config),
                "init": {"path": str(o.init), "sha256": self.init_sha} if o.init else None}

    def _check_resume(self) -> None:
        fit_file = self.out / "fit.json"
        if not fit_file.is_file():
            raise GenzooError(f"--resume: {fit_file} not found; start the run without --resume")
        saved = _upgrade_settings(json.loads(fit_file.read_text())["settings"])
        now = json.loads(json.dumps(self._settings()))
        for key in now:
            if saved.get(key) != now[key]:
                raise GenzooError(
                    f"--resume: {key} differs from the run in {self.out} (was {saved.get(key)!r}, now {now[key]!r}); "
                    f"resume with the original settings or choose a new --out"
                )

    def _check_schedule_horizon(self, state: ckpt.TrainState) -> None:
        """A learning-rate schedule is laid out over --steps: a resumed run keeps the original total."""
        if not state.schedulers:
            return
        saved = json.loads((self.out / "fit.json").read_text())["options"].get("steps")
        if saved is not None and saved != self.opts.steps:
            raise ArgumentError("steps", f"the run in {self.out} follows a learning-rate schedule over {{arg}} {saved}; "
                                f"resume it with {{arg}} {saved} (a schedule cannot be stretched), or start a new run "
                                f"from it with --init")

    def _saved_choice(self) -> PrecisionChoice | None:
        """The precision the run in --out started with (None for a new run)."""
        fit_file = self.out / "fit.json"
        if not (self.opts.resume and fit_file.is_file()):
            return None
        document = json.loads(fit_file.read_text())
        saved = _upgrade_settings(document["settings"]).get("precision")
        if isinstance(document.get("precision"), dict) and document["precision"].get("precision") == saved:
            return PrecisionChoice.from_dict(document["precision"])
        return PrecisionChoice(saved, saved, "as the run started") if saved else None

    def _accelerator(self):
        from accelerate import Accelerator
        from accelerate.utils import DistributedDataParallelKwargs

        if self.device.type == "cuda" and self.device.index is not None:
            if int(os.environ.get("WORLD_SIZE", "1")) > 1:
                raise ArgumentError("device", "{arg} cuda:N picks one GPU; under accelerate launch each process "
                                    "gets its own: use {arg} auto")
            torch.cuda.set_device(self.device)
        trackers = _trackers(self.opts.log_with)
        return Accelerator(
            cpu=self.device.type == "cpu",
            mixed_precision="fp16" if self.precision == "fp16" else "no",  # bf16 autocast is genzoo's own
            log_with=trackers or None,
            project_dir=str(self.out / "trackers") if trackers else None,
            kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=False)],
        )

    def _build(self, data: ImageData | None) -> ckpt.TrainState:
        """The method, its EMA copy, optimisers and schedulers, from the seed (or --init's weights)."""
        _seed_everything(self.opts.seed)  # the same initial weights in every process
        model = self.cls(self.config)
        model.fit_steps = self.opts.steps
        model.setup_fit(data)
        optimizers, schedulers = split_optimizers(model.configure_optimizers(), self.cls.name)
        ema_decay = float(getattr(self.config, "ema_decay", 0.0) or 0.0)
        ema = copy.deepcopy(model).eval().requires_grad_(False) if ema_decay > 0 else None
        state = ckpt.TrainState(model, ema, optimizers, schedulers)
        if self.opts.init and not self.opts.resume:
            self._load_init(state)
        return state

    def _load_init(self, state: ckpt.TrainState) -> None:
        """Start from another model's weights (fine-tuning): fresh optimiser, this run's config."""
        source = load_model_dir(self.opts.init)
        if source.name != self.cls.name:
            raise GenzooError(f"--init {self.opts.init} holds a {source.name!r} model, not {self.cls.name!r}")
        try:
            state.model.load_state_dict(source.state_dict(), strict=True)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[-1].strip()
            raise GenzooError(f"--init {self.opts.init} does not fit this config's network ({first}); "
                              f"keep the architecture settings of that model") from None
        if state.ema is not None:
            state.ema.load_state_dict(source.state_dict(), strict=True)
        self.init_commands = (read_config(Path(self.opts.init)).get("provenance") or {}).get("commands", [])

    def _decide_precision(self, state: ckpt.TrainState, data: ImageData | None) -> PrecisionChoice:
        """The run's precision, decided once: a resumed run keeps the one it started with (never timed again)."""
        saved = self._saved_choice()
        if saved is not None and self.opts.precision in ("auto", saved.precision):
            return saved

        device = self.accelerator.device

        def probe(precision: str) -> float:
            model = copy.deepcopy(state.model).to(device).train()
            batch = self._batch(data, 0, 0, device)

            def one_step() -> None:
                with autocast(precision, device):
                    losses = model.training_step(batch)
                losses["loss"].float().backward()
                model.zero_grad(set_to_none=True)

            return timed(one_step, calls=None)

        key = f"fit:{self.cls.name}:{_digest(config_to_dict(self.config))}:batch{self.local_batch}"
        return decide_precision(self.opts.precision, device, probe, key)

    def run(self) -> Path:
        o = self.opts
        if not o.resume and (self.out / "fit.json").exists():
            raise GenzooError(f"{self.out} already holds a run; pass --resume to continue it or choose a new --out")
        if o.init:
            self.init_sha = sha256_file(Path(o.init) / WEIGHTS_FILE)
        if o.precision == "fp16":
            self.precision = resolve_precision("fp16", self.device)
        acc = self.accelerator = self._accelerator()
        world, rank = acc.num_processes, acc.process_index
        if o.batch_size % world:
            raise ArgumentError("batch_size", f"{{arg}} {o.batch_size} must be divisible by the number of processes ({world})")
        self.local_batch = o.batch_size // world
        data = load_dataset(o.dataset, o.data_root) if self.cls.needs_data else None
        if data is not None and len(data) < o.batch_size * o.grad_accum:
            raise ArgumentError("batch_size", f"dataset {data.name} has {len(data)} images, fewer than one step's "
                                f"{o.batch_size * o.grad_accum} ({{arg}} x --grad-accum)")
        state = self._build(data)
        self.precision_choice = self._agreed_precision(state, data)
        self.precision = self.precision_choice.precision
        latest = None
        if o.resume:
            self._check_resume()
            self._check_schedule_horizon(state)
            latest = ckpt.latest_checkpoint(self.out)
            if latest is None:
                raise GenzooError(f"--resume: no checkpoint under {self.out / ckpt.FOLDER}; start again without --resume")
            ckpt.load_training_state(latest, state, world)
            acc.print(f"resuming {self.out} from step {state.step}")
        acc.print(f"precision: {self.precision_choice.describe()}")
        _seed_everything(image_seed(o.seed, rank, "train"))  # per-process randomness of the method
        if latest is not None and state.step:
            ckpt.load_rng(latest, rank)

        prepared = acc.prepare(_TrainingStep(state.model), *state.optimizers)
        wrapped, state.optimizers = prepared[0], list(prepared[1:])
        state.model = acc.unwrap_model(wrapped).method
        if acc.is_main_process:
            self.out.mkdir(parents=True, exist_ok=True)
            self._start_segment(state.step, world)
            self._write_fit_json(world)
            self._trim_metrics(state.step)
        trackers = bool(_trackers(o.log_with))
        if trackers:
            acc.init_trackers(self.out.name or "genzoo", config=_flat_config(self._settings()))
        acc.wait_for_everyone()
        try:
            if state.step >= o.steps:
                acc.print(f"{self.out} is already at step {state.step} >= --steps {o.steps}; nothing to do")
            else:
                self._loop(wrapped, state, data)
            if acc.is_main_process:
                self._end_segment(state.step, world)
                self._save_model(state.ema if state.ema is not None else state.model, max(state.step, o.steps),
                                 state.elapsed, world)
                plot_losses(self.out)
        finally:
            if trackers:
                acc.end_training()
        acc.wait_for_everyone()
        return self.out

    def _agreed_precision(self, state: ckpt.TrainState, data: ImageData | None) -> PrecisionChoice:
        """The run's precision: decided on the main process (``auto`` may time both), the same everywhere."""
        from accelerate.utils import broadcast_object_list

        acc = self.accelerator
        choice = [self._decide_precision(state, data).to_dict() if acc.is_main_process else None]
        if acc.num_processes > 1:
            broadcast_object_list(choice, from_process=0)
        return PrecisionChoice.from_dict(choice[0])

    # -- the loop -------------------------------------------------------------------------------

    def _batch(self, data: ImageData | None, step: int, micro: int, device: torch.device) -> dict[str, Any]:
        """Micro-batch ``micro`` of step ``step`` for this process: a pure function of (seed, step)."""
        if data is None:
            return {"x": None, "y": None, "size": self.local_batch, "step": step}
        o = self.opts
        n, b = len(data), o.batch_size
        per_step = b * o.grad_accum
        epoch, position = divmod(step, n // per_step)
        if self._perm_epoch != epoch:
            seed = image_seed(o.seed, epoch, "data")
            self._perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
            self._perm_epoch = epoch
        offset = micro * b + self.accelerator.process_index * self.local_batch
        start = position * per_step + offset
        index = self._perm[start:start + self.local_batch]
        y = data.labels[index].to(device) if data.labels is not None else None
        x = data.floats(index)
        if o.hflip:
            x = mirrored_half(x, image_seed(o.seed, step, "hflip"), offset, per_step)
        return {"x": x.to(device), "y": y, "size": self.local_batch, "step": step}

    def _loop(self, wrapped, state: ckpt.TrainState, data: ImageData | None) -> None:
        from tqdm.auto import tqdm

        o, acc = self.opts, self.accelerator
        grad_clip = getattr(self.config, "grad_clip", None)
        ema_decay = float(getattr(self.config, "ema_decay", 0.0) or 0.0)
        wrapped.train()
        bar = tqdm(total=o.steps, initial=state.step, desc=f"fit {self.cls.name}", unit="step",  # None: on a terminal only
                   disable=None if acc.is_main_process and o.progress else True, dynamic_ncols=True)
        log = open(self.out / "metrics.jsonl", "a", encoding="utf-8", buffering=1) if acc.is_main_process else None
        t0 = time.time()
        stop = _StopRequest(acc.num_processes == 1)
        try:
            while state.step < o.steps:
                scalars = self._one_step(wrapped, state, data, grad_clip)
                if state.ema is not None:
                    _update_ema(state.ema, state.model, ema_decay_at(state.step, ema_decay))
                state.step += 1
                step = state.step
                if log is not None:
                    log.write(json.dumps({"step": step, **{k: float(f"{v:.7g}") for k, v in scalars.items()}}) + "\n")
                    if step % 10 == 0 or step == o.steps:
                        bar.set_postfix({k: f"{v:.4g}" for k, v in list(scalars.items())[:4]}, refresh=False)
                if _trackers(o.log_with):
                    acc.log(scalars, step=step)
                bar.update(1)
                done = step == o.steps
                if o.sample_every and (step % o.sample_every == 0 or done) and acc.is_main_process:
                    self._write_grid(state.ema if state.ema is not None else state.model, step)
                saved = (o.checkpoint_every and step % o.checkpoint_every == 0) or done
                if saved or stop.requested:
                    self._save_checkpoint(state, state.elapsed + time.time() - t0, model=not (stop.requested and not done))
                if stop.requested and not done:
                    stop.saved = True
                    bar.close()
                    acc.print(f"interrupted: checkpoint saved at step {step}; continue with --resume, or write "
                              f"that step's model with: genzoo export {self.out} DEST --checkpoint {step}")
                    raise KeyboardInterrupt
        except KeyboardInterrupt:
            if not stop.saved:  # a second Ctrl-C (or several processes): the step in progress is lost
                latest = ckpt.latest_checkpoint(self.out)
                acc.print(f"\ninterrupted mid-step, nothing saved; --resume continues from "
                          f"{latest.name if latest else 'the start (no checkpoint yet)'}")
            raise
        finally:
            stop.restore()
            bar.close()
            if log is not None:
                log.close()
        state.elapsed += time.time() - t0

    def _one_step(self, wrapped, state: ckpt.TrainState, data: ImageData | None, grad_clip: float | None) -> dict[str, float]:
        """One optimisation step over --grad-accum micro-batches; returns the logged scalars (their mean)."""
        o, acc = self.opts, self.accelerator
        for opt in state.optimizers:
            opt.zero_grad(set_to_none=True)
        totals: dict[str, torch.Tensor] = {}
        for micro in range(o.grad_accum):
            batch = self._batch(data, state.step, micro, acc.device)
            sync = acc.no_sync(wrapped) if micro < o.grad_accum - 1 else _nothing()
            with sync:
                with autocast(self.precision, acc.device) if self.precision == "bf16" else _nothing():
                    losses = wrapped(batch)
                if not isinstance(losses, dict) or "loss" not in losses:
                    raise GenzooError(f"{self.cls.name}.training_step must return a dict with a 'loss' entry")
                acc.backward(losses["loss"] / o.grad_accum)
            for key, value in losses.items():
                if isinstance(value, torch.Tensor) and value.numel() == 1:
                    totals[key] = totals.get(key, 0) + value.detach().float() / o.grad_accum
        if grad_clip:
            acc.clip_grad_norm_(wrapped.parameters(), grad_clip)
        scalars = {k: acc.reduce(v, "mean").item() for k, v in totals.items()}
        if state.schedulers:  # the learning rate this step used
            for i, opt in enumerate(state.optimizers):
                scalars["lr" if len(state.optimizers) == 1 else f"lr_{i}"] = float(opt.param_groups[0]["lr"])
        for opt in state.optimizers:
            opt.step()
        for scheduler in state.schedulers:
            scheduler.step()
        return scalars

    # -- files ----------------------------------------------------------------------------------

    def _start_segment(self, step: int, world: int) -> None:
        """Record this invocation: its command, and a segment of the run starting at ``step``.

        Segments past ``step`` (trained after the checkpoint this run resumes from) are cut there.
        """
        path = self.out / "fit.json"
        previous = json.loads(path.read_text()) if path.is_file() else {}
        commands = previous.get("commands", [])
        if not commands and self.opts.init:  # the fine-tuned model's provenance lists its whole history
            commands = list(self.init_commands)
        self.commands = commands + [self.opts.command or " ".join(sys.argv)]
        kept = []
        for segment in previous.get("segments", []):
            first, last = segment["steps"]
            if first < step:
                kept.append({**segment, "steps": [first, min(last, step)]})
        self.segments = kept + [{"steps": [step, step], "precision": self.precision,
                                 "precision_reason": self.precision_choice.reason,
                                 "hardware": device_name(self.accelerator.device), "processes": world,
                                 "command": self.commands[-1], "started": time.strftime("%Y-%m-%d %H:%M:%S")}]

    def _end_segment(self, step: int, world: int) -> None:
        """The current segment now reaches ``step``; fit.json rewritten."""
        self.segments[-1]["steps"][1] = step
        self._write_fit_json(world)

    def _trained_segments(self) -> list[dict[str, Any]]:
        return [segment for segment in self.segments if segment["steps"][0] < segment["steps"][1]]

    def _write_fit_json(self, world: int) -> None:
        document = {"settings": self._settings(), "options": asdict(self.opts), "processes": world,
                    "hardware": device_name(self.accelerator.device), "precision": self.precision_choice.to_dict(),
                    "commands": self.commands, "segments": self._trained_segments()}
        path = self.out / "fit.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(document, indent=2, default=str))
        os.replace(tmp, path)

    def _trim_metrics(self, step: int) -> None:
        """On resume, drop log lines past the checkpoint so the log reads as one run."""
        path = self.out / "metrics.jsonl"
        if not path.is_file():
            return
        kept = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
        path.write_text("".join(line + "\n" for line in kept))

    def _write_grid(self, model: Method, step: int) -> None:
        if "sample" not in model.capabilities:
            return
        model.prepare_export()
        images = model.sample(self.opts.grid_size, seed=GRID_SEED, batch_size=self.opts.grid_size)
        save_grid(images, self.out / "samples" / f"{ckpt.checkpoint_name(step)}.png")

    def _save_checkpoint(self, state: ckpt.TrainState, elapsed: float, model: bool = True) -> None:
        """A checkpoint of ``state``; with ``model``, the model directory and loss plot of its step too.

        Stopping on Ctrl-C writes the checkpoint alone: a method's ``prepare_export`` may take many
        steps' time (IGN calibrates its batch-norm statistics on 8,192 forward passes).
        """
        acc = self.accelerator
        staging = ckpt.staging_folder(self.out, state.step)
        if acc.is_main_process:
            ckpt.start_checkpoint(self.out, state.step)
        acc.wait_for_everyone()
        ckpt.save_rng(staging, acc.process_index)
        if acc.is_main_process:
            ckpt.save_training_state(staging, state)
        acc.wait_for_everyone()
        if acc.is_main_process:
            info = {"elapsed_seconds": elapsed, "processes": acc.num_processes}
            ckpt.finish_checkpoint(staging, state.step, info, keep=self.opts.keep_checkpoints)
            self._end_segment(state.step, acc.num_processes)
            if model:
                self._save_model(state.ema if state.ema is not None else state.model, state.step, elapsed,
                                 acc.num_processes)
                plot_losses(self.out)
        acc.wait_for_everyone()

    def _save_model(self, model: Method, step: int, elapsed: float, world: int) -> None:
        o = self.opts
        provenance = {
            "genzoo_version": __version__,
            "genzoo_commit": _git_commit(),
            "torch_version": torch.__version__,
            "python_version": platform.python_version(),
            "dataset": o.dataset,
            "seed": o.seed,
            "steps": step,
            "batch_size": o.batch_size,
            "grad_accum": o.grad_accum,
            "hflip": o.hflip,
            "precision": self.precision,
            "hardware": device_name(self.accelerator.device),
            "processes": world,
            "training_seconds": round(elapsed, 1),
            "weights": "ema" if getattr(self.config, "ema_decay", 0) else "raw",
            "commands": self.commands or [o.command],
            "segments": [{key: segment[key] for key in PROVENANCE_SEGMENT} for segment in self._trained_segments()],
        }
        model.prepare_export()
        save_pretrained(model, self.out, provenance=provenance)


class _StopRequest:
    """Ctrl-C during fit: the first one lets the step in progress finish, so the checkpoint saved then
    holds a whole step (weights, optimiser, EMA and RNG agree) and --resume stays exact; a second one
    interrupts at once. Only in the main thread of a single-process run (processes must stop together)."""

    def __init__(self, enabled: bool):
        self.requested = self.saved = False
        self._previous: Any = None
        if enabled and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True
        self.restore()  # a second Ctrl-C takes the default path: KeyboardInterrupt at once
        print("\nCtrl-C: stopping after this step and saving a checkpoint (Ctrl-C again to stop at once, "
              "without it)", file=sys.stderr, flush=True)

    def restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def split_optimizers(returned: Any, name: str) -> tuple[list[torch.optim.Optimizer], list[Any]]:
    """configure_optimizers' result -> (optimisers, schedulers)."""
    schedulers: list[Any] = []
    if isinstance(returned, tuple) and len(returned) == 2 and isinstance(returned[0], (list, tuple)):
        returned, schedulers = returned
        schedulers = list(schedulers) if isinstance(schedulers, (list, tuple)) else [schedulers]
    optimizers = list(returned) if isinstance(returned, (list, tuple)) else [returned]
    if not optimizers or not all(isinstance(o, torch.optim.Optimizer) for o in optimizers):
        raise GenzooError(f"{name}.configure_optimizers must return an optimiser, a list of them, or "
                          f"(optimizers, schedulers); got {type(returned).__name__}")
    for s in schedulers:
        if not (hasattr(s, "step") and hasattr(s, "state_dict") and hasattr(s, "load_state_dict")):
            raise GenzooError(f"{name}.configure_optimizers returned a scheduler without step/state_dict: {s!r}")
    return optimizers, schedulers


def mirrored_half(x: torch.Tensor, seed: int, offset: int, per_step: int) -> torch.Tensor:
    """``x`` (rows ``offset``... of a step's ``per_step`` images) with each image mirrored left-right with
    probability 1/2; the coin of every image of the step comes from ``seed``, so which images are
    mirrored does not depend on how the step is split over processes or accumulated micro-batches."""
    coins = torch.rand(per_step, generator=torch.Generator().manual_seed(seed))[offset:offset + len(x)] < 0.5
    return torch.where(coins[:, None, None, None], x.flip(-1), x)


def _upgrade_settings(saved: dict[str, Any]) -> dict[str, Any]:
    """fit.json settings of runs started before --precision, --grad-accum and --hflip, in today's terms."""
    saved = dict(saved)
    if "precision" not in saved and "bf16" in saved:
        saved["precision"] = "bf16" if saved.pop("bf16") else "fp32"
    saved.setdefault("grad_accum", 1)
    saved.setdefault("hflip", False)
    return saved


def _trackers(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _flat_config(settings: dict[str, Any]) -> dict[str, Any]:
    """Settings as the flat scalar dict trackers accept."""
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            for k, v in value.items():
                flat[f"{key}.{k}"] = v if isinstance(v, (int, float, str, bool)) else str(v)
        else:
            flat[key] = value if isinstance(value, (int, float, str, bool)) else str(value)
    return flat


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def ema_decay_at(step: int, decay: float) -> float:
    """The EMA decay after optimisation step ``step`` (0-based): ``min(decay, (1 + step) / (10 + step))``.

    The warm-up (diffusers' and TensorFlow's form) lets a short run export what it learned: at a
    fixed 0.999, the EMA of a 200-step run still sits almost on the initial weights.
    """
    return min(decay, (1 + step) / (10 + step))


def _seed_everything(seed: int) -> None:
    """Seed torch's, Python's and NumPy's global RNGs (a checkpoint saves all three)."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


@torch.no_grad()
def _update_ema(ema: torch.nn.Module, model: torch.nn.Module, decay: float) -> None:
    for e, p in zip(ema.parameters(), model.parameters()):
        e.lerp_(p.detach(), 1.0 - decay)
    for e, b in zip(ema.buffers(), model.buffers()):
        e.copy_(b)


__all__ = ["FitOptions", "PRECISIONS", "Trainer", "fit"]
