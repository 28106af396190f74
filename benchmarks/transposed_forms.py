"""Which exact form of a 4x4 stride-2 transposed convolution is fastest here, layer by layer.

    python benchmarks/transposed_forms.py [--batch 256] [--rounds 7] [--precision fp32] [--json OUT]

For every ConvTranspose2d(k=4, s=2, p=1) of the IGN networks at 28x28 (ign-mnist), 32x32
(ign-cifar10, width 64) and 64x64 (the CelebA configuration, width 32), the forward time at
inference (torch.inference_mode) of the layer itself, its sub-pixel form (3x3 conv to 4C + pixel
shuffle; genzoo.blocks.fastconv), its phase form (2x2 conv to 4C + interleave) and its GEMM form
(one matrix product to the 16 taps of every input pixel + 16 strided overlap-adds, channels-last
inside); the last two are defined here, since genzoo does not use them. Median of ``--rounds``,
interleaved so that a change in the machine's load hits every form alike. This is what decides
which layers ``genzoo.blocks.fastconv.speed_up`` rewrites. Run it on an idle machine.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from genzoo.hardware import cpu_name
from genzoo.precision import autocast
from genzoo.blocks.fastconv import SubpixelTransposedConv
from genzoo_ign.network import build_network
from harness import interleaved_seconds, parser, write_json

NETWORKS = {"ign-mnist": (1, 28, 128, 64), "ign-cifar10": (3, 32, 128, 64), "ign-celeba64": (3, 64, 256, 32)}


def phase_kernels(weight: torch.Tensor, taps: tuple[tuple[int | None, ...], ...]) -> torch.Tensor:
    """The ordinary-convolution kernels of each output phase of a stride-2 transposed conv.

    ``weight`` is the ConvTranspose2d's (C_in, C_out, 4, 4); ``taps[r][u]`` is the kernel row (and,
    for columns, the kernel column) that window offset u of phase r reads, None for none. Returns
    (2, 2, C_out, C_in, k, k) with k = len(taps[0]), indexed by the phase (r, s) first.
    """
    c_in, c_out = weight.shape[:2]
    k = len(taps[0])
    kernel = weight.new_zeros(2, 2, c_out, c_in, k, k)
    for r in range(2):
        for s in range(2):
            for u, ky in enumerate(taps[r]):
                for v, kx in enumerate(taps[s]):
                    if ky is not None and kx is not None:
                        kernel[r, s, :, :, u, v] = weight[:, :, ky, kx].t()
    return kernel


class PhaseTransposedConv(nn.Module):
    """ConvTranspose2d(k=4, s=2, p=1) as one 2x2 convolution to 4 C channels + an interleave, the same function.

    Each output phase (r, s) (row parity r, column parity s) sees a 2x2 window of the input: rows
    a - 1, a (kernel rows 3, 1) for r = 0 and a, a + 1 (rows 2, 0) for r = 1; columns likewise. On the
    input padded by 1, one 2x2 convolution computes all four phases at (H + 1) x (W + 1) positions;
    phase (r, s) is its window starting at (r, s). Its FLOPs are the transposed convolution's times
    (H + 1)(W + 1) / (H W), against 9/4 for the sub-pixel 3x3 form, which is why this form is the
    candidate for wide layers.
    """

    TAP = ((3, 1), (2, 0))

    def __init__(self, layer: nn.ConvTranspose2d):
        super().__init__()
        weight = layer.weight.detach()
        c_in, c_out = weight.shape[:2]
        self.c_out = c_out
        self.register_buffer("kernel", phase_kernels(weight, self.TAP).reshape(4 * c_out, c_in, 2, 2))
        bias = layer.bias.detach() if layer.bias is not None else weight.new_zeros(c_out)
        self.register_buffer("phase_bias", bias.repeat(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, _, h, w = x.shape
        phases = F.conv2d(F.pad(x, (1, 1, 1, 1)), self.kernel.to(x.dtype), self.phase_bias.to(x.dtype))
        phases = phases.view(n, 2, 2, self.c_out, h + 1, w + 1)
        out = x.new_empty(n, self.c_out, h, 2, w, 2)
        for r in range(2):
            for s in range(2):
                out[:, :, :, r, :, s] = phases[:, r, s, :, r:r + h, s:s + w]
        return out.view(n, self.c_out, 2 * h, 2 * w)


class GemmTransposedConv(nn.Module):
    """ConvTranspose2d(k=4, s=2, p=1) as im2col's adjoint: X (NHW x C_in) @ W (C_in x 16 C_out), then each
    tap (kh, kw) of input pixel (a, b) is added at output (2a + kh - 1, 2b + kw - 1)."""

    def __init__(self, layer: nn.ConvTranspose2d):
        super().__init__()
        c_in, c_out = layer.weight.shape[:2]
        self.c_out = c_out
        self.register_buffer("matrix", layer.weight.detach().permute(0, 2, 3, 1).reshape(c_in, 16 * c_out).clone())
        self.register_buffer("out_bias", layer.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c_in, h, w = x.shape
        rows = x.permute(0, 2, 3, 1).reshape(-1, c_in)
        taps = (rows @ self.matrix.to(x.dtype)).view(n, h, w, 4, 4, self.c_out)
        out = taps.new_zeros(n, 2 * h + 2, 2 * w + 2, self.c_out)
        for kh in range(4):
            for kw in range(4):
                out[:, kh:kh + 2 * h:2, kw:kw + 2 * w:2].add_(taps[:, :, :, kh, kw])
        out = out[:, 1:2 * h + 1, 1:2 * w + 1] + self.out_bias.to(x.dtype)
        return out.permute(0, 3, 1, 2)


def layers_with_inputs(channels: int, size: int, bottleneck: int, width: int, batch: int):
    net = build_network(channels, size, bottleneck, width, "none").eval()
    found = []

    def keep(module, inp, out) -> None:
        found.append((module, inp[0].detach()))

    hooks = [m.register_forward_hook(keep) for m in net.modules()
             if isinstance(m, nn.ConvTranspose2d) and m.stride == (2, 2)]
    with torch.inference_mode():
        net(torch.rand(batch, channels, size, size) * 2 - 1)
    for hook in hooks:
        hook.remove()
    return found


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    args = p.parse_args()
    device = torch.device("cpu")
    rows = []
    for name, shape in NETWORKS.items():
        for layer, x in layers_with_inputs(*shape, batch=args.batch):
            forms = {"transposed": layer, "subpixel": SubpixelTransposedConv(layer), "phase": PhaseTransposedConv(layer),
                     "gemm": GemmTransposedConv(layer)}
            with torch.inference_mode(), autocast(args.precision, device):
                reference = layer(x).float()
                for form, module in forms.items():
                    error = (module(x).float() - reference).abs().max().item()
                    assert error < (1e-4 if args.precision == "fp32" else 5e-2), f"{form} differs by {error}"
                seconds = interleaved_seconds({form: (lambda m=module: m(x)) for form, module in forms.items()},
                                              args.rounds)
            ms = {form: round(1000 * t, 2) for form, t in seconds.items()}
            row = {"network": name, "layer": f"{layer.in_channels}->{layer.out_channels} at {x.shape[-1]}x{x.shape[-1]}",
                   "ms": ms, "fastest": min(ms, key=ms.get)}
            rows.append(row)
            print(f"{name:13s} {row['layer']:20s} " + "  ".join(f"{f} {v:7.2f} ms" for f, v in ms.items())
                  + f"  -> {row['fastest']}", flush=True)
    write_json(args.json, {"cpu": cpu_name(), "threads": torch.get_num_threads(), "batch": args.batch,
                           "precision": args.precision, "rounds": args.rounds, "rows": rows})


if __name__ == "__main__":
    main()
