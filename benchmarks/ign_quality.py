"""IGN sample quality for f(z), f(f(z)) and f(f(f(z))) in a dataset's own feature space, and its speed.

    python benchmarks/ign_quality.py --model ign-mnist --data-root DATA [--json benchmarks/results/ign_quality.json]
    python benchmarks/ign_quality.py --model ign-cifar10 --ref cifar10:test --data-root DATA \
        --json benchmarks/results/ign_cifar10.json --grid benchmarks/results/ign_cifar10.png
    python benchmarks/ign_quality.py --model ign-celeba64 --ref celeba64:test -n 5000 --memorization \
        --data-root DATA --json benchmarks/results/ign_celeba64.json --grid benchmarks/results/ign_celeba64.png

The scores are `genzoo eval MODEL -n N --apply 1,2,3 --ref REF` (metrics swd, fid, kid, precision,
recall). ``--memorization`` adds the mean max-SSIM of 1,000 samples to the training split of REF's
dataset and their mean nearest-neighbour feature distance, with the same figures for the held-out
reference images themselves beside them (what "not copies" is measured against). ``--grid`` writes
64 samples (seed 0). Sampling speed: images/s of ``model.sample`` at batch 256, median of 3 passes;
with ``--speed-only``, that alone (several models: ``--model ign-mnist,ign-cifar10,ign-celeba64``).
"""

from __future__ import annotations

import genzoo
from genzoo.hardware import cpu_name
from genzoo.images import save_grid
from harness import median_seconds, parser, write_json


def sampling_speed(model) -> dict:
    """Images/s of ``model.sample`` (fp32) at batch 256: the median of 3 passes of 2,048 images."""
    seconds = median_seconds(lambda: model.sample(2048, seed=1, batch_size=256), rounds=3, warmup=1)
    return {"sample_images_per_s_batch256": round(2048 / seconds, 1), "cpu": cpu_name()}


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("--model", default="ign-mnist")
    p.add_argument("--ref", default="mnist:test")
    p.add_argument("-n", type=int, default=10000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--memorization", action="store_true")
    p.add_argument("--grid", default=None)
    p.add_argument("--speed-only", action="store_true", help="only the sampling speed, of each model named")
    args = p.parse_args()
    if args.speed_only:
        speeds = {name: sampling_speed(genzoo.load(name)) for name in args.model.split(",")}
        for name, speed in speeds.items():
            print(f"{name}: {speed['sample_images_per_s_batch256']} images/s at batch 256 on {speed['cpu']}")
        write_json(args.json, speeds)
        return
    model = genzoo.load(args.model)
    reference = genzoo.load_dataset(args.ref, args.data_root)
    common = dict(ref=args.ref, data_root=args.data_root, progress=False)
    metrics = "swd,fid,kid,precision,recall" + (",memorization" if args.memorization else "")
    reports = genzoo.evaluate(model, n=args.n, apply=(1, 2, 3), metrics=metrics, seed=args.seed,
                              kid_subset_size=min(1000, args.n, len(reference)), **common)
    rows = {f"apply {report['apply']}": report for report in reports}
    for name, report in rows.items():
        m = report["metrics"]
        c = m.get("classes")
        classes = f" entropy {c['entropy']:.4f} confidence {c['confidence']:.3f} classes {c['histogram']}" if c else ""
        mem = m.get("memorization")
        memo = f" max-SSIM {mem['max_ssim_mean']:.3f} NN-feature {mem['nn_feature_distance_mean']:.2f}" if mem else ""
        print(f"{name}: SWD x1e3 {m['swd']:.2f} FID {m['fid']:.1f} KID x1e3 {1e3 * m['kid']['mean']:.1f} "
              f"P {m['precision']:.3f} R {m['recall']:.3f}{classes}{memo}", flush=True)
    if args.memorization:  # the held-out real images, scored against the same training images
        held_out = reference.floats()
        report = genzoo.evaluate(held_out, n=len(held_out), metrics="memorization",
                                 memorization_n=min(1000, len(held_out)), **common)
        rows["held-out real images"] = report
        mem = report["metrics"]["memorization"]
        print(f"held-out real: max-SSIM {mem['max_ssim_mean']:.3f} NN-feature {mem['nn_feature_distance_mean']:.2f}")
    rows["speed"] = sampling_speed(model)
    print(f"sampling: {rows['speed']['sample_images_per_s_batch256']} images/s at batch 256 on {cpu_name()}")
    if args.grid:
        save_grid(model.sample(64, seed=0), args.grid)
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
