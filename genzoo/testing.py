"""Check a method against the genzoo contract, the way scikit-learn's ``check_estimator`` checks an estimator.

From a plugin's own tests::

    from genzoo.testing import check_method, parametrize_with_checks
    from genzoo_mine import MyMethod

    def test_my_method_keeps_the_contract():
        check_method(MyMethod, {"width": 8})          # raises ContractError listing every broken rule

    @parametrize_with_checks([(MyMethod, {"width": 8})])
    def test_contract(method_cls, config, check):     # one pytest test per rule, named after it
        check(method_cls, config)

Every check builds a tiny instance from ``config`` (a dict of Config fields; None = the defaults)
and fails with an AssertionError that starts with the rule's name and says by how much, against
what. Images are compared up to ``TOLERANCE`` (1e-5): oneDNN picks different kernels for different
batch sizes, so "the same image" means equal to float rounding (about 1e-6 measured), not bit for
bit. A method whose sampler amplifies that rounding (many steps, each feeding the next) declares a
larger ``image_tolerance`` of its own.

Importing this module pins torch to one CPU thread, as genzoo's own suite does: a test process among
others on a busy machine runs many times slower with threads that compete for the cores.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from safetensors.torch import load_file

from .configs import build_config
from .datasets import ImageData
from .errors import GenzooError, UnsupportedVerb
from .method import VERBS, Method
from .entries import MethodEntry
from .plugins import get_host
from .seeding import Noise
from .training.step import optimizers_of
from .training.loop import fit
from .training.step import TrainStep, describe_parameters
from .weights import load_model_dir, save_pretrained

torch.set_num_threads(1)

TOLERANCE = 1e-5  # largest absolute difference allowed between two computations of one image
NOISE_DRAWS = ("randn", "rand", "generators")  # how a hook draws from its Noise
Check = Callable[[type, "dict[str, Any] | None"], None]


class ContractError(AssertionError):
    """One or more rules of the contract are broken; the message lists each by name."""


# -- helpers -------------------------------------------------------------------------------------


def _build(cls: type, config: dict[str, Any] | None) -> Method:
    torch.manual_seed(0)
    return cls(build_config(cls.Config, dict(config or {}), where=f"{cls.name} test config"))


def _fail(rule: str, message: str) -> None:
    raise AssertionError(f"{rule}: {message}")


def tolerance_for(cls: type) -> float:
    """The largest pixel difference the checks accept between two computations of one image: the
    method's ``image_tolerance`` when it declares one, else :data:`TOLERANCE`."""
    declared = getattr(cls, "image_tolerance", None)
    return TOLERANCE if declared is None else float(declared)


def _difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest absolute difference of two image tensors (infinite when their shapes differ)."""
    if a.shape != b.shape:
        return math.inf
    return 0.0 if a.numel() == 0 else float((a - b).abs().max())


def _require_close(rule: str, cls: type, a: torch.Tensor, b: torch.Tensor, what: str, hint: str = "") -> None:
    """Fail ``rule`` with ``what``, the largest difference and the tolerance, unless a and b agree."""
    tolerance, difference = tolerance_for(cls), _difference(a, b)
    if difference <= tolerance:
        return
    if math.isinf(difference):
        _fail(rule, f"{what} (shapes {tuple(a.shape)} and {tuple(b.shape)}){hint}")
    if not hint and difference <= 100 * tolerance:
        hint = ("; if that is float rounding amplified by a sampler of many steps, declare a larger "
                "image_tolerance on the method (docs/plugins.md, Methods with many-step samplers)")
    _fail(rule, f"{what} (largest difference {difference:.3g}, tolerance {tolerance:.3g}){hint}")


class _NoiseDraws:
    """Counts a hook's draws from its ``noise`` argument (Noise.randn, .rand, .generators)."""

    def __init__(self):
        self.count = 0

    @contextlib.contextmanager
    def watching(self) -> Iterator["_NoiseDraws"]:
        originals = {name: getattr(Noise, name) for name in NOISE_DRAWS}

        def counted(original):
            def draw(noise, *args, **kwargs):
                self.count += 1
                return original(noise, *args, **kwargs)
            return draw

        try:
            for name, original in originals.items():
                setattr(Noise, name, counted(original))
            yield self
        finally:
            for name, original in originals.items():
                setattr(Noise, name, original)


def _synthetic_images(model: Method, n: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(n, *model.image_shape, generator=generator)


@contextlib.contextmanager
def registered(cls: type) -> Iterator[None]:
    """Make ``cls`` loadable by name for a while (a method tested before its plugin is installed)."""
    host = get_host()
    if host.has_method(cls.name):
        yield
        return
    host.methods[cls.name] = MethodEntry(cls, "genzoo.testing")
    try:
        yield
    finally:
        host.methods.pop(cls.name, None)


# -- the checks ----------------------------------------------------------------------------------


def check_declaration(cls: type, config: dict[str, Any] | None) -> None:
    """The class attributes are complete and consistent, and the test config builds."""
    rule = "check_declaration"
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        _fail(rule, f"{cls!r} is not a genzoo.Method subclass")
    try:
        cls.check_declaration()
        config_obj = build_config(cls.Config, dict(config or {}), where=f"{cls.name} test config")
    except GenzooError as exc:
        _fail(rule, str(exc))
    if not cls.summary:
        _fail(rule, f"method {cls.name!r} has no one-line summary")
    if not cls.capabilities:
        _fail(rule, f"method {cls.name!r} declares no capabilities; declare a subset of {VERBS}")
    for field in dataclasses.fields(config_obj):
        if field.type is None:
            _fail(rule, f"Config field {field.name!r} has no type")
    declared = getattr(cls, "image_tolerance", None)
    if declared is not None and not (isinstance(declared, (int, float)) and 0 < declared < 1):
        _fail(rule, f"image_tolerance must be a number in (0, 1), the largest pixel difference accepted; got {declared!r}")
    model = _build(cls, config)
    if "sample" in cls.capabilities or "refine" in cls.capabilities:
        try:
            model.image_shape
        except GenzooError as exc:
            _fail(rule, str(exc))


def check_undeclared_verbs_refuse(cls: type, config: dict[str, Any] | None) -> None:
    """Calling a verb the method does not declare raises UnsupportedVerb naming the ones it does."""
    rule = "check_undeclared_verbs_refuse"
    model = _build(cls, config)
    calls = {"sample": lambda: model.sample(1, seed=0), "fit": lambda: cls.require("fit"),
             "refine": lambda: model.refine(torch.zeros(1, 1, 1, 1))}
    for verb in VERBS:
        if verb in cls.capabilities:
            continue
        try:
            calls[verb]()
        except UnsupportedVerb:
            continue
        except Exception as exc:
            _fail(rule, f"{verb} is not declared, but calling it raised {type(exc).__name__} instead of UnsupportedVerb")
        _fail(rule, f"{verb} is not declared, but calling it did not raise")


def check_sample_images(cls: type, config: dict[str, Any] | None) -> None:
    """sample(n) returns n float NCHW images of the declared shape, finite, in [0, 1], on the CPU."""
    rule = "check_sample_images"
    model = _build(cls, config)
    images = model.sample(3, seed=0, batch_size=3)
    if not isinstance(images, torch.Tensor) or images.dtype != torch.float32:
        _fail(rule, f"sample returned {type(images).__name__} {getattr(images, 'dtype', '')}, not a float32 tensor")
    if tuple(images.shape) != (3, *model.image_shape):
        _fail(rule, f"sample(3) has shape {tuple(images.shape)}, expected {(3, *model.image_shape)}")
    if images.device.type != "cpu":
        _fail(rule, f"sample returned images on {images.device}, not the CPU")
    if not torch.isfinite(images).all():
        _fail(rule, f"sample returned {int((~torch.isfinite(images)).sum())} NaN or infinite pixels")
    if images.min() < 0 or images.max() > 1:
        _fail(rule, f"sample returned pixels outside [0, 1] (from {float(images.min()):.4g} to {float(images.max()):.4g})")
    if model.sample(0, seed=0).shape[0] != 0:
        _fail(rule, "sample(0) did not return an empty batch")


def check_per_image_seeding(cls: type, config: dict[str, Any] | None) -> None:
    """Image i depends only on (seed, i): not on n, the batch size, ``start`` or torch's global RNG."""
    rule = "check_per_image_seeding"
    model = _build(cls, config)
    with _NoiseDraws().watching() as draws:
        whole = model.sample(5, seed=7, batch_size=5)
    hint = "" if draws.count else (
        "; sample_batch drew nothing from its `noise` argument: the starting noise must come from it "
        "(noise.randn(...), noise.rand(...) or noise.generators()), not from torch.randn or a generator of your own")
    torch.manual_seed(1)
    first = model.sample(2, seed=7, batch_size=2)
    torch.manual_seed(2)
    _require_close(rule, cls, model.sample(2, seed=7, batch_size=2), first,
                   "sample(2, seed=7) changes with torch's global RNG (torch.manual_seed before the call)", hint)
    _require_close(rule, cls, first, whole[:2], "the first 2 images of sample(5, seed=7) differ from sample(2, seed=7)",
                   hint)
    _require_close(rule, cls, model.sample(5, seed=7, batch_size=2), whole,
                   "sample(5, seed=7) differs between batch_size=2 and batch_size=5: an image depends on its batch", hint)
    _require_close(rule, cls, model.sample(2, seed=7, start=3), whole[3:],
                   "sample(2, seed=7, start=3) differs from images 3 and 4 of sample(5, seed=7)", hint)
    _require_close(rule, cls, model.sample(5, seed=7, batch_size=5), whole,
                   "sample(5, seed=7) is not reproducible: two calls gave different images", hint)


def check_labels(cls: type, config: dict[str, Any] | None) -> None:
    """A conditional method validates labels; an unconditional one refuses them."""
    rule = "check_labels"
    model = _build(cls, config)
    verb = model.sample if "sample" in cls.capabilities else None
    if verb is None:
        return
    if not model.num_classes:
        with _expect_error(rule, "labels given to an unconditional method were accepted"):
            verb(2, seed=0, labels=[0, 0])
        return
    c = model.num_classes
    images = verb(2, seed=0, labels=[c - 1, 0])
    if images.shape[0] != 2:
        _fail(rule, "sample with explicit labels returned the wrong number of images")
    with _expect_error(rule, f"label {c} (out of range for {c} classes) was accepted"):
        verb(2, seed=0, labels=[c, 0])
    with _expect_error(rule, "3 labels for 2 images were accepted"):
        verb(2, seed=0, labels=[0, 0, 0])


def check_options(cls: type, config: dict[str, Any] | None) -> None:
    """Options are declared with types; an undeclared option is refused."""
    rule = "check_options"
    model = _build(cls, config)
    if "sample" in cls.capabilities:
        with _expect_error(rule, "sample accepted an undeclared option"):
            model.sample(1, seed=0, no_such_option_for_genzoo_tests=1)
    if "refine" in cls.capabilities:
        with _expect_error(rule, "refine accepted an undeclared option"):
            model.refine(_synthetic_images(model, 1), no_such_option_for_genzoo_tests=1)


def check_refine_images(cls: type, config: dict[str, Any] | None) -> None:
    """refine maps images in [0, 1] to images of the same shape in [0, 1]; a wrong shape is refused."""
    rule = "check_refine_images"
    model = _build(cls, config)
    x = _synthetic_images(model, 3)
    out = model.refine(x, seed=0, batch_size=2)
    if tuple(out.shape) != tuple(x.shape) or out.dtype != torch.float32:
        _fail(rule, f"refine of {tuple(x.shape)} returned {tuple(out.shape)} {out.dtype}")
    if not torch.isfinite(out).all() or out.min() < 0 or out.max() > 1:
        _fail(rule, f"refine returned pixels that are not finite or outside [0, 1] (from {float(out.min()):.4g} to "
                    f"{float(out.max()):.4g})")
    _require_close(rule, cls, model.refine(x, seed=0, batch_size=3), out,
                   "refine's result depends on the batch size (batch_size=3 against 2)")
    c, h, w = model.image_shape
    with _expect_error(rule, "refine accepted images of the wrong shape"):
        model.refine(torch.rand(1, c, h + 1, w))


def check_refine_zero_steps(cls: type, config: dict[str, Any] | None) -> None:
    """refine(x, steps=0) returns x unchanged: zero steps of refinement is no refinement."""
    rule = "check_refine_zero_steps"
    model = _build(cls, config)
    x = _synthetic_images(model, 3)
    _require_close(rule, cls, model.refine(x, steps=0, seed=0), x, "refine(x, steps=0) changed the images",
                   "; steps=0 means no refinement: return x as it is")


def check_save_load_round_trip(cls: type, config: dict[str, Any] | None) -> None:
    """save_pretrained, then genzoo's loader, gives a model that samples (or refines) the same images."""
    rule = "check_save_load_round_trip"
    model = _build(cls, config)
    with tempfile.TemporaryDirectory(prefix="genzoo-check-") as tmp, registered(cls):
        save_pretrained(model, Path(tmp) / "model")
        try:
            loaded = load_model_dir(Path(tmp) / "model")
        except GenzooError as exc:
            _fail(rule, f"the saved model does not load: {exc}")
    if type(loaded) is not cls:
        _fail(rule, f"loading gave a {type(loaded).__name__}, not a {cls.__name__}")
    if "sample" in cls.capabilities:
        _require_close(rule, cls, loaded.sample(3, seed=1), model.sample(3, seed=1),
                       "the loaded model samples other images than the saved one")
    if "refine" in cls.capabilities:
        x = _synthetic_images(model, 2)
        _require_close(rule, cls, loaded.refine(x, seed=1), model.refine(x, seed=1),
                       "the loaded model refines differently from the saved one")


KIT_STEPS = (0, 1, 2, 3)  # the steps at which the training step is checked (a schedule may switch on parity)


def kit_steps(cls: type) -> tuple[int, ...]:
    """The steps check_training_step runs: :data:`KIT_STEPS`, or more for a method whose ``update_period``
    (steps within which every optimiser is stepped) is longer, so the window holds one whole period."""
    period = getattr(cls, "update_period", 1)
    if isinstance(period, bool) or not isinstance(period, int) or period < 1:
        _fail("check_training_step", f"update_period must be an integer >= 1 (the steps within which every "
                                     f"optimiser is stepped), got {period!r}")
    return tuple(range(max(len(KIT_STEPS), period)))


def check_training_step(cls: type, config: dict[str, Any] | None) -> None:
    """At several steps, the training step gives finite scalar logs and gradients that reach parameters:
    ``training_step(batch)`` a finite scalar ``loss`` whose gradient is finite and not all zero, or
    ``update(step)`` a dict of finite scalars after stepping an optimiser, every optimiser within a
    few steps, and no gradient left behind that no optimiser step used."""
    rule = "check_training_step"
    if "fit" not in cls.capabilities:
        return
    steps = kit_steps(cls)
    model, optimizers, data = _fit_ready(cls, config, len(steps))
    stepped: set[int] = set()
    for t in steps:
        batch = _kit_batch(data, t, 4, len(KIT_STEPS))
        if cls.owns_update():
            stepped |= _one_update(rule, model, optimizers, batch, t)
        else:
            _one_training_step(rule, model, batch, t)
    never = sorted(set(range(len(optimizers))) - stepped) if cls.owns_update() else []
    if never:
        params = _optimizer_parameters(model, optimizers[never[0]])
        _fail(rule, f"optimiser {never[0]} ({describe_parameters(params)}) was never stepped in steps "
                    f"{steps[0]}-{steps[-1]}; update() must call step.step(optimizer) for every network it trains "
                    f"(a schedule that steps a network less often declares update_period, the steps within "
                    f"which every optimiser is stepped)")


def _fit_ready(cls: type, config: dict[str, Any] | None, steps: int = len(KIT_STEPS)
               ) -> tuple[Method, list[torch.optim.Optimizer], Any]:
    model = _build(cls, config)
    data = synthetic_dataset(model, 8) if cls.needs_data else None
    model.setup_fit(data)
    optimizers, _ = optimizers_of(model, steps)
    model.train()
    return model, optimizers, data


def _kit_batch(data: Any, step: int, size: int, steps: int) -> dict[str, Any]:
    if data is None:
        return {"x": None, "y": None, "size": size, "step": step, "steps": steps}
    return {"x": data.floats()[:size], "y": data.labels[:size] if data.labels is not None else None, "size": size,
            "step": step, "steps": steps}


def _one_training_step(rule: str, model: Method, batch: dict[str, Any], t: int) -> None:
    losses = model.training_step(batch)
    if not isinstance(losses, dict) or "loss" not in losses:
        _fail(rule, f"step {t}: training_step must return a dict with a 'loss' entry")
    for key, value in losses.items():
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            _fail(rule, f"step {t}: training_step's {key!r} is not a scalar tensor (every entry is logged)")
    loss = losses["loss"]
    if not torch.isfinite(loss):
        _fail(rule, f"step {t}: the loss is not finite ({float(loss)})")
    model.zero_grad(set_to_none=True)
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    if not grads:
        _fail(rule, f"step {t}: the loss sends no gradient to any parameter")
    for name, grad in grads.items():
        if not torch.isfinite(grad).all():
            _fail(rule, f"step {t}: the gradient of {name!r} holds NaN or infinite values")
    if not any(g.abs().sum() > 0 for g in grads.values()):
        _fail(rule, f"step {t}: every gradient is zero")
    model.zero_grad(set_to_none=True)


def _one_update(rule: str, model: Method, optimizers: list[torch.optim.Optimizer], batch: dict[str, Any],
                t: int) -> set[int]:
    """One ``update`` at step ``t``; returns the indices of the optimisers it stepped."""
    model.zero_grad(set_to_none=True)
    step = TrainStep(model, t, [batch], optimizers)
    try:
        logged = step.finish(model.update(step))
    except GenzooError as exc:
        _fail(rule, f"step {t}: {exc}")
    for key, value in logged.items():
        if not torch.isfinite(value):
            _fail(rule, f"step {t}: update's {key!r} is not finite ({float(value)})")
    left = [n for n, p in model.named_parameters() if p.grad is not None]
    if left:
        _fail(rule, f"step {t}: update left gradients in {left[0]!r} (and {len(left) - 1} more) that no optimiser step "
                    f"used: a loss sent gradients into a network it does not train; compute it inside "
                    f"step.frozen(network), or detach that network's output")
    for name, p in model.named_parameters():
        if not torch.isfinite(p).all():
            _fail(rule, f"step {t}: after the update {name!r} holds NaN or infinite values")
    return set(step.stepped)


def check_optimizers_own_parameters(cls: type, config: dict[str, Any] | None) -> None:
    """Every trainable parameter belongs to exactly one optimiser (unless the method lists it in ``unoptimized``)."""
    rule = "check_optimizers_own_parameters"
    if "fit" not in cls.capabilities:
        return
    model, optimizers, _ = _fit_ready(cls, config)
    owners: dict[int, list[int]] = {}
    for i, optimizer in enumerate(optimizers):
        for group in optimizer.param_groups:
            for p in group["params"]:
                owners.setdefault(id(p), []).append(i)
    exempt = tuple(getattr(cls, "unoptimized", ()) or ())
    for name, p in model.named_parameters():
        count = owners.get(id(p), [])
        if len(count) > 1:
            _fail(rule, f"parameter {name!r} belongs to optimisers {count}; each parameter needs exactly one (an "
                        f"update of one network would move the other)")
        if not count and p.requires_grad and not (exempt and name.startswith(exempt)):
            _fail(rule, f"parameter {name!r} is trainable but in no optimiser that configure_optimizers returns; "
                        f"add it to one, set requires_grad=False, or list its prefix in the method's unoptimized")


def check_fit_resumes_exactly(cls: type, config: dict[str, Any] | None) -> None:
    """genzoo fit runs a few steps on synthetic data, and a run resumed at an odd step ends with the weights
    and logs of an uninterrupted one (a schedule keyed on a counter of its own would restart there)."""
    rule = "check_fit_resumes_exactly"
    if "fit" not in cls.capabilities:
        return
    model = _build(cls, config)
    with tempfile.TemporaryDirectory(prefix="genzoo-check-") as tmp:
        tmp = Path(tmp)
        common = dict(dataset=_synthetic_npz(model, tmp), config=dict(config or {}), batch_size=4, precision="fp32",
                      device="cpu", sample_every=0, progress=False)
        try:
            fit(cls, steps=5, out=tmp / "straight", checkpoint_every=5, **common)
            fit(cls, steps=5, out=tmp / "resumed", checkpoint_every=3, **common)
            shutil.rmtree(tmp / "resumed" / "checkpoints" / "step-00000005")  # as if killed after step 3's checkpoint
            fit(cls, steps=5, out=tmp / "resumed", checkpoint_every=3, resume=True, **common)
        except GenzooError as exc:
            _fail(rule, f"genzoo fit failed on synthetic data: {exc}")
        straight = load_file(str(tmp / "straight" / "model.safetensors"))
        resumed = load_file(str(tmp / "resumed" / "model.safetensors"))
        logs = [(tmp / run / "metrics.jsonl").read_text() for run in ("straight", "resumed")]
    _require_equal_weights(rule, straight, resumed, "a run resumed at step 3 of 5", "an uninterrupted run")
    if logs[0] != logs[1]:
        _fail(rule, "a run resumed at step 3 of 5 logged other values than an uninterrupted run: some randomness or "
                    "state is not in the checkpoint (use torch's global RNG, or buffers)")


def check_several_processes(cls: type, config: dict[str, Any] | None, processes: int = 2, steps: int = 4) -> None:
    """genzoo fit under ``processes`` CPU processes (gloo), as ``accelerate launch`` runs it: every step's
    update goes through (a step-dependent schedule included) and every process ends with the same weights,
    bit for bit. Slow (each process imports torch): mark the test that runs it slow."""
    rule = "check_several_processes"
    if "fit" not in cls.capabilities:
        return
    import multiprocessing
    import socket

    model = _build(cls, config)
    with tempfile.TemporaryDirectory(prefix="genzoo-check-") as tmp:
        tmp = Path(tmp)
        dataset = _synthetic_npz(model, tmp, n=4 * processes * 2)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        context = multiprocessing.get_context("spawn")
        errors = context.Queue()
        workers = [context.Process(target=_process_worker, args=(rank, processes, port, cls, dict(config or {}),
                                                                 dataset, str(tmp / "run"), steps, errors))
                   for rank in range(processes)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=600)
        failures = []
        while not errors.empty():
            failures.append(errors.get())
        if failures:
            _fail(rule, f"under {processes} processes: {sorted(failures)[0][1]}")
        if any(worker.exitcode != 0 for worker in workers):
            _fail(rule, f"a process of {processes} exited with {[w.exitcode for w in workers]}")
        weights = [load_file(str(tmp / f"rank{rank}.safetensors")) for rank in range(processes)]
    for rank in range(1, processes):
        _require_equal_weights(rule, weights[0], weights[rank], f"process {rank} after {steps} steps", "process 0")


def _process_worker(rank: int, processes: int, port: int, cls: type, config: dict[str, Any], dataset: str, out: str,
                    steps: int, errors: Any) -> None:
    """One process of check_several_processes: the environment accelerate launch gives it, then genzoo fit."""
    import os

    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(processes),
                       "LOCAL_WORLD_SIZE": str(processes), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                       "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1"})
    torch.set_num_threads(1)
    from .training.options import FitOptions
    from .training.loop import Trainer
    from .tensorfile import write_tensors

    try:
        with registered(cls):
            opts = FitOptions(steps=steps, out=out, dataset=dataset, overrides=config, batch_size=2 * processes,
                              precision="fp32", device="cpu", sample_every=0, checkpoint_every=2, progress=False)
            trainer = Trainer(cls, opts)
            trainer.run()
        state = {k: v.detach().cpu().contiguous() for k, v in trainer.state.model.state_dict().items()}
        write_tensors(state, Path(out).parent / f"rank{rank}.safetensors")
    except Exception as exc:  # reported to the parent, which names the rule
        errors.put((rank, f"process {rank}: {type(exc).__name__}: {exc}"))
        raise SystemExit(1)


def _synthetic_npz(model: Method, folder: Path, n: int = 8) -> str | None:
    if not model.needs_data:
        return None
    data = synthetic_dataset(model, n)
    arrays = {"x": data.images.numpy()}
    if data.labels is not None:
        arrays["y"] = data.labels.numpy()
    np.savez(folder / "data.npz", **arrays)
    return f"npz:{folder / 'data.npz'}"


def _require_equal_weights(rule: str, a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], what: str,
                           against: str) -> None:
    if a.keys() != b.keys():
        _fail(rule, f"{what} has other tensors than {against}: {sorted(set(a) ^ set(b))}")
    differences = {k: float((a[k].float() - b[k].float()).abs().max()) for k in a if not torch.equal(a[k], b[k])}
    if differences:
        worst = max(differences, key=differences.get)
        _fail(rule, f"{what} ended with other weights than {against} ({len(differences)} tensor(s) differ, most "
                    f"{worst!r} by {differences[worst]:.3g}; it must be 0): some randomness or state is not in the "
                    f"checkpoint or differs between processes (use torch's global RNG, or buffers)")


def _optimizer_parameters(model: Method, optimizer: torch.optim.Optimizer) -> list[str]:
    ids = {id(p) for group in optimizer.param_groups for p in group["params"]}
    return [n for n, p in model.named_parameters() if id(p) in ids]


CHECKS: tuple[Check, ...] = (check_declaration, check_undeclared_verbs_refuse, check_sample_images,
                             check_per_image_seeding, check_labels, check_options, check_refine_images,
                             check_refine_zero_steps, check_save_load_round_trip, check_training_step,
                             check_optimizers_own_parameters, check_fit_resumes_exactly)
SLOW_CHECKS: tuple[Check, ...] = (check_several_processes,)  # not in check_method: run them from a slow test
_NEEDS = {check_sample_images: "sample", check_per_image_seeding: "sample", check_refine_images: "refine",
          check_refine_zero_steps: "refine", check_training_step: "fit", check_optimizers_own_parameters: "fit",
          check_fit_resumes_exactly: "fit", check_several_processes: "fit"}


def checks_for(cls: type) -> list[Check]:
    """The checks that apply to ``cls`` (those of verbs it does not declare are left out)."""
    verbs = getattr(cls, "capabilities", frozenset())
    return [c for c in CHECKS if _NEEDS.get(c) is None or _NEEDS[c] in verbs]


def check_method(cls: type, config: dict[str, Any] | None = None, *, skip: Sequence[str] = ()) -> list[str]:
    """Run every applicable check on ``cls``; return the names of those that passed.

    Raises ContractError listing each broken rule (by name, with what was wrong). ``skip`` names
    checks to leave out, e.g. ``("check_fit_resumes_exactly",)`` for a method too slow to train here.
    """
    _check_skip(skip)
    passed, failures = [], []
    for check in checks_for(cls):
        if check.__name__ in skip:
            continue
        try:
            check(cls, config)
            passed.append(check.__name__)
        except AssertionError as exc:
            failures.append(str(exc))
        except Exception as exc:  # a crash inside the method is a broken rule too
            failures.append(f"{check.__name__}: raised {type(exc).__name__}: {exc}")
    if failures:
        raise ContractError(f"{getattr(cls, 'name', cls)!r} breaks {len(failures)} rule(s) of the genzoo contract:\n- "
                            + "\n- ".join(failures))
    return passed


def parametrize_with_checks(methods: Sequence[type | tuple[type, dict[str, Any] | None]], *,
                            skip: Sequence[str] = ()):
    """A ``pytest.mark.parametrize`` over (method_cls, config, check): one test per rule and method."""
    import pytest

    _check_skip(skip)
    cases, ids = [], []
    for item in methods:
        cls, config = item if isinstance(item, tuple) else (item, None)
        for check in checks_for(cls):
            if check.__name__ in skip:
                continue
            cases.append((cls, config, check))
            ids.append(f"{cls.name}-{check.__name__}")
    return pytest.mark.parametrize("method_cls, config, check", cases, ids=ids)


def _check_skip(skip: Sequence[str]) -> None:
    unknown = sorted(set(skip) - {c.__name__ for c in CHECKS})
    if unknown:
        raise ValueError(f"skip names no check {unknown}; the checks are: {', '.join(c.__name__ for c in CHECKS)}")


def synthetic_dataset(model: Method, n: int, seed: int = 0) -> ImageData:
    """``n`` random uint8 images of the model's shape (at least two per class; labels i mod C)."""
    n = max(n, 2 * model.num_classes)
    generator = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, *model.image_shape), generator=generator, dtype=torch.uint8)
    labels = torch.arange(n) % model.num_classes if model.num_classes else None
    return ImageData(images, labels, "synthetic")


@contextlib.contextmanager
def _expect_error(rule: str, message: str) -> Iterator[None]:
    try:
        yield
    except GenzooError:
        return
    _fail(rule, message)


__all__ = ["CHECKS", "KIT_STEPS", "SLOW_CHECKS", "ContractError", "TOLERANCE", "check_method", "checks_for", "kit_steps",
           "parametrize_with_checks", "registered", "synthetic_dataset", "tolerance_for"] + [c.__name__ for c in CHECKS + SLOW_CHECKS]
