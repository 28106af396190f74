"""The training engine: one optimisation step, from micro-batches to stepped optimisers, for every method.

One object, :class:`TrainStep`, owns backward, gradient averaging across processes, clipping, fp16
loss scaling and stepping. A method that owns its update (a GAN's two networks) receives it::

    def update(self, step):
        d_opt, g_opt = step.optimizers
        loss_d = step.accumulate(self.discriminator_loss)     # backward over the step's micro-batches
        step.step(d_opt)                                       # gradients averaged over processes, then Adam
        with step.frozen(self.discriminator):                  # no gradient into D from the G loss
            loss_g = step.accumulate(self.generator_loss)
        step.step(g_opt)
        return {"loss_d": loss_d, "loss_g": loss_g}

and a single-loss method (``training_step(batch)``) gets the same engine through
:func:`single_loss_update`: its ``loss`` accumulated over the micro-batches, every optimiser stepped
(:func:`run_update` runs whichever of the two a method has).
The loop runs either inside the run's autocast (``training.precision.RunPrecision``), so precision
and processes are applied here and nowhere else.

Gradients start each step at None. ``step(optimizer)`` averages the gradients of that optimiser's
parameters over the processes (parameters no process gave a gradient stay None, so Adam leaves
them alone), unscales them under fp16, clips them to the config's ``grad_clip``, steps the
optimiser and sets those gradients back to None. Networks are not wrapped in
DistributedDataParallel, so a step may use only some of them, and an optimiser may be stepped more
than once in one update (a critic's inner steps). Randomness comes from torch's global RNG, which
the loop seeds per process and checkpoints, or from :meth:`TrainStep.generator`, a function of
(run seed, step, micro-batch, process).
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Iterator

import torch
from torch import nn

from ..errors import GenzooError
from ..seeding import image_seed

class TrainStep:
    """Step ``index`` of a run: this process's micro-batches, the optimisers and the update's tools.

    ``process`` and ``processes`` say which process this is of how many (0 and 1 on one process);
    ``seed`` is the run's ``--seed``.
    """

    def __init__(self, method: nn.Module, index: int, batches: list[dict[str, Any]],
                 optimizers: list[torch.optim.Optimizer], *, processes: int = 1, process: int = 0, seed: int = 0,
                 grad_clip: float | None = None, scaler: Any = None):
        self.method, self.index, self.batches, self.optimizers = method, index, batches, optimizers
        self.processes, self.process, self.seed = processes, process, seed
        self.grad_clip, self.scaler = grad_clip, scaler
        self.stepped: list[int] = []
        self._names = {id(p): name for name, p in method.named_parameters()}

    # -- what an update calls -----------------------------------------------------------------

    def generator(self, micro: int = 0, stream: str = "", device: torch.device | str | None = None) -> torch.Generator:
        """A torch.Generator seeded from (run seed, step, micro-batch ``micro``, this process, ``stream``).

        Draws from it are the same however often the run is resumed; with several processes each
        process gets its own stream, so its draws are independent of the others' (a draw that must be
        the same on every process takes ``stream`` and ignores the process: :meth:`shared_generator`).
        """
        return self._seeded(f"step/{self.index}/micro/{micro}/process/{self.process}/{stream}", device)

    def shared_generator(self, micro: int = 0, stream: str = "", device: torch.device | str | None = None
                         ) -> torch.Generator:
        """Like :meth:`generator`, the same on every process (a choice every process must make alike)."""
        return self._seeded(f"step/{self.index}/micro/{micro}/shared/{stream}", device)

    def backward(self, loss: torch.Tensor) -> None:
        """Accumulate the gradient of ``loss`` (the loss of one micro-batch) into the parameters it reaches.

        Scaled by 1 / the number of micro-batches, so the step's gradient is that of their mean.
        """
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise GenzooError(f"{self._who()}: backward takes a scalar loss tensor, got {_describe(loss)}")
        loss = loss.float() / len(self.batches)
        with torch.autocast(device_type=loss.device.type, enabled=False):
            (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def accumulate(self, loss_of: Callable[[dict[str, Any]], Any]) -> Any:
        """``backward(loss_of(batch))`` for each micro-batch of the step; returns their mean loss (detached).

        ``loss_of`` returns the loss, or a dict holding it as ``"loss"`` beside other scalars to log;
        then the dict comes back, each entry the mean over the micro-batches.
        """
        totals: dict[str, torch.Tensor] = {}
        as_dict = True
        for batch in self.batches:
            returned = loss_of(batch)
            as_dict = isinstance(returned, dict)
            losses = returned if as_dict else {"loss": returned}
            if "loss" not in losses:
                raise GenzooError(f"{self._who()}: the loss function given to step.accumulate returned a dict "
                                  f"without a 'loss' entry (keys: {', '.join(map(str, losses)) or 'none'})")
            self.backward(losses["loss"])
            for key, value in losses.items():
                if not isinstance(value, torch.Tensor) or value.numel() != 1:
                    raise GenzooError(f"{self._who()}: the loss function returned {key!r} = {_describe(value)}; "
                                      f"every value it returns is logged and must be a scalar tensor")
                totals[key] = totals.get(key, 0) + value.detach().float().reshape(())
        means = {key: total / len(self.batches) for key, total in totals.items()}
        return means if as_dict else means["loss"]

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """Average this optimiser's gradients over the processes, clip them, step it and clear them."""
        self._step(optimizer, required=True)

    def zero_grad(self, *optimizers: torch.optim.Optimizer) -> None:
        """Drop the gradients of these optimisers' parameters (all of them when none is named)."""
        for optimizer in optimizers or self.optimizers:
            optimizer.zero_grad(set_to_none=True)

    @contextlib.contextmanager
    def frozen(self, *modules: nn.Module) -> Iterator[None]:
        """Inside: the modules' parameters take no gradient (a loss still flows through them to others)."""
        flags = [(p, p.requires_grad) for m in modules for p in m.parameters()]
        try:
            for p, _ in flags:
                p.requires_grad_(False)
            yield
        finally:
            for p, flag in flags:
                p.requires_grad_(flag)

    # -- what the loop calls ------------------------------------------------------------------

    def finish(self, logged: Any) -> dict[str, torch.Tensor]:
        """Check what the update did and returned; the scalars to log."""
        if not self.stepped:
            raise GenzooError(f"{self._who()} stepped no optimiser at step {self.index}; call step.step(optimizer) "
                              f"for each network it updates")
        if self.scaler is not None:
            self.scaler.update()
        if not isinstance(logged, dict):
            raise GenzooError(f"{self._who()} must return a dict of scalars to log (e.g. {{'loss_d': ..., "
                              f"'loss_g': ...}}), got {type(logged).__name__}")
        scalars = {}
        for key, value in logged.items():
            if isinstance(value, dict):  # what step.accumulate returned for a loss function with extra scalars
                scalars.update(self._scalars(value, prefix=f"{key}."))
                continue
            scalars.update(self._scalars({key: value}))
        return scalars

    def _scalars(self, values: dict[str, Any], prefix: str = "") -> dict[str, torch.Tensor]:
        scalars = {}
        for key, value in values.items():
            if isinstance(value, (int, float)):
                value = torch.tensor(float(value))
            if not isinstance(value, torch.Tensor) or value.numel() != 1:
                raise GenzooError(f"{self._who()} returned {prefix + key!r} = {_describe(value)}; every value it "
                                  f"returns is logged and must be a scalar")
            scalars[prefix + key] = value.detach().float().reshape(())
        return scalars

    def _step(self, optimizer: torch.optim.Optimizer, required: bool) -> None:
        index = self._index_of(optimizer)
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if self.processes > 1:
            average_gradients(params, self.processes)
        if not any(p.grad is not None for p in params):
            if not required:
                return
            raise GenzooError(
                f"{self._who()} stepped optimiser {index} ({self._networks(params)}) at step {self.index}, but none "
                f"of its parameters received a gradient; call step.backward(loss) on a loss that reaches them first")
        if self.scaler is not None:
            if index in self.stepped:  # a second step of one optimiser in this update: a fresh unscale
                self.scaler.update()
            self.scaler.unscale_(optimizer)
        if self.grad_clip:
            torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], self.grad_clip)
        if self.scaler is not None:
            self.scaler.step(optimizer)
        else:
            optimizer.step()
        for p in params:
            p.grad = None
        self.stepped.append(index)

    def _seeded(self, stream: str, device: torch.device | str | None) -> torch.Generator:
        device = torch.device(device) if device is not None else _device_of(self.method)
        return torch.Generator(device=device).manual_seed(image_seed(self.seed, 0, f"train/{stream}"))

    def _index_of(self, optimizer: torch.optim.Optimizer) -> int:
        for i, candidate in enumerate(self.optimizers):
            if candidate is optimizer:
                return i
        raise GenzooError(f"{self._who()} stepped an optimiser that is not one of step.optimizers (those "
                          f"configure_optimizers returned); step those")

    def _networks(self, params: list[nn.Parameter]) -> str:
        return describe_parameters([self._names.get(id(p), "?") for p in params])

    def _who(self) -> str:
        return f"{getattr(self.method, 'name', type(self.method).__name__)}.update"


def run_update(method: nn.Module, step: TrainStep) -> Any:
    """The method's update of this step, before :meth:`TrainStep.finish`: its own ``update(step)`` if it owns
    one, else :func:`single_loss_update`."""
    return method.update(step) if method.owns_update() else single_loss_update(method, step)


def single_loss_update(method: nn.Module, step: TrainStep) -> dict[str, torch.Tensor]:
    """The update of a method with the single-loss contract: ``training_step`` on each micro-batch, its
    ``loss`` backpropagated, then every optimiser that received a gradient stepped; returns the means
    of every scalar ``training_step`` returned."""
    name = getattr(method, "name", type(method).__name__)

    def losses_of(batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        losses = method.training_step(batch)
        if not isinstance(losses, dict) or "loss" not in losses:
            raise GenzooError(f"{name}.training_step must return a dict with a 'loss' entry")
        return {key: value for key, value in losses.items() if isinstance(value, torch.Tensor) and value.numel() == 1}

    totals = step.accumulate(losses_of)
    for optimizer in step.optimizers:
        step._step(optimizer, required=False)
    if not step.stepped:
        raise GenzooError(f"{name}.training_step's loss sent no gradient to any parameter at step {step.index}")
    return totals


def optimizers_of(model: nn.Module, total_steps: int) -> tuple[list[torch.optim.Optimizer], list[Any]]:
    """The method's optimisers and schedulers for a run of ``total_steps``: ``configure_optimizers(total_steps)``;
    a method whose configure_optimizers takes no argument reads ``self.fit_steps`` instead (deprecated)."""
    configure = model.configure_optimizers
    if inspect.signature(configure).parameters:
        returned = configure(total_steps)
    else:
        model.fit_steps = total_steps
        returned = configure()
    return split_optimizers(returned, model.name)


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


def _device_of(module: nn.Module) -> torch.device:
    for p in module.parameters():
        return p.device
    return torch.device("cpu")


def average_gradients(params: list[nn.Parameter], processes: int) -> None:
    """Average the gradients of ``params`` over the processes, in place, in two collective calls.

    A parameter that no process gave a gradient keeps None everywhere; one that only some did counts
    as zero on the others (what DistributedDataParallel would average).
    """
    import torch.distributed as dist

    if not params:
        return
    device = params[0].device
    present = torch.tensor([p.grad is not None for p in params], dtype=torch.int32, device=device)
    dist.all_reduce(present, op=dist.ReduceOp.MAX)
    graded = [p for p, flag in zip(params, present.tolist()) if flag]
    for p in graded:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    if not graded:
        return
    flat = torch.cat([p.grad.reshape(-1).float() for p in graded])
    dist.all_reduce(flat)
    flat /= processes
    offset = 0
    for p in graded:
        size = p.grad.numel()
        p.grad.copy_(flat[offset:offset + size].view_as(p.grad))
        offset += size


def broadcast_buffers(module: nn.Module) -> None:
    """Every process takes process 0's buffers (batch-norm statistics), so the processes stay equal."""
    import torch.distributed as dist

    for buffer in module.buffers():
        dist.broadcast(buffer, 0)


def describe_parameters(names: list[str], limit: int = 3) -> str:
    """``generator.*, discriminator.head.weight`` style: the networks a list of parameter names covers."""
    heads = list(dict.fromkeys(name.split(".")[0] + (".*" if "." in name else "") for name in names))
    shown = ", ".join(heads[:limit])
    return shown + (f" and {len(heads) - limit} more" if len(heads) > limit else "")


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return type(value).__name__


__all__ = ["TrainStep", "average_gradients", "broadcast_buffers", "describe_parameters", "run_update",
           "single_loss_update", "split_optimizers"]
