"""EDM: a diffusion model with Karras et al.'s preconditioning, loss and Heun sampler.

D(x, sigma) = c_skip x + c_out F(c_in x, c_noise) denoises an image at any noise level; it is trained by
weighted regression onto the clean image at lognormally drawn levels. With ``num_classes`` the network also takes
a class label, dropped for a fraction of the training images so that it denoises with and without one. sample =
Heun's method from sigma_max to 0, deterministic or with EDM's churn (Algorithm 2), optionally autoguided by a
weaker EDM model of the same data (Karras et al., NeurIPS 2024) or, for a conditional model, guided by its own
unconditional denoiser (classifier-free guidance); refine = noise an image to a level and solve back (SDEdit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import torch

import genzoo
from genzoo.blocks import (Churn, Denoiser, DenoiserConfig, LevelDenoiser, UNet, c_noise, edm_scalings, guided, heun,
                           karras_sigmas, to_signed, to_unit)
from genzoo.configs import NonNegative, Positive, Range

PAPER = """@inproceedings{karras2022elucidating,
  title     = {Elucidating the Design Space of Diffusion-Based Generative Models},
  author    = {Karras, Tero and Aittala, Miika and Aila, Timo and Laine, Samuli},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS)},
  year      = {2022}
}"""

MAX_STEPS = 1000


@dataclass
class EDMConfig(DenoiserConfig):  # the U-Net, noise levels, refine_sigma and optimiser fields: DenoiserConfig's
    # edm-mnist's recipe, chosen by short measured comparisons (docs/methods/edm.md)
    width: Annotated[int, Positive] = 64
    dropout: Annotated[float, Range(0, 1, high_open=True)] = 0.0
    lr: Annotated[float, Positive] = 1e-3
    sample_steps: Annotated[int, Range(1, MAX_STEPS)] = 18  # Heun steps of a sample: 2 x steps - 1 network calls
    s_churn: Annotated[float, NonNegative] = 0.0  # sampler noise (EDM Algorithm 2): 0 is the deterministic Heun sampler
    s_tmin: Annotated[float, NonNegative] = 0.05  # churn only at levels in [s_tmin, s_tmax]
    s_tmax: Annotated[float, NonNegative] = 50.0
    s_noise: Annotated[float, Positive] = 1.003  # scale of the churn's fresh noise
    guide: str | None = None  # autoguidance: a weaker EDM model of the same data (name or directory)
    guidance: Annotated[float, NonNegative] = 1.0  # w in D = w D_self + (1 - w) D_guide; 1: no guide
    cfg: Annotated[float, NonNegative] = 1.0  # classifier-free guidance w in D_uncond + w (D_cond - D_uncond); 1: none
    refine_steps: Annotated[int, Range(0, MAX_STEPS)] = 10  # Heun steps from refine_sigma back to 0
    warmup_steps: Annotated[int, Range(0)] = 200

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.s_tmin > self.s_tmax:
            raise ValueError(f"s_tmin must not exceed s_tmax, got {self.s_tmin} and {self.s_tmax}")
        if self.cfg != 1 and not self.num_classes:
            raise ValueError(f"cfg {self.cfg:g} needs a class-conditional model (num_classes > 0)")


class EDM(LevelDenoiser, genzoo.Method):
    name = "edm"
    summary = "Diffusion model with EDM's preconditioning, trained by denoising; sampled by Heun's method"
    Config = EDMConfig
    capabilities = frozenset({"fit", "sample", "refine"})
    default_model = "edm-mnist"
    paper = PAPER
    sample_options = {"steps": Annotated[int, Range(1, MAX_STEPS)], "s_churn": Annotated[float, NonNegative],
                      "s_tmin": Annotated[float, NonNegative], "s_tmax": Annotated[float, NonNegative],
                      "s_noise": Annotated[float, Positive], "guide": str, "guidance": Annotated[float, NonNegative],
                      "cfg": Annotated[float, NonNegative]}
    refine_options = {"sigma": Annotated[float, Positive]}
    # Each Heun step feeds the last one's rounding into the next network call, and oneDNN rounds
    # differently for different batch sizes.
    image_tolerance = 1e-4

    def __init__(self, config=None):
        super().__init__(config)
        c = self.config
        self.net = UNet(c.channels, c.width, c.levels, c.blocks, c.dropout, c.attention, c.num_classes)
        self._guides: dict[str, EDM] = {}  # autoguidance models, loaded on first use and never saved with this one

    def denoise(self, x: torch.Tensor, sigma: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        """D(x, sigma): the clean image estimated from x (in [-1, 1] space) at noise level sigma (per image), given
        each image's label (a conditional model; None or NO_LABEL: unconditional)."""
        c_skip, c_out, c_in = (s.view(-1, 1, 1, 1) for s in edm_scalings(sigma, self.config.sigma_data))
        return c_skip * x + c_out * self.net(c_in * x, c_noise(sigma), labels).to(x.dtype)

    def noise_levels(self, steps: int, sigma_max: float | None = None) -> list[float]:
        """``steps`` levels from sigma_max (or the given level) down to sigma_min on the rho-schedule, then 0."""
        c = self.config
        top = c.sigma_max if sigma_max is None else sigma_max
        return [float(s) for s in karras_sigmas(steps, c.sigma_min, top, c.rho).flip(0)] + [0.0]

    def network_calls(self, steps: int | None = None, guidance: float | None = None, cfg: float | None = None) -> int:
        """Network calls of a Heun sample of ``steps`` steps (the last step is a plain Euler step), the
        guide's counted: a guided sample (autoguidance or classifier-free) calls two denoisers at every level."""
        c = self.config
        calls = 2 * (c.sample_steps if steps is None else steps) - 1
        guiding = (c.guidance if guidance is None else guidance) != 1 or (c.cfg if cfg is None else cfg) != 1
        return calls * (2 if guiding else 1)

    def guided(self, labels: torch.Tensor | None, guide: str | None, guidance: float, cfg: float = 1.0) -> Denoiser:
        """D itself (with ``labels``); w D + (1 - w) D_guide with the weaker model ``guide`` (autoguidance); or
        D_uncond + w (D_cond - D_uncond) with this model's own unconditional denoiser (classifier-free guidance)."""
        self._check_guidance(guide, guidance, cfg)
        own = self.denoiser(labels)
        if cfg != 1:
            return guided(own, self.denoiser(None), cfg)
        if guidance == 1:
            return own
        weaker = self._guide(guide)
        return guided(own, weaker.denoiser(labels if weaker.num_classes else None), guidance)

    def _check_guidance(self, guide: str | None, guidance: float, cfg: float) -> None:
        if guidance != 1 and cfg != 1:
            raise genzoo.GenzooError(f"edm sample: choose one guidance: autoguidance (guidance {guidance:g}) or "
                                     f"classifier-free guidance (cfg {cfg:g}); set the other to 1")
        if cfg != 1 and not self.num_classes:
            raise genzoo.GenzooError(f"edm sample: cfg {cfg:g} needs a class-conditional model; this one is "
                                     "unconditional (use autoguidance: --opt guide=MODEL --opt guidance=W)")
        if guidance != 1 and not guide:
            raise genzoo.GenzooError(f"edm sample: guidance {guidance:g} needs a guide model; "
                                     "add --opt guide=MODEL (a weaker EDM model of the same data)")
        if guidance != 1:
            self._guide(guide)  # loaded and checked now, before any image

    def _guide(self, name: str) -> "EDM":
        if name not in self._guides:
            guide = genzoo.load(name, device=self.device).eval().requires_grad_(False)
            if not isinstance(guide, EDM):
                raise genzoo.GenzooError(f"edm sample: the guide {name!r} is a {guide.name} model; "
                                         "autoguidance needs an EDM model of the same data")
            mine, theirs = self.config, guide.config
            if guide.image_shape != self.image_shape or mine.sigma_data != theirs.sigma_data:
                raise genzoo.GenzooError(
                    f"edm sample: the guide {name!r} makes images of shape {guide.image_shape} with sigma_data "
                    f"{theirs.sigma_data:g}; this model {self.image_shape} with {mine.sigma_data:g}: "
                    "the guide must be trained on the same data with the same preconditioning")
            self._guides[name] = guide
        guide = self._guides[name]
        return guide.to(self.device)

    # -- verbs -------------------------------------------------------------------------------

    def check_options(self, verb: str, options: dict, steps: int | None = None) -> None:
        c = self.config
        if verb == "refine":
            c.refine_level(options.get("sigma"), "edm")
            if steps is not None and steps > MAX_STEPS:
                raise genzoo.GenzooError(f"edm refine: steps must be at most {MAX_STEPS}, got {steps}")
            return
        churn = self._churn(options)
        if churn.tmin > churn.tmax:
            raise genzoo.GenzooError(f"edm sample: s_tmin must not exceed s_tmax, got {churn.tmin:g} and {churn.tmax:g}")
        self._check_guidance(*self._guidance(options))

    def _churn(self, options: dict) -> Churn:
        c = self.config
        return Churn(*(getattr(c, key) if options.get(key) is None else float(options[key])
                       for key in ("s_churn", "s_tmin", "s_tmax", "s_noise")))

    def _guidance(self, options: dict) -> tuple[str | None, float, float]:
        c = self.config
        return tuple(getattr(c, key) if options.get(key) is None else options[key] for key in ("guide", "guidance", "cfg"))

    def sample_batch(self, noise, labels, steps: int | None = None, s_churn: float | None = None,
                     s_tmin: float | None = None, s_tmax: float | None = None, s_noise: float | None = None,
                     guide: str | None = None, guidance: float | None = None, cfg: float | None = None):
        c = self.config
        options = {"s_churn": s_churn, "s_tmin": s_tmin, "s_tmax": s_tmax, "s_noise": s_noise, "guide": guide,
                   "guidance": guidance, "cfg": cfg}
        denoise = self.guided(labels, *self._guidance(options))
        x = c.sigma_max * noise.randn(*self.image_shape, device=self.device)
        x = heun(denoise, x, self.noise_levels(c.sample_steps if steps is None else steps), self._churn(options),
                 noise.child("churn"), self.track)
        return to_unit(x, clamp=True)

    def refine_batch(self, x, labels, noise, steps, sigma: float | None = None):
        """Noise x to ``sigma`` and solve back in ``steps`` Heun steps (SDEdit); ``steps=0`` returns x."""
        c = self.config
        sigma = c.refine_level(sigma, "edm")
        steps = c.refine_steps if steps is None else steps
        if steps == 0:
            return x
        noisy = to_signed(x) + sigma * noise.randn(*self.image_shape, device=self.device)
        levels = self.noise_levels(steps, sigma)
        return to_unit(heun(self.denoiser(labels), noisy, levels, track=self.track), clamp=True)

    # -- training ----------------------------------------------------------------------------

    def training_step(self, batch):
        c = self.config
        x = to_signed(batch["x"])
        sigma = (torch.randn(x.shape[0], device=x.device) * c.p_std + c.p_mean).exp()
        noisy = x + sigma.view(-1, 1, 1, 1) * torch.randn_like(x)
        labels = self.drop_labels(batch.get("y"), c.label_dropout)
        weight = (sigma ** 2 + c.sigma_data ** 2) / (sigma * c.sigma_data) ** 2  # EDM's lambda(sigma)
        error = (self.denoise(noisy, sigma, labels).float() - x).square().flatten(1).mean(1)
        return {"loss": (weight * error).mean(), "mse": error.mean()}

    def configure_optimizers(self, total_steps: int):
        c = self.config
        optimizer = torch.optim.Adam(self.net.parameters(), lr=c.lr, betas=(c.beta1, c.beta2))
        total = max(total_steps, 1)
        return [optimizer], [genzoo.schedules.warmup_cosine(optimizer, warmup_steps=min(c.warmup_steps, total),
                                                            total_steps=total, final_ratio=0.05)]
