"""A GAN and IGN on the same network, trained for the same steps at the same batch: their samples
scored side by side, with reference rows at the same number of images.

    python benchmarks/gan_vs_ign.py --gan runs/gan-1000 --ign runs/ign-1000 --data-root DATA -n 10000 \
        --json benchmarks/results/gan_vs_ign.json
    python benchmarks/gan_vs_ign.py --gan runs/gan-mnist --ign runs/ign-3000 --data-root DATA -n 10000 \
        --json benchmarks/results/gan_vs_ign_3000.json

Each model is a run folder or a catalogue name. FID, KID, precision, recall and class entropy in
features-mnist, SWD on pixels, against mnist:test.
"""

from __future__ import annotations

import json
from pathlib import Path

import genzoo
from harness import machine, parser, write_json
from reference_rows import rows_at

METRICS = "fid,kid,precision,recall,accuracy,swd"


def trained_steps(source: str) -> int | None:
    """The steps a run folder trained for (its last command's --steps); None for a catalogue name."""
    record = Path(source) / "fit.json"
    return json.loads(record.read_text())["options"]["steps"] if record.is_file() else None


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("--gan", required=True)
    p.add_argument("--ign", required=True)
    p.add_argument("-n", type=int, default=10000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    runs = {}
    for method, source in (("gan", args.gan), ("ign", args.ign)):
        model = genzoo.load(source)
        report = genzoo.evaluate(model, n=args.n, seed=args.seed, metrics=METRICS, data_root=args.data_root,
                                 progress=False)
        runs[method] = {"source": Path(source).name, "steps": trained_steps(source), "metrics": report["metrics"],
                        "generate_seconds": report["seconds"]["generate"]}
        print(json.dumps({"method": method, "fid": report["metrics"]["fid"]}), flush=True)
    write_json(args.json, {"n": args.n, "seed": args.seed, "ref": "mnist:test", "hardware": machine(), "runs": runs,
                           "reference_rows": rows_at(args.n, args.data_root, METRICS)})


if __name__ == "__main__":
    main()
