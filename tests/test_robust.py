"""Robust refiner: PGD geometry, identity at 0 steps, gradient reaching every loss term, composition."""

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import genzoo
from genzoo.cli import cli
from genzoo_robust import RobustRefiner
from genzoo_robust.attacks import pgd_ascent, project, random_start


def small(**overrides):
    torch.manual_seed(0)
    return RobustRefiner({"width": 8, **overrides})


def test_projection_and_pgd_stay_inside_the_ball_and_the_pixel_range():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(6, 1, 28, 28, generator=g)
    start = random_start(x, 1.5, generator=g)
    assert ((start - x).flatten(1).norm(dim=1) <= 1.5 + 1e-5).all() and start.min() >= 0 and start.max() <= 1
    far = project(x + 10 * torch.randn(x.shape, generator=g), x, 0.7)
    assert ((far - x).flatten(1).norm(dim=1) <= 0.7 + 1e-5).all() and far.min() >= 0 and far.max() <= 1
    model = small()
    adv = pgd_ascent(lambda im: model.logits(im)[:, 3], x, eps=0.5, steps=5)
    assert ((adv - x).flatten(1).norm(dim=1) <= 0.5 + 1e-5).all() and adv.min() >= 0 and adv.max() <= 1
    assert (model.logits(adv)[:, 3] > model.logits(x)[:, 3]).all()  # it ascends
    assert all(p.grad is None for p in model.parameters())  # and leaves parameter gradients alone


def test_refine_with_zero_steps_is_the_identity():
    model = small()
    x = torch.rand(4, 1, 28, 28)
    assert torch.equal(model.refine(x, labels=[1, 2, 3, 4], steps=0), x)


def test_refine_stays_within_its_radius_and_raises_the_objective():
    model = small()
    x = torch.rand(4, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0, 1, 2, 3])
    out = model.refine(x, labels=labels, steps=10, eps=0.8)
    assert ((out - x).flatten(1).norm(dim=1) <= 0.8 + 1e-4).all()
    with torch.no_grad():
        before = torch.log_softmax(model.logits(x), 1).gather(1, labels[:, None])
        after = torch.log_softmax(model.logits(out), 1).gather(1, labels[:, None])
    assert (after > before).all()


def test_refinement_draws_no_noise_and_does_not_depend_on_the_batch():
    model = small()
    x = torch.rand(3, 1, 28, 28, generator=torch.Generator().manual_seed(2))
    a = model.refine(x, labels=[0, 1, 2], steps=3, seed=7)
    assert torch.equal(a, model.refine(x, labels=[0, 1, 2], steps=3, seed=8))
    assert torch.allclose(a, model.refine(x, labels=[0, 1, 2], steps=3, seed=7, batch_size=1), atol=1e-5)
    assert not torch.equal(a, x)


@pytest.mark.parametrize("realness", ["energy", "logit"])
def test_every_loss_term_sends_gradient_to_the_classifier(realness, monkeypatch):
    model = small(realness=realness)
    fakes = torch.rand(4, 1, 28, 28)
    monkeypatch.setattr(model, "labelled_fakes", lambda n, device: (fakes[:n], torch.tensor([3, 2, 1, 0])[:n]))
    batch = {"x": torch.rand(4, 1, 28, 28), "y": torch.tensor([0, 1, 2, 3])}
    for term in ("ce", "bce_real", "bce_fake"):
        model.zero_grad(set_to_none=True)
        losses = model.training_step(batch)
        losses[term].backward()
        total = sum(p.grad.abs().sum() for p in model.parameters() if p.grad is not None)
        assert total > 0, f"{term} sends no gradient: it is detached (the released code's bug)"
    want = losses["ce"] + model.config.lambda_bce * (losses["bce_real"] + losses["bce_fake"])
    assert torch.allclose(losses["loss"], want)


def test_the_config_carries_no_ablation_switches_or_measured_useless_options():
    from dataclasses import fields

    names = {f.name for f in fields(RobustRefiner.Config)}
    assert not names & {"discriminator", "adversarial", "ce_on_fakes", "langevin", "stop_at"}
    assert set(RobustRefiner.refine_options) == {"eps", "step_size"}
    for name in ("robust-mnist", "robust-consistency-mnist", "robust-cifar10", "robust-consistency-cifar10"):
        assert genzoo.load(name).config.refine_steps == 30  # the bundled configs load without those fields


@pytest.fixture
def ablation(monkeypatch):
    """benchmarks/robust_ablation.py, imported as the benchmarks import it."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import robust_ablation

    robust_ablation.register()
    return robust_ablation


def _fake_base(monkeypatch, model, n_labels=4):
    fakes = torch.rand(4, 1, 28, 28, generator=torch.Generator().manual_seed(3))
    monkeypatch.setattr(model, "labelled_fakes", lambda n, device: (fakes[:n], torch.arange(n) % n_labels))


def test_the_ablation_method_with_its_defaults_trains_and_refines_as_robust(ablation, monkeypatch):
    batch = {"x": torch.rand(4, 1, 28, 28, generator=torch.Generator().manual_seed(4)), "y": torch.tensor([0, 1, 2, 3])}
    results = []
    for cls in (RobustRefiner, ablation.RobustAblation):
        torch.manual_seed(0)
        model = cls({"width": 8})
        _fake_base(monkeypatch, model)
        torch.manual_seed(1)
        losses = model.training_step(batch)
        refined = model.refine(batch["x"], labels=batch["y"], steps=3)
        results.append(({k: v.detach() for k, v in losses.items()}, refined))
    (plain, refined_plain), (ablated, refined_ablated) = results
    assert plain.keys() == ablated.keys() and all(torch.equal(plain[k], ablated[k]) for k in plain)
    assert torch.equal(refined_plain, refined_ablated)


def test_classifier_only_ablation_has_no_discriminator_terms(ablation, monkeypatch):
    model = ablation.RobustAblation({"width": 8, "discriminator": False})
    monkeypatch.setattr(model, "labelled_fakes", lambda n, device: pytest.fail("the ablation must not sample fakes"))
    losses = model.training_step({"x": torch.rand(2, 1, 28, 28), "y": torch.tensor([0, 1])})
    assert "bce_fake" not in losses and torch.equal(losses["loss"], losses["ce"])
    x = torch.rand(2, 1, 28, 28)
    logits = model.logits(x)
    assert torch.equal(model.refine_objective(logits, torch.tensor([0, 1])),
                       torch.log_softmax(logits, 1)[:, :2].diagonal())


def test_plain_ablation_trains_on_the_images_as_they_are(ablation, monkeypatch):
    model = ablation.RobustAblation({"width": 8, "discriminator": False, "adversarial": False})
    x = torch.rand(2, 1, 28, 28)
    assert model.attack_reals(x, torch.tensor([0, 1])) is x
    monkeypatch.setattr("genzoo_robust.model.pgd_ascent", lambda *a, **k: pytest.fail("plain training runs no PGD"))
    model.training_step({"x": x, "y": torch.tensor([0, 1])})


def test_ce_on_fakes_adds_a_term_that_reaches_the_classifier(ablation, monkeypatch):
    model = ablation.RobustAblation({"width": 8, "ce_on_fakes": True})
    _fake_base(monkeypatch, model)
    losses = model.training_step({"x": torch.rand(4, 1, 28, 28), "y": torch.tensor([0, 1, 2, 3])})
    losses["ce_fake"].backward()
    assert sum(p.grad.abs().sum() for p in model.parameters() if p.grad is not None) > 0
    assert losses["loss"] > losses["ce"] + losses["bce_real"] + losses["bce_fake"]


def test_an_ablation_trained_by_the_benchmark_script_loads_and_refines(ablation, toy_site, tmp_path):
    gen = _tiny_generator_dir(tmp_path)
    out = tmp_path / "clsonly"
    with pytest.raises(SystemExit) as done:
        ablation.main(["classifier-only", "--set", f"base={gen}", "--set", "width=8", "--steps", "2",
                       "--batch-size", "4", "--data-root", str(tmp_path), "--dataset", "npz:" + str(_digits(tmp_path)),
                       "--out", str(out), "--sample-every", "0", "--no-progress"])
    assert done.value.code == 0
    model = genzoo.load(out)
    assert type(model).__name__ == "RobustAblation" and model.config.discriminator is False
    x = torch.rand(2, 1, 28, 28)
    assert ((model.refine(x, steps=2, eps=0.3) - x).flatten(1).norm(dim=1) <= 0.3 + 1e-5).all()


def _digits(tmp_path):
    """16 random labelled 28x28 images as an .npz dataset."""
    g = torch.Generator().manual_seed(0)
    path = tmp_path / "digits.npz"
    __import__("numpy").savez(path, x=(torch.rand(16, 28, 28, generator=g) * 255).to(torch.uint8).numpy(),
                              y=(torch.arange(16) % 10).numpy())
    return path


def _tiny_generator_dir(tmp_path):
    """A 28x28 sample-only generator for composition tests (the toy plugin's 'sample-only')."""
    from genzoo.plugins import get_host

    torch.manual_seed(0)
    cls = get_host().method("sample-only")
    return genzoo.save_pretrained(cls({"image_size": 28}), tmp_path / "gen")


def test_sample_refine_composition_through_the_cli_is_deterministic(toy_site, tmp_path):
    gen = _tiny_generator_dir(tmp_path)
    refiner = genzoo.save_pretrained(small(base=str(gen), refine_steps=3), tmp_path / "refiner")
    runner = CliRunner()
    outs = []
    for name in ("a.npz", "b.npz"):
        result = runner.invoke(cli, ["sample", str(gen), "-n", "5", "--seed", "2", "--refine", str(refiner),
                                     "--format", "npz", "-o", str(tmp_path / name), "--batch-size", "2"])
        assert result.exit_code == 0, result.output
        outs.append(__import__("numpy").load(tmp_path / name)["x"])
    assert (outs[0] == outs[1]).all()
    plain = genzoo.load(gen).sample(5, seed=2)
    assert not torch.equal(torch.from_numpy(outs[0]).float() / 255, plain)
    own = runner.invoke(cli, ["sample", str(refiner), "-n", "3", "-o", str(tmp_path / "own.png")])
    assert own.exit_code == 0, own.output
    tight = runner.invoke(cli, ["sample", str(gen), "-n", "5", "--seed", "2", "--refine", str(refiner),
                                "--refine-opt", "eps=0.05", "--format", "npz", "-o", str(tmp_path / "t.npz")])
    assert tight.exit_code == 0, tight.output
    moved = torch.from_numpy(__import__("numpy").load(tmp_path / "t.npz")["x"]).float() / 255 - plain
    bound = 0.05 + 28 * 0.5 / 255  # the radius plus 8-bit rounding over 28x28 pixels
    assert (moved.flatten(1).norm(dim=1) <= bound).all()  # the radius reached the refiner
    assert ((torch.from_numpy(outs[0]).float() / 255 - plain).flatten(1).norm(dim=1) > bound).any()
    wrong = runner.invoke(cli, ["sample", str(gen), "-n", "2", "--refine", str(refiner), "--refine-opt", "radius=1"])
    assert wrong.exit_code != 0 and "radius" in wrong.output


def test_eval_passes_refine_options_to_the_refiner(toy_site, tmp_path):
    from genzoo.generate import generate

    gen = _tiny_generator_dir(tmp_path)
    refiner = genzoo.save_pretrained(small(base=str(gen), refine_steps=3), tmp_path / "refiner")
    plain, _ = generate(genzoo.load(gen), 4, seed=1)
    tight, _ = generate(genzoo.load(gen), 4, seed=1, refiner=genzoo.load(refiner), refine_options={"eps": 0.05})
    loose, _ = generate(genzoo.load(gen), 4, seed=1, refiner=genzoo.load(refiner))
    assert ((tight - plain).flatten(1).norm(dim=1) <= 0.05 + 1e-5).all()
    assert ((loose - plain).flatten(1).norm(dim=1) > 0.05 + 1e-5).any()
    runner = CliRunner()
    lone = runner.invoke(cli, ["eval", str(gen), "-n", "4", "--refine-opt", "eps=1"])
    assert lone.exit_code != 0 and "--refine" in lone.output
    wrong = runner.invoke(cli, ["eval", str(gen), "-n", "4", "--refine", str(refiner), "--refine-opt", "radius=1"])
    assert wrong.exit_code != 0 and "radius" in wrong.output


def test_export_recalibrate_recomputes_the_label_offset_against_the_current_base(toy_site, tmp_path):
    from safetensors.torch import load_file

    gen = _tiny_generator_dir(tmp_path)
    refiner = genzoo.save_pretrained(small(base=str(gen)), tmp_path / "refiner")
    saved = load_file(str(refiner / "model.safetensors"))["label_bias"]
    torch.manual_seed(5)  # a different base generator now lives at the same path
    from genzoo.plugins import get_host

    genzoo.save_pretrained(get_host().method("sample-only")({"image_size": 28}), gen)
    runner = CliRunner()
    assert runner.invoke(cli, ["export", str(refiner), str(tmp_path / "plain")]).exit_code == 0
    result = runner.invoke(cli, ["export", str(refiner), str(tmp_path / "recal"), "--recalibrate"])
    assert result.exit_code == 0, result.output
    assert torch.equal(load_file(str(tmp_path / "plain" / "model.safetensors"))["label_bias"], saved)
    recal = genzoo.load(tmp_path / "recal")
    assert not torch.equal(recal.label_bias, saved)
    images = genzoo.load(gen).sample(1024, seed=0, batch_size=256)
    assert torch.allclose(recal.label_bias, recal.logits(images).mean(0), atol=1e-5)


def test_export_set_changes_an_inference_default_and_refuses_architecture(toy_site, tmp_path):
    gen = _tiny_generator_dir(tmp_path)
    refiner = genzoo.save_pretrained(small(base=str(gen)), tmp_path / "refiner")
    runner = CliRunner()
    result = runner.invoke(cli, ["export", str(refiner), str(tmp_path / "eps1"), "--set", "refine_eps=1.0"])
    assert result.exit_code == 0, result.output
    before, after = genzoo.load(refiner), genzoo.load(tmp_path / "eps1")
    assert after.config.refine_eps == 1.0 and before.config.refine_eps != 1.0
    assert all(torch.equal(a, b) for a, b in zip(before.state_dict().values(), after.state_dict().values()))
    wide = runner.invoke(cli, ["export", str(refiner), str(tmp_path / "wide"), "--set", "width=64"])
    assert wide.exit_code != 0 and "changes the network's tensors" in wide.output
    assert not (tmp_path / "wide").exists()


def test_predicted_labels_do_not_depend_on_the_batch(toy_site, tmp_path):
    gen = _tiny_generator_dir(tmp_path)
    model = small(base=str(gen))
    model.prepare_export()
    assert model.label_bias.abs().sum() > 0
    x = torch.rand(8, 1, 28, 28)
    assert torch.equal(model.predict_labels(x)[:3], model.predict_labels(x[:3]))


@pytest.mark.slow  # over 5 s on 2 cores: the default suite stays under 3 minutes
def test_bundled_robust_mnist_refines_ign_samples_towards_their_labels_within_the_ball():
    from genzoo.metrics.features import extract, feature_space

    refiner = genzoo.load("robust-mnist")
    images = genzoo.load("ign-mnist").sample(64, seed=1)
    labels = refiner.predict_labels(images)
    refined = refiner.refine(images, labels=labels, seed=0)
    change = (refined - images).flatten(1).norm(dim=1)
    assert (change <= refiner.config.refine_eps + 1e-4).all() and change.mean() > 0.5
    assert refined.min() >= 0 and refined.max() <= 1
    space = feature_space(dataset="mnist")
    agree_before = (extract(space, images)[1].argmax(1) == labels).float().mean()
    agree_after = (extract(space, refined)[1].argmax(1) == labels).float().mean()
    assert agree_after >= agree_before and agree_after > 0.9  # an independent classifier agrees more
