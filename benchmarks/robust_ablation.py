"""The robust refiner's ablations: train the classifier-only (BIGRoC) and the plain, non-robust refiners.

    python benchmarks/robust_ablation.py classifier-only --data-root DATA --steps 3000 --batch-size 64 \
        --out runs/robust-clsonly
    python benchmarks/robust_ablation.py plain --data-root DATA --steps 3000 --batch-size 64 --out runs/robust-plain
    python benchmarks/robust_ablation.py joint ... --set ce_on_fakes=true      # the joint loss + CE on the fakes

Each trains method ``robust-ablation``: genzoo's ``robust`` with three switches the product does not
carry (``discriminator``, ``adversarial``, ``ce_on_fakes``). ``classifier-only`` sets
discriminator=false (no fakes, no realness term in training or refinement); ``plain`` also sets
adversarial=false (no PGD); ``joint`` keeps both, for ``--set ce_on_fakes=true``. The other flags are
``genzoo fit``'s (``--set KEY=VALUE`` any robust Config field, ``--steps``, ``--batch-size``,
``--seed``, ``--out``, ...); the defaults train on MNIST against ign-mnist with lr 1e-3, as
robust-mnist was. The models it writes load in any script that calls :func:`register` first
(benchmarks/robust_refine.py does), not through the ``genzoo`` command.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import genzoo
from genzoo_robust import RobustConfig, RobustRefiner
from genzoo_robust.model import labelled

ABLATIONS = {"joint": {}, "classifier-only": {"discriminator": False},
             "plain": {"discriminator": False, "adversarial": False}}


@dataclass
class AblationConfig(RobustConfig):
    discriminator: bool = True  # False: the classifier-only ablation (BIGRoC): no fakes, no realness term
    adversarial: bool = True  # False: no PGD on reals or fakes (with discriminator=False, a plain classifier)
    ce_on_fakes: bool = False  # True: + CE of the adversarial fakes against their labels


class RobustAblation(RobustRefiner):
    """``robust`` with its ablation switches; with the defaults, the same training and refinement."""

    name = "robust-ablation"
    summary = "the robust refiner with ablation switches (benchmarks only)"
    Config = AblationConfig
    default_model = None

    def training_step(self, batch):
        c = self.config
        if c.discriminator and not c.ce_on_fakes:
            return super().training_step(batch)
        x, y = labelled(batch)
        logits_real = self.logits(self.attack_reals(x, y))
        losses = self.classification_losses(logits_real, y)
        loss = losses["ce"]
        if c.discriminator:
            fakes, fake_labels = self.labelled_fakes(x.shape[0], x.device)
            logits_fake = self.logits(self.attack_fakes(fakes, fake_labels))
            losses.update(self.discrimination_losses(logits_real, y, logits_fake, fake_labels))
            losses["ce_fake"] = F.cross_entropy(logits_fake, fake_labels)
            loss = loss + c.lambda_bce * (losses["bce_real"] + losses["bce_fake"]) + losses["ce_fake"]
        losses["loss"] = loss
        return losses

    def real_objective(self, images: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.config.discriminator:
            return super().real_objective(images, y)
        return F.cross_entropy(self.logits(images), y, reduction="none")

    def attack_reals(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return super().attack_reals(x, y) if self.config.adversarial else x

    def attack_fakes(self, fakes: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return super().attack_fakes(fakes, labels) if self.config.adversarial else fakes

    def refine_objective(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.config.discriminator:
            return super().refine_objective(logits, labels)
        return F.log_softmax(logits, 1).gather(1, labels[:, None])[:, 0]


@genzoo.hookimpl
def register_methods(register):
    register(RobustAblation)


def register() -> None:
    """Make method ``robust-ablation`` known to genzoo in this process, so its model directories load."""
    host = genzoo.get_host()
    if not host.has_method(RobustAblation.name):
        host.add(sys.modules[__name__], name="benchmarks.robust_ablation")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ABLATIONS:
        sys.exit(__doc__ + f"\nthe first argument is one of: {', '.join(ABLATIONS)}")
    from genzoo.cli import cli

    register()
    switches = [f"{key}={str(value).lower()}" for key, value in ABLATIONS[argv[0]].items()]
    defaults = ["--dataset", "mnist", "--set", "base=ign-mnist", "--set", "lr=1e-3"]
    cli.main(["fit", RobustAblation.name, *defaults, *(f for s in switches for f in ("--set", s)), *argv[1:]],
             prog_name="robust_ablation.py")


if __name__ == "__main__":
    main()
