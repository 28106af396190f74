"""The before/after figure of docs/results.md: generator samples (left) and the same samples refined (right).

    python benchmarks/robust_figure.py [--generator ign-mnist] [--refiner robust-mnist] [-n 64] \
        [-o benchmarks/results/robust_refine.png]

Samples are drawn with seed 0 (a class-conditional generator's with labels i mod classes, which the
refiner then aims at: with -n 100 each column of a grid is one class) and refined with the refiner's
defaults; the script prints the mean L2 change and how many images change class under the refiner's
own (debiased) labels.
"""

from __future__ import annotations

import torch

import genzoo
from genzoo.images import make_grid, save_png
from harness import parser


def main() -> None:
    p = parser(__doc__, output=False)
    p.add_argument("--generator", default="ign-mnist")
    p.add_argument("--refiner", default="robust-mnist")
    p.add_argument("-n", type=int, default=64)
    p.add_argument("-o", "--output", default="benchmarks/results/robust_refine.png")
    args = p.parse_args()

    generator = genzoo.load(args.generator)
    samples = generator.sample(args.n, seed=0)
    refiner = genzoo.load(args.refiner)
    # a class-conditional generator's labels (i mod classes) are what the refiner aims at, as with --refine
    labels = generator.labels_for(args.n, None)  # None for an unconditional generator
    refined = refiner.refine(samples, labels=labels, seed=0)
    nrow = int(args.n**0.5)
    left, right = make_grid(samples, nrow=nrow), make_grid(refined, nrow=nrow)
    gap = torch.ones(left.shape[0], left.shape[1], 8)
    save_png(torch.cat([left, gap, right], 2), args.output)
    with torch.no_grad():
        changed = (refiner.predict_labels(samples) != refiner.predict_labels(refined)).sum().item()
    change = (refined - samples).flatten(1).norm(dim=1).mean().item()
    print(f"wrote {args.output}: mean L2 change {change:.2f}, {changed} of {args.n} change class under the refiner's labels")


if __name__ == "__main__":
    main()
