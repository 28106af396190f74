"""The plugin authors' kit: genzoo.testing's contract checks, on every built-in method and on broken
ones, and `genzoo new-plugin`, whose project installs and passes its own tests."""

import os
import re
import shlex
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
import torch
from click.testing import CliRunner

import genzoo
from genzoo.cli import cli
from genzoo.testing import CHECKS, ContractError, check_method, checks_for, parametrize_with_checks
from genzoo_edm import EDM
from genzoo_features import FeatureClassifier
from genzoo_gan import GAN
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
    (EDM, {"width": 4, "levels": 2, "image_size": 8, "sample_steps": 3, "refine_steps": 2}),
    (GAN, {"width": 8, "bottleneck": 4}),
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


class _OneScaleSampler(genzoo.Method):
    """A 4x4 sampler with one parameter: the shared body of the broken samplers below."""

    Config = _Shape
    capabilities = frozenset({"sample"})

    def __init__(self, config=None):
        super().__init__(config)
        self.scale = torch.nn.Parameter(torch.ones(()))


class BatchDependent(_OneScaleSampler):
    """Broken on purpose: each image is shifted by its batch's mean noise, so it depends on its neighbours."""

    name = "batch-dependent"
    summary = "a method that breaks per-image seeding"

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
    assert "check_fit_resumes_exactly" in str(info.value) and "most 'weight' by" in str(info.value)
    assert "check_sample_images" not in str(info.value)  # the rules it keeps are not reported


class GlobalNoise(_OneScaleSampler):
    """Broken on purpose: its starting noise comes from torch's global RNG, not from the noise object."""

    name = "global-noise"
    summary = "a method that ignores its noise argument"

    def sample_batch(self, noise, labels):
        return torch.sigmoid(self.scale * torch.randn(len(noise), 1, 4, 4))


class Rounding(_OneScaleSampler):
    """Each image moves by 3e-5 times its batch's spread: a stand-in for the rounding a many-step
    sampler amplifies, which differs with the batch size."""

    name = "rounding"
    summary = "a method whose images differ with the batch by about 3e-5"

    def sample_batch(self, noise, labels):
        z = noise.randn(1, 4, 4)
        return torch.sigmoid(self.scale * z) + 3e-5 * torch.tanh(z - z.mean(0))


class StepsIgnored(genzoo.Method):
    """Broken on purpose: refine applies its step even when asked for none."""

    name = "steps-ignored"
    summary = "a refiner that ignores steps=0"
    Config = _Shape
    capabilities = frozenset({"refine"})

    def __init__(self, config=None):
        super().__init__(config)
        self.target = torch.nn.Parameter(torch.full((1, 4, 4), 0.5))

    def refine_batch(self, x, labels, noise, steps):
        return 0.5 * (x + self.target)


def test_failures_say_by_how_much_and_against_what():
    with pytest.raises(ContractError) as info:
        check_method(Rounding, skip=("check_save_load_round_trip",))
    message = str(info.value)
    assert re.search(r"check_per_image_seeding: the first 2 images .* \(largest difference [123]\.\d+e-05, "
                     r"tolerance 1e-05\); if that is float rounding", message), message
    assert "declare a larger image_tolerance" in message


def test_a_method_declares_its_own_tolerance():
    class Tolerant(Rounding):
        image_tolerance = 1e-4  # the rounding of a many-step sampler

    assert "check_per_image_seeding" in check_method(Tolerant)

    class Nonsense(Rounding):
        image_tolerance = 2

    with pytest.raises(ContractError, match=r"check_declaration: image_tolerance must be a number in \(0, 1\)"):
        check_method(Nonsense)


def test_noise_not_drawn_from_the_noise_object_is_named_as_the_cause():
    with pytest.raises(ContractError) as info:
        check_method(GlobalNoise)
    message = str(info.value)
    assert "changes with torch's global RNG" in message
    assert "sample_batch drew nothing from its `noise` argument" in message


def test_a_refiner_that_ignores_zero_steps_fails_with_the_difference():
    with pytest.raises(ContractError) as info:
        check_method(StepsIgnored)
    message = str(info.value)
    assert "check_refine_zero_steps: refine(x, steps=0) changed the images (largest difference 0." in message
    assert "steps=0 means no refinement" in message
    assert "check_refine_images" not in message


def test_checks_for_leaves_out_the_verbs_a_method_does_not_declare():
    names = {c.__name__ for c in checks_for(BatchDependent)}
    assert "check_fit_resumes_exactly" not in names and "check_refine_images" not in names
    assert "check_undeclared_verbs_refuse" in names and len(CHECKS) == 12


def test_new_plugin_refuses_bad_names_and_existing_folders(tmp_path):
    runner = CliRunner()
    for name in ("Bad Name", "9lives", "genzoo-x", "a--b"):
        result = runner.invoke(cli, ["new-plugin", name, str(tmp_path / "p")])
        assert result.exit_code == 1 and result.output.startswith("Error:") and "Traceback" not in result.output
    (tmp_path / "taken").mkdir()
    taken = runner.invoke(cli, ["new-plugin", "vae", str(tmp_path / "taken")])
    assert taken.exit_code == 1 and "already exists" in taken.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_new_plugin_names_the_class_and_says_the_model_is_a_placeholder(tmp_path):
    runner = CliRunner()
    plain = runner.invoke(cli, ["new-plugin", "vae", str(tmp_path / "plain")])
    assert plain.exit_code == 0 and "class Vae" in plain.output
    readme = (tmp_path / "plain" / "README.md").read_text()
    assert "](https://github.com/)" not in readme and "Vae" not in readme
    model = (tmp_path / "plain" / "genzoo_vae" / "model.py").read_text()
    assert model.startswith('"""The vae method.') and "placeholder" in model and "Replace this docstring" in model
    acronym = runner.invoke(cli, ["new-plugin", "vae", str(tmp_path / "acronym"), "--class-name", "VAE"])
    assert acronym.exit_code == 0, acronym.output
    model = (tmp_path / "acronym" / "genzoo_vae" / "model.py").read_text()
    assert "class VAEConfig:" in model and "class VAE(genzoo.Method):" in model
    assert "from .model import VAE, VAEConfig" in (tmp_path / "acronym" / "genzoo_vae" / "__init__.py").read_text()
    bad = runner.invoke(cli, ["new-plugin", "vae", str(tmp_path / "bad"), "--class-name", "my class"])
    assert bad.exit_code == 1 and "class name 'my class' is not usable" in bad.output and not (tmp_path / "bad").exists()


def test_the_tutorial_shows_the_files_new_plugin_writes(tmp_path):
    """docs/plugins.md says its pyproject.toml and README.md stay as new-plugin wrote them: they do."""
    from genzoo.scaffold import new_plugin

    text = (Path(__file__).resolve().parent.parent / "docs" / "plugins.md").read_text()
    shown = {m.group(1): m.group(2) for m in re.finditer(r"^File: (\S+)\n\n```\w*\n(.*?)^```", text, re.S | re.M)}
    project = new_plugin("pixelstats", tmp_path / "genzoo-pixelstats")
    for name in ("pyproject.toml", "README.md"):
        assert shown[name] == (project / name).read_text(), f"docs/plugins.md shows another {name} than new-plugin writes"


def _readme_commands(readme: Path) -> list[list[str]]:
    """The command lines of a README's indented block, without their comments."""
    lines = [line.strip() for line in readme.read_text().splitlines() if line.startswith("    ")]
    return [shlex.split(line, comments=True) for line in lines]


@pytest.mark.slow
@pytest.mark.parametrize("template, made_last", [((), "grid.png"), (("--refine-only",), "refined.png")])
def test_the_readme_of_a_new_plugin_runs_as_written(tmp_path, mnist_root, template, made_last):
    """Every command in a new project's README, in order, in a fresh environment that sees genzoo's:
    the editable install offline (--no-build-isolation, as the README says), the project's own tests
    (default and slow), genzoo plugins, a fit on MNIST and a sample grid (a refiner: refined digits)."""
    project = tmp_path / "genzoo-flow-toy"
    made = CliRunner().invoke(cli, ["new-plugin", "flow-toy", str(project), *template])
    assert made.exit_code == 0, made.output
    commands = _readme_commands(project / "README.md")
    assert [words[0] for words in commands[:4]] == ["pip", "pytest", "pytest", "genzoo"]
    assert {words[0] for words in commands[4:]} == {"genzoo"}
    environment = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(environment)], check=True, timeout=120)
    site = next(environment.glob("lib/python*/site-packages"))
    (site / "_genzoo_env.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    python = str(environment / "bin" / "python")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    outputs = []
    for words in commands:
        if words[:2] == ["pip", "install"]:
            words = ["pip", "install", "--no-build-isolation"] + words[2:]  # offline, as its comment says
        words = [str(mnist_root) if word == "DATA" else word for word in words]
        done = subprocess.run([python, "-m", *words], cwd=project, env=env, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, f"{' '.join(words)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        outputs.append(done.stdout)
    assert (site / "_genzoo_flow_toy.pth").is_file()  # installed in the new environment, editable
    assert " passed" in outputs[1] and " passed" in outputs[2] and "flow-toy [ok]" in outputs[3]
    assert (project / "runs" / "flow-toy" / "model.safetensors").is_file() and (project / made_last).is_file()


@pytest.mark.parametrize("verb, options_cls", [("fit", "genzoo.training.options:FitOptions"), ("eval", "genzoo.metrics.evaluation:EvalOptions"),
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


def _new_method(tmp_path, owns_update):
    """The method class `genzoo new-plugin` writes, imported from the new project's files."""
    import importlib.util

    from genzoo.scaffold import new_plugin

    project = new_plugin("two-nets", tmp_path / "project", owns_update=owns_update)
    spec = importlib.util.spec_from_file_location(f"two_nets_model_{owns_update}", project / "genzoo_two_nets" / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TwoNets


def test_new_plugin_offers_a_method_that_owns_its_update(tmp_path):
    from genzoo.testing import check_declaration, check_optimizers_own_parameters, check_training_step

    cls = _new_method(tmp_path, owns_update=True)
    assert cls.owns_update() and cls.update_period == 2
    for check in (check_declaration, check_training_step, check_optimizers_own_parameters):
        check(cls, {"image_size": 8})
    made = CliRunner().invoke(cli, ["new-plugin", "two-nets", str(tmp_path / "cli"), "--owns-update"])
    assert made.exit_code == 0 and "def update(self, step)" in (tmp_path / "cli/genzoo_two_nets/model.py").read_text()


@pytest.mark.slow
def test_the_owned_update_template_passes_every_check(tmp_path):
    from genzoo.testing import check_method

    assert "check_fit_resumes_exactly" in check_method(_new_method(tmp_path, owns_update=True), {"image_size": 8})


def _new_refiner(tmp_path):
    """The refine-only method class `genzoo new-plugin --refine-only` writes, imported from the new project's files."""
    import importlib.util

    from genzoo.scaffold import new_plugin

    project = new_plugin("clean-up", tmp_path / "refiner", refine_only=True)
    spec = importlib.util.spec_from_file_location("clean_up_model", project / "genzoo_clean_up" / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return project, module.CleanUp


def test_new_plugin_offers_a_refiner_with_a_ranged_option(tmp_path):
    from genzoo.testing import (check_declaration, check_options, check_refine_images, check_refine_zero_steps,
                                check_training_step, check_undeclared_verbs_refuse)

    project, cls = _new_refiner(tmp_path)
    assert cls.capabilities == {"fit", "refine"} and "check_sample_images" not in {c.__name__ for c in checks_for(cls)}
    for check in (check_declaration, check_undeclared_verbs_refuse, check_options, check_refine_images,
                  check_refine_zero_steps, check_training_step):
        check(cls, {"image_size": 8})
    grey = torch.full((2, 1, 8, 8), 0.5)
    with pytest.raises(genzoo.GenzooError, match="pull must be in \\[0, 1\\], got 2"):
        cls({"image_size": 8}).refine(grey, pull=2.0)
    readme = (project / "README.md").read_text()
    assert "genzoo new-plugin clean-up --refine-only" in readme and "genzoo refine runs/clean-up" in readme
    assert "`genzoo refine clean-up` loads it" in (project / "genzoo_clean_up" / "__init__.py").read_text()
    made = CliRunner().invoke(cli, ["new-plugin", "clean-up", str(tmp_path / "cli"), "--refine-only"])
    assert made.exit_code == 0 and 'capabilities = frozenset({"fit", "refine"})' in \
        (tmp_path / "cli/genzoo_clean_up/model.py").read_text()
    both = CliRunner().invoke(cli, ["new-plugin", "x", str(tmp_path / "both"), "--refine-only", "--owns-update"])
    assert both.exit_code == 1 and "choose one of them" in both.output and not (tmp_path / "both").exists()


@pytest.mark.slow
def test_the_refiner_template_passes_every_check(tmp_path):
    from genzoo.testing import check_method

    _, cls = _new_refiner(tmp_path)
    assert "check_fit_resumes_exactly" in check_method(cls, {"image_size": 8})


def test_a_new_plugins_tests_run_on_one_thread(tmp_path):
    """The conftest.py new-plugin writes holds torch to one thread before any test runs, as genzoo's own does."""
    from genzoo.scaffold import new_plugin

    project = new_plugin("vae", tmp_path / "vae")
    env = {key: value for key, value in os.environ.items() if key not in ("OMP_NUM_THREADS", "GENZOO_THREADS")}
    probe = ("import os, runpy, torch; runpy.run_path('tests/conftest.py'); "
             "print(torch.get_num_threads(), os.environ['OMP_NUM_THREADS'])")
    done = subprocess.run([sys.executable, "-c", probe], cwd=project, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1"]
