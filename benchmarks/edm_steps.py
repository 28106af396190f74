"""An EDM model's quality against its number of network calls: one evaluation per Heun step count.

    python benchmarks/edm_steps.py --model edm-mnist --data-root DATA --steps 5,10,18,40 -n 2000 \
        [--seed 0] [--metrics fid,kid,precision,recall,accuracy,swd] --json benchmarks/results/edm_steps.json

N Heun steps make 2N - 1 network calls. Each row is ``genzoo eval MODEL --opt steps=N`` on ``-n``
samples against mnist:test, with the seconds generation took on this machine (the CPU is named in
the JSON). Real training digits, blurred and noised, are scored at the same ``-n`` beside them: FID and
KID depend on the number of images.
"""

from __future__ import annotations

import json

import genzoo
from harness import machine, parser, write_json
from reference_rows import rows_at


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("--model", default="edm-mnist")
    p.add_argument("--ref", default="mnist:test")
    p.add_argument("-n", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", default="5,10,18,40", help="comma list of Heun step counts")
    p.add_argument("--metrics", default="fid,kid,precision,recall,accuracy,swd")
    args = p.parse_args()

    model = genzoo.load(args.model)
    rows = []
    for steps in (int(s) for s in args.steps.split(",")):
        report = genzoo.evaluate(model, n=args.n, seed=args.seed, ref=args.ref, metrics=args.metrics,
                                 sample_options={"steps": steps}, data_root=args.data_root, progress=False)
        row = {"steps": steps, "network_calls": model.network_calls(steps), "metrics": report["metrics"],
               "generate_seconds": report["seconds"]["generate"]}
        print(json.dumps({k: v for k, v in row.items() if k != "metrics"} | {"fid": report["metrics"].get("fid")}),
              flush=True)
        rows.append(row)
    references = rows_at(args.n, args.data_root, args.metrics, args.ref)
    write_json(args.json, {"model": args.model, "n": args.n, "seed": args.seed, "ref": args.ref,
                           "hardware": machine(), "rows": rows, "reference_rows": references})


if __name__ == "__main__":
    main()
