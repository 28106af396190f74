"""Class balance, FID and SWD of every checkpoint a run kept (its EMA weights), to choose one.

    python benchmarks/ign_checkpoint_sweep.py RUN --data-root DATA [-n 5000] [--seed 1]
    python benchmarks/ign_checkpoint_sweep.py RUN --ref cifar10:test --data-root DATA [--from-step 21000]

Scores with a different noise seed (default 1) from the one the reported numbers use (seed 0 in
`ign_quality.py`), so choosing a checkpoint here does not also choose the noise it is judged on.
Each checkpoint's batch-norm statistics are calibrated as `genzoo fit` does for the saved model;
`genzoo export RUN DEST --checkpoint STEP` then writes the chosen one as a model directory.
``--apply2`` also scores f(f(z)) (the same noise) and reports its FID as a ratio of f(z)'s; ``--swd``
adds the feature-free SWD (x1e3) of each.
"""

from __future__ import annotations

from pathlib import Path

import genzoo
from genzoo.training.checkpoints import model_from_checkpoint
from harness import parser, write_json

BAND = (0.06, 0.14)  # the per-class bar: every digit between 6% and 14% of the samples


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("run", type=Path)
    p.add_argument("-n", type=int, default=5000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ref", default="mnist:test")
    p.add_argument("--from-step", type=int, default=0, help="skip checkpoints before this step")
    p.add_argument("--apply2", action="store_true", help="also the FID of f(f(z)) and its ratio to f(z)'s")
    p.add_argument("--swd", action="store_true", help="also the SWD on Laplacian-pyramid patches")
    args = p.parse_args()
    rows = []
    for checkpoint in sorted((args.run / "checkpoints").glob("step-*")):
        step = int(checkpoint.name.split("-")[1])
        if step < args.from_step:
            continue
        model, _ = model_from_checkpoint(args.run, step)
        reports = genzoo.evaluate(model, n=args.n, seed=args.seed, apply=(1, 2) if args.apply2 else (1,),
                                  metrics="fid,swd" if args.swd else "fid", ref=args.ref, data_root=args.data_root,
                                  progress=False)
        fid = reports[0]["metrics"]["fid"]
        row = {"checkpoint": checkpoint.name, "fid": fid}
        line = f"{checkpoint.name}: FID {fid:.1f}"
        if args.swd:
            row["swd"] = reports[0]["metrics"]["swd"]
            line += f"  SWD {row['swd']:.2f}"
        classes = reports[0]["metrics"].get("classes")
        if classes is not None:  # a feature network that classifies (not celeba64's): the class balance too
            hist = classes["histogram"]
            row.update(histogram=hist, entropy=classes["entropy"],
                       min_class=min(range(len(hist)), key=hist.__getitem__),
                       max_class=max(range(len(hist)), key=hist.__getitem__),
                       in_band=BAND[0] <= min(hist) and max(hist) <= BAND[1])
            line += (f"  entropy {row['entropy']:.3f}  min {min(hist):.4f} (class {row['min_class']})  "
                     f"max {max(hist):.4f} (class {row['max_class']})  in band: {row['in_band']}")
        if args.apply2:
            fid2 = reports[1]["metrics"]["fid"]
            row.update(fid_apply2=fid2, apply2_ratio=fid2 / fid)
            line += f"  f(f(z)) FID {fid2:.1f} ({fid2 / fid - 1:+.1%})"
            if args.swd:
                row["swd_apply2"] = reports[1]["metrics"]["swd"]
                line += f"  SWD {row['swd_apply2']:.2f}"
        rows.append(row)
        print(line, flush=True)
    write_json(args.json, {"run": str(args.run), "n": args.n, "seed": args.seed, "rows": rows})


if __name__ == "__main__":
    main()
