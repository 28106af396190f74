"""``genzoo mmb ...``: look inside a classifier the way the MMB generator does."""

from __future__ import annotations

import math

import click
import torch


@click.group("mmb")
def group() -> None:
    """Tools of the MMB plugin (a generator born from a classifier)."""


def _load_classifier(ref: str):
    import genzoo

    model = genzoo.load(ref)
    if model.name != "mmb-classifier":
        raise genzoo.GenzooError(f"{ref} is a {model.name!r} model; these tools read mmb-classifier models")
    return model


@group.command("lambda")
@click.argument("classifier")
@click.option("--inputs", default=64, show_default=True, help="Random inputs in the least-squares system.")
@click.option("--seed", default=0, show_default=True)
def lambda_command(classifier: str, inputs: int, seed: int) -> None:
    """Print the quasi-homogeneity Lambda of CLASSIFIER, per parameter tensor (no data used).

    Lambda is the minimum-norm solution of sum_k Lambda_k <grad_k Phi_c(x), theta_k> = Phi_c(x)
    over random inputs; the check line is the relative error of
    Phi(exp(alpha Lambda) theta; x) = exp(alpha) Phi(theta; x) at alpha = 1 on fresh inputs.
    """
    from .homogeneity import estimate_lambda, max_block, scaling_error

    model = _load_classifier(classifier)
    lam = estimate_lambda(model.net, model.image_shape, inputs=inputs, seed=seed)
    block = set(max_block(lam))
    width = max(len(name) for name in lam)
    for name, p in model.net.named_parameters():
        mark = "  (max block)" if name in block else ""
        click.echo(f"{name:<{width}}  {str(tuple(p.shape)):<16} Lambda = {lam[name]:.6f}{mark}")
    fresh = torch.randn(inputs, *model.image_shape, generator=torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        error = scaling_error(model.net, lam, 1.0, fresh)
    click.echo(f"sum of Lambda = {sum(lam.values()):.6f}; scaling identity at alpha=1 on {inputs} fresh inputs: "
               f"relative error {error:.2e}")


@group.command("kkt")
@click.argument("classifier")
@click.option("--dataset", default="mnist", show_default=True, help="The dataset the classifier was fitted on.")
@click.option("--data-root", default=None, help="Where datasets live (default: $GENZOO_DATA_ROOT or ./data).")
@click.option("--stationarity", type=click.Choice(["max-block", "flow"]), default="max-block", show_default=True)
@click.option("--active", default=0.05, show_default=True,
              help="Complementary slackness: only pairs with normalised margin <= 1 + ACTIVE get a multiplier (-1: all pairs).")
def kkt_command(classifier: str, dataset: str, data_root: str | None, stationarity: str, active: float) -> None:
    """How well CLASSIFIER satisfies the KKT conditions on its own training subset.

    Fits non-negative multipliers to the stationarity condition by NNLS over the true training
    images (the ones whose indices the classifier saved), one per (image, competing class), and
    prints the relative residual.
    """
    from genzoo.datasets import load_dataset

    from .kkt import KKTTarget, fit_multipliers

    model = _load_classifier(classifier)
    data = load_dataset(dataset, data_root)
    x, y = data.floats(model.indices), data.labels[model.indices]
    target = KKTTarget(model, stationarity=stationarity)
    fit = fit_multipliers(target, x, y, active=None if active < 0 else active)
    lam = fit.multipliers.sum(1)
    support = fit.support
    q = fit.margins
    click.echo(f"training images: {len(y)}; smallest margin of the saved weights: {float(model.margin):.4g} "
               f"(alpha = {target.alpha:.4f})")
    click.echo(f"relative stationarity residual ||c theta~ - sum lambda grad q|| / ||c theta~|| = {fit.relative_residual:.4f}")
    click.echo(f"margin points (lambda > 0): {int(support.sum())}; their normalised margins: "
               f"median {float(q[support].median()):.4f}, max {float(q[support].max()):.4f}; "
               f"all points: min {float(q.min()):.4f}, median {float(q.median()):.4f}")
    block_sq = sum(float(target.params[n].double().pow(2).sum()) for n in target.block)
    top = max(target.lam.values())
    euler = float((lam * q.double()).sum()) / top
    if math.isfinite(euler) and euler > 0:
        click.echo(f"Euler check: ||theta~_max||^2 = {block_sq:.4g}; (1 / Lambda_max) sum_i lambda_i q_i = {euler:.4g}")


@group.command("interpolate")
@click.argument("model", default="mmb")
@click.option("--label", type=int, required=True, help="The class to walk within.")
@click.option("--pairs", default=4, show_default=True, type=click.IntRange(min=1), help="Walks (grid rows).")
@click.option("--steps", default=9, show_default=True, type=click.IntRange(min=2), help="Images per walk (grid columns).")
@click.option("--seed", default=0, show_default=True, help="Picks the two end latents of each walk.")
@click.option("--classifier", default=0, show_default=True, help="Which classifier's generator (multi-classifier models).")
@click.option("-o", "--output", default="walk.png", show_default=True, help="The grid (.png or .jpg).")
def interpolate_command(model: str, label: int, pairs: int, steps: int, seed: int, classifier: int, output: str) -> None:
    """Draw walks between two latents of one label: each row starts at one sample and ends at another.

    With a code-book model (codes > 0) both ends are fresh draws of the label's code density and the
    walk follows the sphere (slerp); otherwise it is a straight line between two Gaussian latents.
    """
    import genzoo
    from genzoo.images import output_target, save_grid

    path, fmt = output_target(output, None, "walk")
    if fmt != "grid":
        raise genzoo.GenzooError(f"-o {output}: an interpolation is written as one grid image (.png or .jpg)")
    generator = genzoo.load(model)
    if generator.name != "mmb":
        raise genzoo.GenzooError(f"{model} is a {generator.name!r} model; interpolation walks an mmb generator's latents")
    images = generator.interpolate(label, pairs=pairs, steps=steps, seed=seed, classifier=classifier)
    save_grid(images, path, nrow=steps)
    click.echo(f"wrote {pairs} walk(s) of {steps} images of label {label} to {path}")
