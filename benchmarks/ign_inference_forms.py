"""Sampling through four exact forms of each bundled IGN network, interleaved, on the machine it runs on.

    python benchmarks/ign_inference_forms.py [--models ign-mnist,ign-cifar10,ign-celeba64] [--rounds 7] [--json OUT]

Forms: the folded network in the default (NCHW) layout, the same with channels-last weights, the
folded network through torch.compile (inductor, default mode; compiled once before timing), and
through TorchScript's freeze + optimize_for_inference. Each round times one batch of 256 noise
inputs through every form in turn, so a change in the machine's speed hits all of them alike; the
figure is the median over ``--rounds`` rounds, in images/s. The largest difference to the folded
network's images is printed for each form. What genzoo.blocks.fastconv chose from it: channels-last
from 32x32 up.
"""

from __future__ import annotations

import json
import warnings

import torch

import genzoo
from genzoo.hardware import cpu_name
from genzoo.blocks.fastconv import speed_up
from genzoo_ign.inference import fold_batchnorm
from harness import interleaved_seconds, parser, write_json


def folded(model) -> torch.nn.Module:
    """The sampling network with its faster exact layers, in the default (NCHW) layout."""
    return speed_up(fold_batchnorm(model.net, "noise"), frozen=True)


def forms(model) -> dict[str, torch.nn.Module]:
    nets = {"folded": folded(model),
            "channels_last": folded(model).to(memory_format=torch.channels_last),
            "compiled": torch.compile(folded(model))}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # TorchScript's deprecation notice: TorchScript is one of the forms measured
        nets["torchscript"] = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(folded(model))))
    return nets


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--models", default="ign-mnist,ign-cifar10,ign-celeba64")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--batch", type=int, default=256)
    args = p.parse_args()
    result: dict = {"cpu": cpu_name(), "torch": torch.__version__, "batch": args.batch, "rounds": args.rounds,
                    "precision": "fp32", "images_per_s": {}, "max_abs_difference": {}}
    for name in args.models.split(","):
        model = genzoo.load(name)
        z = model.noise_images(genzoo.Noise(0, 0, args.batch).randn(*model.image_shape, 2))
        nets = forms(model)
        with torch.no_grad():
            reference = nets["folded"](z)
            for _ in range(2):  # warm-up (and torch.compile's compilation)
                outputs = {key: net(z) for key, net in nets.items()}
            result["max_abs_difference"][name] = {key: float((out - reference).abs().max()) for key, out in outputs.items()}
            seconds = interleaved_seconds({key: (lambda net=net: net(z)) for key, net in nets.items()}, args.rounds,
                                          warmup=0)
        result["images_per_s"][name] = {key: args.batch / t for key, t in seconds.items()}
        print(name, {key: round(v) for key, v in result["images_per_s"][name].items()}, flush=True)
    print(json.dumps(result, indent=2))
    write_json(args.json, result)


if __name__ == "__main__":
    main()
