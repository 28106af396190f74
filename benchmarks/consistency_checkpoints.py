"""Every checkpoint a consistency run kept (its EMA weights), scored with one step and with two, to choose one.

    python benchmarks/consistency_checkpoints.py RUN --data-root DATA [-n 2000] [--seed 1] \
        [--mid-sigma 0.821] [--every 500] [--from-step 3500] --json benchmarks/results/consistency_ect_checkpoints.json

Scores with a noise seed (default 1) other than the one the catalogue's figures use (0), so the
checkpoint is not chosen on the samples it is then scored on. FID, recall and class entropy in
features-mnist against mnist:test.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import genzoo
from genzoo.training.checkpoints import model_from_checkpoint
from harness import parser, write_json


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("run", type=Path)
    p.add_argument("-n", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mid-sigma", type=float, default=None, help="the two-step sampler's level (default: the run's)")
    p.add_argument("--every", type=int, default=1, help="score only the checkpoints whose step is a multiple of this")
    p.add_argument("--from-step", type=int, default=0, help="score only the checkpoints from this step on")
    args = p.parse_args()
    rows = []
    for checkpoint in sorted((args.run / "checkpoints").glob("step-*")):
        step = int(checkpoint.name.split("-")[1])
        if step % args.every or step < args.from_step:
            continue
        model, _ = model_from_checkpoint(args.run, step)
        if args.mid_sigma is not None:
            model.config = dataclasses.replace(model.config, mid_sigma=args.mid_sigma)
        row = {"step": step}
        for steps in (1, 2):
            report = genzoo.evaluate(model, n=args.n, seed=args.seed, metrics="fid,recall,accuracy",
                                     sample_options={"steps": steps}, data_root=args.data_root, progress=False)
            m = report["metrics"]
            row[f"{steps}_step"] = {"fid": round(m["fid"], 1), "recall": round(m["recall"], 3),
                                    "class_entropy": round(m["classes"]["entropy"], 3)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    write_json(args.json, {"run": args.run.name, "n": args.n, "seed": args.seed,
                           "mid_sigma": model.config.mid_sigma, "rows": rows})


if __name__ == "__main__":
    main()
