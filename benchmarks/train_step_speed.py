"""Seconds per training step of edm, consistency, ign and gan at MNIST and CIFAR-10 shapes: eager and compiled,
fp32 and bf16, with the compile's own time.

    python benchmarks/train_step_speed.py --methods edm,consistency,ign,gan --shapes mnist,cifar10 \\
        --precisions fp32,bf16 --compile off,on --rounds 5 --json benchmarks/results/train_step_speed.json

A step is what ``genzoo fit`` runs per step, less data loading and the EMA: the method's update through
genzoo's engine (forward, backward, gradient clipping, every optimiser step) on random images of the shape, at
batch 64. Each figure is the median of ``--rounds`` steps after one untimed step; for a compiled row, that
first step's seconds are the compile time (on a warm compile cache it is seconds). The networks are the
catalogue's: edm-mnist's recipe (width 64) for edm and consistency, ign-mnist's and ign-cifar10's configs for
ign, gan-mnist's for gan (its 32x32 form for CIFAR-10 shapes). Run it on an idle machine, one benchmark at a
time; ``PYTHONPATH=OLD_CHECKOUT:OLD_CHECKOUT/plugins`` measures an earlier commit's code with the same script
(``--compile off``).
"""

from __future__ import annotations

import json
import statistics
import time

import torch

import genzoo
from genzoo.precision import autocast
from genzoo.training.step import TrainStep, single_loss_update
from harness import machine, parser, write_json

SHAPES = {"mnist": (1, 28), "cifar10": (3, 32)}
CONFIGS = {  # method -> shape -> (catalogue model whose config it takes, overrides)
    "edm": {"mnist": ("edm-mnist", {}), "cifar10": ("edm-mnist", {})},
    "consistency": {"mnist": ("consistency-mnist", {}), "cifar10": ("consistency-mnist", {})},
    "ign": {"mnist": ("ign-mnist", {}), "cifar10": ("ign-cifar10", {})},
    "gan": {"mnist": ("gan-mnist", {}), "cifar10": ("gan-mnist", {})},
}
SAMPLER_FIELDS = ("guide", "guidance", "s_churn")  # sampling settings an export may carry: not the network's


def build(method: str, shape: str) -> genzoo.Method:
    model_name, overrides = CONFIGS[method][shape]
    reference = genzoo.load(model_name)
    config = {k: v for k, v in vars(reference.config).items() if k not in SAMPLER_FIELDS}
    channels, size = SHAPES[shape]
    config.update(channels=channels, image_size=size, **overrides)
    torch.manual_seed(0)
    return type(reference)(config).train()


def optimizers(model: genzoo.Method, total: int) -> list[torch.optim.Optimizer]:
    try:
        from genzoo.training.step import optimizers_of
    except ImportError:  # an earlier commit's code: configure_optimizers() read fit_steps
        from genzoo.training.step import split_optimizers

        model.fit_steps = total
        return split_optimizers(model.configure_optimizers(), model.name)[0]
    return optimizers_of(model, total)[0]


def random_batch(model: genzoo.Method, size: int = 64) -> dict:
    """A training batch of random images of the model's shape, labels i mod 10."""
    return {"x": torch.rand(size, *model.image_shape), "y": torch.arange(size) % 10, "size": size, "step": 0,
            "steps": 10_000}


def one_step(model: genzoo.Method, opts: list, batch: dict, t: int, precision: str) -> None:
    """Step ``t`` of the method's update through genzoo's engine (written out, not run_update: earlier commits
    that this script also times lack it)."""
    for opt in opts:
        opt.zero_grad(set_to_none=True)
    step = TrainStep(model, t, [{**batch, "step": t}], opts)
    with autocast(precision, torch.device("cpu")):
        logged = model.update(step) if model.owns_update() else single_loss_update(model, step)
    step.finish(logged)


def step_seconds(model: genzoo.Method, precision: str, rounds: int) -> tuple[float, float]:
    """(the first step's seconds, the median of the next ``rounds``)."""
    opts, batch = optimizers(model, 10_000), random_batch(model)
    times = []
    for t in range(rounds + 1):
        start = time.perf_counter()
        one_step(model, opts, batch, t, precision)
        times.append(time.perf_counter() - start)
    return times[0], statistics.median(times[1:])


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--methods", default="edm,consistency,ign,gan")
    p.add_argument("--shapes", default="mnist,cifar10")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--compile", default="off,on", help="off, on or off,on")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--label", default="", help="what code this measures (e.g. a commit), kept in each row")
    args = p.parse_args()
    rows = []
    for method in args.methods.split(","):
        for shape in args.shapes.split(","):
            for precision in args.precisions.split(","):
                for compiled in args.compile.split(","):
                    model = build(method, shape)
                    if compiled == "on":
                        from genzoo.training.compiling import compile_in_place

                        compile_in_place(model)
                    first, seconds = step_seconds(model, precision, args.rounds)
                    row = {"method": method, "shape": shape, "precision": precision, "compiled": compiled == "on",
                           "seconds_per_step": round(seconds, 4), "first_step_seconds": round(first, 2),
                           "parameters": sum(p.numel() for p in model.parameters()), "label": args.label}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    write_json(args.json, {"batch_size": 64, "rounds": args.rounds, "hardware": machine(), "rows": rows})


if __name__ == "__main__":
    main()
