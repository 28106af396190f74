"""Consistency models: the curriculum's and the loss's maths, the boundary condition, the sampler, refine's rounds, and
that training pulls one-step samples onto the data."""

import json
import math

import pytest
import torch

import genzoo
from genzoo.testing import parametrize_with_checks
from genzoo_consistency import Consistency
from genzoo_consistency.curriculum import curriculum, lognormal_weights
from genzoo_consistency.losses import pseudo_huber
from genzoo.blocks.karras import edm_scalings, karras_sigmas

TINY = {"width": 8, "levels": 2, "image_size": 8}


@parametrize_with_checks([(Consistency, TINY)])
def test_consistency_keeps_the_contract(method_cls, config, check):
    check(method_cls, config)


def test_karras_levels_run_from_sigma_min_to_sigma_max_evenly_in_sigma_to_the_one_over_rho():
    sigmas = karras_sigmas(11, 0.002, 80.0, 7.0)
    assert sigmas[0].item() == pytest.approx(0.002) and sigmas[-1].item() == pytest.approx(80.0)
    roots = sigmas ** (1 / 7)
    assert torch.allclose(roots.diff(), roots.diff().mean().expand(10), atol=1e-12)


def test_the_curriculum_doubles_from_s0_to_s1_in_equal_stages():
    total = 8000  # log2(1280 / 10) + 1 = 8 stages of 1,000 steps
    assert [curriculum(k, total, 10, 1280) for k in (0, 999, 1000, 2000, 6999, 7000, 7999, 50_000)] == \
        [11, 11, 21, 41, 641, 1281, 1281, 1281]


def test_lognormal_weights_are_a_distribution_peaked_near_exp_p_mean():
    sigmas = karras_sigmas(641, 0.002, 80.0, 7.0)
    weights = lognormal_weights(sigmas, -1.1, 2.0)
    assert weights.min() >= 0 and weights.sum().item() == pytest.approx(1.0)
    mode = sigmas[weights.argmax()].item()
    assert 0.05 < mode < 1.0  # the densest pairs sit around exp(-1.1) = 0.33 (a density per unit of sigma)
    median_pair = sigmas[(weights.cumsum(0) >= 0.5).nonzero()[0]].item()
    assert median_pair == pytest.approx(math.exp(-1.1), rel=0.05)


def test_pseudo_huber_is_quadratic_near_zero_and_linear_far_away():
    a = torch.zeros(1, 4)
    c = 0.03
    small = torch.full((1, 4), 1e-4)
    assert pseudo_huber(small, a, c).item() == pytest.approx(small.square().sum().item() / (2 * c), rel=1e-3)
    large = torch.full((1, 4), 10.0)
    assert pseudo_huber(large, a, c).item() == pytest.approx(20.0 - c, rel=1e-4)


def test_f_is_the_identity_at_sigma_min_whatever_the_network():
    model = Consistency(TINY)
    torch.nn.init.normal_(model.net.out.weight)  # a network whose output is far from zero
    x = torch.randn(3, 1, 8, 8)
    c_skip, c_out, _ = edm_scalings(torch.tensor(0.002), 0.5, 0.002)
    assert c_skip.item() == 1.0 and c_out.item() == 0.0
    assert torch.equal(model.denoise(x, torch.full((3,), 0.002)), x)
    assert not torch.allclose(model.denoise(x, torch.full((3,), 1.0)), x, atol=1e-3)


def test_the_two_step_sampler_visits_sigma_max_then_mid_sigma_and_seeds_each_image():
    model = Consistency(TINY)
    assert model.sample_sigmas(1) == [80.0]
    assert model.sample_sigmas(2) == [80.0, pytest.approx(0.821)]
    three = model.sample_sigmas(3)
    assert three[1] == pytest.approx(0.821) and 0.002 < three[2] < 0.821
    four = model.sample(4, seed=0, steps=2)
    assert torch.allclose(model.sample(2, seed=0, steps=2), four[:2], atol=1e-6)
    assert not torch.allclose(four, model.sample(4, seed=0, steps=1), atol=1e-4)
    with pytest.raises(Exception, match="steps must be at least 1, got 0"):
        model.sample(2, seed=0, steps=0)


def test_refine_zero_rounds_is_the_identity_and_sigma_is_checked():
    model = Consistency(TINY)
    x = torch.rand(3, 1, 8, 8)
    x[0, 0, 0, 0] = 1e-9  # (2x - 1 + 1) / 2 would round this away
    assert torch.equal(model.refine(x, steps=0, seed=0), x)
    one, two = model.refine(x, steps=1, seed=0), model.refine(x, steps=2, seed=0)
    assert not torch.allclose(one, two, atol=1e-4)
    assert not torch.allclose(model.refine(x, steps=1, seed=0, sigma=0.1), one, atol=1e-4)
    with pytest.raises(Exception, match="sigma must lie in"):
        model.refine(x, steps=1, sigma=100.0)


def test_the_teacher_receives_no_gradient():
    model = Consistency(TINY)
    calls = []
    handle = model.net.register_forward_hook(lambda mod, inp, out: calls.append(out.requires_grad))
    out = model.training_step({"x": torch.rand(4, 1, 8, 8), "y": None, "size": 4, "step": 0})
    handle.remove()
    assert calls == [False, True]  # the teacher's pass under no_grad, then the student's
    assert out["loss"].requires_grad and out["levels"].item() == 11


@pytest.mark.slow  # over 5 s on 2 cores: the default suite stays under 3 minutes
def test_training_pulls_one_step_samples_onto_a_single_image():
    """On data that is one image, f(sigma_max z) must move from grey towards that image."""
    torch.manual_seed(0)
    model = Consistency({**TINY, "dropout": 0.0, "lr": 2e-3, "s0": 4, "s1": 4, "ema_decay": 0.5})
    target = torch.zeros(1, 1, 8, 8)
    target[..., :4] = 1
    before = (model.sample(16, seed=0) - target).abs().mean().item()
    optimizer = model.configure_optimizers(150)
    for step in range(150):
        loss = model.training_step({"x": target.expand(32, 1, 8, 8), "y": None, "size": 32, "step": step})["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = (model.sample(16, seed=0) - target).abs().mean().item()
    assert before == pytest.approx(0.5, abs=0.01)
    assert after < 0.25


def test_genzoo_eval_passes_sample_options_to_the_model(toy_site, toy_npz, tmp_path):
    """`genzoo eval DIR --opt steps=2` scores the two-step sampler; a misspelt option is one clear error."""
    import json

    from click.testing import CliRunner

    import genzoo
    from genzoo.cli import cli

    directory = genzoo.save_pretrained(Consistency(TINY), tmp_path / "tiny")
    common = [str(directory), "--ref", f"npz:{toy_npz}", "--features", "toy-features", "--metrics", "swd", "-n", "16",
              "--no-progress"]
    reports = {}
    for steps in (1, 2):
        out = tmp_path / f"steps{steps}.json"
        result = CliRunner().invoke(cli, ["eval", *common, "--opt", f"steps={steps}", "--json", str(out)])
        assert result.exit_code == 0, result.output
        reports[steps] = json.loads(out.read_text())
    assert reports[2]["sample_options"] == {"steps": 2}
    assert reports[1]["metrics"]["swd"] != reports[2]["metrics"]["swd"]
    wrong = CliRunner().invoke(cli, ["eval", *common, "--opt", "stpes=2"])
    assert wrong.exit_code != 0 and "--opt stpes: consistency sample has no option 'stpes'" in wrong.output


def test_student_and_teacher_draw_one_dropout_mask_in_a_training_step():
    """The teacher's pass and the student's pass of one training step see the same dropout mask; two
    passes outside the step draw two (so the hooks would see a difference if there were one)."""
    model = Consistency({**TINY, "dropout": 0.5})
    model.train()
    masks = []
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.register_forward_hook(lambda m, args, out: masks.append(out == 0))
    model.training_step({"x": torch.rand(4, 1, 8, 8), "y": None, "size": 4, "step": 0})
    half = len(masks) // 2
    assert half > 0 and all(torch.equal(a, b) for a, b in zip(masks[:half], masks[half:]))
    masks.clear()
    x, sigma = torch.randn(4, 1, 8, 8), torch.full((4,), 1.0)
    model.denoise(x, sigma), model.denoise(x, sigma)
    assert not all(torch.equal(a, b) for a, b in zip(masks[:half], masks[half:]))


def test_ect_pairs_put_the_teacher_below_the_student_and_closer_stage_by_stage():
    model = Consistency({**TINY, "training": "ect", "ect_q": 2.0, "ect_stage_steps": 10})
    torch.manual_seed(0)
    t, r, _ = model._ect_pair(4096, 0, "cpu")
    assert (r >= 0).all() and (r < t).all()
    assert (r == 0).any()  # stage 0 with q = 2: small t has a(t) / 2 >= 1, so its teacher is the clean image
    torch.manual_seed(0)
    t3, r3, logged = model._ect_pair(4096, 35, "cpu")
    assert logged["stage"].item() == 3 and torch.equal(t, t3)
    assert ((t3 - r3) / t3).max() < ((t - r) / t).min() + 1e-6 or ((t3 - r3) / t3).mean() < ((t - r) / t).mean() / 8


def test_consistency_tuning_starts_from_an_edm_model_of_the_same_network(tmp_path):
    import numpy as np

    import genzoo
    from genzoo.errors import GenzooError

    np.savez(tmp_path / "data.npz", x=(np.random.default_rng(0).random((16, 8, 8)) * 255).astype(np.uint8))
    common = dict(dataset=f"npz:{tmp_path / 'data.npz'}", batch_size=8, sample_every=0, progress=False,
                  precision="fp32")
    edm = genzoo.fit("edm", steps=2, out=tmp_path / "edm", config=TINY, **common)
    tuned = genzoo.fit("consistency", steps=2, out=tmp_path / "ct", init=str(edm),
                       config={**TINY, "training": "ect", "huber_c": 0.0}, **common)
    fit_json = (tuned / "fit.json").read_text()
    assert '"init"' in fit_json and str(edm) in fit_json
    with pytest.raises(GenzooError, match="does not fit this config's network"):
        genzoo.fit("consistency", steps=2, out=tmp_path / "wide", init=str(edm), config={**TINY, "width": 16}, **common)
    with pytest.raises(GenzooError, match="holds a 'consistency' model; edm starts from 'edm' models"):
        genzoo.fit("edm", steps=2, out=tmp_path / "back", init=str(tuned), config=TINY, **common)


def test_a_resume_that_would_respace_the_curriculum_is_refused_and_a_fixed_one_may_grow(toy_npz, tmp_path):
    """The ict curriculum spreads its discretisations over the run's --steps: a resume with other --steps would
    re-space it, so it is refused; with curriculum_steps fixed, nothing depends on the total and the run grows."""
    config = {**TINY, "s0": 2, "s1": 8}
    common = {"dataset": f"npz:{toy_npz}", "batch_size": 8, "progress": False, "sample_every": 0,
              "checkpoint_every": 2}
    run = genzoo.fit("consistency", steps=2, out=tmp_path / "run", config=config, **common)
    with pytest.raises(genzoo.ArgumentError, match="follows a curriculum over steps 2; resume it with steps 2"):
        genzoo.fit("consistency", steps=4, out=run, config=config, resume=True, **common)
    fixed = genzoo.fit("consistency", steps=2, out=tmp_path / "fixed", config={**config, "curriculum_steps": 4},
                       **common)
    genzoo.fit("consistency", steps=4, out=fixed, config={**config, "curriculum_steps": 4}, resume=True, **common)
    assert json.loads((fixed / "fit.json").read_text())["options"]["steps"] == 4
