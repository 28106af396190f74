"""A method with a many-step sampler (tests/tinydiffusion.py: DDPM training, DDIM sampling, SDEdit
refining) keeps the contract, and what `steps`, the tolerance and auto's probe mean for it."""

import pytest
import torch

import genzoo
from genzoo import precision as prec
from genzoo.testing import check_method, checks_for
from tinydiffusion import TinyDiffusion

SMALL = {"width": 16, "timesteps": 20, "sample_steps": 5, "refine_steps": 2}


def test_the_tiny_diffusion_method_passes_every_check():
    assert check_method(TinyDiffusion, SMALL) == [c.__name__ for c in checks_for(TinyDiffusion)]


def test_refine_steps_count_sampler_steps_from_the_clean_end():
    torch.manual_seed(0)
    model = TinyDiffusion(SMALL)
    x = torch.rand(3, 1, 8, 8)
    other = torch.rand(3, 1, 8, 8)
    assert torch.equal(model.refine(x, steps=0, seed=0), x)
    # strength 5/5 starts from pure noise: the input is forgotten, the result is a sample
    assert (model.refine(x, steps=5, seed=0) - model.refine(other, steps=5, seed=0)).abs().max() < 0.05
    # strength 1/5 (--apply 2's refine) starts from a little noise: the result stays near its input
    assert (model.refine(x, steps=1, seed=0) - model.refine(other, steps=1, seed=0)).abs().mean() > 0.1
    with pytest.raises(genzoo.GenzooError, match="at most sample_steps=5 steps"):
        model.refine(x, steps=6)


def test_auto_precision_times_a_few_denoising_steps_not_whole_samples(monkeypatch):
    monkeypatch.setattr(prec, "cpu_has_native_bf16", lambda: True)
    torch.manual_seed(0)
    model = TinyDiffusion({**SMALL, "sample_steps": 40})
    calls = []
    model.net.register_forward_pre_hook(lambda module, args: calls.append(1))
    model.sample(4, seed=0, precision="auto")
    assert len(calls) - 40 <= 4 * (prec.PROBE_CALLS + 1)  # two precisions x (warm-up + timed), each cut short
