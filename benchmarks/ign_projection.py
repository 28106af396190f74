"""IGN as a projector: corrupted test digits before and after `refine` (f applied K times).

    python benchmarks/ign_projection.py --model ign-mnist --data-root DATA [-n 2000] \
        [--json benchmarks/results/ign_projection.json] [--figure benchmarks/results/ign_projection.png]

Corruptions of MNIST test digits: additive Gaussian noise (sigma 0.3, clamped), an occluding
10x10 black square at a random place, and a "sketch" (morphological gradient: outline only).
For each: the feature classifier's accuracy against the true labels and the PSNR to the clean
digit, before and after K = 1 and 2 applications of f.
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F

import genzoo
from genzoo.datasets import fixed_permutation, load_dataset
from genzoo.images import save_grid
from genzoo.metrics.features import extract, feature_space
from harness import parser, write_json


def corruptions(x: torch.Tensor, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    noisy = (x + 0.3 * torch.randn(x.shape, generator=g)).clamp(0, 1)
    occluded = x.clone()
    corners = torch.randint(0, 18, (len(x), 2), generator=g)
    for i, (r, c) in enumerate(corners.tolist()):
        occluded[i, :, r:r + 10, c:c + 10] = 0
    dilated = F.max_pool2d(x, 3, 1, 1)
    eroded = -F.max_pool2d(-x, 3, 1, 1)
    sketch = (dilated - eroded).clamp(0, 1)
    return {"noise sigma 0.3": noisy, "10x10 occlusion": occluded, "sketch (outline)": sketch}


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    mse = (a - b).square().flatten(1).mean(1).clamp_min(1e-10)
    return float((10 * torch.log10(1 / mse)).mean())


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("--model", default="ign-mnist")
    p.add_argument("-n", type=int, default=2000)
    p.add_argument("--figure", default=None)
    args = p.parse_args()
    model = genzoo.load(args.model)
    space = feature_space(dataset="mnist")
    test = load_dataset("mnist:test", args.data_root)
    index = fixed_permutation(len(test))[: args.n]
    clean, labels = test.floats(index), test.labels[index]

    def accuracy(images):
        _, probs = extract(space, images)
        return float((probs.argmax(1) == labels).double().mean())

    rows = {"clean": {"accuracy": accuracy(clean)}}
    figure = [clean[:8]]
    for name, corrupted in corruptions(clean).items():
        row = {"before": {"accuracy": accuracy(corrupted), "psnr": psnr(corrupted, clean)}}
        figure.append(corrupted[:8])
        for k in (1, 2):
            out = model.refine(corrupted, steps=k)
            row[f"after K={k}"] = {"accuracy": accuracy(out), "psnr": psnr(out, clean)}
            if k == 1:
                figure.append(out[:8])
        rows[name] = row
        print(name, json.dumps(row), flush=True)
    if args.figure:
        save_grid(torch.cat(figure), args.figure, nrow=8)
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
