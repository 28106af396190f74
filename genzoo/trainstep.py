"""What a method that owns its update receives: one optimisation step, with backward and step that know
about gradient accumulation, precision and processes.

A method with several networks (a GAN's generator and discriminator) defines ``update(step)`` instead
of relying on the single-loss ``training_step``::

    def update(self, step):
        d_opt, g_opt = step.optimizers
        loss_d = step.accumulate(self.discriminator_loss)     # backward over the step's micro-batches
        step.step(d_opt)                                       # gradients averaged over processes, then Adam
        with step.frozen(self.discriminator):                  # no gradient into D from the G loss
            loss_g = step.accumulate(self.generator_loss)
        step.step(g_opt)
        return {"loss_d": loss_d, "loss_g": loss_g}

Gradients start each step at None. ``step(optimizer)`` averages the gradients of that optimiser's
parameters over the processes (parameters no process gave a gradient stay None, so Adam leaves
them alone), clips them to the config's ``grad_clip``, steps the optimiser and sets those gradients
back to None. Networks are not wrapped in DistributedDataParallel, so a step may use only some of
them. Randomness comes from torch's global RNG, which the loop seeds per process and checkpoints.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch
from torch import nn

from .errors import GenzooError


class TrainStep:
    """Step ``index`` of a run: this process's micro-batches, the optimisers and the update's tools."""

    def __init__(self, method: nn.Module, index: int, batches: list[dict[str, Any]],
                 optimizers: list[torch.optim.Optimizer], *, processes: int = 1, grad_clip: float | None = None,
                 scaler: Any = None):
        self.method, self.index, self.batches, self.optimizers = method, index, batches, optimizers
        self.processes, self.grad_clip, self.scaler = processes, grad_clip, scaler
        self.stepped: list[int] = []
        self._names = {id(p): name for name, p in method.named_parameters()}

    # -- what an update calls -----------------------------------------------------------------

    def backward(self, loss: torch.Tensor) -> None:
        """Accumulate the gradient of ``loss`` (the loss of one micro-batch) into the parameters it reaches.

        Scaled by 1 / the number of micro-batches, so the step's gradient is that of their mean.
        """
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise GenzooError(f"{self._who()}: backward takes a scalar loss tensor, got {_describe(loss)}")
        loss = loss.float() / len(self.batches)
        with torch.autocast(device_type=loss.device.type, enabled=False):
            (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def accumulate(self, loss_of: Callable[[dict[str, Any]], torch.Tensor]) -> torch.Tensor:
        """``backward(loss_of(batch))`` for each micro-batch of the step; returns their mean loss (detached)."""
        total = torch.zeros(())
        for batch in self.batches:
            loss = loss_of(batch)
            self.backward(loss)
            total = total + loss.detach().float().cpu()
        return total / len(self.batches)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """Average this optimiser's gradients over the processes, clip them, step it and clear them."""
        index = self._index_of(optimizer)
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if self.processes > 1:
            average_gradients(params, self.processes)
        if not any(p.grad is not None for p in params):
            raise GenzooError(
                f"{self._who()} stepped optimiser {index} ({self._networks(params)}) at step {self.index}, but none "
                f"of its parameters received a gradient; call step.backward(loss) on a loss that reaches them first")
        if self.scaler is not None:
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
            if isinstance(value, (int, float)):
                value = torch.tensor(float(value))
            if not isinstance(value, torch.Tensor) or value.numel() != 1:
                raise GenzooError(f"{self._who()} returned {key!r} = {_describe(value)}; every value it returns is "
                                  f"logged and must be a scalar")
            scalars[key] = value.detach().float().reshape(())
        return scalars

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




class SingleLossStep:
    """The update of a method with the single-loss contract: ``training_step`` on each micro-batch (through
    DistributedDataParallel across processes), ``loss`` backpropagated, every optimiser stepped."""

    def __init__(self, accelerator: Any, wrapped: nn.Module, method: nn.Module, precision: str,
                 grad_clip: float | None):
        self.acc, self.wrapped, self.method = accelerator, wrapped, method
        self.precision, self.grad_clip = precision, grad_clip
        self.ungraded: list[str] = []

    def __call__(self, batches: list[dict[str, Any]], optimizers: list[torch.optim.Optimizer]) -> dict[str, torch.Tensor]:
        from .precision import autocast

        acc = self.acc
        totals: dict[str, torch.Tensor] = {}
        for micro, batch in enumerate(batches):
            sync = acc.no_sync(self.wrapped) if micro < len(batches) - 1 else contextlib.nullcontext()
            with sync:
                bf16 = autocast(self.precision, acc.device) if self.precision == "bf16" else contextlib.nullcontext()
                with bf16:
                    losses = self._forward(batch)
                if not isinstance(losses, dict) or "loss" not in losses:
                    raise GenzooError(f"{self.method.name}.training_step must return a dict with a 'loss' entry")
                acc.backward(losses["loss"] / len(batches))
            for key, value in losses.items():
                if isinstance(value, torch.Tensor) and value.numel() == 1:
                    totals[key] = totals.get(key, 0) + value.detach().float() / len(batches)
        if acc.num_processes > 1:
            self._check_all_graded(batches[0]["step"])
        if self.grad_clip:
            acc.clip_grad_norm_(self.wrapped.parameters(), self.grad_clip)
        for optimizer in optimizers:
            optimizer.step()
        return totals

    def _forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        try:
            return self.wrapped(batch)
        except RuntimeError as exc:
            if "Expected to have finished reduction" not in str(exc):
                raise
            raise GenzooError(self._ungraded_message(batch["step"] - 1)) from None

    def _check_all_graded(self, step: int) -> None:
        """Under several processes a single-loss step must reach every trainable parameter (DDP's rule)."""
        self.ungraded = [n for n, p in self.method.named_parameters() if p.requires_grad and p.grad is None]
        if self.ungraded:
            raise GenzooError(self._ungraded_message(step))

    def _ungraded_message(self, step: int) -> str:
        return (f"{self.method.name}.training_step left {describe_parameters(self.ungraded) or 'a parameter'} without "
                f"a gradient at step {step}, which several processes cannot average; give the method an update() "
                f"that steps each network's optimiser on its own (docs/plugins.md, Methods with several "
                f"networks), or set requires_grad=False on what it does not train")


__all__ = ["SingleLossStep", "TrainStep", "average_gradients", "broadcast_buffers", "describe_parameters"]
