"""Class balance and FID of every checkpoint a run kept (its EMA weights), to choose one.

    python benchmarks/ign_checkpoint_sweep.py /work/runs/ign-ft --data-root ../shared/data [-n 5000] [--seed 1]
    python benchmarks/ign_checkpoint_sweep.py /work/runs/ign-cifar10 --ref cifar10:test --data-root ../shared/data [--from-step 21000]

Scores with a different noise seed (default 1) from the one the reported numbers use (seed 0 in
`ign_quality.py`), so choosing a checkpoint here does not also choose the noise it is judged on.
Each checkpoint's batch-norm statistics are calibrated as `genzoo fit` does for the saved model;
`genzoo export RUN DEST --checkpoint STEP` then writes the chosen one as a model directory.
``--apply2`` also scores f(f(z)) (the same noise) and reports its FID as a ratio of f(z)'s.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import genzoo
from genzoo.checkpoints import model_from_checkpoint

BAND = (0.06, 0.14)  # the per-class bar


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path)
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("-n", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ref", default="mnist:test")
    parser.add_argument("--from-step", type=int, default=0, help="skip checkpoints before this step")
    parser.add_argument("--apply2", action="store_true", help="also the FID of f(f(z)) and its ratio to f(z)'s")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    for checkpoint in sorted((args.run / "checkpoints").glob("step-*")):
        step = int(checkpoint.name.split("-")[1])
        if step < args.from_step:
            continue
        model, _ = model_from_checkpoint(args.run, step)
        report = genzoo.evaluate(model, n=args.n, seed=args.seed, metrics="fid", ref=args.ref, data_root=args.data_root,
                                 progress=False)
        twice = ""
        extra = {}
        if args.apply2:
            fid2 = genzoo.evaluate(model, n=args.n, seed=args.seed, apply=2, metrics="fid", ref=args.ref,
                                   data_root=args.data_root, progress=False)["metrics"]["fid"]
            extra = {"fid_apply2": fid2, "apply2_ratio": fid2 / report["metrics"]["fid"]}
            twice = f"  f(f(z)) FID {fid2:.1f} ({fid2 / report['metrics']['fid'] - 1:+.1%})"
        classes = report["metrics"].get("classes")
        if classes is None:  # a feature network without classes (celeba64): FID only
            rows.append({"checkpoint": checkpoint.name, "fid": report["metrics"]["fid"], **extra})
            print(f"{checkpoint.name}: FID {report['metrics']['fid']:.1f}{twice}", flush=True)
            continue
        hist = classes["histogram"]
        row = {"checkpoint": checkpoint.name, "fid": report["metrics"]["fid"], **extra, "histogram": hist,
               "entropy": classes["entropy"],
               "min_class": min(range(len(hist)), key=hist.__getitem__),
               "max_class": max(range(len(hist)), key=hist.__getitem__),
               "in_band": BAND[0] <= min(hist) and max(hist) <= BAND[1]}
        rows.append(row)
        print(f"{checkpoint.name}: FID {row['fid']:.1f}  entropy {row['entropy']:.3f}  min {min(hist):.4f} "
              f"(class {row['min_class']})  max {max(hist):.4f} (class {row['max_class']})  in band: {row['in_band']}{twice}",
              flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"run": str(args.run), "n": args.n, "seed": args.seed, "rows": rows},
                                              indent=2) + "\n")


if __name__ == "__main__":
    main()
