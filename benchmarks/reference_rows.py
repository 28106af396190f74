"""Reference rows for docs/results.md: what real and degraded images score in a dataset's own features.

    python benchmarks/reference_rows.py --dataset mnist --data-root DATA [--json benchmarks/results/reference.json]
    python benchmarks/reference_rows.py --dataset cifar10 --data-root DATA --json benchmarks/results/reference_cifar10.json
    python benchmarks/reference_rows.py --dataset celeba64 --data-root DATA --json benchmarks/results/reference_celeba64.json
    python benchmarks/reference_rows.py --dataset cifar10 --metrics swd --data-root DATA --json benchmarks/results/reference_swd_cifar10.json

Rows: real training images (a fixed random subset; all 4,000 training faces for celeba64) against
the test split (the floor; for celeba64 the held-out faces 4,001-5,000), and the same images
degraded: shrunk to 7/8 of their size and enlarged back (bilinear: "28 -> 32" for 32 pixels),
Gaussian blur sigma 1, additive Gaussian noise sigma 0.1 and 0.3 (clamped to [0, 1]). A feature
network that serves its dataset ranks them in that order. Also the feature network's own accuracy
on the test split (labels, or the rotation it was trained to predict) and the time the metrics take.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torchvision.transforms.functional import gaussian_blur

import genzoo
from genzoo.datasets import fixed_permutation, load_dataset
from genzoo.metrics.features import extract, feature_space
from genzoo_features.model import rotate
from harness import parser, write_json

DATASETS = {
    "mnist": {"ref": "mnist:test", "train": "mnist:train", "n": 10000, "task": "digit labels"},
    "cifar10": {"ref": "cifar10:test", "train": "cifar10:train", "n": 10000, "task": "class labels"},
    "celeba64": {"ref": "celeba64:test", "train": "celeba64:train", "n": 4000, "task": "rotation by 0/90/180/270"},
}


def resized(images: torch.Tensor, factor: float = 7 / 8) -> torch.Tensor:
    """Shrunk to ``factor`` of the size and enlarged back, bilinear (the "28 -> 32" of a 32-pixel image)."""
    size = images.shape[-1]
    small = F.interpolate(images, size=round(size * factor), mode="bilinear", antialias=True, align_corners=False)
    return F.interpolate(small, size=size, mode="bilinear", align_corners=False).clamp(0, 1)


def degraded_rows(train: torch.Tensor, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "real training images": train,
        "resized to 7/8 and back": resized(train),
        "Gaussian blur sigma 1": gaussian_blur(train, kernel_size=[7, 7], sigma=[1.0, 1.0]),
        "additive noise sigma 0.1": (train + 0.1 * torch.randn(train.shape, generator=g)).clamp(0, 1),
        "additive noise sigma 0.3": (train + 0.3 * torch.randn(train.shape, generator=g)).clamp(0, 1),
    }


def training_subset(train_spec: str, n: int, data_root: str | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The reference rows' real images: a fixed random subset of ``n`` training images, and their labels."""
    train = load_dataset(train_spec, data_root)
    index = fixed_permutation(len(train), seed=1)[:n]
    return train.floats(index), (train.labels[index] if train.labels is not None else None)


def rows_at(n: int, data_root: str | None, metrics: str, ref: str = "mnist:test",
            names: tuple[str, ...] = ("real training images", "Gaussian blur sigma 1",
                                      "additive noise sigma 0.1")) -> dict[str, dict]:
    """Reference rows scored at ``n`` images (their metrics), for a table whose models were scored at that
    ``n``: FID and KID depend on it."""
    images, labels = training_subset(ref.split(":")[0] + ":train", n, data_root)
    rows = degraded_rows(images)
    return {name: genzoo.evaluate(rows[name], n=n, ref=ref, labels=labels, metrics=metrics, data_root=data_root,
                                  progress=False)["metrics"] for name in names}


def feature_accuracy(space, test) -> float:
    """The feature network's accuracy on the test split: on its labels, or on the turns it learnt to predict."""
    images = test.floats()
    if space.can_classify():
        _, probs = extract(space, images)
        return float((probs.argmax(1) == test.labels).double().mean())
    classifier = space.module.classifier
    turns = torch.arange(len(images)) % 4
    with torch.no_grad():
        logits = torch.cat([classifier.classify(rotate(images[i:i + 500], turns[i:i + 500]))
                            for i in range(0, len(images), 500)])
    return float((logits.argmax(1) == turns).double().mean())


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("--dataset", default="mnist", choices=sorted(DATASETS))
    p.add_argument("-n", type=int, default=None, help="Real images per row (default: the dataset's).")
    p.add_argument("--metrics", default=None, help="Comma list of genzoo eval metrics (default: fid,kid,precision,"
                                                   "recall and accuracy where the features classify); the rows are "
                                                   "checked for order on the first")
    args = p.parse_args()
    setting = DATASETS[args.dataset]

    test = load_dataset(setting["ref"], args.data_root)
    space = feature_space(dataset=args.dataset)
    accuracy = feature_accuracy(space, test)
    print(f"{space.name}: accuracy {accuracy:.4f} on {setting['ref']} ({setting['task']})", flush=True)

    real, labels = training_subset(setting["train"], args.n or setting["n"], args.data_root)
    metrics = args.metrics or "fid,kid,precision,recall" + (",accuracy" if space.can_classify() else "")
    primary = metrics.split(",")[0]
    rows = {}
    for name, images in degraded_rows(real).items():
        t = time.time()
        report = genzoo.evaluate(images, n=len(images), ref=setting["ref"], labels=labels, metrics=metrics,
                                 data_root=args.data_root, progress=False,
                                 kid_subset_size=min(1000, len(test), len(images)))
        report["wall_seconds"] = round(time.time() - t, 1)
        rows[name] = report
        m = report["metrics"]
        shown = {k: v for k, v in m.items() if isinstance(v, (int, float))}
        print(f"{name}: " + "  ".join(f"{k} {v:.4g}" for k, v in shown.items()) + f"  ({report['seconds']})", flush=True)
    scores = [rows[name]["metrics"][primary] for name in rows]
    ordered = all(a < b for a, b in zip(scores, scores[1:]))
    print(f"rows ranked in the expected order: {ordered}", flush=True)
    result = {"dataset": args.dataset, "metrics": metrics, "feature_network": space.name, "feature_network_accuracy": accuracy,
              "accuracy_task": setting["task"], "ranked_in_order": ordered, "rows": rows}
    write_json(args.json, result)


if __name__ == "__main__":
    main()
