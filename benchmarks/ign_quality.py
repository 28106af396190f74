"""IGN sample quality for f(z), f(f(z)) and f(f(f(z))) in genzoo's MNIST feature space.

    python benchmarks/ign_quality.py --model ign-mnist --data-root ../shared/data [-n 10000] [--json docs/results/ign_quality.json]

The same as `genzoo eval ign -n 10000 --apply K --ref mnist:test` for K = 1, 2, 3.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import genzoo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="ign-mnist")
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("-n", type=int, default=10000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = {}
    for k in (1, 2, 3):
        report = genzoo.evaluate(args.model, n=args.n, apply=k, metrics="fid,kid,precision,recall",
                                 data_root=args.data_root, progress=False)
        rows[f"apply {k}"] = report
        m = report["metrics"]
        c = m["classes"]
        print(f"apply {k}: FID {m['fid']:.1f} KID {m['kid']['mean']:.1f} P {m['precision']:.3f} R {m['recall']:.3f} "
              f"entropy {c['entropy']:.4f} confidence {c['confidence']:.3f} classes {c['histogram']}", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
