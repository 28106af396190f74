"""A model directory whose weights are the uniform mean of some of a run's checkpoints, to score with `genzoo eval`.

    python benchmarks/average_checkpoints.py runs/edm-mnist-13000 --weights raw --steps 5000,5500,6000 \\
        --storage-dtype float16 --out runs/ema/rawmean-5000-6000
    genzoo eval runs/ema/rawmean-5000-6000 -n 2000 --ref mnist:test --metrics fid,precision,recall,swd \\
        --precision bf16 --data-root DIR

``--weights raw`` averages the optimised weights, ``--weights ema`` the moving averages the run kept; one
step gives that checkpoint's weights alone. Each checkpoint is read and verified as `genzoo export
--checkpoint` reads it, and the result is written as export writes (``--storage-dtype`` as there), its
provenance naming the averaged steps. It compares averaging windows after a run without training again
(how long an EMA pays).
"""

from __future__ import annotations

import argparse

from genzoo.exporting import STORAGE_DTYPES
from genzoo.provenance import portable_provenance
from genzoo.training.checkpoints import model_from_checkpoint
from genzoo.weights import save_pretrained


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a training run's directory")
    p.add_argument("--weights", choices=("raw", "ema"), default="ema")
    p.add_argument("--steps", required=True, help="comma list of kept checkpoint steps to average")
    p.add_argument("--storage-dtype", choices=STORAGE_DTYPES, default="float32")
    p.add_argument("--out", required=True)
    args = p.parse_args()

    steps = [int(s) for s in args.steps.split(",")]
    model, provenance = model_from_checkpoint(args.run, steps[-1], args.weights)
    state = {name: tensor.double() for name, tensor in model.state_dict().items()}
    for step in steps[:-1]:
        for name, tensor in model_from_checkpoint(args.run, step, args.weights)[0].state_dict().items():
            state[name] += tensor.double()
    model.load_state_dict({name: (total / len(steps)).to(model.state_dict()[name].dtype) for name, total in state.items()})
    provenance = {**portable_provenance(provenance), "averaged": {"weights": args.weights, "steps": steps}}
    save_pretrained(model, args.out, storage_dtype=None if args.storage_dtype == "float32" else args.storage_dtype,
                    provenance=provenance, training_networks=False)
    print(f"{args.out}: mean of the {args.weights} weights at steps {args.steps}")


if __name__ == "__main__":
    main()
