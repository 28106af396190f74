"""What held consistency training from scratch back: the dropout masks of student and teacher, and the
noise level's input scale. Two measurements.

1. The mask noise (``--model M``, no training): on 256 test digits in train mode, pairs of adjacent
   levels of the discretisation N drawn by their lognormal mass, the median per-image L2 distance
   between the student's output f(x + sigma_{i+1} z, sigma_{i+1}) and the teacher's f(x + sigma_i z,
   sigma_i), with one shared dropout mask and with independent masks; and with dropout off (the
   consistency signal alone). The difference is the noise independent masks add to every target.

       python benchmarks/consistency_diagnostic.py masks --model consistency-mnist --data-root DATA

2. Short runs from scratch (``train``): the same recipe with and without each fix (shared masks;
   c_noise = ln(sigma)/4 against 250 ln(sigma)), each scored at every checkpoint on ``-n`` samples
   (one step, and two steps at mid_sigma 0.821): FID, recall and class entropy in features-mnist,
   beside the reference rows (real, blurred and noised training digits) scored at the same ``-n``.
   The variant with independent masks is a subclass defined here (it is not an option of the
   product).

       python benchmarks/consistency_diagnostic.py train --data-root DATA --steps 600 --batch-size 64 \
           --variants shared-log4,independent-log4,shared-250,independent-250 --out runs/ct-diagnostic \
           --json benchmarks/results/consistency_diagnostic.json
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch

import genzoo
from genzoo_consistency import Consistency
from genzoo_consistency.curriculum import lognormal_weights
from genzoo_consistency.losses import pseudo_huber
from genzoo.blocks.karras import karras_sigmas
from harness import parser, write_json
from reference_rows import rows_at

VARIANTS = {"shared-log4": (True, 0.25), "independent-log4": (False, 0.25), "shared-250": (True, 250.0),
            "independent-250": (False, 250.0)}


class IndependentMasks(Consistency):
    """Consistency training as it was before the fix: the teacher's pass and the student's pass each draw
    their own dropout mask."""

    def training_step(self, batch):
        c = self.config
        x = batch["x"] * 2 - 1
        high, low, logged = self._ict_pair(x.shape[0], int(batch["step"]), x.device)
        z = torch.randn_like(x)
        boundary = (low <= c.sigma_min).view(-1, 1, 1, 1)
        with torch.no_grad():
            teacher = self.denoise(x + low.view(-1, 1, 1, 1) * z, low.clamp_min(c.sigma_min))
        student = self.denoise(x + high.view(-1, 1, 1, 1) * z, high)
        target = torch.where(boundary, x + low.view(-1, 1, 1, 1) * z, teacher)
        huber_c = c.huber_c if c.huber_c is not None else 0.00054 * math.sqrt(x[0].numel())
        distance = pseudo_huber(student.float(), target.float(), huber_c)
        return {"loss": (distance / (high - low)).mean(), "distance": distance.mean(), **logged}


@torch.no_grad()
def mask_noise(model: Consistency, images: torch.Tensor, levels: int, seed: int = 0) -> dict[str, float]:
    """Median per-image L2 distance of student and teacher outputs at adjacent levels of N = ``levels``."""
    c = model.config
    sigmas = karras_sigmas(levels, c.sigma_min, c.sigma_max, c.rho)
    generator = torch.Generator().manual_seed(seed)
    index = torch.multinomial(lognormal_weights(sigmas, c.p_mean, c.p_std), len(images), replacement=True,
                              generator=generator)
    low, high = sigmas[index].float(), sigmas[index + 1].float()
    x = images * 2 - 1
    z = torch.randn(x.shape, generator=generator)

    def pair(shared: bool, train: bool) -> float:
        model.train(train)
        torch.manual_seed(seed)
        state = torch.get_rng_state()
        teacher = model.denoise(x + low.view(-1, 1, 1, 1) * z, low)
        if shared:
            torch.set_rng_state(state)
        student = model.denoise(x + high.view(-1, 1, 1, 1) * z, high)
        return float((student - teacher).flatten(1).norm(dim=1).median())

    result = {"levels": levels, "shared_mask": pair(True, True), "independent_masks": pair(False, True),
              "no_dropout": pair(True, False)}
    model.eval()
    return result


def score(model, n: int, seed: int, data_root: str | None, steps: int) -> dict[str, float]:
    images = model.sample(n, seed=seed, steps=steps, progress=False)
    report = genzoo.evaluate(images, n=n, metrics="fid,recall,accuracy", ref="mnist:test", data_root=data_root,
                             progress=False)
    m = report["metrics"]
    return {"fid": round(m["fid"], 1), "recall": round(m["recall"], 3),
            "class_entropy": round(m["classes"]["entropy"], 3)}


def run_masks(args) -> dict:
    model = genzoo.load(args.model)
    data = genzoo.load_dataset("mnist:test", args.data_root)
    images = data.floats(torch.randperm(len(data), generator=torch.Generator().manual_seed(0))[:256])
    rows = [mask_noise(model, images, levels) for levels in (11, 41, 161, 641, 1281)]
    for row in rows:
        print(json.dumps(row), flush=True)
    return {"model": args.model, "images": 256, "rows": rows}


def run_training(args) -> dict:
    out = Path(args.out)
    results = []
    for name in args.variants.split(","):
        shared, scale = VARIANTS[name]
        cls = Consistency if shared else IndependentMasks
        start = time.time()
        run = genzoo.fit(cls, steps=args.steps, out=out / name, dataset="mnist", data_root=args.data_root,
                         batch_size=args.batch_size, config={"noise_scale": scale, "lr": args.lr},
                         checkpoint_every=args.every, keep_checkpoints=args.steps // args.every + 1,
                         sample_every=args.every, progress=False, precision="fp32")
        seconds = round(time.time() - start, 1)
        curve = []
        for step in range(args.every, args.steps + 1, args.every):
            from genzoo.training.checkpoints import model_from_checkpoint

            model, _ = model_from_checkpoint(run, step)
            row = {"step": step, "one_step": score(model, args.n, args.seed, args.data_root, 1),
                   "two_steps": score(model, args.n, args.seed, args.data_root, 2)}
            print(json.dumps({"variant": name, **row}), flush=True)
            curve.append(row)
        results.append({"variant": name, "shared_mask": shared, "noise_scale": scale, "training_seconds": seconds,
                        "curve": curve})
    references = {name: {"fid": round(m["fid"], 1), "recall": round(m["recall"], 3)}
                  for name, m in rows_at(args.n, args.data_root, "fid,recall").items()}
    return {"steps": args.steps, "batch_size": args.batch_size, "lr": args.lr, "n": args.n, "seed": args.seed,
            "variants": results, "reference_rows": references}


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("what", choices=("masks", "train"))
    p.add_argument("--model", default="consistency-mnist")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--every", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--out", default="runs/ct-diagnostic")
    p.add_argument("-n", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    result = run_masks(args) if args.what == "masks" else run_training(args)
    write_json(args.json, result)


if __name__ == "__main__":
    main()
