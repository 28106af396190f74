"""The MMB paper's comparison: generator vs per-image reconstruction, from the same classifier.

    python benchmarks/mmb_compare.py --generator mmb-mnist --reconstruct RUN_DIR \
        --classifier mmb-mnist-classifier --data-root ../shared/data [--json docs/results/mmb.json]

Both are scored on 500 images (the reconstruction has exactly M = 500; FID at 500 samples is
biased upwards, equally for both), the generator also on 10,000. Memorisation: mean over images of
the max SSIM to (a) the classifier's 500 training images and (b) all 60k MNIST training images
(pixel-L2 prefilter to 64 candidates), and the mean nearest-neighbour distance in genzoo's features.
Accuracy: the eval classifier's agreement with the requested labels.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

import genzoo
from genzoo.datasets import load_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--generator", default="mmb-mnist")
    parser.add_argument("--reconstruct", required=True)
    parser.add_argument("--classifier", default="mmb-mnist-classifier")
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    classifier = genzoo.load(args.classifier)
    train = load_dataset("mnist:train", args.data_root)
    subset = train.subset(classifier.indices, name=f"{args.classifier} training subset (500 images)")
    common = dict(ref="mnist:test", data_root=args.data_root, progress=False, kid_subset_size=250, kid_subsets=100)
    metrics = "fid,kid,precision,recall,accuracy,memorization"
    rows = {}
    recon = genzoo.load(args.reconstruct)
    m = recon.config.count
    for name, model, n in ((f"{args.generator} (n={m})", genzoo.load(args.generator), m),
                           (f"reconstruction baseline (n={m})", recon, m),
                           (f"{args.generator} (n=10000)", genzoo.load(args.generator), 10000)):
        for train_name, train_set in (("classifier's 500", subset), ("all 60k", "mnist:train")):
            kid_size = 250 if n <= 500 else 1000
            report = genzoo.evaluate(model, n=n, metrics=metrics, train=train_set, memorization_n=min(n, 1000),
                                     **{**common, "kid_subset_size": kid_size})
            rows[f"{name} vs {train_name}"] = report
            r = report["metrics"]
            print(f"{name} / {train_name}: FID {r['fid']:.1f} acc {r['accuracy']:.3f} entropy "
                  f"{r['classes']['entropy']:.3f} max-SSIM {r['memorization']['max_ssim_mean']:.3f} "
                  f"NN-feat {r['memorization']['nn_feature_distance_mean']:.2f}", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
