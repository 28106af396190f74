"""How large bf16's rounding is against the signal consistency training learns from.

    python benchmarks/consistency_precision.py --model edm-mnist --data-root DIR \\
        --json benchmarks/results/consistency_precision.json

The consistency loss compares the network's outputs at two nearby noise levels t > r of one noised
image (ECT: r = t (1 - a(t) / q), q = 256). This loads an EDM model's network into the consistency
method (as `genzoo fit consistency --init` does), draws one batch of training digits, levels and
noise, and computes that difference f(t) - f(r) in fp32 and under bf16 autocast. Per range of t it
prints the difference's size in fp32 and the size of bf16's error in it (both per-image L2 norms,
averaged). An error as large as the difference means bf16 trains on rounding, not on the signal.
"""

from __future__ import annotations

import json

import torch

import genzoo
from genzoo.datasets import load_dataset
from genzoo_consistency.model import Consistency, ConsistencyConfig
from harness import machine, parser, write_json

RANGES = ((0.0, 0.1), (0.1, 1.0), (1.0, 10.0), (10.0, 81.0))


def differences(model: Consistency, x: torch.Tensor, precision: str) -> tuple[torch.Tensor, torch.Tensor]:
    """f(x + t z, t) - f(x + r z, r) per image, and t; the same levels and noise for every precision."""
    torch.manual_seed(1)
    c = model.config
    t, r, _ = model._ect_pair(x.shape[0], 0, x.device)
    z = torch.randn_like(x)
    signed = x * 2 - 1
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        high = model.denoise(signed + t.view(-1, 1, 1, 1) * z, t).float()
        low = model.denoise(signed + r.view(-1, 1, 1, 1) * z, r.clamp_min(c.sigma_min)).float()
    return high - low, t


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("--model", default="edm-mnist", help="the EDM model consistency tuning starts from")
    p.add_argument("-n", type=int, default=128, help="training digits in the batch")
    args = p.parse_args()
    edm = genzoo.load(args.model).float()
    model = Consistency(ConsistencyConfig(width=edm.config.width, levels=edm.config.levels,
                                          blocks=edm.config.blocks, dropout=0.0, training="ect"))
    model.net.load_state_dict(edm.net.state_dict())
    model.eval()
    x = load_dataset("mnist:train", args.data_root).floats(torch.arange(args.n))
    exact, t = differences(model, x, "fp32")
    rounded, _ = differences(model, x, "bf16")
    signal = exact.flatten(1).norm(dim=1)
    error = (rounded - exact).flatten(1).norm(dim=1)
    rows = []
    for low, high in RANGES:
        keep = (t >= low) & (t < high)
        if keep.any():
            row = {"t_from": low, "t_to": high, "images": int(keep.sum()), "difference_fp32": float(signal[keep].mean()),
                   "bf16_error": float(error[keep].mean())}
            row["error_over_difference"] = row["bf16_error"] / row["difference_fp32"]
            print(json.dumps(row), flush=True)
            rows.append(row)
    write_json(args.json, {"model": args.model, "n": args.n, "ect_q": model.config.ect_q, "hardware": machine(),
                           "rows": rows})


if __name__ == "__main__":
    main()
