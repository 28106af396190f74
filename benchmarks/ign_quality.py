"""IGN sample quality for f(z), f(f(z)) and f(f(f(z))) in a dataset's own feature space, and its speed.

    python benchmarks/ign_quality.py --model ign-mnist --data-root ../shared/data [--json docs/results/ign_quality.json]
    python benchmarks/ign_quality.py --model ign-cifar10 --ref cifar10:test --json docs/results/ign_cifar10.json \
        --grid docs/results/ign_cifar10.png
    python benchmarks/ign_quality.py --model ign-celeba64 --ref celeba64:test -n 5000 --memorization \
        --json docs/results/ign_celeba64.json --grid docs/results/ign_celeba64.png

The same as `genzoo eval MODEL -n N --apply K --ref REF` for K = 1, 2, 3. ``--memorization`` adds
the mean max-SSIM of 1,000 samples to the training split of REF's dataset and their mean
nearest-neighbour feature distance, with the same figures for the held-out reference images
themselves beside them (what "not copies" is measured against). ``--grid`` writes 64 samples
(seed 0). Sampling speed: images/s of ``model.sample`` at batch 256, median of 3 passes; with
``--speed-only``, that alone (several models: ``--model ign-mnist,ign-cifar10,ign-celeba64``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import genzoo
from genzoo.datasets import load_dataset
from genzoo.hardware import cpu_name
from genzoo.images import save_grid


def sampling_speed(model) -> dict:
    """Images/s of ``model.sample`` (fp32) at batch 256: the median of 3 passes of 2,048 images."""
    rates = []
    model.sample(256, seed=0)
    for _ in range(3):
        start = time.perf_counter()
        model.sample(2048, seed=1, batch_size=256)
        rates.append(2048 / (time.perf_counter() - start))
    return {"sample_images_per_s_batch256": round(sorted(rates)[1], 1), "passes": [round(r) for r in rates],
            "cpu": cpu_name()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="ign-mnist")
    parser.add_argument("--ref", default="mnist:test")
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("-n", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--memorization", action="store_true")
    parser.add_argument("--grid", default=None)
    parser.add_argument("--speed-only", action="store_true", help="only the sampling speed, of each model named")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.speed_only:
        speeds = {name: sampling_speed(genzoo.load(name)) for name in args.model.split(",")}
        for name, speed in speeds.items():
            print(f"{name}: {speed['sample_images_per_s_batch256']} images/s at batch 256 (passes {speed['passes']}) "
                  f"on {speed['cpu']}")
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(speeds, indent=2) + "\n")
        return
    model = genzoo.load(args.model)
    reference = load_dataset(args.ref, args.data_root)
    kid = min(1000, args.n, len(reference))
    rows = {}
    for k in (1, 2, 3):
        metrics = "fid,kid,precision,recall" + (",memorization" if args.memorization and k == 1 else "")
        report = genzoo.evaluate(model, n=args.n, apply=k, ref=args.ref, metrics=metrics, seed=args.seed,
                                 data_root=args.data_root, progress=False, kid_subset_size=kid)
        rows[f"apply {k}"] = report
        m = report["metrics"]
        c = m.get("classes")
        classes = f" entropy {c['entropy']:.4f} confidence {c['confidence']:.3f} classes {c['histogram']}" if c else ""
        mem = m.get("memorization")
        memo = f" max-SSIM {mem['max_ssim_mean']:.3f} NN-feature {mem['nn_feature_distance_mean']:.2f}" if mem else ""
        print(f"apply {k}: FID {m['fid']:.1f} KID x1e3 {1e3 * m['kid']['mean']:.1f} P {m['precision']:.3f} "
              f"R {m['recall']:.3f}{classes}{memo}", flush=True)
    if args.memorization:  # the held-out real images, scored against the same training images
        held_out = reference.floats()
        report = genzoo.evaluate(held_out, n=len(held_out), ref=args.ref, metrics="memorization",
                                 data_root=args.data_root, progress=False, memorization_n=min(1000, len(held_out)))
        rows["held-out real images"] = report
        mem = report["metrics"]["memorization"]
        print(f"held-out real: max-SSIM {mem['max_ssim_mean']:.3f} NN-feature {mem['nn_feature_distance_mean']:.2f}")
    rows["speed"] = sampling_speed(model)
    print(f"sampling: {rows['speed']['sample_images_per_s_batch256']} images/s at batch 256 on {cpu_name()}")
    if args.grid:
        save_grid(model.sample(64, seed=0), args.grid)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
