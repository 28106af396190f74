"""Seconds per training step of EDM networks of several shapes, in fp32 and in bf16 autocast, on this CPU.

    python benchmarks/edm_step_time.py --configs "width=32;width=64;width=64,blocks=2;width=48,blocks=2" \\
        --batch-size 64 --rounds 5 --json benchmarks/results/edm_step_time.json

Each row times the method's own training_step, backward and an Adam step on random 28x28 digits (the
median of ``--rounds`` after one untimed step), so it measures the network and not the data loader. bf16
pays only where the CPU runs it natively (AMX or AVX512-BF16); elsewhere it is emulated and far slower.
Run it on an idle machine.
"""

from __future__ import annotations

import json

import torch

from genzoo_edm import EDM
from harness import machine, median_seconds, parser, write_json


def step_seconds(config: dict, precision: str, batch_size: int, rounds: int) -> tuple[float, int]:
    torch.manual_seed(0)
    model = EDM(config)
    model.fit_steps = 1000
    optimizer = torch.optim.Adam(model.net.parameters(), 1e-4)
    batch = {"x": torch.rand(batch_size, model.config.channels, model.config.image_size, model.config.image_size)}

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model.training_step(batch)["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return median_seconds(step, rounds, warmup=1), sum(p.numel() for p in model.net.parameters())


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--configs", default="width=32;width=64;width=64,blocks=2;width=48,blocks=2",
                   help="Config overrides, KEY=VALUE,... per network, networks separated by ';'")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    rows = []
    for text in args.configs.split(";"):
        overrides = dict(item.split("=", 1) for item in text.split(",") if item)
        config = {k: (float(v) if "." in v or "e" in v else int(v)) for k, v in overrides.items()}
        row = {"config": config}
        for precision in ("fp32", "bf16"):
            seconds, parameters = step_seconds(config, precision, args.batch_size, args.rounds)
            row[f"{precision}_seconds"], row["parameters"] = seconds, parameters
        print(json.dumps(row), flush=True)
        rows.append(row)
    write_json(args.json, {"batch_size": args.batch_size, "rounds": args.rounds, "hardware": machine(), "rows": rows})


if __name__ == "__main__":
    main()
