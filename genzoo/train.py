"""The training loop every method shares, on one Accelerator (CPU, GPU, several of either).

Layout of an output directory (``--out DIR``):

    DIR/config.json, DIR/model.safetensors    the model (EMA weights when the method keeps an EMA),
                                              rewritten at every checkpoint: DIR is loadable at once
    DIR/fit.json                              the run's settings, checked again on --resume
    DIR/metrics.jsonl                         one JSON line of losses per step
    DIR/samples/step-XXXXXXXX.png             sample grids
    DIR/checkpoints/step-XXXXXXXX/            the last checkpoint (pickle-free; see checkpoints.py)

The data order is a pure function of (seed, step): the global batch of step t is a slice of a
permutation seeded by the epoch. Together with the RNG states in the checkpoint this makes a
resumed run end with the same weights as an uninterrupted one.
"""

from __future__ import annotations

import copy
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import checkpoints as ckpt
from ._version import __version__
from .configs import build_config, config_to_dict
from .data import ImageData, load_dataset
from .errors import GenzooError
from .hardware import device_name
from .seeding import image_seed
from .weights import save_pretrained

GRID_SEED = 0


@dataclass
class FitOptions:
    """Settings of one training run (the CLI flags of ``genzoo fit``)."""

    steps: int
    out: str
    batch_size: int = 64
    dataset: str | None = None
    data_root: str | None = None
    seed: int = 0
    bf16: bool = False
    resume: bool = False
    checkpoint_every: int = 1000
    keep_checkpoints: int = 1
    init: str | None = None
    sample_every: int = 1000
    grid_size: int = 64
    progress: bool = True
    command: str = ""
    overrides: dict[str, Any] = field(default_factory=dict)


def fit(
    method: str | type,
    *,
    steps: int,
    out: str | os.PathLike,
    dataset: str | None = None,
    config: dict[str, Any] | None = None,
    **options: Any,
) -> Path:
    """Train ``method`` (a name or Method class) and return the output model directory."""
    from .plugins import get_host

    cls = get_host().method(method) if isinstance(method, str) else method
    cls.require("fit")
    opts = FitOptions(steps=steps, out=str(out), dataset=dataset, overrides=dict(config or {}), **options)
    return Trainer(cls, opts).run()


def _git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parent.parent
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


class Trainer:
    def __init__(self, cls: type, opts: FitOptions):
        self.cls = cls
        self.opts = opts
        self.out = Path(opts.out)
        self._perm_epoch: int | None = None
        self._perm = torch.empty(0, dtype=torch.long)
        self._validate()

    def _validate(self) -> None:
        o = self.opts
        if o.steps <= 0:
            raise GenzooError(f"--steps must be positive, got {o.steps}")
        if o.batch_size <= 0:
            raise GenzooError(f"--batch-size must be positive, got {o.batch_size}")
        if o.keep_checkpoints <= 0:
            raise GenzooError(f"--keep-checkpoints must be positive, got {o.keep_checkpoints}")
        if self.cls.needs_data and not o.dataset:
            raise GenzooError(f"method {self.cls.name!r} trains on data: pass --dataset (e.g. mnist)")
        if not self.cls.needs_data and o.dataset:
            raise GenzooError(f"method {self.cls.name!r} trains without data: drop --dataset")

    # -- setup ----------------------------------------------------------------------------------

    def _settings(self) -> dict[str, Any]:
        """What must match between a run and its --resume (the step count may grow)."""
        o = self.opts
        return {"method": self.cls.name, "dataset": o.dataset, "batch_size": o.batch_size, "seed": o.seed,
                "bf16": o.bf16, "config": config_to_dict(self.config), "init": self._init_record()}

    def _init_record(self) -> dict[str, Any] | None:
        """Which model directory --init started from (its weights' sha256), or None."""
        if not self.opts.init:
            return None
        if not hasattr(self, "_init_sha"):
            from .weights import WEIGHTS_FILE, sha256_file

            path = Path(self.opts.init) / WEIGHTS_FILE
            if not path.is_file():
                raise GenzooError(f"--init {self.opts.init}: no {WEIGHTS_FILE} there; pass a model directory written by genzoo fit")
            self._init_sha = sha256_file(path)
        return {"path": str(self.opts.init), "sha256": self._init_sha}

    def _load_init(self, model, ema) -> None:
        """Start from another model's weights (fine-tuning): fresh optimiser, this run's config."""
        from .weights import load_model_dir, read_config

        source = load_model_dir(self.opts.init)
        if source.name != self.cls.name:
            raise GenzooError(f"--init {self.opts.init} holds a {source.name!r} model, not {self.cls.name!r}")
        try:
            model.load_state_dict(source.state_dict(), strict=True)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[-1].strip()
            raise GenzooError(f"--init {self.opts.init} does not fit this config's network ({first}); "
                              f"keep the architecture settings of that model") from None
        if ema is not None:
            ema.load_state_dict(source.state_dict(), strict=True)
        self._init_commands = (read_config(Path(self.opts.init)).get("provenance") or {}).get("commands", [])

    def _check_resume(self) -> None:
        fit_file = self.out / "fit.json"
        if not fit_file.is_file():
            raise GenzooError(f"--resume: {fit_file} not found; start the run without --resume")
        saved = json.loads(fit_file.read_text())["settings"]
        now = json.loads(json.dumps(self._settings()))
        for key in now:
            if saved.get(key) != now[key]:
                raise GenzooError(
                    f"--resume: {key} differs from the run in {self.out} (was {saved.get(key)!r}, now {now[key]!r}); "
                    f"resume with the original settings or choose a new --out"
                )

    def run(self) -> Path:
        from accelerate import Accelerator
        from accelerate.utils import DistributedDataParallelKwargs

        o = self.opts
        accelerator = Accelerator(
            mixed_precision="bf16" if o.bf16 else "no",
            kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=False)],
        )
        self.accelerator = accelerator
        world, rank = accelerator.num_processes, accelerator.process_index
        if o.batch_size % world:
            raise GenzooError(f"--batch-size {o.batch_size} must be divisible by the number of processes ({world})")
        self.local_batch = o.batch_size // world

        self.config = build_config(self.cls.Config, o.overrides, where=f"{self.cls.name} --set")
        if o.resume:
            self._check_resume()
        elif (self.out / "fit.json").exists():
            raise GenzooError(f"{self.out} already holds a run; pass --resume to continue it or choose a new --out")

        data = load_dataset(o.dataset, o.data_root) if self.cls.needs_data else None
        if data is not None and len(data) < o.batch_size:
            raise GenzooError(f"dataset {data.name} has {len(data)} images, fewer than --batch-size {o.batch_size}")

        torch.manual_seed(o.seed)  # the same initial weights in every process
        model = self.cls(self.config)
        model.setup_fit(data)
        optimizers = model.configure_optimizers()
        optimizers = list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]
        ema_decay = float(getattr(self.config, "ema_decay", 0.0) or 0.0)
        ema = copy.deepcopy(model).eval().requires_grad_(False) if ema_decay > 0 else None

        start_step, elapsed = 0, 0.0
        if o.resume:
            start_step, elapsed = self._load_checkpoint(model, ema, optimizers)
        elif o.init:
            self._load_init(model, ema)
        torch.manual_seed(image_seed(o.seed, rank, "train"))  # per-process randomness of the method
        if o.resume and start_step:
            ckpt.rng_from_files(ckpt.latest_checkpoint(self.out / "checkpoints") / f"rng-rank{rank}")

        prepared = accelerator.prepare(model, *optimizers)
        wrapped, optimizers = prepared[0], list(prepared[1:])
        if accelerator.is_main_process:
            self.out.mkdir(parents=True, exist_ok=True)
            self._write_fit_json(world)
            self._trim_metrics(start_step)
        accelerator.wait_for_everyone()

        if start_step >= o.steps:
            accelerator.print(f"{self.out} is already at step {start_step} >= --steps {o.steps}; nothing to do")
        else:
            elapsed = self._loop(wrapped, optimizers, ema, ema_decay, data, start_step, elapsed)
        final = ema if ema is not None else accelerator.unwrap_model(wrapped)
        if accelerator.is_main_process:
            self._save_model(final, max(start_step, o.steps), elapsed, world)
        accelerator.wait_for_everyone()
        return self.out

    # -- the loop -------------------------------------------------------------------------------

    def _batch(self, data: ImageData | None, step: int, device: torch.device) -> dict[str, Any]:
        if data is None:
            return {"x": None, "y": None, "size": self.local_batch}
        n, b = len(data), self.opts.batch_size
        per_epoch = n // b
        epoch, position = divmod(step, per_epoch)
        if self._perm_epoch != epoch:
            seed = image_seed(self.opts.seed, epoch, "data")
            self._perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
            self._perm_epoch = epoch
        perm = self._perm
        rank = self.accelerator.process_index
        index = perm[position * b: (position + 1) * b][rank * self.local_batch: (rank + 1) * self.local_batch]
        y = data.labels[index].to(device) if data.labels is not None else None
        return {"x": data.floats(index).to(device), "y": y, "size": self.local_batch}

    def _loop(self, wrapped, optimizers, ema, ema_decay, data, start_step, elapsed) -> float:
        from tqdm.auto import tqdm

        o, acc = self.opts, self.accelerator
        unwrapped = acc.unwrap_model(wrapped)
        grad_clip = getattr(self.config, "grad_clip", None)
        wrapped.train()
        bar = tqdm(total=o.steps, initial=start_step, desc=f"fit {self.cls.name}", unit="step",
                   disable=not (acc.is_main_process and o.progress), dynamic_ncols=True)
        log = open(self.out / "metrics.jsonl", "a", encoding="utf-8", buffering=1) if acc.is_main_process else None
        step, t0 = start_step, time.time()
        try:
            while step < o.steps:
                batch = self._batch(data, step, acc.device)
                losses = wrapped(batch)
                if "loss" not in losses:
                    raise GenzooError(f"{self.cls.name}.training_step must return a dict with a 'loss' entry")
                for opt in optimizers:
                    opt.zero_grad(set_to_none=True)
                acc.backward(losses["loss"])
                if grad_clip:
                    acc.clip_grad_norm_(wrapped.parameters(), grad_clip)
                for opt in optimizers:
                    opt.step()
                if ema is not None:
                    _update_ema(ema, unwrapped, ema_decay)
                step += 1
                scalars = {k: acc.reduce(v.detach().float(), "mean").item() for k, v in losses.items() if v.numel() == 1}
                if log is not None:
                    log.write(json.dumps({"step": step, **{k: round(v, 6) for k, v in scalars.items()}}) + "\n")
                    if step % 10 == 0 or step == o.steps:
                        bar.set_postfix({k: f"{v:.4g}" for k, v in list(scalars.items())[:4]}, refresh=False)
                bar.update(1)
                done = step == o.steps
                if o.sample_every and (step % o.sample_every == 0 or done) and acc.is_main_process:
                    self._write_grid(ema if ema is not None else unwrapped, step)
                if o.checkpoint_every and (step % o.checkpoint_every == 0 or done):
                    self._save_checkpoint(unwrapped, ema, optimizers, step, elapsed + time.time() - t0)
        except KeyboardInterrupt:
            if acc.num_processes == 1 and step > start_step:
                self._save_checkpoint(unwrapped, ema, optimizers, step, elapsed + time.time() - t0)
                acc.print(f"\ninterrupted: checkpoint saved at step {step}; continue with --resume")
            raise
        finally:
            bar.close()
            if log is not None:
                log.close()
        return elapsed + time.time() - t0

    # -- files ----------------------------------------------------------------------------------

    def _write_fit_json(self, world: int) -> None:
        path = self.out / "fit.json"
        document = {"settings": self._settings(), "options": asdict(self.opts), "processes": world,
                    "hardware": device_name(self.accelerator.device)}
        previous = json.loads(path.read_text()).get("commands", []) if path.is_file() else []
        if not previous and self.opts.init:  # the fine-tuned model's provenance lists its whole history
            previous = list(getattr(self, "_init_commands", []))
        document["commands"] = previous + [self.opts.command or " ".join(sys.argv)]
        self.commands = document["commands"]
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

    def _write_grid(self, model, step: int) -> None:
        if "sample" not in model.capabilities:
            return
        from .images import save_grid

        model.prepare_export()
        images = model.sample(self.opts.grid_size, seed=GRID_SEED, batch_size=self.opts.grid_size)
        save_grid(images, self.out / "samples" / f"{ckpt.checkpoint_name(step)}.png")

    def _save_checkpoint(self, model, ema, optimizers, step: int, elapsed: float) -> None:
        acc = self.accelerator
        root = self.out / "checkpoints"
        staging = root / f".staging-{ckpt.checkpoint_name(step)}"
        if acc.is_main_process:
            if staging.exists():
                import shutil

                shutil.rmtree(staging)
            staging.mkdir(parents=True)
        acc.wait_for_everyone()
        ckpt.rng_to_files(staging / f"rng-rank{acc.process_index}")
        if acc.is_main_process:
            ckpt.save_tensors(model.state_dict(), staging / "model.safetensors")
            if ema is not None:
                ckpt.save_tensors(ema.state_dict(), staging / "ema.safetensors")
            for i, opt in enumerate(optimizers):
                ckpt.optimizer_to_files(opt, staging / f"optimizer-{i}")
        acc.wait_for_everyone()
        if acc.is_main_process:
            state = {"step": step, "elapsed_seconds": elapsed, "processes": acc.num_processes}
            ckpt.finish_checkpoint(staging, root / ckpt.checkpoint_name(step), state, keep=self.opts.keep_checkpoints)
            self._save_model(ema if ema is not None else model, step, elapsed, acc.num_processes)
        acc.wait_for_everyone()

    def _load_checkpoint(self, model, ema, optimizers) -> tuple[int, float]:
        from safetensors.torch import load_file

        latest = ckpt.latest_checkpoint(self.out / "checkpoints")
        if latest is None:
            raise GenzooError(f"--resume: no checkpoint under {self.out / 'checkpoints'}; start again without --resume")
        state = ckpt.read_state(latest)
        world = self.accelerator.num_processes
        if state.get("processes", 1) != world:
            raise GenzooError(
                f"--resume: checkpoint {latest.name} was written by {state.get('processes')} process(es), this run has "
                f"{world}; an exact resume needs the same number"
            )
        model.load_state_dict(load_file(str(latest / "model.safetensors")), strict=True)
        if ema is not None:
            ema.load_state_dict(load_file(str(latest / "ema.safetensors")), strict=True)
        for i, opt in enumerate(optimizers):
            ckpt.optimizer_from_files(opt, latest / f"optimizer-{i}")
        self.accelerator.print(f"resuming {self.out} from step {state['step']}")
        return int(state["step"]), float(state.get("elapsed_seconds", 0.0))

    def _save_model(self, model, step: int, elapsed: float, world: int) -> None:
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
            "bf16": o.bf16,
            "precision": "bf16" if o.bf16 else "fp32",
            "hardware": device_name(self.accelerator.device),
            "processes": world,
            "training_seconds": round(elapsed, 1),
            "weights": "ema" if getattr(self.config, "ema_decay", 0) else "raw",
            "commands": getattr(self, "commands", [o.command]),
        }
        model.prepare_export()
        save_pretrained(model, self.out, provenance=provenance)


@torch.no_grad()
def _update_ema(ema: torch.nn.Module, model: torch.nn.Module, decay: float) -> None:
    for e, p in zip(ema.parameters(), model.parameters()):
        e.lerp_(p.detach(), 1.0 - decay)
    for e, b in zip(ema.buffers(), model.buffers()):
        e.copy_(b)
