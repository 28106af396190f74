"""Where one training step of a method goes, by torch.profiler: the operators with the most self time.

    python benchmarks/profile_step.py --method edm --shape cifar10 --precision bf16 --rounds 3 \\
        --json benchmarks/results/profile_edm_cifar10_bf16.json

The step is train_step_speed.py's (the method's update through genzoo's engine at batch 64 on random images of
the shape: forward, backward, clipping, every optimiser step), profiled over ``--rounds`` steps after two
untimed ones. The table lists each operator's share of the profiled CPU time; ``groups`` sums them into
convolutions (forward and backward), normalisation, matrix products, the optimiser, dtype casts and the rest,
which is what a faster step has to cut. Run it on an idle machine.
"""

from __future__ import annotations

import time

from torch.profiler import ProfilerActivity, profile

from harness import machine, parser, write_json
from train_step_speed import build, one_step, optimizers, random_batch

GROUPS = {  # first match wins: a substring of the operator's name, or the name itself for casts
    "convolution": ("convolution",),
    "normalisation": ("norm",),
    "matrix products": ("mm", "linear", "matmul", "attention"),
    "optimiser": ("_foreach", "adam", "lerp", "addcdiv", "addcmul", "sqrt"),
}
CASTS = {"aten::to", "aten::_to_copy", "aten::copy_", "aten::clone", "aten::contiguous", "aten::empty_strided"}


def group_of(name: str) -> str:
    if name in CASTS:
        return "dtype casts and copies"
    for group, keys in GROUPS.items():
        if any(k in name for k in keys):
            return group
    return "other (elementwise, activations, autograd)"


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--method", default="edm")
    p.add_argument("--shape", default="cifar10")
    p.add_argument("--precision", default="bf16")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    model = build(args.method, args.shape)
    opts, batch = optimizers(model, 10_000), random_batch(model)
    for t in range(2):
        one_step(model, opts, batch, t, args.precision)
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for t in range(args.rounds):
            one_step(model, opts, batch, 2 + t, args.precision)
    wall = (time.perf_counter() - start) / args.rounds
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    events.sort(key=lambda e: -e.self_cpu_time_total)
    rows = [{"op": e.key, "share": round(e.self_cpu_time_total / total, 4), "calls_per_step": e.count // args.rounds,
             "ms_per_step": round(e.self_cpu_time_total / 1000 / args.rounds, 2)} for e in events[: args.top]]
    groups: dict[str, float] = {}
    for e in events:
        groups[group_of(e.key)] = groups.get(group_of(e.key), 0.0) + e.self_cpu_time_total / total
    result = {"method": args.method, "shape": args.shape, "precision": args.precision, "batch_size": 64,
              "seconds_per_step_profiled": round(wall, 3), "hardware": machine(),
              "groups": {k: round(v, 4) for k, v in sorted(groups.items(), key=lambda kv: -kv[1])}, "top": rows}
    for row in rows:
        print(f"{row['share']:7.1%} {row['ms_per_step']:9.1f} ms {row['calls_per_step']:5d}x  {row['op']}")
    print(result["groups"])
    write_json(args.json, result)


if __name__ == "__main__":
    main()
