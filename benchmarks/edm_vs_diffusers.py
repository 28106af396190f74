"""genzoo's edm beside what a user would write instead: a diffusers ``UNet2DModel`` of the same parameter count,
trained with the same EDM loss on the same CIFAR-10 batches, in the same precision, in one process.

    pip install diffusers        # a benchmark dependency only; genzoo never imports it
    python benchmarks/edm_vs_diffusers.py --data-root DIR --rounds 10 --json benchmarks/results/edm_vs_diffusers.json

Training: steps per second at batch 64 of class-conditional CIFAR-10 (genzoo's ``cifar10`` subset), bf16
autocast where the CPU runs it natively (else fp32; ``--precision``), Adam at lr 1e-3 for both; the two steps
alternate within every round so that a change in the machine's load hits both alike. genzoo's step is its own
training_step (EDM's preconditioning, loss weight and lognormal levels); the peer's is the same loss written
around ``UNet2DModel(c_in x, c_noise, class_labels)``. Sampling: images per second of a batch of 256 through
the same Heun sampler (``genzoo.blocks.heun``, 5 steps, 9 network calls each) with each network as the
denoiser, in ``--sample-precision`` (fp32 by default, as ``genzoo sample`` runs). The peer is diffusers'
defaults at block widths (64, 120, 120), one block per level and 8 groups: 3.81M parameters against edm's 3.83M
(its middle block has self-attention, diffusers' default; edm's default has none).
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn

import genzoo
from genzoo.blocks import c_noise, edm_scalings, heun, to_signed
from genzoo.precision import autocast, cpu_has_native_bf16
from genzoo_edm import EDM
from harness import machine, parser, write_json

CPU = torch.device("cpu")


class DiffusersEDM(nn.Module):
    """EDM's preconditioning and loss around a diffusers UNet2DModel: D(x) = c_skip x + c_out F(c_in x, c_noise)."""

    def __init__(self, config):
        super().__init__()
        from diffusers import UNet2DModel

        self.config = config
        self.net = UNet2DModel(sample_size=32, in_channels=3, out_channels=3, layers_per_block=1,
                               block_out_channels=(64, 120, 120), down_block_types=("DownBlock2D",) * 3,
                               up_block_types=("UpBlock2D",) * 3, norm_num_groups=8, num_class_embeds=10)

    def denoise(self, x, sigma, labels):
        c_skip, c_out, c_in = (s.view(-1, 1, 1, 1) for s in edm_scalings(sigma, self.config.sigma_data))
        return c_skip * x + c_out * self.net(c_in * x, c_noise(sigma), class_labels=labels).sample.to(x.dtype)

    def training_step(self, batch):
        c = self.config
        x = to_signed(batch["x"])
        sigma = (torch.randn(x.shape[0]) * c.p_std + c.p_mean).exp()
        noisy = x + sigma.view(-1, 1, 1, 1) * torch.randn_like(x)
        weight = (sigma ** 2 + c.sigma_data ** 2) / (sigma * c.sigma_data) ** 2
        error = (self.denoise(noisy, sigma, batch["y"]).float() - x).square().flatten(1).mean(1)
        return {"loss": (weight * error).mean()}


def trainer(model, precision: str):
    optimizer = torch.optim.Adam(model.net.parameters(), lr=1e-3)

    def step(batch) -> None:
        with autocast(precision, CPU):
            loss = model.training_step(batch)["loss"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return step


def sampler(model, labels: torch.Tensor, precision: str):
    x = 80.0 * torch.randn(len(labels), 3, 32, 32, generator=torch.Generator().manual_seed(0))
    sigmas = [float(s) for s in genzoo.blocks.karras_sigmas(5, 0.002, 80.0, 7.0).flip(0)] + [0.0]

    def denoise(images, sigma):
        return model.denoise(images, torch.full((len(images),), sigma), labels)

    def run() -> None:
        with torch.no_grad(), autocast(precision, CPU):
            heun(denoise, x, sigmas)
    return run


def alternating(works: dict[str, callable], rounds: int, argument=None) -> dict[str, list[float]]:
    """Each work once per round, in turn; the first round is a warm-up."""
    times = {name: [] for name in works}
    for r in range(rounds + 1):
        for name, work in works.items():
            start = time.perf_counter()
            work(argument(r)) if argument else work()
            if r:
                times[name].append(time.perf_counter() - start)
    return times


def main() -> None:
    p = parser(__doc__, data=True)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--sample-rounds", type=int, default=3)
    p.add_argument("--precision", default="auto", help="training precision: auto (bf16 where native), fp32, bf16")
    p.add_argument("--sample-precision", default="fp32")
    args = p.parse_args()
    native = "bf16" if cpu_has_native_bf16() else "fp32"
    precision = native if args.precision == "auto" else args.precision
    data = genzoo.load_dataset("cifar10", args.data_root)
    torch.manual_seed(0)
    ours = EDM({"channels": 3, "image_size": 32, "num_classes": 10}).train()
    theirs = DiffusersEDM(ours.config).train()
    parameters = {name: sum(p.numel() for p in m.net.parameters()) for name, m in (("genzoo", ours), ("diffusers", theirs))}

    def batch(r: int):
        index = torch.arange(64) + 64 * r
        return {"x": data.floats(index), "y": data.labels[index], "size": 64, "step": r, "steps": 1000}

    train = alternating({"genzoo": trainer(ours, precision), "diffusers": trainer(theirs, precision)}, args.rounds, batch)
    labels = torch.arange(256) % 10
    ours.eval(), theirs.eval()
    sample = alternating({"genzoo": sampler(ours, labels, args.sample_precision),
                          "diffusers": sampler(theirs, labels, args.sample_precision)}, args.sample_rounds)
    result = {"hardware": machine(), "training_precision": precision, "sampling_precision": args.sample_precision,
              "batch_size": 64, "rounds": args.rounds, "parameters": parameters, "rows": {}}
    for name in ("genzoo", "diffusers"):
        step = statistics.median(train[name])
        batch_seconds = statistics.median(sample[name])
        result["rows"][name] = {"seconds_per_step": round(step, 4), "steps_per_second": round(1 / step, 3),
                                "sample_images_per_second_9_calls": round(256 / batch_seconds, 2)}
    result["genzoo_over_diffusers"] = {
        "training": round(statistics.median(train["diffusers"]) / statistics.median(train["genzoo"]), 2),
        "sampling": round(statistics.median(sample["diffusers"]) / statistics.median(sample["genzoo"]), 2)}
    print(result)
    write_json(args.json, result)


if __name__ == "__main__":
    main()
