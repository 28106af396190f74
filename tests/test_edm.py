"""EDM's sampler options: the deterministic Heun sampler, churn (EDM Algorithm 2), autoguidance, class conditioning
and classifier-free guidance."""

import pytest
import torch

import genzoo
from genzoo import GenzooError
from genzoo_edm import EDM
from genzoo.blocks import Churn, heun

TINY = {"width": 8, "levels": 2, "image_size": 8, "sample_steps": 4}


def tiny(seed: int, **config) -> EDM:
    torch.manual_seed(seed)
    model = EDM({**TINY, **config}).eval()
    with torch.no_grad():  # the output layer starts at zero: give the network something to say
        for p in model.net.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


def test_churn_zero_is_the_deterministic_heun_sampler_and_churn_changes_the_samples():
    model = tiny(0)
    plain = model.sample(6, seed=1)
    assert torch.equal(plain, model.sample(6, seed=1, s_churn=0.0))
    churned = model.sample(6, seed=1, s_churn=40.0, s_tmin=0.0, s_tmax=100.0)
    assert (plain - churned).abs().max() > 1e-3


def test_a_churned_image_depends_only_on_its_seed_and_index():
    model = tiny(0)
    options = {"s_churn": 40.0, "s_tmin": 0.0, "s_tmax": 100.0}
    whole = model.sample(6, seed=3, batch_size=6, **options)
    tail = model.sample(2, seed=3, start=4, batch_size=1, **options)
    assert torch.allclose(whole[4:], tail, atol=1e-5)


def test_churn_raises_only_levels_inside_its_window_and_never_past_sqrt2_minus_1():
    churn = Churn(amount=80.0, tmin=0.05, tmax=50.0)
    assert churn.gamma(80.0, 18) == 0 and churn.gamma(0.01, 18) == 0
    assert churn.gamma(1.0, 18) == pytest.approx(2 ** 0.5 - 1)
    assert Churn(amount=3.6).gamma(1.0, 18) == pytest.approx(0.2)


def test_heun_without_churn_is_exact_on_a_denoiser_that_knows_the_answer():
    target = torch.full((2, 1, 4, 4), 0.25)
    x = torch.randn(2, 1, 4, 4) * 80
    out = heun(lambda x, sigma: target, x, [80.0, 10.0, 1.0, 0.1, 0.0])
    assert torch.allclose(out, target, atol=1e-5)


def test_sampler_options_out_of_range_are_refused_in_one_sentence():
    model = tiny(0)
    with pytest.raises(GenzooError, match="s_tmin must not exceed s_tmax"):
        model.sample(1, seed=0, s_churn=10.0, s_tmin=5.0, s_tmax=1.0)
    with pytest.raises(GenzooError, match="s_churn"):
        model.sample(1, seed=0, s_churn=-1.0)
    with pytest.raises(GenzooError, match="s_tmin must not exceed s_tmax"):
        EDM({**TINY, "s_tmin": 2.0, "s_tmax": 1.0})


def test_autoguidance_mixes_the_two_denoisers_by_w_and_counts_the_guides_calls(tmp_path):
    model, weaker = tiny(0), tiny(1)
    genzoo.save_pretrained(weaker, tmp_path / "guide")
    guide = str(tmp_path / "guide")
    x, sigma = torch.randn(3, 1, 8, 8), 2.0
    with torch.no_grad():
        mixed = model.guided(None, guide, 2.5)(x, sigma)
        expected = 2.5 * model.denoise_at(x, sigma) - 1.5 * weaker.denoise_at(x, sigma)
    assert torch.allclose(mixed, expected, atol=1e-5)
    assert model.network_calls(4) == 7 and model.network_calls(4, guidance=2.5) == 14
    plain = model.sample(4, seed=0)
    assert torch.equal(plain, model.sample(4, seed=0, guide=guide, guidance=1.0))
    assert (plain - model.sample(4, seed=0, guide=guide, guidance=2.0)).abs().max() > 1e-3


def test_a_model_guided_by_its_own_copy_samples_as_it_does_unguided(tmp_path):
    model = tiny(0)
    genzoo.save_pretrained(model, tmp_path / "same")
    assert torch.allclose(model.sample(4, seed=2), model.sample(4, seed=2, guide=str(tmp_path / "same"), guidance=2.0),
                          atol=1e-6)


def test_guidance_without_a_guide_or_with_another_kind_of_model_is_refused(tmp_path):
    model = tiny(0)
    with pytest.raises(GenzooError, match="needs a guide model; add --opt guide=MODEL"):
        model.sample(1, seed=0, guidance=2.0)
    genzoo.save_pretrained(tiny(0, image_size=4), tmp_path / "small")
    with pytest.raises(GenzooError, match="must be trained on the same data"):
        model.sample(1, seed=0, guide=str(tmp_path / "small"), guidance=2.0)


def test_one_step_starts_at_sigma_max_and_returns_the_denoisers_estimate_there():
    model = tiny(0)
    assert model.noise_levels(1) == [model.config.sigma_max, 0.0]
    noise = genzoo.Noise(5, 0, 2)
    x = model.config.sigma_max * noise.randn(*model.image_shape)
    with torch.no_grad():
        expected = ((model.denoise_at(x, model.config.sigma_max) + 1) / 2).clamp(0, 1)
    assert torch.allclose(model.sample(2, seed=5, steps=1), expected, atol=1e-5)


def conditional(seed: int = 0, **config) -> EDM:
    return tiny(seed, num_classes=3, class_names=["cat", "dog", "ship"], **config)


def test_a_conditional_network_has_a_label_embedding_and_an_unconditional_one_keeps_its_tensors():
    plain, conditioned = tiny(0), conditional()
    assert set(conditioned.state_dict()) - set(plain.state_dict()) == {"net.label_embed.weight"}
    assert conditioned.state_dict()["net.label_embed.weight"].shape == (3, TINY["width"])


def test_labels_change_the_samples_and_no_label_is_the_unconditional_denoiser():
    model = conditional()
    x, sigma = torch.randn(3, 1, 8, 8), 1.5
    with torch.no_grad():
        cats, ships = (model.denoise_at(x, sigma, torch.full((3,), k)) for k in (0, 2))
        unconditional = model.denoise_at(x, sigma)
        no_label = model.denoise_at(x, sigma, torch.full((3,), genzoo.blocks.NO_LABEL))
    assert (cats - ships).abs().max() > 1e-3
    assert torch.equal(unconditional, no_label)


def test_label_dropout_replaces_about_its_rate_of_the_labels_by_no_label():
    model = conditional(label_dropout=0.25)
    torch.manual_seed(0)
    dropped = model.drop_labels(torch.arange(3).repeat(4000), 0.25)
    assert abs((dropped == genzoo.blocks.NO_LABEL).float().mean().item() - 0.25) < 0.02
    kept = dropped != genzoo.blocks.NO_LABEL
    assert torch.equal(dropped[kept], torch.arange(3).repeat(4000)[kept])
    assert tiny(0).drop_labels(torch.arange(3), 0.25) is None


def test_class_names_become_labels_and_an_unknown_name_lists_the_classes():
    model = conditional()
    by_name = model.sample(4, seed=1, labels=["ship", "cat"])
    assert torch.equal(by_name, model.sample(4, seed=1, labels=[2, 0, 2, 0]))
    with pytest.raises(GenzooError, match="no class 'dragon'; its classes are cat, dog, ship"):
        model.sample(2, seed=1, labels=["dragon"])
    with pytest.raises(GenzooError, match="names no classes; give labels as integers 0..2"):
        tiny(0, num_classes=3).sample(2, seed=1, labels=["cat"])


def test_classifier_free_guidance_at_w_1_is_the_conditional_sampler_and_mixes_by_w_otherwise():
    model = conditional()
    labels = torch.tensor([0, 1, 2])
    assert torch.equal(model.sample(3, seed=2, labels=labels), model.sample(3, seed=2, labels=labels, cfg=1.0))
    x, sigma = torch.randn(3, 1, 8, 8), 2.0
    with torch.no_grad():
        mixed = model.guided(labels, None, 1.0, cfg=3.0)(x, sigma)
        conditional_d, unconditional_d = model.denoise_at(x, sigma, labels), model.denoise_at(x, sigma)
    assert torch.allclose(mixed, unconditional_d + 3.0 * (conditional_d - unconditional_d), atol=1e-5)
    assert model.network_calls(4, cfg=3.0) == 14
    with pytest.raises(GenzooError, match="cfg 2 needs a class-conditional model"):
        tiny(0).sample(1, seed=0, cfg=2.0)
    with pytest.raises(GenzooError, match="choose one guidance"):
        model.sample(1, seed=0, cfg=2.0, guidance=2.0, guide="edm-mnist")


def test_a_conditional_edm_trains_on_labelled_data_only(tmp_path):
    images = (torch.rand(8, 1, 8, 8) * 255).to(torch.uint8).numpy()
    import numpy as np

    np.savez(tmp_path / "unlabelled.npz", x=images)
    with pytest.raises(GenzooError, match="has no labels; train an unconditional model"):
        genzoo.fit("edm", steps=1, out=tmp_path / "run", dataset=f"npz:{tmp_path / 'unlabelled.npz'}", batch_size=4,
                   config={**TINY, "num_classes": 3}, progress=False)
    np.savez(tmp_path / "labelled.npz", x=images, y=np.arange(8) % 3)
    out = genzoo.fit("edm", steps=1, out=tmp_path / "run2", dataset=f"npz:{tmp_path / 'labelled.npz'}", batch_size=4,
                     config={"width": 8, "levels": 2, "num_classes": 3}, progress=False, sample_every=0)
    model = genzoo.load(out)
    assert model.num_classes == 3 and model.image_shape == (1, 8, 8)  # the shape taken from the data


def test_sample_per_class_draws_each_class_k_times_in_labelled_rows(tmp_path):
    from click.testing import CliRunner

    from genzoo.cli import cli

    model_dir = tmp_path / "conditional"
    genzoo.save_pretrained(conditional(), model_dir)
    runner = CliRunner()
    npz = runner.invoke(cli, ["sample", str(model_dir), "--per-class", "2", "-o", str(tmp_path / "x.npz"), "--no-progress"])
    assert npz.exit_code == 0, npz.output
    import numpy as np

    assert np.load(tmp_path / "x.npz")["y"].tolist() == [0, 0, 1, 1, 2, 2]
    grid = runner.invoke(cli, ["sample", str(model_dir), "--per-class", "2", "-o", str(tmp_path / "rows.png"),
                               "--no-progress"])
    assert grid.exit_code == 0, grid.output
    from PIL import Image

    width, height = Image.open(tmp_path / "rows.png").size
    assert height == 3 * (2 * 8 + 2 * 2) and width > 2 * (2 * 8 + 2)  # three rows of two 16-pixel images, a margin
    refused = runner.invoke(cli, ["sample", str(model_dir), "--per-class", "2", "--labels", "cat"])
    assert refused.exit_code != 0 and "give it or --labels, not both" in refused.output
    plain_dir = tmp_path / "plain"
    genzoo.save_pretrained(tiny(0), plain_dir)
    refused = runner.invoke(cli, ["sample", str(plain_dir), "--per-class", "2"])
    assert refused.exit_code != 0 and "is not class-conditional" in refused.output


def test_a_conditional_models_push_preview_is_drawn_per_class_as_its_card_says(tmp_path):
    from genzoo.pushing import stage_push

    staged = stage_push(conditional(), tmp_path / "staged", repo_id="org/tiny", preview=6)
    card = (staged / "README.md").read_text()
    assert "genzoo sample hf://org/tiny --per-class 2 --seed 0" in card
    assert (staged / "samples.png").is_file()
