"""Robust joint classifier-discriminator refiner (Golan, Ganz and Elad, NeurIPS 2024).

One network J gives C class logits. Trained adversarially, it is a robust classifier (its input
gradients are perceptually aligned, as in BIGRoC) and an energy-based discriminator. Refinement
moves any generator's samples a few normalised gradient steps up log p(y|x) + realness.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Annotated, Literal

import torch
import torch.nn.functional as F

import genzoo
from genzoo.blocks import to_signed
from genzoo.configs import NonNegative, Positive, Probability

from .attacks import pgd_ascent, random_start
from .network import build_classifier

# The bases whose samples are being made right now, outermost first: a base met again is a cycle.
_BASES_IN_USE: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("robust_bases", default=())

PAPER = """@inproceedings{golan2024enhancing,
  title     = {Enhancing Consistency-Based Image Generation via Adversarially-Trained Classification and Energy-Based Discrimination},
  author    = {Golan, Shelly and Ganz, Roy and Elad, Michael},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS)},
  year      = {2024}
}"""


@dataclass
class RobustConfig:
    channels: int = 1
    image_size: int = 28
    num_classes: int = 10
    width: Annotated[int, Positive] = 32  # a multiple of 8 (GroupNorm with 8 groups)
    base: str = "ign-mnist"  # the generator whose samples are the fakes (any genzoo model that samples)
    realness: Literal["energy", "logit"] = "energy"  # sigmoid(logsumexp J(x)) or sigmoid(J_y(x))
    eps_real: Annotated[float, NonNegative] = 1.0  # L2 radius of PGD on real images, in [0, 1] pixel units
    steps_real: Annotated[int, NonNegative] = 3
    eps_fake: Annotated[float, NonNegative] = 3.0  # L2 radius of PGD pushing fakes towards looking real
    steps_fake: Annotated[int, NonNegative] = 3
    real_target: Annotated[float, Probability] = 0.9  # BCE target for real images (the paper's target value)
    fake_target: Annotated[float, Probability] = 0.0
    lambda_bce: Annotated[float, NonNegative] = 1.0
    lr: Annotated[float, Positive] = 1e-3  # measured on MNIST: 95% adversarial accuracy by step 500 (robust-mnist)
    grad_clip: float | None = 1.0
    ema_decay: float = 0.0
    refine_steps: Annotated[int, NonNegative] = 30
    refine_eps: Annotated[float, NonNegative] = 2.0  # L2 radius of refinement around the input, [0, 1] pixel units
    refine_step_size: Annotated[float, Positive] = 0.1
    refine_realness_weight: Annotated[float, NonNegative] = 1.0

    def __post_init__(self) -> None:
        if self.image_size % 4:
            raise ValueError(f"image_size must be divisible by 4, got {self.image_size}")
        if self.width % 8:
            raise ValueError(f"width must be a multiple of 8 (GroupNorm with 8 groups), got {self.width}")


class RobustRefiner(genzoo.Method):
    name = "robust"
    summary = "adversarially trained classifier that is also an energy-based discriminator; refines any generator"
    Config = RobustConfig
    capabilities = frozenset({"fit", "sample", "refine"})
    default_model = "robust-mnist"
    paper = PAPER
    refine_options = {"eps": Annotated[float, NonNegative], "step_size": Annotated[float, Positive]}

    def __init__(self, config=None):
        super().__init__(config)
        c = self.config
        self.net = build_classifier(c.channels, c.image_size, c.num_classes, c.width)
        # mean logits of J over the base generator's samples: the fixed debiasing offset for labels
        self.register_buffer("label_bias", torch.zeros(c.num_classes))
        self._base: list = []  # the base generator, loaded on demand and never saved with J

    # -- scores --------------------------------------------------------------------------------

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(to_signed(x))

    def realness_logit(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The discriminator's logit: logsumexp_c J_c (= -E(x)) or the target-class logit J_y."""
        if self.config.realness == "energy":
            return torch.logsumexp(logits, dim=1)
        return logits.gather(1, labels[:, None])[:, 0]

    def predict_labels(self, x: torch.Tensor, *, batch_debias: bool = False) -> torch.Tensor:
        """J's prediction for unlabelled samples, debiased as in BIGRoC by mean logits over generated images.

        In training the mean is the batch's; at inference it is ``label_bias`` (fixed at export from
        the base generator's samples), so an image's label never depends on the rest of its batch.
        """
        with torch.no_grad():
            logits = self.logits(x)
            bias = logits.mean(0, keepdim=True) if batch_debias else self.label_bias
            return (logits - bias).argmax(1)

    def prepare_export(self) -> None:
        try:
            base = self.base
        except genzoo.GenzooError:
            return  # no base generator available: keep the stored offset
        with torch.no_grad(), self._sampling_base():
            images = base.sample(1024, seed=0, batch_size=256, device=self.device).to(self.device)
            self.label_bias.copy_(self.logits(images).mean(0))

    # -- the base generator ---------------------------------------------------------------------

    @property
    def base(self) -> genzoo.Method:
        chain = _BASES_IN_USE.get()
        if self.config.base in chain:
            path = " -> ".join(repr(name) for name in (*chain[chain.index(self.config.base):], self.config.base))
            raise genzoo.GenzooError(
                f"robust's base generator leads back to itself ({path}): a refiner's base must be a model that "
                f"samples without it; export the refiner with --set base=MODEL naming another generator")
        if not self._base:
            self._base.append(genzoo.load(self.config.base, device=self.device).eval().requires_grad_(False))
        return self._base[0]

    @contextlib.contextmanager
    def _sampling_base(self):
        """While the base makes samples: a robust model met inside them whose base is one of these is a cycle."""
        base = self.base
        token = _BASES_IN_USE.set((*_BASES_IN_USE.get(), self.config.base))
        try:
            yield base
        finally:
            _BASES_IN_USE.reset(token)

    def labelled_fakes(self, n: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        """n samples of the base generator and their labels (the batch-debiased prediction of J when it has none)."""
        seed = int(torch.randint(0, 2**62, (1,)).item())  # from the training RNG: an exact resume redraws them
        with self._sampling_base() as base:
            labels = (torch.arange(n) % base.num_classes) if base.num_classes else None
            images = base.sample(n, seed=seed, labels=labels, batch_size=n, device=device).to(device)
        if labels is None:
            return images, self.predict_labels(images, batch_debias=True)
        return images, labels.to(device)

    # -- training: the joint loss -----------------------------------------------------------------

    def training_step(self, batch):
        """CE(J(x_adv), y) + lambda_bce [BCE(realness(x_adv) -> real) + BCE(realness(x_fake_adv) -> fake)]."""
        x, y = labelled(batch)
        logits_real = self.logits(self.attack_reals(x, y))
        losses = self.classification_losses(logits_real, y)
        fakes, fake_labels = self.labelled_fakes(x.shape[0], x.device)
        logits_fake = self.logits(self.attack_fakes(fakes, fake_labels))
        losses.update(self.discrimination_losses(logits_real, y, logits_fake, fake_labels))
        losses["loss"] = losses["ce"] + self.config.lambda_bce * (losses["bce_real"] + losses["bce_fake"])
        return losses

    def real_objective(self, images: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The joint loss on real images, per image: what PGD on the reals maximises."""
        c = self.config
        logits = self.logits(images)
        ce = F.cross_entropy(logits, y, reduction="none")
        return ce + c.lambda_bce * F.binary_cross_entropy_with_logits(
            self.realness_logit(logits, y), torch.full_like(ce, c.real_target), reduction="none")

    def fake_objective(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """BCE of generated images towards "fake", per image: maximising it makes them look real."""
        realness = self.realness_logit(self.logits(images), labels)
        return F.binary_cross_entropy_with_logits(realness, torch.full_like(realness, self.config.fake_target),
                                                  reduction="none")

    def attack_reals(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Adversarial reals: PGD from a random start in the L2 ball of radius eps_real."""
        c = self.config
        return pgd_ascent(lambda images: self.real_objective(images, y), x, eps=c.eps_real, steps=c.steps_real,
                          start=random_start(x, c.eps_real))

    def attack_fakes(self, fakes: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Adversarial fakes: PGD in the L2 ball of radius eps_fake towards looking real."""
        c = self.config
        return pgd_ascent(lambda images: self.fake_objective(images, labels), fakes, eps=c.eps_fake,
                          steps=c.steps_fake)

    def classification_losses(self, logits_real: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            accuracy = (logits_real.argmax(1) == y).float().mean()
        return {"ce": F.cross_entropy(logits_real, y), "accuracy": accuracy}

    def discrimination_losses(self, logits_real: torch.Tensor, y: torch.Tensor, logits_fake: torch.Tensor,
                              fake_labels: torch.Tensor) -> dict[str, torch.Tensor]:
        c = self.config
        real_score = self.realness_logit(logits_real, y)
        fake_score = self.realness_logit(logits_fake, fake_labels)
        losses = {
            "bce_real": F.binary_cross_entropy_with_logits(real_score, torch.full_like(real_score, c.real_target)),
            "bce_fake": F.binary_cross_entropy_with_logits(fake_score, torch.full_like(fake_score, c.fake_target)),
        }
        with torch.no_grad():
            losses["real_prob"] = torch.sigmoid(real_score).mean()
            losses["fake_prob"] = torch.sigmoid(fake_score).mean()
        return losses

    def configure_optimizers(self):
        return torch.optim.Adam(self.net.parameters(), lr=self.config.lr)

    # -- refinement -------------------------------------------------------------------------------

    def refine_objective(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """log p(y|x) + refine_realness_weight * log sigmoid(realness), per image: what refinement ascends."""
        log_p = F.log_softmax(logits, 1).gather(1, labels[:, None])[:, 0]
        return log_p + self.config.refine_realness_weight * F.logsigmoid(self.realness_logit(logits, labels))

    def refine_batch(self, x, labels, noise, steps, eps=None, step_size=None):
        """Normalised L2 gradient steps up the refine objective, inside the ball of radius eps around x."""
        c = self.config
        steps = c.refine_steps if steps is None else steps
        if steps == 0:
            return x
        labels = self.predict_labels(x) if labels is None else labels
        return pgd_ascent(lambda images: self.refine_objective(self.logits(images), labels), x,
                          eps=c.refine_eps if eps is None else eps, steps=steps,
                          step_size=c.refine_step_size if step_size is None else step_size,
                          track=lambda rounds: self.track(rounds, "refine steps"))

    def sample_batch(self, noise, labels):
        """The base generator's images start..stop of this seed, refined: sample(seed=s) = refine(base.sample(seed=s))."""
        with self._sampling_base() as base:
            base_labels = labels.cpu() if base.num_classes else None
            images = base.sample(len(noise), seed=noise.seed, start=noise.start, labels=base_labels,
                                 batch_size=len(noise), device=self.device).to(self.device)
        return self.refine_batch(images, labels if base.num_classes else None, noise.child("refine"), None)


def labelled(batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """A training batch's images and labels; robust trains on labelled images only."""
    if batch["y"] is None:
        raise genzoo.GenzooError("robust trains on labelled images; use a dataset with labels (e.g. mnist)")
    return batch["x"], batch["y"]
