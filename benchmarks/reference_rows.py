"""Reference rows for docs/results.md: what real and degraded MNIST digits score in genzoo's metrics.

    python benchmarks/reference_rows.py --data-root ../shared/data [-n 10000] [--json docs/results/reference.json]

Rows: 10k real training digits vs the 10k test digits (the floor), and the same training digits
blurred (Gaussian, sigma 1) or with additive Gaussian noise (sigma 0.3, clamped to [0, 1]). Also
the feature classifier's accuracy on the test set, and the time FID + KID + precision/recall take
for 10k vs 10k images.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from torchvision.transforms.functional import gaussian_blur

import genzoo
from genzoo.data import fixed_permutation
from genzoo.datasets import load_dataset
from genzoo.features import extract, feature_space


def degraded_rows(train: torch.Tensor, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "real training digits": train,
        "training digits, Gaussian blur sigma 1": gaussian_blur(train, kernel_size=[7, 7], sigma=[1.0, 1.0]),
        "training digits + noise sigma 0.3": (train + 0.3 * torch.randn(train.shape, generator=g)).clamp(0, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("-n", type=int, default=10000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    test = load_dataset("mnist:test", args.data_root)
    space = feature_space(dataset="mnist")
    _, probs = extract(space, test.floats())
    accuracy = float((probs.argmax(1) == test.labels).double().mean())
    print(f"feature classifier accuracy on the 10k test digits: {accuracy:.4f}", flush=True)

    train = load_dataset("mnist:train", args.data_root)
    index = fixed_permutation(len(train), seed=1)[: args.n]
    rows = {}
    for name, images in degraded_rows(train.floats(index)).items():
        t = time.time()
        report = genzoo.evaluate(images, n=len(images), ref="mnist:test", labels=train.labels[index],
                                 metrics="fid,kid,precision,recall,accuracy", data_root=args.data_root, progress=False)
        report["wall_seconds"] = round(time.time() - t, 1)
        rows[name] = report
        m = report["metrics"]
        print(f"{name}: FID {m['fid']:.2f}  KID {m['kid']['mean']:.4f}  P {m['precision']:.3f}  R {m['recall']:.3f}  "
              f"acc {m['accuracy']:.4f}  entropy {m['classes']['entropy']:.4f}  ({report['seconds']})", flush=True)
    result = {"feature_classifier_test_accuracy": accuracy, "rows": rows}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
