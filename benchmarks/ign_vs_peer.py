"""genzoo's ign beside IGN as a user would write it from the paper: the same network, batch and precision, timed
alternately in one process.

    python benchmarks/ign_vs_peer.py --model ign-mnist --rounds 10 --json benchmarks/results/ign_vs_peer.json

The peer follows the paper's training listing as reproductions write it: f and a frozen copy f' refreshed from f
at every step (``load_state_dict``), four passes (f(x), f(z), f(f(z) detached) for the tightness term, f'(f(z))
for idempotence), squared distances, the paper's weights (20, 20, 2.5) and Adam; its network is the model's
architecture built with torch's own BatchNorm2d (genzoo.blocks.dcgan), its noise ``torch.randn_like(x)``.
genzoo's step is the method's own training step through genzoo's engine (three passes, one of them routed two
ways). Sampling: ``model.sample`` (batch norm folded into the convolutions, the exact faster layer forms) against
the peer's ``f(z)`` in eval mode under ``torch.no_grad()``, batch 256. Every figure is the median of
``--rounds``, the two alternating within each round. Run it on an idle machine.
"""

from __future__ import annotations

import copy

import torch

import genzoo
from genzoo.blocks import dcgan
from genzoo.precision import autocast
from harness import interleaved_seconds, machine, parser, write_json
from train_step_speed import one_step, optimizers

CPU = torch.device("cpu")


def peer_network(model) -> torch.nn.Module:
    c = model.config
    net = torch.nn.Sequential(dcgan.encoder(c.channels, c.image_size, c.width, c.bottleneck, c.norm),
                              dcgan.decoder(c.channels, c.image_size, c.width, c.bottleneck, c.norm))
    return dcgan.initialise(net)


class Peer:
    """The paper's training step, written plainly."""

    def __init__(self, net: torch.nn.Module, lr: float, betas: tuple[float, float]):
        self.f, self.f_copy = net, copy.deepcopy(net).requires_grad_(False)
        self.opt = torch.optim.Adam(self.f.parameters(), lr=lr, betas=betas)

    def step(self, x: torch.Tensor) -> None:
        z = torch.randn_like(x)
        self.f_copy.load_state_dict(self.f.state_dict())
        fx, fz = self.f(x), self.f(z)
        f_z = fz.detach()
        ff_z = self.f(f_z)
        f_fz = self.f_copy(fz)
        loss_rec = (fx - x).pow(2).mean()
        loss_idem = (f_fz - fz).pow(2).mean()
        loss_tight = -(ff_z - f_z).pow(2).mean()
        loss = 20 * loss_rec + 20 * loss_idem + 2.5 * loss_tight
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()

    @torch.no_grad()
    def sample(self, n: int, shape: tuple[int, ...]) -> torch.Tensor:
        self.f.eval()
        images = (self.f(torch.randn(n, *shape)) + 1) / 2
        self.f.train()
        return images.clamp(0, 1)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", default="ign-mnist")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--batch-size", type=int, default=64)
    args = p.parse_args()
    rows = {}
    for precision in args.precisions.split(","):
        torch.manual_seed(0)
        model = genzoo.load(args.model).train()
        opts = optimizers(model, 10_000)
        peer = Peer(peer_network(model), model.config.lr, (model.config.beta1, model.config.beta2))
        shape = model.image_shape
        x = torch.rand(args.batch_size, *shape)
        batch = {"x": x, "y": None, "size": args.batch_size, "step": 0, "steps": 10_000}
        counter = [0]

        def genzoo_step() -> None:
            counter[0] += 1
            one_step(model, opts, batch, counter[0], precision)

        def peer_step() -> None:
            with autocast(precision, CPU):
                peer.step(x * 2 - 1)

        train = interleaved_seconds({"genzoo": genzoo_step, "peer": peer_step}, args.rounds)
        model.eval()

        def peer_sample() -> None:
            with autocast(precision, CPU):
                peer.sample(256, shape)

        sample = interleaved_seconds({"genzoo": lambda: model.sample(256, seed=0, batch_size=256, precision=precision),
                                      "peer": peer_sample}, args.rounds)
        rows[precision] = {
            "train_images_per_second": {k: round(args.batch_size / v, 1) for k, v in train.items()},
            "sample_images_per_second": {k: round(256 / v, 1) for k, v in sample.items()},
            "genzoo_over_peer": {"training": round(train["peer"] / train["genzoo"], 2),
                                 "sampling": round(sample["peer"] / sample["genzoo"], 2)}}
        print(precision, rows[precision], flush=True)
    write_json(args.json, {"model": args.model, "batch_size": args.batch_size, "rounds": args.rounds,
                           "hardware": machine(), "precisions": rows})


if __name__ == "__main__":
    main()
