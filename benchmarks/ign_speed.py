"""IGN speed against the machine's own limit: images/s and achieved GFLOP/s next to a bare convolution and a GEMM.

    python benchmarks/ign_speed.py [--model ign-mnist] [--rounds 5] [--json benchmarks/results/ign_speed.json]

On the machine it runs on (named in the output), for each precision (fp32, and bf16 autocast):
training images/s at batch 64 and 256 (the method's own training_step and Adam), sampling images/s
at batch 256 (``model.sample``: noise, batching, clamping included), the FLOPs of each counted by
torch's FLOP formulas (flop_registry), and in the same run the GFLOP/s of a bare convolution with the shape of
the network's heaviest layer and of a 2048 x 2048 GEMM. Every figure is the median of ``--rounds``
rounds. Variants measured alongside: sampling with batch norm left unfolded, folded but without the
exact rewrites of the transposed convolutions (genzoo.blocks.fastconv), with ``--compile`` the folded
network through torch.compile (inductor), training with the bottleneck's layers as plain
convolutions instead of matrix products (``train_256_paired``: the two timed alternately), the
training step with f applied four times instead of three (``train_256_passes_paired``, alternately),
channels-last memory format for training, and Adam's foreach and fused implementations (sampling's layouts: benchmarks/ign_inference_forms.py); with
``--layers``, each layer of the folded sampling network timed alone, whose summed time (plus the
noise draw) bounds what any chaining of those kernels can reach. Run it on an idle
machine: another job on the cores halves some figures and not others.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from typing import Callable

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

import genzoo
from genzoo.hardware import cpu_name
from genzoo.precision import autocast
from genzoo.blocks import batchnorm
from genzoo.blocks.fastconv import channels_last_pays, speed_up
from genzoo_ign.inference import fold_batchnorm
from genzoo_ign.network import build_network
from harness import interleaved_seconds, median_seconds, parser, write_json

CPU = torch.device("cpu")


class _FlopCount(TorchDispatchMode):
    """FLOPs of every op torch's counter knows. FlopCounterMode itself cannot be used: its module tracker
    hooks fail inside the autograd.grad calls of genzoo_ign.losses' two-route backward."""

    def __init__(self):
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        count = flop_registry.get(func._overloadpacket)
        if count is not None:
            self.total += count(*args, **kwargs, out_val=out)
        return out


def flops_of(work: Callable[[], object]) -> int:
    with _FlopCount() as counter:
        work()
    return counter.total


def heaviest_conv(net: nn.Module, x: torch.Tensor) -> tuple[nn.Module, torch.Tensor]:
    """The (transposed) convolution of ``net`` with the most FLOPs on input ``x``, and its input."""
    inputs: dict[nn.Module, torch.Tensor] = {}

    def keep(module, inp, out) -> None:  # a hook that returned a value would replace the output
        inputs.setdefault(module, inp[0].detach())

    hooks = [m.register_forward_hook(keep) for m in net.modules() if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d))]
    with torch.no_grad():
        net(x)
    for h in hooks:
        h.remove()
    costs = {m: flops_of(lambda m=m, i=i: m(i)) for m, i in inputs.items()}
    best = max(costs, key=costs.get)
    return copy.deepcopy(best), inputs[best]


def training_step(model, batch: int, precision: str, *, channels_last: bool = False,
                  adam: str = "default") -> Callable[[], None]:
    """One full training step (the method's training_step, backward, Adam) of a copy of ``model``."""
    model = copy.deepcopy(model).train()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    c = model.config
    kwargs = {"foreach": True} if adam == "foreach" else {"fused": True} if adam == "fused" else {"foreach": False}
    opt = torch.optim.Adam(model.net.parameters(), lr=c.lr, betas=(c.beta1, c.beta2), **kwargs)
    x = torch.rand(batch, *model.image_shape)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)

    def step():
        with autocast(precision, CPU):
            loss = model.training_step({"x": x, "y": None, "size": batch})["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def train_rate(model, batch: int, precision: str, rounds: int, **variant) -> tuple[float, float]:
    """(images/s, GFLOP/s) of full training steps."""
    step = training_step(model, batch, precision, **variant)
    seconds = median_seconds(step, rounds)
    return batch / seconds, flops_of(step) / seconds / 1e9


def paired_train_rates(a, b, batch: int, precision: str, rounds: int) -> tuple[float, float]:
    """Images/s of training models ``a`` and ``b``, their steps timed alternately (the machine's drift hits both)."""
    seconds = interleaved_seconds({"a": training_step(a, batch, precision), "b": training_step(b, batch, precision)},
                                  rounds, warmup=2)
    return batch / seconds["a"], batch / seconds["b"]


class FourPassIGN:
    """Mixin: IGN's losses as first written, with f applied four times (f(x), f(z), a frozen f'(f(z)) and f(y)
    with y = f(z) detached), the form genzoo_ign.losses replaces with three passes of equal losses and gradients."""

    def losses(self, x, z):
        from torch.func import functional_call

        from genzoo_ign.losses import distance, smooth_clamp

        c, net = self.config, self.net
        fx, fz = net(x), net(z)
        f_fz = functional_call(net, {n: p.detach() for n, p in net.named_parameters()}, (fz,))
        y = fz.detach()
        rec, idem, tight = distance(fx, x, c.distance), distance(f_fz, fz, c.distance), -distance(net(y), y, c.distance)
        if c.tight_clamp > 0:
            scale = rec if c.clamp_scale == "rec" else distance(fz, z, c.distance)
            tight = smooth_clamp(tight, scale.detach(), c.tight_clamp)
        return {"rec": rec, "idem": idem, "tight": tight}


def four_pass(model):
    """A copy of ``model`` whose training step applies f four times (:class:`FourPassIGN`)."""
    copied = copy.deepcopy(model)
    copied.__class__ = type("FourPass" + type(model).__name__, (FourPassIGN, type(model)), {})
    return copied


def plain_layers(model):
    """A copy of ``model`` whose bottleneck layers are plain nn.Conv2d / nn.ConvTranspose2d (not the matrix-product
    forms genzoo.blocks.fastconv swaps in): the same parameters, for the gain of those forms."""
    c = model.config
    plain = copy.deepcopy(model)
    plain.net = build_network(c.channels, c.image_size, c.bottleneck, c.width, c.norm, decoder=c.decoder)
    plain.net.load_state_dict(model.net.state_dict())
    return plain


def sample_rate(model, batch: int, precision: str, rounds: int) -> tuple[float, float]:
    seconds = median_seconds(lambda: model.sample(batch, seed=0, batch_size=batch, precision=precision), rounds)
    return batch / seconds, flops_of(lambda: model.sample(batch, seed=0, batch_size=batch, precision=precision)) / seconds / 1e9


def net_sample_rate(model, net: nn.Module, batch: int, precision: str, rounds: int,
                    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
                    warmup: int = 2) -> float:
    """Images/s of model.sample's work (noise, the network, the output map) through ``net`` instead of
    the folded network sampling uses, for the gain of the folding and of the rewrites."""
    def work():
        with torch.inference_mode(), autocast(precision, CPU), context():
            z = model.noise_images(genzoo.Noise(0, 0, batch).randn(*model.image_shape, 2))
            return ((net(z) + 1) / 2).clamp(0, 1)

    return batch / median_seconds(work, rounds, warmup)


def unfolded_sample_rate(model, batch: int, precision: str, rounds: int) -> float:
    """The network as trained (batch norm as a separate pass)."""
    model.eval()
    return net_sample_rate(model, model.net, batch, precision, rounds, lambda: batchnorm.source(model.net, "noise"))


def unrewritten_sample_rate(model, batch: int, precision: str, rounds: int) -> float:
    """Batch norm folded, the stride-2 transposed convolutions left as they are."""
    return net_sample_rate(model, fold_batchnorm(model.net, "noise"), batch, precision, rounds)


def compiled_sample_rate(model, batch: int, precision: str, rounds: int) -> tuple[float, float]:
    """(images/s, compile seconds) of the folded network compiled by torch.compile (inductor, default mode)."""
    compiled = torch.compile(speed_up(fold_batchnorm(model.net, "noise"), frozen=True))
    start = time.perf_counter()
    net_sample_rate(model, compiled, batch, precision, 1, warmup=0)
    seconds = time.perf_counter() - start
    return net_sample_rate(model, compiled, batch, precision, rounds), seconds


def layer_breakdown(model, batch: int, precision: str, rounds: int) -> dict:
    """Each layer of the folded sampling network timed alone on its own input, and the noise draw.

    The sum of the layers' times is what the network would take if chaining them cost nothing; its
    FLOPs over that sum is the most a sampling pass can reach with these kernels (``ceiling_gflops``).
    """
    net = model.inference_net("noise")
    layers = [layer for stage in net for layer in stage if not isinstance(layer, nn.Identity)]
    rows, total_ms, total_flops = [], 0.0, 0
    with torch.inference_mode(), autocast(precision, CPU):
        x = model.noise_images(genzoo.Noise(0, 0, batch).randn(*model.image_shape, 2))
        # the network's own layout (a 1-channel NCHW weight also passes is_contiguous(channels_last))
        if channels_last_pays(model.config.image_size):
            x = x.contiguous(memory_format=torch.channels_last)
        for layer in layers:
            seconds = median_seconds(lambda layer=layer, x=x: layer(x), rounds)
            flops = flops_of(lambda layer=layer, x=x: layer(x))
            rows.append({"layer": type(layer).__name__, "input": list(x.shape), "ms": 1000 * seconds,
                         "gflops": flops / seconds / 1e9})
            total_ms += 1000 * seconds
            total_flops += flops
            x = layer(x)
        noise_ms = 1000 * median_seconds(lambda: model.noise_images(genzoo.Noise(0, 0, batch).randn(*model.image_shape, 2)),
                                         rounds)
    return {"layers": rows, "layers_ms": total_ms, "noise_ms": noise_ms,
            "ceiling_gflops": total_flops / (total_ms + noise_ms) * 1e-6,
            "ceiling_images_per_s": batch / (total_ms + noise_ms) * 1000}


def bare_rates(conv: nn.Module, x: torch.Tensor, precision: str, rounds: int) -> dict[str, float]:
    """GFLOP/s of the bare convolution (forward; forward + backward) and of a 2048 GEMM."""
    conv = conv.train().requires_grad_(True)

    def forward():
        with torch.no_grad(), autocast(precision, CPU):
            conv(x)

    def both():
        with autocast(precision, CPU):
            out = conv(x.requires_grad_(True))
        out.float().sum().backward()

    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)

    def gemm():
        with autocast(precision, CPU):
            a @ b

    return {"conv_forward": flops_of(forward) / median_seconds(forward, rounds) / 1e9,
            "conv_forward_backward": flops_of(both) / median_seconds(both, rounds) / 1e9,
            "gemm_2048": flops_of(gemm) / median_seconds(gemm, rounds) / 1e9}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", default="ign-mnist")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--compile", action="store_true",
                   help="also time sampling through torch.compile (about a minute of compiling)")
    p.add_argument("--layers", action="store_true",
                   help="also time each layer of the folded sampling network alone (the ceiling its kernels allow)")
    args = p.parse_args()
    model = genzoo.load(args.model)
    conv, conv_input = heaviest_conv(model.net, torch.rand(256, *model.image_shape))
    result: dict = {"model": args.model, "cpu": cpu_name(), "torch": torch.__version__, "rounds": args.rounds,
                    "heaviest_conv": f"{conv} on input {tuple(conv_input.shape)}", "precisions": {}}
    fresh = type(model)(model.config)
    for precision in args.precisions.split(","):
        row: dict = {}
        row["sample_256"] = dict(zip(("images_per_s", "gflops"), sample_rate(model, 256, precision, args.rounds)))
        row["sample_256_unfolded_images_per_s"] = unfolded_sample_rate(model, 256, precision, args.rounds)
        row["sample_256_without_rewrites_images_per_s"] = unrewritten_sample_rate(model, 256, precision, args.rounds)
        if args.compile:
            rate, seconds = compiled_sample_rate(model, 256, precision, args.rounds)
            row["sample_256_compiled_images_per_s"] = rate
            row["compile_and_first_pass_seconds"] = seconds
        for batch in (64, 256):
            row[f"train_{batch}"] = dict(zip(("images_per_s", "gflops"), train_rate(fresh, batch, precision, args.rounds)))
        dense, plain = paired_train_rates(fresh, plain_layers(fresh), 256, precision, args.rounds)
        row["train_256_paired"] = {"matrix_product_bottleneck_images_per_s": dense, "plain_layers_images_per_s": plain}
        three, four = paired_train_rates(fresh, four_pass(fresh), 256, precision, args.rounds)
        row["train_256_passes_paired"] = {"three_passes_images_per_s": three, "four_passes_images_per_s": four}
        row["train_256_channels_last"] = dict(zip(("images_per_s", "gflops"),
                                                  train_rate(fresh, 256, precision, args.rounds, channels_last=True)))
        for adam in ("foreach", "fused"):
            row[f"train_256_adam_{adam}"] = dict(zip(("images_per_s", "gflops"),
                                                     train_rate(fresh, 256, precision, args.rounds, adam=adam)))
        row["bare"] = bare_rates(conv, conv_input, precision, args.rounds)
        bare = row["bare"]["conv_forward"]
        row["sample_256_share_of_bare_conv"] = row["sample_256"]["gflops"] / bare
        row["train_256_share_of_bare_conv"] = row["train_256"]["gflops"] / bare
        if args.layers:
            row["sample_256_layers"] = layer_breakdown(model, 256, precision, args.rounds)
            row["sample_256_ceiling_share_of_bare_conv"] = row["sample_256_layers"]["ceiling_gflops"] / bare
            for layer in row["sample_256_layers"]["layers"]:
                print(f"  {precision} {layer['layer']:24s} {str(tuple(layer['input'])):20s} {layer['ms']:7.2f} ms "
                      f"{layer['gflops']:7.1f} GFLOP/s", flush=True)
            print(f"  {precision} layers alone {row['sample_256_layers']['layers_ms']:.1f} ms + noise "
                  f"{row['sample_256_layers']['noise_ms']:.1f} ms: ceiling {row['sample_256_layers']['ceiling_images_per_s']:.0f} "
                  f"img/s, {row['sample_256_ceiling_share_of_bare_conv']:.0%} of the bare conv", flush=True)
        result["precisions"][precision] = row
        print(f"{precision}: sample {row['sample_256']['images_per_s']:.0f} img/s ({row['sample_256']['gflops']:.1f} "
              f"GFLOP/s, {row['sample_256_share_of_bare_conv']:.0%} of the bare conv's {bare:.1f}); train b256 "
              f"{row['train_256']['images_per_s']:.0f} img/s ({row['train_256']['gflops']:.1f} GFLOP/s, "
              f"{row['train_256_share_of_bare_conv']:.0%}); train b64 {row['train_64']['images_per_s']:.0f} img/s; "
              f"GEMM {row['bare']['gemm_2048']:.0f} GFLOP/s", flush=True)
    print(json.dumps(result, indent=2))
    write_json(args.json, result)


if __name__ == "__main__":
    main()
