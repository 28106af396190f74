"""MMB generators against the per-image reconstruction baseline and real digits, on the targets of issue 15.

    python benchmarks/mmb_compare.py --generators mmb-mnist,RUN_DIR,... --reconstruct RUN_DIR \
        --classifier mmb-mnist-classifier --data-root DATA [--json benchmarks/results/mmb.json]

Each source gives 10,000 images, 1,000 per label (labels i mod 10, seed 0; the reconstruction's 500
images repeat, 20 times each), scored in features-mnist against the MNIST test set:
- diversity: mean pairwise feature distance among images of one label, averaged over labels, and
  its share of the same figure for the 10,000 real test digits (the target is >= 30%);
- label accuracy: how often features-mnist predicts the requested label, overall and per label;
- novelty: mean nearest-neighbour feature distance from 1,000 of the images (a fixed subset) to
  the classifier's 500 training digits, and their mean max-SSIM to those digits (the target: at
  least / at most the reconstruction's);
- FID (and precision, recall);
- corner ink: over the first 2,000 images, the mean intensity of the four 6x6 corners and the share
  of images with a pixel above 0.5 there. MNIST digits are nearly always black there, so the
  classifier barely sees those pixels and a generator can fill them (with blobs) at little cost.
With ``--unseen``, novelty is also measured against 500 training digits the classifier did not see
(a fixed random draw from the rest of the training split): a generator that copies the
classifier's digits is nearer to those than to these; one that does not is about as near to both.
Real test digits get the same diversity, novelty and corner figures, for scale; with ``--noisy
0.1,0.3`` also the novelty figures of real test digits with Gaussian noise of those sigmas added
(clamped to [0, 1]): how far noise alone, with no change of content, moves them.
"""

from __future__ import annotations

import torch

import genzoo
from genzoo.datasets import load_dataset
from harness import parser, write_json

METRICS = "fid,precision,recall,accuracy,diversity,memorization"


def corner_ink(images: torch.Tensor, size: int = 6) -> dict[str, float]:
    corners = torch.zeros(images.shape[-2:], dtype=torch.bool)
    corners[:size, :size] = corners[:size, -size:] = corners[-size:, :size] = corners[-size:, -size:] = True
    ink = images[:, 0][:, corners]
    return {"corner_intensity": ink.mean().item(), "corner_blob_share": (ink.amax(1) > 0.5).float().mean().item()}


def summary(report: dict, real_diversity: float | None) -> dict:
    m = report["metrics"]
    row = {"fid": m.get("fid"), "precision": m.get("precision"), "recall": m.get("recall"),
           "accuracy": m.get("accuracy"), "accuracy_per_label": m.get("accuracy_per_label"),
           "diversity": m.get("diversity"), "diversity_per_label": m.get("diversity_per_label"),
           "nn_feature_distance_to_classifier_train": m["memorization"]["nn_feature_distance_mean"],
           "max_ssim_to_classifier_train": m["memorization"]["max_ssim_mean"]}
    if real_diversity:
        row["diversity_share_of_real"] = row["diversity"] / real_diversity
    return row


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("--generators", default="mmb-mnist")
    p.add_argument("--reconstruct", default=None)
    p.add_argument("--classifier", default="mmb-mnist-classifier")
    p.add_argument("-n", type=int, default=10000)
    p.add_argument("--unseen", action="store_true",
                   help="also measure novelty against 500 training digits the classifier did not see")
    p.add_argument("--noisy", default="", help="comma-separated noise sigmas for noisy real-digit novelty rows")
    args = p.parse_args()

    classifier = genzoo.load(args.classifier)
    train = load_dataset("mnist:train", args.data_root)
    subset = train.subset(classifier.indices, name=f"{args.classifier} training subset ({len(classifier.indices)} images)")
    test = load_dataset("mnist:test", args.data_root)
    common = dict(ref="mnist:test", data_root=args.data_root, progress=False, train=subset, memorization_n=1000)
    unseen = None
    if args.unseen:
        seen = torch.zeros(len(train), dtype=torch.bool)
        seen[torch.as_tensor(classifier.indices)] = True
        rest = torch.nonzero(~seen).squeeze(1)
        pick = rest[torch.randperm(len(rest), generator=torch.Generator().manual_seed(0))[:len(classifier.indices)]]
        unseen = train.subset(pick, name=f"{len(pick)} training digits {args.classifier} did not see")

    def novelty_unseen(images_or_source, row: dict) -> None:
        if unseen is None:
            return
        n = len(images_or_source) if isinstance(images_or_source, torch.Tensor) else args.n
        memo = genzoo.evaluate(images_or_source, n=n, metrics="memorization", **dict(common, train=unseen))["metrics"]["memorization"]
        row["nn_feature_distance_to_unseen_train"] = memo["nn_feature_distance_mean"]
        row["max_ssim_to_unseen_train"] = memo["max_ssim_mean"]
    rows = {}
    real = genzoo.evaluate(test.floats(), n=len(test), labels=test.labels, metrics="diversity,memorization", **common)
    real_diversity = real["metrics"]["diversity"]
    rows["real test digits"] = {"diversity": real_diversity, "diversity_share_of_real": 1.0,
                                "nn_feature_distance_to_classifier_train": real["metrics"]["memorization"]["nn_feature_distance_mean"],
                                "max_ssim_to_classifier_train": real["metrics"]["memorization"]["max_ssim_mean"],
                                **corner_ink(test.floats(torch.arange(2000)))}
    novelty_unseen(test.floats(), rows["real test digits"])
    for sigma in [float(s) for s in args.noisy.split(",") if s]:
        clean = test.floats(torch.arange(1000))
        noisy = (clean + sigma * torch.randn(clean.shape, generator=torch.Generator().manual_seed(0))).clamp(0, 1)
        memo = genzoo.evaluate(noisy, n=len(noisy), metrics="memorization", **common)["metrics"]["memorization"]
        rows[f"real test digits + noise sigma {sigma}"] = {
            "nn_feature_distance_to_classifier_train": memo["nn_feature_distance_mean"],
            "max_ssim_to_classifier_train": memo["max_ssim_mean"]}
    sources = [s for s in args.generators.split(",") if s] + ([args.reconstruct] if args.reconstruct else [])
    for source in sources:
        report = genzoo.evaluate(source, n=args.n, metrics=METRICS, **common)
        rows[source] = summary(report, real_diversity)
        rows[source].update(corner_ink(genzoo.load(source).sample(2000, labels=torch.arange(2000) % 10, seed=0)))
        novelty_unseen(source, rows[source])
    for name, row in rows.items():
        text = "  ".join(f"{k} {v:.3f}" for k, v in row.items() if isinstance(v, float))
        worst = row.get("accuracy_per_label")
        extra = f"  worst label {min(range(10), key=lambda c: worst[c])} at {min(worst):.3f}" if worst else ""
        print(f"{name}: {text}{extra}", flush=True)
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
