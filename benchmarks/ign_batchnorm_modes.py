"""How should a batch-norm IGN normalise at sampling time? Measures FID and class coverage of f(z) for:

  calibrated   per-source population statistics recomputed on z and on f(z) (what genzoo samples with)
  batch        train-mode batch statistics of each sampling batch (a sample depends on its batch)
  pooled       one set of statistics pooled over everything training feeds f (x, z, f(z)): what
               running averages converge to, i.e. plain eval-mode batch norm

    python benchmarks/ign_batchnorm_modes.py MODEL [-n 10000] [--data-root DATA] [--json OUT]
"""

from __future__ import annotations

import copy
import json

import torch

import genzoo
from genzoo.datasets import fixed_permutation, load_dataset
from genzoo.metrics import class_statistics, fid
from genzoo.metrics.features import extract, feature_space
from genzoo.blocks import batchnorm
from harness import parser, write_json


def pooled_copy(model, train_images: torch.Tensor) -> torch.nn.Module:
    """A copy whose 'noise' and 'image' statistics are one pool over x, z and f(z) inputs."""
    pooled = copy.deepcopy(model)
    net = pooled.net
    g = torch.Generator().manual_seed(1)

    def every_input() -> None:
        for start in range(0, 4096, 256):
            x = train_images[start:start + 256] * 2 - 1
            z = pooled.noise_images(torch.randn(len(x), *pooled.image_shape, 2, generator=g))
            net(x)
            net(net(z))

    statistics = batchnorm.population_statistics(net, every_input)
    for source in batchnorm.SOURCES:
        batchnorm.set_statistics(net, source, statistics)
    return pooled.eval()


def batch_mode_samples(model, n: int, batch: int = 256) -> torch.Tensor:
    out = []
    model.net.train()
    with torch.no_grad():
        for start in range(0, n, batch):
            noise = genzoo.Noise(0, start, min(n, start + batch))
            z = model.noise_images(noise.randn(*model.image_shape, 2))
            out.append(((model.net(z) + 1) / 2).clamp(0, 1))
    model.net.eval()
    return torch.cat(out)


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("model")
    p.add_argument("-n", type=int, default=10000)
    args = p.parse_args()
    model = genzoo.load(args.model)
    if not batchnorm.layers(model.net):
        raise SystemExit(f"{args.model} has no batch norm (norm={model.config.norm})")
    space = feature_space(dataset="mnist")
    test = load_dataset("mnist:test", args.data_root)
    real_f, _ = extract(space, test.floats(fixed_permutation(len(test))[: args.n]))
    train = load_dataset("mnist:train", args.data_root)
    samples = {
        "calibrated": model.sample(args.n, seed=0),
        "batch": batch_mode_samples(model, args.n),
        "pooled": pooled_copy(model, train.floats(fixed_permutation(len(train))[:4096])).sample(args.n, seed=0),
    }
    rows = {}
    for mode, images in samples.items():
        feats, probs = extract(space, images)
        stats = class_statistics(probs, None)
        rows[mode] = {"fid": round(fid(real_f, feats), 2), "entropy": stats["entropy"], "confidence": stats["confidence"]}
        print(mode, rows[mode], flush=True)
    print(json.dumps(rows))
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
