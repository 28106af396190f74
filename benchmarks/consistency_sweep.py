"""A consistency model's sampler and refiner settings, swept: FID, precision, recall and class entropy per setting.

    python benchmarks/consistency_sweep.py --model consistency-mnist --data-root DATA \
        [--mid-sigmas 0.2,0.4,0.821,1.5,3] [--steps 1,2,3] [-n 2000] [--seed 1] \
        [--refine-of ign-mnist,mmb-mnist --refine-sigmas 0.25,0.5,1,2] [--json OUT]

Rows: ``steps`` = 1 once; for each K > 1 in ``--steps``, one row per ``mid_sigma`` (the level the
second step re-noises to, the start of the lower levels for K > 2). With ``--refine-of``: each named
generator's samples unrefined, then refined by the consistency model once at each ``--refine-sigmas``
noise level. Use a seed other than the one the catalogue's figures use (0), so that the setting is
not chosen on the samples it is then scored on.
"""

from __future__ import annotations

import dataclasses
import json

import genzoo
from harness import parser, write_json


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("--model", default="consistency-mnist")
    p.add_argument("--ref", default="mnist:test")
    p.add_argument("-n", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--steps", default="1,2", help="comma list of sampler step counts")
    p.add_argument("--mid-sigmas", default="0.821", help="comma list of mid_sigma values for K > 1")
    p.add_argument("--refine-of", default="", help="comma list of generators whose samples the model refines")
    p.add_argument("--refine-sigmas", default="1.0", help="comma list of refinement noise levels")
    args = p.parse_args()

    model = genzoo.load(args.model)
    default_config = model.config

    def score(images, **setting) -> dict:
        report = genzoo.evaluate(images, n=args.n, metrics="fid,precision,recall", ref=args.ref,
                                 data_root=args.data_root, progress=False)
        m = report["metrics"]
        row = {**setting, "fid": m["fid"], "precision": m["precision"], "recall": m["recall"]}
        if "classes" in m:
            row.update(class_entropy=m["classes"]["entropy"], smallest_class=min(m["classes"]["histogram"]))
        print(json.dumps(row), flush=True)
        return row

    rows = []
    for steps in (int(s) for s in args.steps.split(",")):
        for mid_sigma in [None] if steps == 1 else [float(s) for s in args.mid_sigmas.split(",")]:
            model.config = default_config if mid_sigma is None else dataclasses.replace(default_config, mid_sigma=mid_sigma)
            images = model.sample(args.n, seed=args.seed, steps=steps, progress=False)
            rows.append(score(images, source=args.model, steps=steps, mid_sigma=mid_sigma))
    model.config = default_config
    for name in filter(None, args.refine_of.split(",")):
        samples = genzoo.load(name).sample(args.n, seed=args.seed, progress=False)
        rows.append(score(samples, source=name, refine_sigma=None))
        for sigma in (float(s) for s in args.refine_sigmas.split(",")):
            refined = model.refine(samples, steps=1, sigma=sigma, seed=args.seed, progress=False)
            rows.append(score(refined, source=name, refine_sigma=sigma))
    write_json(args.json, {"model": args.model, "n": args.n, "seed": args.seed, "ref": args.ref, "rows": rows})


if __name__ == "__main__":
    main()
