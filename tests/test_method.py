"""The Method contract: verbs, per-image seeding, labels, options, input checks, progress."""

import sys

import pytest
import torch

import genzoo
from genzoo.plugins import get_host
from genzoo.seeding import Noise


@pytest.fixture
def toy(toy_site):
    torch.manual_seed(0)
    return get_host().method("toy")()


def test_first_images_do_not_depend_on_n_or_batch_size(toy):
    big = toy.sample(64, seed=0, batch_size=7)
    small = toy.sample(16, seed=0, batch_size=16)
    assert torch.equal(big[:16], small)
    assert not torch.equal(toy.sample(16, seed=1), small)


def test_unseeded_sampling_follows_torch_manual_seed(toy):
    torch.manual_seed(3)
    a = toy.sample(4)
    torch.manual_seed(3)
    assert torch.equal(a, toy.sample(4))


def test_images_are_nchw_floats_in_unit_range(toy):
    x = toy.sample(5, seed=0)
    assert x.shape == (5, 1, 8, 8) and x.dtype == torch.float32
    assert x.min() >= 0 and x.max() <= 1


def test_unsupported_verb_lists_the_supported_ones(toy_site):
    only = get_host().method("sample-only")()
    with pytest.raises(genzoo.UnsupportedVerb, match="does not support 'refine'; it supports: sample"):
        only.refine(torch.zeros(1, 1, 8, 8))


def test_conditional_default_labels_are_i_mod_c(toy_site):
    cls = get_host().method("toy")
    model = cls({"num_classes": 3})
    a = model.sample(6, seed=0)
    b = model.sample(6, seed=0, labels=[0, 1, 2, 0, 1, 2])
    assert torch.equal(a, b)
    with pytest.raises(genzoo.GenzooError, match=r"labels must be in 0..2"):
        model.sample(2, seed=0, labels=[0, 5])
    with pytest.raises(genzoo.GenzooError, match="3 labels for 2 images"):
        model.sample(2, seed=0, labels=[0, 1, 2])


def test_unconditional_method_refuses_labels(toy):
    with pytest.raises(genzoo.GenzooError, match="unconditional"):
        toy.sample(2, labels=[1, 1])


def test_declared_options_are_accepted_and_others_refused(toy):
    cold = toy.sample(4, seed=0, temperature=0.0)
    assert torch.allclose(cold[0], cold[1])
    with pytest.raises(genzoo.GenzooError, match="no option.*'tau'.*temperature"):
        toy.sample(4, seed=0, tau=1.0)


def test_refine_checks_shape_and_range(toy):
    with pytest.raises(genzoo.GenzooError, match=r"shape \(1, 8, 8\)"):
        toy.refine(torch.zeros(2, 3, 8, 8))
    with pytest.raises(genzoo.GenzooError, match=r"\[0, 1\]"):
        toy.refine(torch.full((2, 1, 8, 8), 2.0))
    assert torch.equal(toy.refine(torch.full((2, 1, 8, 8), 0.5), steps=0), torch.full((2, 1, 8, 8), 0.5))


def test_noise_depends_only_on_seed_and_index():
    a = Noise(5, 0, 10).randn(3)
    b = Noise(5, 4, 6).randn(3)
    assert torch.equal(a[4:6], b)
    assert not torch.equal(Noise(5, 0, 10, "x").randn(3), a)
    assert not torch.equal(Noise(5, 0, 10).child("y").randn(3), a)


def test_declaration_is_checked_on_registration():
    from dataclasses import dataclass

    @dataclass
    class Cfg:
        pass

    class Incomplete(genzoo.Method):
        name = "incomplete"
        Config = Cfg
        capabilities = frozenset({"sample"})

    with pytest.raises(genzoo.GenzooError, match="does not implement sample_batch"):
        Incomplete.check_declaration()


class _Terminal:
    """A stand-in for stderr that says it is a terminal and keeps what is written to it."""

    def __init__(self):
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


def _stepper():
    from dataclasses import dataclass

    @dataclass
    class Cfg:
        channels: int = 1
        image_size: int = 2

    class Stepper(genzoo.Method):
        """A many-step sampler: three steps per batch, each wrapped in track()."""

        name = "stepper"
        Config = Cfg
        capabilities = frozenset({"sample"})

        def sample_batch(self, noise, labels):
            x = noise.rand(1, 2, 2)
            for _ in self.track(range(3), "denoising"):
                x = x * 0.5
            return x

    return Stepper()


def test_a_many_step_sampler_shows_its_steps_on_a_terminal_and_nothing_elsewhere(monkeypatch):
    model = _stepper()
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    shown = model.sample(5, seed=0, batch_size=2, progress=True)
    assert "denoising: " in terminal.text and "step/s" in terminal.text and "sampling: " in terminal.text
    terminal.text = ""
    assert torch.equal(model.sample(5, seed=0, batch_size=2), shown)  # progress off: no bar, the same images
    assert terminal.text == ""
    assert list(model.track(range(3))) == [0, 1, 2]  # outside sample(): the steps, unwrapped
    monkeypatch.setattr("sys.stderr", type("Pipe", (_Terminal,), {"isatty": lambda self: False})())
    model.sample(5, seed=0, batch_size=2, progress=True)  # on a pipe or in a log: nothing either
    assert sys.stderr.text == ""


def test_the_python_defaults_are_the_options_dataclasses():
    import inspect
    import typing

    from genzoo.generate import Precision, RefineOptions, SampleOptions, generate
    from genzoo.metrics.evaluation import EvalOptions
    from genzoo.precision import PRECISIONS

    for function, options in ((genzoo.Method.sample, SampleOptions), (genzoo.Method.refine, RefineOptions),
                              (generate, SampleOptions)):
        parameters = inspect.signature(function).parameters
        for name in ("batch_size", "precision"):
            assert parameters[name].default == getattr(options(), name) == getattr(EvalOptions(), name)
    assert inspect.signature(generate).parameters["apply"].default == SampleOptions().apply
    assert set(typing.get_args(Precision)) == set(PRECISIONS)
