"""IGN speed on this machine: training steps/s at batch 256 (fp32 and bf16 autocast) and sampling images/s (median of 3 passes of 10,240).

    python benchmarks/ign_speed.py [--model ign-mnist] [--steps 20] [--json docs/results/ign_speed.json]

Training steps use the method's own training_step and optimiser on random images (speed does not
depend on the data); sampling uses `model.sample` (noise drawing, batching and clamping included).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import genzoo


def train_speed(model, batch: int, steps: int, bf16: bool) -> float:
    model.train()
    opt = model.configure_optimizers()
    x = torch.rand(batch, *model.image_shape)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model.training_step({"x": x, "y": None})["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()
    t = time.time()
    for _ in range(steps):
        step()
    return steps / (time.time() - t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="ign-mnist")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    result = {"threads": torch.get_num_threads(), "torch": torch.__version__}
    model = genzoo.load(args.model)
    model.sample(256, seed=0)
    for batch in (256,):
        rates = []
        for _ in range(3):  # the first large passes are slower (allocator and kernel warm-up): report the median
            t = time.time()
            model.sample(10240, seed=1, batch_size=batch)
            rates.append(round(10240 / (time.time() - t)))
        result[f"sample_images_per_s_batch{batch}"] = sorted(rates)[1]
        result[f"sample_images_per_s_batch{batch}_runs"] = rates
    fresh = type(model)(model.config)
    for bf16 in (False, True):
        result[f"train_steps_per_s_batch256_{'bf16' if bf16 else 'fp32'}"] = round(train_speed(fresh, 256, args.steps, bf16), 3)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
