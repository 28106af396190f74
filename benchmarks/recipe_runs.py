"""Collect short recipe runs (``genzoo fit`` folders, each scored by ``genzoo eval ... --json RUN/eval.json``) into
one results file: each run's command, the settings it changed, its mean training loss over the last fifth of its
steps, its wall time, and the scores.

    python benchmarks/recipe_runs.py runs/recipe/base runs/recipe/attn ... --json benchmarks/results/edm_cifar10_recipe.json

The commands are the runs' own (from fit.json and eval.json), with this machine's paths made portable; the
wall time is the fit's training seconds from its config.json provenance (say in the results which runs shared
the machine with other work).
"""

from __future__ import annotations

import json
from pathlib import Path

from genzoo.provenance import portable_command
from harness import machine, parser, write_json

SCORES = ("fid", "swd", "precision", "recall", "accuracy")


def run_row(folder: Path) -> dict:
    fit = json.loads((folder / "fit.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    report = json.loads((folder / "eval.json").read_text())
    steps = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    last = steps[-max(1, len(steps) // 5):]
    metrics = report["metrics"]
    return {
        "run": folder.name,
        "command": portable_command(fit["commands"][-1]),
        "settings": {key: value for key, value in fit["settings"].items() if key not in ("config", "data")},
        "changed": [word for word in fit["commands"][-1].split() if "=" in word and not word.startswith("--")],
        "steps": len(steps),
        "mean_loss_last_fifth": round(sum(s["loss"] for s in last) / len(last), 4),
        "training_seconds": config["provenance"].get("training_seconds"),
        "n": report["n"], "reference": report["reference"]["spec"], "features": report["features"]["name"],
        **{key: (round(metrics[key], 4) if isinstance(metrics.get(key), float) else metrics.get(key)) for key in SCORES},
    }


def main() -> None:
    p = parser(__doc__)
    p.add_argument("runs", nargs="+", help="run folders, each holding fit.json, config.json and eval.json")
    p.add_argument("--eval-command", default="genzoo eval runs/recipe/RUN -n 1000 --ref cifar10:test --metrics "
                   "fid,precision,recall,accuracy,swd --precision bf16 --data-root DIR --json runs/recipe/RUN/eval.json")
    args = p.parse_args()
    rows = [run_row(Path(folder)) for folder in args.runs]
    for row in rows:
        print(json.dumps({k: row[k] for k in ("run", "changed", "mean_loss_last_fifth", "fid", "swd", "accuracy")}))
    write_json(args.json, {"hardware": machine(), "eval_command": args.eval_command, "rows": rows})


if __name__ == "__main__":
    main()
