"""Seconds per sampling batch of edm and consistency models: fp32 and bf16, eager and compiled, with the largest
pixel difference each makes against eager fp32, and what that gives for ``genzoo eval -n 10000``.

    python benchmarks/sampling_speed.py --models edm-mnist,consistency-mnist --batch-size 256 \\
        --json benchmarks/results/sampling_speed.json

Each row samples one batch of ``--batch-size`` images through ``model.sample`` (the model's default sampler:
edm-mnist 35 network calls, consistency-mnist one) after one untimed batch, whose time for a compiled row is the
compile; the median of ``--rounds``. ``eval_10000_seconds`` is 10,000 / batch images at that rate: the
sampling part of scoring 10,000 samples (the feature network's part is the same for every row). Compiling
wraps the model's network (``net``) with ``torch.compile`` in place; ``max_pixel_difference`` compares the
row's images with eager fp32's, in [0, 1] units (1/255 is one grey level). Run it on an idle machine.
"""

from __future__ import annotations

import json
import statistics
import time

import torch

import genzoo
from genzoo.training.compiling import compile_in_place, uncompile
from harness import machine, parser, write_json


def batch_seconds(model, n: int, precision: str, rounds: int) -> tuple[float, float, torch.Tensor]:
    """(the first batch's seconds, the median of ``rounds`` more, the images)."""
    times, images = [], None
    for _ in range(rounds + 1):
        start = time.perf_counter()
        images = model.sample(n, seed=0, batch_size=n, precision=precision)
        times.append(time.perf_counter() - start)
    return times[0], statistics.median(times[1:]), images


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--models", default="edm-mnist,consistency-mnist")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--compile", default="off,on")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    rows = []
    for name in args.models.split(","):
        model = genzoo.load(name)
        reference = None
        for compiled in args.compile.split(","):
            if compiled == "on":
                compile_in_place(model)
            for precision in args.precisions.split(","):
                first, seconds, images = batch_seconds(model, args.batch_size, precision, args.rounds)
                if reference is None:
                    reference = images
                row = {"model": name, "precision": precision, "compiled": compiled == "on",
                       "seconds_per_batch": round(seconds, 3), "first_batch_seconds": round(first, 1),
                       "images_per_second": round(args.batch_size / seconds, 2),
                       "eval_10000_seconds": round(10_000 / args.batch_size * seconds),
                       "max_pixel_difference": round(float((images - reference).abs().max()), 4),
                       "mean_pixel_difference": round(float((images - reference).abs().mean()), 5)}
                print(json.dumps(row), flush=True)
                rows.append(row)
            uncompile(model)
    write_json(args.json, {"batch_size": args.batch_size, "rounds": args.rounds, "hardware": machine(), "rows": rows})


if __name__ == "__main__":
    main()
