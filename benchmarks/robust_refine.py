"""Refinement benchmark: a generator's samples before and after each refiner, in the dataset's own features.

    python benchmarks/robust_refine.py --refiners robust-mnist,runs/robust-clsonly,runs/robust-plain \
        --data-root DATA [-n 10000] [--steps K --eps R --step-size S] [--opt KEY=VALUE] [--seed S] \
        [--json benchmarks/results/robust.json]
    python benchmarks/robust_refine.py --generator ign-cifar10 --ref cifar10:test --refiners robust-cifar10 \
        --data-root DATA --json benchmarks/results/robust_cifar10.json
    python benchmarks/robust_refine.py --generator consistency-mnist --sample-opt steps=2 \
        --refiners robust-mnist,consistency-mnist --data-root DATA


For each refiner: FID, KID, precision, recall, class entropy and confidence of the refined
samples, how often the eval classifier agrees with the label the refiner aimed at (before and after), and
refinement speed (images/s). The generator's samples are drawn once (--seed, default 0) and shared.
A class-conditional generator's samples keep their labels (``i mod classes``, as ``genzoo sample``
makes them), and every refiner that classifies aims at those, as ``genzoo sample MODEL --refine R``
does; an unconditional generator's samples take each refiner's own prediction.
``--opt KEY=VALUE`` passes any other refine option of the refiners;
``--sample-opt KEY=VALUE`` a sample option of the generator (e.g. ``steps=2``). A refiner that does not
classify (a consistency model, say) refines without labels, and has no label agreement. A refiner
may be a model directory written by benchmarks/robust_ablation.py (the classifier-only and plain
ablations).
"""

from __future__ import annotations

import json
import time

import genzoo
from genzoo.metrics.features import extract, feature_space
from harness import parser, write_json
from robust_ablation import register as register_ablations


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("--generator", default="ign-mnist")
    p.add_argument("--refiners", required=True, help="comma list of refiner models (names or directories)")
    p.add_argument("--ref", default="mnist:test", help="the reference split (its dataset's feature network scores)")
    p.add_argument("-n", type=int, default=10000)
    p.add_argument("--steps", type=int, default=None, help="refinement steps (default: each refiner's own)")
    p.add_argument("--eps", type=float, default=None, help="refinement radius (default: each refiner's own)")
    p.add_argument("--step-size", type=float, default=None, help="refinement step size (default: each refiner's own)")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE", help="another refine option (repeatable)")
    p.add_argument("--sample-opt", action="append", default=[], metavar="KEY=VALUE",
                   help="a sample option of the generator (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generator's samples (refinement noise too)")
    p.add_argument("--precision", default="fp32", help="the generator's sampling precision (refinement runs in fp32)")
    p.add_argument("--metrics", default="fid,kid,precision,recall", help="comma list (add swd for pixel SWD)")
    args = p.parse_args()
    register_ablations()

    generator = genzoo.load(args.generator)
    t = time.time()
    samples = generator.sample(args.n, seed=args.seed, precision=args.precision, progress=True,
                               **_options(args.sample_opt))
    sample_seconds = time.time() - t
    generated_labels = generator.labels_for(args.n, None)  # None for an unconditional generator
    metrics = args.metrics
    rows = {"unrefined": genzoo.evaluate(samples, n=args.n, labels=generated_labels,
                                         metrics=metrics + (",accuracy" if generated_labels is not None else ""),
                                         ref=args.ref, data_root=args.data_root, progress=False)}
    print("unrefined", json.dumps(rows["unrefined"]["metrics"]), flush=True)
    # the eval classifier's predictions on the unrefined samples, once, for every refiner's "before"
    _, probs = extract(feature_space(dataset=args.ref.split(":")[0]), samples)
    predicted = probs.argmax(1)
    options = {k: v for k, v in (("eps", args.eps), ("step_size", args.step_size)) if v is not None}
    options.update(_options(args.opt))
    for name in args.refiners.split(","):
        refiner = genzoo.load(name)
        classifies = hasattr(refiner, "predict_labels")
        labels = None
        if classifies:
            labels = generated_labels if generated_labels is not None else refiner.predict_labels(samples)
        before = float((predicted == labels).double().mean()) if classifies else None
        t = time.time()
        refined = refiner.refine(samples, labels=labels, steps=args.steps, seed=args.seed, progress=True, **options)
        speed = args.n / (time.time() - t)
        report = genzoo.evaluate(refined, n=args.n, labels=labels, metrics=metrics + (",accuracy" if classifies else ""),
                                 ref=args.ref, data_root=args.data_root, progress=False)
        report["refine_images_per_second"] = round(speed, 1)
        report["refine_options"] = {"steps": args.steps, **options}
        report["label_accuracy_before"] = before
        report["mean_l2_change"] = float((refined - samples).flatten(1).norm(dim=1).mean())
        rows[name] = report
        agreement = f"label accuracy before {before:.4f}" if classifies else "no labels"
        print(name, json.dumps(report["metrics"]), agreement, f"{speed:.0f} img/s", flush=True)
    # the rows' own "seed" is evaluate's (the reference draw); the samples' seed is this one
    write_json(args.json, {"generator": args.generator, "sample_seed": args.seed, "n": args.n,
                           "sample_options": _options(args.sample_opt), "sample_precision": args.precision,
                           "sample_seconds": round(sample_seconds, 1),
                           "labels": "generator's" if generated_labels is not None else "each refiner's prediction",
                           **rows})


def _options(pairs: list[str]) -> dict[str, float | int]:
    """KEY=VALUE pairs as numbers (ints where they parse as ints)."""
    options: dict[str, float | int] = {}
    for key, _, value in (pair.partition("=") for pair in pairs):
        options[key] = int(value) if value.lstrip("-").isdigit() else float(value)
    return options


if __name__ == "__main__":
    main()
