"""A model directory whose weights are the uniform mean of some of a run's checkpoints, to score with `genzoo eval`.

    python benchmarks/average_checkpoints.py runs/edm-mnist-13000 --like edm-mnist --weights model \\
        --steps 5000,5500,6000 --out runs/ema/rawmean-5000-6000
    genzoo eval runs/ema/rawmean-5000-6000 -n 2000 --ref mnist:test --metrics fid,precision,recall,swd \\
        --precision bf16 --data-root DIR

``--weights model`` averages the raw (optimised) weights, ``--weights ema`` the moving averages the run
kept; one step gives that checkpoint's weights alone. The output takes its config from ``--like`` (a model
name or directory of the same architecture, e.g. the run's export) and stores each tensor in that model's
dtype, so the variant differs from the export only in its weights. It compares averaging windows after a run
without training again (how long an EMA pays).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from genzoo.loading import resolve


def mean_weights(files: list[Path]) -> dict[str, torch.Tensor]:
    sums: dict[str, torch.Tensor] = {}
    for file in files:
        for name, tensor in load_file(str(file)).items():
            sums[name] = sums[name] + tensor.double() if name in sums else tensor.double()
    return {name: total / len(files) for name, total in sums.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a training run's directory (holding checkpoints/step-NNNNNNNN/)")
    p.add_argument("--like", required=True, help="model (name or directory) whose config and dtypes to copy")
    p.add_argument("--weights", choices=("model", "ema"), default="ema")
    p.add_argument("--steps", required=True, help="comma list of checkpoint steps to average")
    p.add_argument("--out", required=True)
    args = p.parse_args()

    files = [Path(args.run) / "checkpoints" / f"step-{int(s):08d}" / f"{args.weights}.safetensors"
             for s in args.steps.split(",")]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise SystemExit(f"error: no checkpoint weights at {', '.join(missing)}; list the run's checkpoints/ for the steps it kept")
    like = resolve(args.like)[0]
    reference = load_file(str(like / "model.safetensors"))
    mean = mean_weights(files)
    if set(mean) != set(reference):
        raise SystemExit(f"error: the checkpoints' tensors differ from {args.like}'s; pass --like the run's own export")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(like / "config.json", out / "config.json")
    save_file({name: mean[name].to(reference[name].dtype).contiguous() for name in reference}, str(out / "model.safetensors"))
    print(f"{out}: mean of {len(files)} {args.weights} checkpoint(s) at steps {args.steps}")


if __name__ == "__main__":
    main()
