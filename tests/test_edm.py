"""EDM's sampler options: the deterministic Heun sampler, churn (EDM Algorithm 2) and autoguidance."""

import pytest
import torch

import genzoo
from genzoo import GenzooError
from genzoo_edm import EDM
from genzoo_edm.sampler import Churn, heun

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
        mixed = model.guided(guide, 2.5)(x, sigma)
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
