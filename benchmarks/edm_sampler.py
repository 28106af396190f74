"""An EDM model's samplers side by side: deterministic Heun, EDM's churn, autoguidance and, for a class-conditional
model, classifier-free guidance (``cfg=W``), at stated network calls.

    python benchmarks/edm_sampler.py --model edm-mnist --data-root DATA -n 10000 \\
        --row "deterministic=steps=18" --row "churn 40=steps=18,s_churn=40" \\
        --row "autoguided w 2=steps=9,guide=edm-mnist-guide,guidance=2" --json benchmarks/results/edm_sampler.json

Each ``--row LABEL=OPTIONS`` is ``genzoo eval MODEL --opt ...`` with the comma-separated sample options
(those of ``genzoo sample edm --opt``) on ``-n`` samples against ``--ref``. The network calls count the
guide's: a guided Heun step (autoguidance or classifier-free) calls two denoisers. Real training digits, blurred and noised, are scored
at the same ``-n`` beside them (FID and KID depend on the number of images).

Rows measured one run at a time (``--no-references``, one ``--row`` each) join in a later run with
``--merge FILE`` (repeatable): their rows come first, and each file must be of the same model, ``-n``,
seed, reference split and precision. ``--merge`` without ``--row`` only scores the reference rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import genzoo
from harness import machine, parser, write_json
from reference_rows import rows_at


def options_of(text: str) -> dict[str, str]:
    pairs = [item.split("=", 1) for item in text.split(",") if item]
    if any(len(pair) != 2 for pair in pairs):
        raise SystemExit(f"a row's options are KEY=VALUE pairs separated by commas, got {text!r}")
    return dict(pairs)


MERGE_KEYS = ("model", "n", "seed", "ref", "precision")


def merged_rows(path: str, args) -> list[dict]:
    """The rows of an earlier run, refused if it measured another model, sample count, seed, split or precision."""
    earlier = json.loads(Path(path).read_text())
    for key in MERGE_KEYS:
        if earlier.get(key) != getattr(args, key):
            raise SystemExit(f"{path}: its {key} is {earlier.get(key)!r}, this run's is {getattr(args, key)!r}; "
                             f"merge only runs of the same model, -n, seed, --ref and --precision")
    return earlier["rows"]


SAMPLER_FIELDS = {"steps": "sample_steps", "s_churn": "s_churn", "s_tmin": "s_tmin", "s_tmax": "s_tmax",
                  "s_noise": "s_noise", "guide": "guide", "guidance": "guidance", "cfg": "cfg"}


def sampler_settings(model, options: dict[str, str]) -> dict[str, str]:
    """Every sampler setting a row ran with: its options over the model's exported defaults (a row's label
    names its options; an exported default such as s_churn applies where a row leaves it out)."""
    return {key: str(options.get(key, getattr(model.config, field))) for key, field in SAMPLER_FIELDS.items()
            if hasattr(model.config, field)}


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("--model", default="edm-mnist")
    p.add_argument("--ref", default="mnist:test")
    p.add_argument("-n", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--row", action="append", default=[], metavar="LABEL=OPTIONS",
                   help="a label, '=', then sample options KEY=VALUE,KEY=VALUE (repeatable)")
    p.add_argument("--metrics", default="fid,kid,precision,recall,accuracy,swd")
    p.add_argument("--precision", default="fp32", help="sampling precision: fp32 (the catalogue's) or bf16 (faster "
                   "where native; every row alike, so rows stay comparable with one another)")
    p.add_argument("--no-references", action="store_true", help="skip the same-n reference rows")
    p.add_argument("--merge", action="append", default=[], metavar="FILE",
                   help="rows of an earlier run of this script (same model, -n, seed, --ref, --precision), kept first")
    args = p.parse_args()
    if not args.row and not args.merge:
        p.error("give at least one --row LABEL=OPTIONS or --merge FILE")
    merged = [row for path in args.merge for row in merged_rows(path, args)]

    model = genzoo.load(args.model)
    rows = list(merged)
    for spec in args.row:
        label, _, text = spec.partition("=")
        options = options_of(text)
        report = genzoo.evaluate(model, n=args.n, seed=args.seed, ref=args.ref, metrics=args.metrics,
                                 sample_options=options, data_root=args.data_root, progress=False,
                                 precision=args.precision)
        steps = int(options.get("steps", model.config.sample_steps))
        guidance = float(options.get("guidance", model.config.guidance))
        cfg = float(options.get("cfg", getattr(model.config, "cfg", 1.0)))
        row = {"label": label, "options": options, "sampler": sampler_settings(model, options),
               "network_calls": model.network_calls(steps, guidance, cfg),
               "metrics": report["metrics"], "generate_seconds": report["seconds"]["generate"]}
        print(json.dumps({k: v for k, v in row.items() if k != "metrics"}
                         | {k: report["metrics"].get(k) for k in ("fid", "precision", "recall", "swd")}), flush=True)
        rows.append(row)
    references = {} if args.no_references else rows_at(args.n, args.data_root, args.metrics, args.ref)
    write_json(args.json, {"model": args.model, "n": args.n, "seed": args.seed, "ref": args.ref, "precision": args.precision,
                           "hardware": machine(), "rows": rows, "reference_rows": references})


if __name__ == "__main__":
    main()
