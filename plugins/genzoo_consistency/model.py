"""The consistency method: f(x, sigma) maps a noisy image at any noise level straight to its clean image.

Trained from scratch by consistency training (no pretrained diffusion model, no EMA teacher): the
outputs at two adjacent noise levels of one noised image are pulled together, the lower one held
fixed. sample = f(sigma_max z) in one step, or the papers' multistep sampler; refine = noise an
image to ``sigma`` and map it back in one step (SDEdit-like, with one network call).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Annotated, Callable, Iterator, Literal

import torch

import genzoo
from genzoo.blocks import DenoiserConfig, LevelDenoiser, UNet, edm_scalings, karras_sigmas, to_signed, to_unit
from genzoo.configs import NonNegative, Positive, Range

from .curriculum import curriculum, lognormal_weights
from .losses import pseudo_huber

PAPER = """@inproceedings{song2023consistency,
  title     = {Consistency Models},
  author    = {Song, Yang and Dhariwal, Prafulla and Chen, Mark and Sutskever, Ilya},
  booktitle = {International Conference on Machine Learning (ICML)},
  year      = {2023}
}
@inproceedings{song2024improved,
  title     = {Improved Techniques for Training Consistency Models},
  author    = {Song, Yang and Dhariwal, Prafulla},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2024}
}"""


@dataclass
class ConsistencyConfig(DenoiserConfig):  # the U-Net, noise levels, refine_sigma and optimiser fields: DenoiserConfig's
    # dropout: one mask shared by student and teacher; refine_sigma: the level refine adds before mapping back
    p_mean: float = -1.1  # lognormal sampling of the noise level: ln sigma ~ N(p_mean, p_std^2)
    p_std: Annotated[float, Positive] = 2.0
    lr: Annotated[float, Positive] = 1e-4
    noise_scale: Annotated[float, Positive] = 0.25  # c_noise = noise_scale ln(sigma): EDM's 1/4; 250 in the original code
    # ict: training from scratch on adjacent Karras levels with a doubling curriculum (s0, s1, curriculum_steps);
    # ect: consistency tuning of a diffusion model (fit --init an edm model), the teacher at r = t (1 - a(t) / q^(stage+1))
    training: Literal["ict", "ect"] = "ict"
    s0: Annotated[int, Positive] = 10  # the curriculum's first and largest discretisation (N - 1)
    s1: Annotated[int, Positive] = 1280
    curriculum_steps: Annotated[int, Positive] | None = None  # K of the curriculum; None: the run's --steps
    ect_q: Annotated[float, Range(1, None, low_open=True)] = 256.0  # with a(t) = 1 + ect_k sigmoid(-ect_b t)
    ect_k: Annotated[float, NonNegative] = 8.0
    ect_b: Annotated[float, NonNegative] = 1.0
    ect_stage_steps: Annotated[int, Positive] | None = None  # steps per stage (r moves closer to t); None: one stage
    huber_c: Annotated[float, NonNegative] | None = None  # None: 0.00054 sqrt(C H W) (improved paper); 0: L2 (ECT)
    mid_sigma: Annotated[float, Positive] = 0.821  # the second noise level of the two-step sampler
    optimizer: Literal["adam", "radam"] = "adam"
    label_dropout: Annotated[float, Range(0, 1, high_open=True)] = 0.0  # a conditional model samples with its labels

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.sigma_min < self.mid_sigma < self.sigma_max:
            raise ValueError(f"mid_sigma must lie between sigma_min and sigma_max, got {self.mid_sigma}")
        if self.s1 < self.s0:
            raise ValueError(f"s1 must be >= s0, got s0={self.s0}, s1={self.s1}")


@contextlib.contextmanager
def shared_randomness(device: torch.device) -> Iterator[Callable[[], None]]:
    """Yields ``again()``, which rewinds torch's RNG to where it stood on entry: the passes before and after
    it draw the same random numbers (the same dropout mask, when they run the same network on inputs of
    one shape)."""
    cpu = torch.get_rng_state()
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None

    def again() -> None:
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, device)

    yield again


class Consistency(LevelDenoiser, genzoo.Method):
    name = "consistency"
    summary = "Consistency model trained from scratch (consistency training): one network call per sample"
    Config = ConsistencyConfig
    capabilities = frozenset({"fit", "sample", "refine"})
    default_model = "consistency-mnist"
    paper = PAPER
    init_from = ("edm",)  # consistency tuning starts from a diffusion model of the same network
    fp32_training = ("its loss compares the network's outputs at two nearby noise levels, and bf16's rounding "
                     "changes that difference by more than its size (measured in docs/methods/consistency.md)")
    sample_options = {"steps": Annotated[int, Range(1)]}
    refine_options = {"sigma": Annotated[float, Positive]}

    def __init__(self, config=None):
        super().__init__(config)
        c = self.config
        self.net = UNet(c.channels, c.width, c.levels, c.blocks, c.dropout, c.attention, c.num_classes)

    def denoise(self, x: torch.Tensor, sigma: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        """f(x, sigma) = c_skip x + c_out F(c_in x, c_noise), images in [-1, 1] space; sigma (and, for a conditional
        model, the label) per image."""
        c = self.config
        c_skip, c_out, c_in = (s.view(-1, 1, 1, 1) for s in edm_scalings(sigma, c.sigma_data, c.sigma_min))
        c_noise = c.noise_scale * sigma.log()
        return c_skip * x + c_out * self.net(c_in * x, c_noise, labels).to(x.dtype)

    def network_calls(self, steps: int = 1) -> int:
        """Network calls of a sample of ``steps`` steps: one a step."""
        return steps

    def sample_sigmas(self, steps: int) -> list[float]:
        """sigma_max, then (for more steps) mid_sigma and levels on the rho-schedule between it and sigma_min."""
        c = self.config
        if steps < 1:
            raise genzoo.GenzooError(f"consistency sample: steps must be >= 1, got {steps}")
        lower = karras_sigmas(steps + 1, c.sigma_min, c.mid_sigma, c.rho).flip(0)[:-1] if steps > 1 else []
        return [c.sigma_max, *[float(s) for s in lower[:steps - 1]]]

    # -- verbs -------------------------------------------------------------------------------

    def sample_batch(self, noise, labels, steps: int = 1):
        c = self.config
        sigmas = self.sample_sigmas(steps)
        x = c.sigma_max * noise.randn(*self.image_shape, device=self.device)
        images = self.denoise_at(x, sigmas[0], labels).clamp(-1, 1)
        for j, sigma in enumerate(sigmas[1:], start=1):
            z = noise.child(f"step{j}").randn(*self.image_shape, device=self.device)
            images = self.denoise_at(images + math.sqrt(sigma ** 2 - c.sigma_min ** 2) * z, sigma, labels).clamp(-1, 1)
        return to_unit(images)

    def check_options(self, verb: str, options: dict, steps: int | None = None) -> None:
        if verb == "refine":
            self.config.refine_level(options.get("sigma"), "consistency")

    def refine_batch(self, x, labels, noise, steps, sigma: float | None = None):
        """``steps`` rounds (default 1), each: add noise of level ``sigma`` and map back in one step; 0: x."""
        c = self.config
        sigma = c.refine_level(sigma, "consistency")
        rounds = 1 if steps is None else steps
        if rounds == 0:
            return x
        images = to_signed(x)
        for r in range(rounds):
            z = noise.child(f"round{r}").randn(*self.image_shape, device=self.device)
            images = self.denoise_at(images + math.sqrt(sigma ** 2 - c.sigma_min ** 2) * z, sigma, labels).clamp(-1, 1)
        return to_unit(images)

    # -- training ----------------------------------------------------------------------------

    def training_step(self, batch):
        c = self.config
        x = to_signed(batch["x"])
        if c.training == "ect":
            high, low, logged = self._ect_pair(x.shape[0], int(batch["step"]), x.device)
        else:
            high, low, logged = self._ict_pair(x.shape[0], int(batch["step"]), batch.get("steps"), x.device)
        z = torch.randn_like(x)
        labels = self.drop_labels(batch.get("y"), c.label_dropout)  # one draw: teacher and student see the same
        boundary = (low <= c.sigma_min).view(-1, 1, 1, 1)  # f(y, sigma) = y at and below sigma_min
        with shared_randomness(x.device) as again:
            with torch.no_grad():  # the teacher: the same network, its output held fixed
                teacher = self.denoise(x + low.view(-1, 1, 1, 1) * z, low.clamp_min(c.sigma_min), labels)
            again()  # the student draws the teacher's dropout mask
            student = self.denoise(x + high.view(-1, 1, 1, 1) * z, high, labels)
        target = torch.where(boundary, x + low.view(-1, 1, 1, 1) * z, teacher)
        huber_c = c.huber_c if c.huber_c is not None else 0.00054 * math.sqrt(x[0].numel())
        distance = pseudo_huber(student.float(), target.float(), huber_c)
        loss = (distance / (high - low)).mean()
        return {"loss": loss, "distance": distance.mean(), **logged}

    def _ict_pair(self, n: int, step: int, total: int | None, device
                  ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Adjacent levels of the curriculum's discretisation over ``total`` steps (the run's, unless
        curriculum_steps says), drawn by their lognormal mass (improved CT)."""
        c = self.config
        levels = curriculum(step, c.curriculum_steps or total or 1, c.s0, c.s1)
        sigmas = karras_sigmas(levels, c.sigma_min, c.sigma_max, c.rho)
        index = torch.multinomial(lognormal_weights(sigmas, c.p_mean, c.p_std), n, replacement=True)
        high, low = sigmas[index + 1].float().to(device), sigmas[index].float().to(device)
        return high, low, {"levels": torch.tensor(float(levels))}

    def _ect_pair(self, n: int, step: int, device) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """t lognormal; the teacher's r = t (1 - (1 + k sigmoid(-b t)) / q^(stage + 1)), at least 0 (ECT)."""
        c = self.config
        t = (torch.randn(n, device=device) * c.p_std + c.p_mean).exp().clamp(c.sigma_min * 1.0001, c.sigma_max)
        stage = 0 if c.ect_stage_steps is None else step // c.ect_stage_steps
        shrink = (1 + c.ect_k * torch.sigmoid(-c.ect_b * t)) / c.ect_q ** (stage + 1)
        return t, (t * (1 - shrink)).clamp_min(0), {"stage": torch.tensor(float(stage))}

    def follows_total_steps(self) -> str:
        c = self.config
        return "a curriculum" if c.training == "ict" and c.curriculum_steps is None else ""

    def configure_optimizers(self, total_steps: int):
        c = self.config
        optimizer = torch.optim.RAdam if c.optimizer == "radam" else torch.optim.Adam
        return optimizer(self.net.parameters(), lr=c.lr, betas=(c.beta1, c.beta2))
