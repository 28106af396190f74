"""The IGN method: one network f, trained so that f(x) = x on data and f(f(z)) = f(z).

sample = f(z); refine = f applied K more times (projects corrupted images onto the learned set).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import torch

import genzoo
from genzoo.blocks import calibrate, speed_up, to_signed, to_unit
from genzoo.blocks.dcgan import STAGES
from genzoo.configs import NonNegative, OptimiserConfig, Positive, UnitOpen

from .inference import FoldedCache
from .losses import ign_losses
from .network import build_network
from .noise import fourier_noise, fourier_statistics, hermitian_fourier_noise

PAPER = """@inproceedings{shocher2024idempotent,
  title     = {Idempotent Generative Network},
  author    = {Shocher, Assaf and Dravid, Amil and Gandelsman, Yossi and Mosseri, Inbar and Rubinstein, Michael and Efros, Alexei A.},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2024}
}"""


@dataclass
class IGNConfig(OptimiserConfig):  # beta2, ema_decay and grad_clip: OptimiserConfig's
    channels: Annotated[int, Positive] = 1
    image_size: int = 28  # 28, 32 or 64
    width: Annotated[int, Positive] = 64  # channels of the first stage; later stages scale with it (a multiple of 4)
    bottleneck: Annotated[int, Positive] = 100
    norm: Literal["batch", "group", "none"] = "batch"  # batch: per-source calibrated statistics (docs/methods/ign.md)
    decoder: Literal["transposed", "resize"] = "transposed"  # how the decoder upsamples (blocks.dcgan.upsampling)
    # fourier: Re(ifft) of independent coefficients (keeps about half the data's per-pixel variance);
    # hermitian: coefficients drawn with Hermitian symmetry, so the noise has the data's per-pixel statistics
    noise: Literal["gaussian", "fourier", "hermitian"] = "gaussian"
    # D and the weights as the paper's text gives them (L1, 20 / 20 / 2.5, the clamp); its MNIST runs used
    # MSE, as its published code does (docs/methods/ign.md says which ign-mnist uses, and why)
    distance: Literal["l1", "mse"] = "l1"
    lambda_rec: Annotated[float, NonNegative] = 20.0
    lambda_idem: Annotated[float, NonNegative] = 20.0
    lambda_tight: Annotated[float, NonNegative] = 2.5
    tight_clamp: Annotated[float, NonNegative] = 1.5  # a in tanh(L_t / (a s)) a s; 0 disables the clamp
    clamp_scale: Literal["noise", "rec"] = "noise"  # s = D(f(z), z), or D(f(x), x) of the paired real image
    lr: Annotated[float, Positive] = 1e-4
    beta1: Annotated[float, UnitOpen] = 0.5  # DCGAN's

    def __post_init__(self) -> None:
        if self.image_size not in STAGES:
            raise ValueError(f"image_size must be one of {sorted(STAGES)}, got {self.image_size}")
        if self.norm == "group" and self.width % 16:
            raise ValueError(f"norm=group needs a width divisible by 16, got {self.width}")


class IGN(genzoo.Method):
    name = "ign"
    summary = "Idempotent Generative Network: one network f with f(x) = x on data and f(f(z)) = f(z)"
    Config = IGNConfig
    capabilities = frozenset({"fit", "sample", "refine"})
    default_model = "ign-mnist"
    paper = PAPER

    def __init__(self, config=None):
        super().__init__(config)
        c = self.config
        self.net = build_network(c.channels, c.image_size, c.bottleneck, c.width, c.norm, decoder=c.decoder)
        speed_up(self.net)  # faster exact forms of some layers on CPU, the same parameters (genzoo.blocks.fastconv)
        self._folded = FoldedCache()  # not a submodule: rebuilt from net, never saved
        stats_shape = (c.channels, c.image_size, c.image_size, 2)
        self.register_buffer("fourier_mean", torch.zeros(stats_shape))
        self.register_buffer("fourier_std", torch.ones(stats_shape))

    # -- noise -------------------------------------------------------------------------------

    def noise_images(self, standard: torch.Tensor) -> torch.Tensor:
        """Standard normal draws (N, C, H, W, 2) -> noise images in the network's [-1, 1] space."""
        if self.config.noise == "fourier":
            return fourier_noise(standard, self.fourier_mean, self.fourier_std)
        if self.config.noise == "hermitian":
            return hermitian_fourier_noise(standard[..., 0], self.fourier_mean, self.fourier_std)
        return standard[..., 0]

    def setup_fit(self, data) -> None:
        if data.image_shape != self.image_shape:
            raise genzoo.GenzooError(
                f"ign is configured for images of shape {self.image_shape} but {data.name} has {data.image_shape}; "
                f"pass --set channels={data.image_shape[0]} --set image_size={data.image_shape[1]}"
            )
        if self.config.noise in ("fourier", "hermitian"):
            mean, std = fourier_statistics(to_signed(data.floats()))
            self.fourier_mean.copy_(mean)
            self.fourier_std.copy_(std)

    # -- verbs -------------------------------------------------------------------------------

    def sample_batch(self, noise, labels):
        """f(z)."""
        z = self.noise_images(noise.randn(*self.image_shape, 2, device=self.device))
        return to_unit(self.inference_net("noise")(z))

    def refine_batch(self, x, labels, noise, steps):
        """f applied ``steps`` times (default once): projects x onto the learned set."""
        y = to_signed(x)
        net = self.inference_net("image")
        for _ in range(1 if steps is None else steps):
            y = net(y)
        return to_unit(y)

    def inference_net(self, source: str) -> torch.nn.Module:
        """f with batch norm at the calibrated statistics of ``source`` ("noise" for f(z), "image" for f
        applied to images), folded into the convolutions (inference.py): the same outputs, faster."""
        return self._folded.get(self.net, source, self.config.image_size)

    def prepare_export(self) -> None:
        """With batch norm: recompute the per-source population statistics sampling uses."""
        def draw(count: int, generator: torch.Generator) -> torch.Tensor:
            standard = torch.randn(count, *self.image_shape, 2, generator=generator)
            return self.noise_images(standard.to(self.device))

        calibrate(self.net, draw)

    def losses(self, x: torch.Tensor, z: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per-sample rec, idem and tight losses for x and z in [-1, 1] space."""
        c = self.config
        return ign_losses(self.net, x, z, kind=c.distance, clamp=c.tight_clamp, clamp_scale=c.clamp_scale)

    def training_step(self, batch):
        c = self.config
        x = to_signed(batch["x"])
        z = self.noise_images(torch.randn(*x.shape, 2, device=x.device))
        parts = {k: v.float().mean() for k, v in self.losses(x, z).items()}
        loss = c.lambda_rec * parts["rec"] + c.lambda_idem * parts["idem"] + c.lambda_tight * parts["tight"]
        return {"loss": loss, **parts}

    def configure_optimizers(self):
        c = self.config
        return torch.optim.Adam(self.net.parameters(), lr=c.lr, betas=(c.beta1, c.beta2))
