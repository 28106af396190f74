"""MMB: Lambda, the KKT conditions of a trained classifier, the 2D toy, and the three methods end to end."""

import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import genzoo
from genzoo.cli import cli
from genzoo.errors import GenzooError
from genzoo.plugins import get_host
from genzoo_mmb.classifier import ClassifierConfig, MMBClassifier
from genzoo_mmb.generator import GeneratorConfig, MMBGenerator
from genzoo_mmb.homogeneity import estimate_lambda, scaling_error
from genzoo_mmb.kkt import KKTTarget, fit_multipliers
from genzoo_mmb.reconstruct import MMBReconstruct, ReconstructConfig

# The generator of the 2D toy: an MLP (a point is a 2 x 1 x 1 "image"), without mode seeking, one
# generated set per classifier: the variant whose landing on the margin points these tests measure.
POINTS = {"generator": "mlp", "mode_seeking": 0.0, "shared": False}


def run_steps(method, steps, batch_size=16):
    """What genzoo.train's loop does with a method, without files: steps of its own optimiser."""
    optimizer = method.configure_optimizers()
    for _ in range(steps):
        losses = method.training_step({"x": None, "y": None, "size": batch_size})
        optimizer.zero_grad()
        losses["loss"].backward()
        optimizer.step()
    return {k: float(v.detach()) for k, v in losses.items()}


def clusters(seed=0, per_cluster=20, std=0.05):
    """Three labelled 2D Gaussian clusters on a ring in [0, 1]^2, as 2 x 1 x 1 "images"."""
    g = torch.Generator().manual_seed(seed)
    angles = torch.tensor([0.3 + 2 * math.pi * k / 3 for k in range(3)])
    centres = 0.5 + 0.3 * torch.stack([angles.cos(), angles.sin()], 1)
    y = torch.arange(3).repeat_interleave(per_cluster)
    x = centres[y] + std * torch.randn(len(y), 2, generator=g)
    return x[:, :, None, None], y


@pytest.fixture(scope="module")
def toy_classifier(tmp_path_factory):
    """A bias-free 2-layer ReLU MLP trained by full-batch GD deep into the max-margin regime on the clusters."""
    x, y = clusters()
    torch.manual_seed(0)
    clf = MMBClassifier(ClassifierConfig(channels=2, image_size=1, num_classes=3, width=64, depth=2, per_class=20, lr=0.3))
    clf.set_training_set(x, y)
    logs = run_steps(clf, 2000)
    path = genzoo.save_pretrained(clf, tmp_path_factory.mktemp("mmb") / "toy-classifier")
    return path, x, y, logs


# -- Lambda ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch,bias", [("mlp", False), ("mlp", True), ("cnn", False), ("cnn", True)])
def test_lambda_satisfies_the_scaling_identity_on_fresh_inputs(arch, bias):
    torch.manual_seed(0)
    clf = MMBClassifier(ClassifierConfig(arch=arch, bias=bias, channels=1, image_size=8, num_classes=4, width=16,
                                         depth=3, per_class=1, init_scale=1.0))
    lam = estimate_lambda(clf.net, clf.image_shape, seed=0)
    fresh = torch.randn(32, *clf.image_shape, generator=torch.Generator().manual_seed(123))
    for alpha in (1.0, -0.7):
        assert scaling_error(clf.net, lam, alpha, fresh) < 1e-4
    if bias:  # the biases take the accumulated Lambda of the layers below them; the last one is 1
        assert lam[max(n for n in lam if n.endswith("bias"))] == pytest.approx(1.0, abs=1e-8)


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_minimum_norm_lambda_of_a_bias_free_mlp_is_one_over_depth(depth):
    torch.manual_seed(0)
    clf = MMBClassifier(ClassifierConfig(channels=1, image_size=6, num_classes=3, width=12, depth=depth, per_class=1))
    lam = estimate_lambda(clf.net, clf.image_shape)
    assert len(lam) == depth and all(v == pytest.approx(1 / depth, abs=1e-9) for v in lam.values())


@pytest.fixture
def plugin_commands():
    """The CLI with the plugins' commands added, as `genzoo` (cli.main) does."""
    before = set(cli.commands)
    get_host().add_commands(cli)
    yield cli
    for name in set(cli.commands) - before:
        cli.commands.pop(name)


def test_lambda_command_prints_lambda_per_tensor(toy_classifier, plugin_commands):
    result = CliRunner().invoke(plugin_commands, ["mmb", "lambda", str(toy_classifier[0])])
    assert result.exit_code == 0, result.output
    assert "layers.0.weight" in result.output and "Lambda = 0.500000  (max block)" in result.output
    error = float(result.output.split("relative error ")[1].split()[0])
    assert error < 1e-4


# -- the KKT conditions on the true training set -------------------------------------------------------


def test_trained_classifier_satisfies_stationarity_with_nonnegative_multipliers(toy_classifier):
    path, x, y, logs = toy_classifier
    assert logs["accuracy"] == 1.0 and logs["margin"] > 500  # deep in the max-margin regime (min q ~ 596)
    target = KKTTarget(genzoo.load(path))
    assert target.margins(x, y).min() == pytest.approx(1.0, abs=1e-4)  # rescaled: smallest margin 1
    fit = fit_multipliers(target, x, y, active=0.05)  # multipliers only on pairs with margin <= 1.05
    # measured: relative residual 0.0174 on 3 margin points (all pairs allowed: 0.0034, but on points off the margin)
    assert fit.relative_residual < 0.03
    assert (fit.margins[fit.support] < 1.05).all() and fit.support.sum() == 3


def test_stationarity_loss_reaches_the_generator_and_the_multiplier_net(toy_classifier):
    torch.manual_seed(0)
    gen = MMBGenerator(GeneratorConfig(**POINTS, classifiers=(str(toy_classifier[0]),), latent=4, width=32))
    gen.setup_fit(None)
    labels = torch.arange(8) % 3
    x = gen.generate(torch.randn(8, 4), labels)
    loss, _, scale = gen.targets[0].stationarity(x, labels, gen.targets[0].unit * gen.multipliers(x, labels), 150.0)
    assert loss == 1 and scale == 0  # untrained: points misclassified on average, no multiplier scale helps
    run_steps(gen, 30)  # the dual loss moves the points across the margin
    x = gen.generate(torch.randn(8, 4), labels)
    loss, _, scale = gen.targets[0].stationarity(x, labels, gen.targets[0].unit * gen.multipliers(x, labels), 150.0)
    assert scale > 0 and loss < 1
    gen.zero_grad()
    loss.backward()  # double backprop: through grad_theta q into x = G(eps, y) and into lambda = h(x, y)
    for net in (gen.generator, gen.multiplier):
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.parameters())


def test_generator_trains_and_reloads_without_the_classifier(toy_classifier, tmp_path):
    torch.manual_seed(0)
    gen = MMBGenerator(GeneratorConfig(**POINTS, classifiers=(str(toy_classifier[0]),), latent=4, width=32))
    gen.setup_fit(None)
    start = gen.generate(torch.randn(16, 4), torch.arange(16) % 3)
    before = gen.targets[0].margins(start, torch.arange(16) % 3).mean()
    logs = run_steps(gen, 40)
    assert logs["margin"] > before  # the dual loss moves the samples out towards the margin
    path = genzoo.save_pretrained(gen, tmp_path / "gen")
    again = genzoo.load(path)  # sampling needs no classifier
    images = again.sample(6, labels=torch.arange(6) % 3, seed=0)
    assert images.min() >= 0 and images.max() <= 1
    assert torch.equal(images, gen.sample(6, labels=torch.arange(6) % 3, seed=0))


def test_reconstruction_starts_at_the_mean_image_once(toy_classifier):
    torch.manual_seed(0)
    rec = MMBReconstruct(ReconstructConfig(classifier=str(toy_classifier[0]), count=6, init_std=0.01))
    rec.setup_fit(None)
    mean = rec.targets[0].classifier.mean
    assert (rec.raw_images() - mean).abs().max() < 0.05 and torch.equal(rec.centre, mean)
    first = rec.raw_images().detach().clone()
    rec.setup_fit(None)  # a resumed run: the pixels came back from the checkpoint, the mean is not added twice
    assert torch.equal(rec.raw_images().detach(), first)


# -- the 2D toy: generated points land on the margin points ------------------------------------------


@pytest.mark.slow  # over 5 s on 2 cores: the default suite stays under 3 minutes
def test_generator_trained_from_the_classifier_alone_lands_on_its_margin_points(toy_classifier):
    path, x, y, _ = toy_classifier
    torch.manual_seed(0)
    gen = MMBGenerator(GeneratorConfig(**POINTS, classifiers=(str(path),), latent=1, width=128, dual_weight=10.0, lr=1e-3))
    gen.setup_fit(None)
    run_steps(gen, 1500, batch_size=16)

    points = gen.sample(300, seed=0).flatten(1)
    train = x.flatten(1)
    centres = torch.stack([train[y == c].mean(0) for c in range(3)])
    spread = (train - centres[y]).norm(dim=1).pow(2).mean().sqrt()  # RMS distance to the cluster centre
    distance = torch.cdist(points, train)
    margin_points = fit_multipliers(KKTTarget(genzoo.load(path)), x, y, active=0.05).support
    # measured: mean distance 0.0044 = 0.062 spread (spread 0.071); 3 of 3 margin points within 0.1 spread
    assert distance.min(1).values.mean() < 0.1 * spread
    assert (distance.min(0).values[margin_points] < 0.1 * spread).float().mean() >= 0.8


# -- the methods through the CLI and the API ---------------------------------------------------------------


def test_fit_classifier_generator_and_reconstruction_from_the_cli(toy_npz, tmp_path):
    runner = CliRunner()
    clf_dir, gen_dir, rec_dir = tmp_path / "clf", tmp_path / "gen", tmp_path / "rec"
    common = ["--no-progress", "--checkpoint-every", "0", "--sample-every", "0"]
    result = runner.invoke(cli, ["fit", "mmb-classifier", "--dataset", f"npz:{toy_npz}", "--steps", "60", "--batch-size", "8",
                                 "--out", str(clf_dir), "--set", "image_size=8", "--set", "num_classes=4",
                                 "--set", "per_class=5", "--set", "width=32", "--set", "lr=0.2", *common])
    assert result.exit_code == 0, result.output
    clf = genzoo.load(clf_dir)
    labels = torch.from_numpy(np.load(toy_npz)["y"])  # the subset: 5 images of each label, saved as indices
    assert torch.equal(labels[clf.indices].view(4, 5), torch.arange(4)[:, None].expand(4, 5))
    assert clf.margin > 0 and clf.mean.shape == (1, 8, 8)

    result = runner.invoke(cli, ["fit", "mmb", "--steps", "3", "--batch-size", "8", "--out", str(gen_dir),
                                 "--set", f"classifiers={clf_dir},{clf_dir}", "--set", "width=32",
                                 "--set", "shared=false", *common])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["fit", "mmb-reconstruct", "--steps", "3", "--out", str(rec_dir),
                                 "--set", f"classifier={clf_dir}", "--set", "count=12", *common])
    assert result.exit_code == 0, result.output

    import shutil

    shutil.rmtree(clf_dir)  # sampling needs no classifier
    gen = genzoo.load(gen_dir)
    assert gen.config.num_classifiers == 2 and gen.config.image_size == 8
    a = gen.sample(12, seed=0, batch_size=5, classifier=1)
    assert a.shape == (12, 1, 8, 8) and torch.equal(a[:4], gen.sample(4, seed=0, classifier=1))
    assert not torch.equal(a, gen.sample(12, seed=0, batch_size=5, classifier=0))
    with pytest.raises(genzoo.GenzooError, match="classifier index must be in 0..1"):
        gen.sample(2, classifier=2)
    rec = genzoo.load(rec_dir)
    images = rec.images().detach()
    assert rec.centre.abs().sum() > 0 and images.min() >= 0 and images.max() <= 1
    assert torch.equal(rec.sample(30, seed=5), images[torch.arange(30) % 12])
    # explicit labels: the (i // C)-th reconstruction of each label, cycling through that label's ones
    assert torch.equal(rec.sample(8, labels=torch.full((8,), 3)), images[torch.tensor([3, 3, 3, 3, 7, 7, 7, 7])])


def test_generator_without_a_classifier_says_how_to_give_one():
    with pytest.raises(genzoo.GenzooError, match="--set classifiers=DIR"):
        MMBGenerator()
    with pytest.raises(genzoo.GenzooError, match="--set classifier="):
        MMBReconstruct(ReconstructConfig(count=4))


def test_the_plugin_registers_its_methods_and_command():
    host = get_host()
    assert {"mmb", "mmb-classifier", "mmb-reconstruct"} <= set(host.methods)
    assert not host.plugins["mmb"].errors


def test_a_code_book_generator_lands_near_the_training_points_and_samples_fresh_ones(toy_classifier, tmp_path):
    path, x, y, _ = toy_classifier
    torch.manual_seed(0)
    gen = MMBGenerator(GeneratorConfig(**POINTS, classifiers=(str(path),), latent=2, width=64, codes=60, lr=3e-3))
    gen.setup_fit(None)
    run_steps(gen, 600)
    gen.prepare_export()
    codes = gen.generate(torch.nn.functional.normalize(gen.codes, dim=1), gen.code_labels).detach().flatten(1)
    spread = (x.flatten(1) - torch.stack([x.flatten(1)[y == c].mean(0) for c in range(3)])[y]).norm(dim=1).pow(2).mean().sqrt()
    assert torch.cdist(codes, x.flatten(1)).min(1).values.mean() < 0.5 * spread
    again = genzoo.load(genzoo.save_pretrained(gen, tmp_path / "gen"))  # the densities travel as buffers
    labels = torch.arange(30) % 3
    fresh = again.sample(30, labels=labels, seed=1)
    assert torch.equal(fresh, gen.sample(30, labels=labels, seed=1))
    assert not torch.allclose(fresh, again.sample(30, labels=labels, seed=2))  # fresh codes, not a fixed set
    near = again.sample(30, labels=labels, seed=1, temperature=0.0)  # the label's mean code
    assert torch.allclose(near[0::3], near[0].expand(10, -1, -1, -1))
    with pytest.raises(GenzooError, match="codes=61"):
        MMBGenerator(GeneratorConfig(**POINTS, classifiers=(str(path),), latent=2, width=16, codes=61)).setup_fit(None)


def test_interpolation_walks_between_two_samples_of_one_label(tmp_path, plugin_commands):
    runner = CliRunner()
    out = tmp_path / "walk.png"
    result = runner.invoke(plugin_commands, ["mmb", "interpolate", "mmb-mnist", "--label", "3", "--pairs", "2", "--steps", "5",
                                 "-o", str(out)])
    assert result.exit_code == 0, result.output
    from genzoo.datasets import load_images

    images, _ = load_images(out)
    gen = genzoo.load("mmb-mnist")
    walk = gen.interpolate(3, pairs=2, steps=5)
    assert images.shape == (10, 1, 28, 28) and (images - walk).abs().max() <= 0.5 / 255 + 1e-6
    assert not torch.allclose(walk[0], walk[4])  # the two ends of a walk differ
    bad = runner.invoke(plugin_commands, ["mmb", "interpolate", "mmb-mnist", "--label", "12", "-o", str(tmp_path / "x.png")])
    assert bad.exit_code == 1 and "label must be in 0..9" in bad.output


def test_mode_seeking_ratio_grows_with_spread_images():
    from genzoo_mmb.generator import mode_seeking_ratio

    z = torch.randn(8, 4)
    labels = torch.arange(8) % 2
    x = torch.rand(8, 1, 4, 4)
    assert mode_seeking_ratio(2 * x, z, labels) == pytest.approx(2 * mode_seeking_ratio(x, z, labels))


def test_first_layer_mode_seeking_ignores_what_the_classifier_ignores():
    from types import SimpleNamespace

    from genzoo_mmb.generator import first_layer_view, mode_seeking_ratio
    from genzoo_mmb.nets import MLP

    net = MLP(16, 16, 2, 2, bias=False)
    with torch.no_grad():
        net.layers[0].weight.copy_(3 * torch.eye(16))
    view = first_layer_view(SimpleNamespace(classifier=SimpleNamespace(net=net)))
    z, labels = torch.randn(8, 4), torch.arange(8) % 2
    x = torch.rand(8, 1, 4, 4)
    # an orthogonal first layer (any scale) measures what pixels measure
    assert mode_seeking_ratio(x, z, labels, view) == pytest.approx(float(mode_seeking_ratio(x, z, labels)), rel=1e-5)
    with torch.no_grad():
        net.layers[0].weight[:, 0] = 0  # the classifier ignores pixel (0, 0)
    corner = torch.zeros(8, 1, 4, 4)
    corner[:, 0, 0, 0] = torch.rand(8)
    view = first_layer_view(SimpleNamespace(classifier=SimpleNamespace(net=net)))
    assert float(mode_seeking_ratio(corner, z, labels)) > 0
    assert float(mode_seeking_ratio(corner, z, labels, view)) == 0


@pytest.mark.parametrize("arch", ["mlp", "cnn"])
def test_first_layer_view_keeps_pixel_distances_for_an_evenly_spread_layer(arch):
    from types import SimpleNamespace

    from genzoo_mmb.generator import first_layer_view
    from genzoo_mmb.nets import CNN, MLP

    torch.manual_seed(0)
    net = MLP(784, 256, 2, 10, bias=False) if arch == "mlp" else CNN(1, 28, 64, 2, 10, bias=False)
    with torch.no_grad():  # i.i.d. weights: every input value weighed alike
        for p in net.parameters():
            p.normal_()
    view = first_layer_view(SimpleNamespace(classifier=SimpleNamespace(net=net)))
    dx = torch.randn(64, 1, 28, 28)
    ratio = view(dx).flatten(1).pow(2).sum(1).mean() / dx.flatten(1).pow(2).sum(1).mean()
    assert 0.8 < float(ratio) < 1.25


def test_a_shared_set_gives_every_classifier_the_same_images_and_labels_and_its_own_multipliers(toy_classifier):
    torch.manual_seed(0)
    path = str(toy_classifier[0])
    gen = MMBGenerator(GeneratorConfig(**{**POINTS, "shared": True}, classifiers=(path, path), latent=4, width=32))
    gen.setup_fit(None)
    seen = []
    for target in gen.targets:
        original = target.stationarity

        def recording(x, labels, lam, slope, original=original):
            seen.append((x, labels, lam))
            return original(x, labels, lam, slope)

        target.stationarity = recording
    for _ in range(5):  # a fresh random label offset each step: a mismatch would show within 5
        seen.clear()
        gen.training_step({"size": 12})
        (x0, y0, lam0), (x1, y1, lam1) = seen
        assert x1 is x0 and torch.equal(y1, y0)
    assert gen.multiplier[0].in_features == 2 + 3 + 2  # h(x, y, k): k one-hot even when shared


def test_mode_seeking_is_zero_for_a_batch_without_two_images_of_a_label():
    from genzoo_mmb.generator import mode_seeking_ratio

    x, z = torch.rand(3, 1, 4, 4, requires_grad=True), torch.randn(3, 2)
    assert mode_seeking_ratio(x, z, torch.tensor([0, 1, 2])) == 0  # not the mean of no pairs (nan)
    ratio = mode_seeking_ratio(x, z, torch.tensor([0, 1, 0]))
    assert torch.isfinite(ratio) and ratio > 0
