"""Refinement benchmark: a generator's samples before and after each refiner, in the dataset's own features.

    python benchmarks/robust_refine.py --refiners robust-mnist,DIR_CLASSIFIER_ONLY,DIR_PLAIN \
        --data-root ../shared/data [-n 10000] [--steps K --eps R --step-size S] [--seed S] [--json docs/results/robust.json]
    python benchmarks/robust_refine.py --generator ign-cifar10 --ref cifar10:test --refiners robust-cifar10 \
        --data-root ../shared/data --json docs/results/robust_cifar10.json

For each refiner: FID, KID, precision, recall, class entropy and confidence of the refined
samples, how often the eval classifier agrees with the label the refiner aimed at (before and after), and
refinement speed (images/s). The generator's samples are drawn once (--seed, default 0) and shared.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import genzoo
from genzoo.metrics.features import extract, feature_space


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--generator", default="ign-mnist")
    parser.add_argument("--refiners", required=True, help="comma list of refiner models (names or directories)")
    parser.add_argument("--ref", default="mnist:test", help="the reference split (its dataset's feature network scores)")
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("-n", type=int, default=10000)
    parser.add_argument("--steps", type=int, default=None, help="refinement steps (default: each refiner's own)")
    parser.add_argument("--eps", type=float, default=None, help="refinement radius (default: each refiner's own)")
    parser.add_argument("--step-size", type=float, default=None, help="refinement step size (default: each refiner's own)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generator's samples (refinement noise too)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    generator = genzoo.load(args.generator)
    samples = generator.sample(args.n, seed=args.seed, progress=True)
    metrics = "fid,kid,precision,recall"
    rows = {"unrefined": genzoo.evaluate(samples, n=args.n, metrics=metrics, ref=args.ref, data_root=args.data_root,
                                         progress=False)}
    print("unrefined", json.dumps(rows["unrefined"]["metrics"]), flush=True)
    # the eval classifier's predictions on the unrefined samples, once, for every refiner's "before"
    _, probs = extract(feature_space(dataset=args.ref.split(":")[0]), samples)
    predicted = probs.argmax(1)
    options = {k: v for k, v in (("eps", args.eps), ("step_size", args.step_size)) if v is not None}
    for name in args.refiners.split(","):
        refiner = genzoo.load(name)
        labels = refiner.predict_labels(samples)
        before = float((predicted == labels).double().mean())
        t = time.time()
        refined = refiner.refine(samples, labels=labels, steps=args.steps, seed=args.seed, progress=True, **options)
        speed = args.n / (time.time() - t)
        report = genzoo.evaluate(refined, n=args.n, labels=labels, metrics=metrics + ",accuracy", ref=args.ref,
                                 data_root=args.data_root, progress=False)
        report["refine_images_per_second"] = round(speed, 1)
        report["refine_options"] = {"steps": args.steps, **options}
        report["label_accuracy_before"] = before
        report["mean_l2_change"] = float((refined - samples).flatten(1).norm(dim=1).mean())
        rows[name] = report
        print(name, json.dumps(report["metrics"]), f"label accuracy before {before:.4f}", f"{speed:.0f} img/s", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        # the rows' own "seed" is evaluate's (the reference draw); the samples' seed is this one
        Path(args.json).write_text(json.dumps({"sample_seed": args.seed, **rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
