"""The plugin authors' kit: genzoo.testing's contract checks, on every built-in method and on broken
ones, and `genzoo new-plugin`, whose project installs and passes its own tests."""

import os
import subprocess
import sys
from dataclasses import dataclass

import click
import pytest
import torch
from click.testing import CliRunner

import genzoo
from genzoo.cli import cli
from genzoo.testing import CHECKS, ContractError, check_method, checks_for, parametrize_with_checks
from genzoo_features import FeatureClassifier
from genzoo_ign import IGN
from genzoo_mmb import MMBClassifier, MMBGenerator, MMBReconstruct
from genzoo_robust import RobustRefiner

BUILT_IN = [
    (IGN, {"width": 8, "bottleneck": 8}),
    (RobustRefiner, {"width": 8, "steps_real": 1, "steps_fake": 1, "refine_steps": 2}),
    (MMBGenerator, {"classifiers": ["mmb-mnist-classifier"], "latent": 4, "width": 16}),
    (MMBClassifier, {"width": 8, "depth": 2, "per_class": 1, "image_size": 8}),
    (MMBReconstruct, {"classifier": "mmb-mnist-classifier", "count": 10}),
    (FeatureClassifier, {"width": 4, "feature_dim": 8}),
]


@parametrize_with_checks(BUILT_IN)
def test_built_in_methods_keep_the_contract(method_cls, config, check):
    check(method_cls, config)


def test_the_toy_plugin_passes_every_check(toy_site):
    toy = genzoo.get_host().method("toy")
    assert check_method(toy) == [c.__name__ for c in checks_for(toy)]


@dataclass
class _Shape:
    channels: int = 1
    image_size: int = 4


class BatchDependent(genzoo.Method):
    """Broken on purpose: each image is shifted by its batch's mean noise, so it depends on its neighbours."""

    name = "batch-dependent"
    summary = "a method that breaks per-image seeding"
    Config = _Shape
    capabilities = frozenset({"sample"})

    def __init__(self, config=None):
        super().__init__(config)
        self.scale = torch.nn.Parameter(torch.ones(()))

    def sample_batch(self, noise, labels):
        z = noise.randn(1, 4, 4)
        return torch.sigmoid(self.scale * (z - z.mean()))


class UnseededFit(genzoo.Method):
    """Broken on purpose: its training step draws from an RNG of its own that no checkpoint saves."""

    name = "unseeded-fit"
    summary = "a method whose resumed training differs"
    Config = _Shape
    capabilities = frozenset({"fit", "sample"})

    def __init__(self, config=None):
        super().__init__(config)
        self.weight = torch.nn.Parameter(torch.zeros(1, 4, 4))
        self.rng = torch.Generator().manual_seed(0)

    def sample_batch(self, noise, labels):
        return torch.sigmoid(self.weight + 0 * noise.randn(1, 4, 4))

    def training_step(self, batch):
        target = torch.rand(batch["x"].shape, generator=self.rng)
        return {"loss": (torch.sigmoid(self.weight) - target).square().mean()}

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.5)


def test_a_batch_dependent_sample_fails_with_the_rules_name():
    with pytest.raises(ContractError, match="check_per_image_seeding: the first 2 images"):
        check_method(BatchDependent)


def test_a_resume_that_is_not_exact_fails_with_the_rules_name():
    with pytest.raises(ContractError) as info:
        check_method(UnseededFit)
    assert "check_fit_resumes_exactly" in str(info.value)
    assert "check_sample_images" not in str(info.value)  # the rules it keeps are not reported


def test_checks_for_leaves_out_the_verbs_a_method_does_not_declare():
    names = {c.__name__ for c in checks_for(BatchDependent)}
    assert "check_fit_resumes_exactly" not in names and "check_refine_images" not in names
    assert "check_undeclared_verbs_refuse" in names and len(CHECKS) == 10


def test_new_plugin_refuses_bad_names_and_existing_folders(tmp_path):
    runner = CliRunner()
    for name in ("Bad Name", "9lives", "genzoo-x", "a--b"):
        result = runner.invoke(cli, ["new-plugin", name, str(tmp_path / "p")])
        assert result.exit_code == 1 and result.output.startswith("Error:") and "Traceback" not in result.output
    (tmp_path / "taken").mkdir()
    taken = runner.invoke(cli, ["new-plugin", "vae", str(tmp_path / "taken")])
    assert taken.exit_code == 1 and "already exists" in taken.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


@pytest.mark.slow
def test_a_scaffolded_plugin_installs_and_passes_its_own_tests(tmp_path):
    result = CliRunner().invoke(cli, ["new-plugin", "flow-toy", str(tmp_path / "genzoo-flow-toy")])
    assert result.exit_code == 0, result.output
    project = tmp_path / "genzoo-flow-toy"
    site = tmp_path / "site"
    # a real pip install of the project (into its own folder, so genzoo's own environment stays clean)
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q",
                              "--target", str(site), str(project)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project / "tests")],
                           cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout


@pytest.mark.parametrize("verb, options_cls", [("fit", "genzoo.train:FitOptions"), ("eval", "genzoo.metrics.evaluation:EvalOptions"),
                                               ("sample", "genzoo.generate:SampleOptions"), ("refine", "genzoo.generate:RefineOptions")])
def test_cli_defaults_agree_with_the_options_dataclass(verb, options_cls):
    """Every CLI option built from a verb's options dataclass has the dataclass's default, and every
    CLI-visible field has an option: the Python API and `genzoo fit/eval/sample/refine` cannot drift apart."""
    import dataclasses
    import importlib

    module, name = options_cls.split(":")
    cls = getattr(importlib.import_module(module), name)
    command = cli.get_command(click.Context(cli), verb)
    params = {p.name: p for p in command.params}
    visible = [f for f in dataclasses.fields(cls) if f.metadata.get("cli", True)]
    assert visible
    for f in visible:
        assert f.name in params, f"{verb}: field {f.name} has no option"
        param = params[f.name]
        if f.default is dataclasses.MISSING:
            assert param.required, f"{verb} --{f.name}: required in Python, optional on the command line"
        else:
            assert param.default == f.default, f"{verb} --{f.name}: CLI default {param.default!r} != {f.default!r}"
    defaults = cls(**{f.name: "x" for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING
                      and f.default_factory is dataclasses.MISSING})
    ctx = command.make_context(verb, ["m"] + {"fit": ["--steps", "1", "--out", "o"], "refine": ["--input", "x"]}.get(verb, []))
    for f in visible:
        if f.default is not dataclasses.MISSING:
            assert ctx.params[f.name] == getattr(defaults, f.name)
