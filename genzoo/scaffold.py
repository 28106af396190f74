"""``genzoo new-plugin NAME [DIR]``: a ``genzoo-NAME`` project that installs and passes its own tests as written.

The method it starts from learns each pixel's mean and spread and samples independent Gaussian
pixels: a bad generative model, and a complete one (fit, sample, refine, a bundled-model hook
ready to fill in, and tests that run genzoo's contract checks on one thread, as genzoo's own suite
does). With ``owns_update`` (``genzoo new-plugin NAME --owns-update``) the same method owns its
update: two networks, two optimisers, one of them stepped every second step (the form of a GAN or
any method with several networks). With ``refine_only`` (``--refine-only``) the method is a
refiner with no sampler: it learns the data's per-pixel mean and pulls images towards it, with a
ranged refine option.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path

from .errors import GenzooError

NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")

PYPROJECT = '''[build-system]
requires = ["hatchling>=1.21"]
build-backend = "hatchling.build"

[project]
name = "genzoo-{name}"
version = "0.1.0"
description = "The {name} method for genzoo"
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["genzoo"]

[project.optional-dependencies]
test = ["pytest>=7"]

# Where the code lives: the model cards `genzoo push` writes for this method's models link it.
# [project.urls]
# Source = "https://github.com/YOU/genzoo-{name}"

# The entry point in group "genzoo" is the whole contract: genzoo finds the plugin through it.
[project.entry-points.genzoo]
{name} = "{package}"

[tool.hatch.build]
# `pip install -e .` puts this folder on sys.path through a .pth file, so the editable build needs
# hatchling alone (without this line it also needs the `editables` package, which an offline
# `pip install --no-build-isolation -e .` does not have).
dev-mode-dirs = ["."]

[tool.hatch.build.targets.wheel]
packages = ["{package}"]
# Bundled weights under {package}/weights/ ship inside the wheel; keep them out of .gitignore
# (hatchling leaves git-ignored files out).

[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = "-m 'not slow'"
markers = ["slow: starts processes; run with pytest -m slow"]
'''

INIT = '''"""genzoo-{name}: the genzoo plugin that provides the {name} method."""

import genzoo

from .model import {cls}, {cls}Config

__all__ = ["{cls}", "{cls}Config"]


@genzoo.hookimpl
def register_methods(register):
    register({cls})


# Once you have trained and exported a model (README.md), register it so that
# `genzoo {verb} {name}` loads it:
#
# @genzoo.hookimpl
# def register_models(register):
#     register("{name}-mnist", method="{name}", summary="...", dataset="mnist",
#              bundled="{package}:weights/{name}-mnist",
#              files={{"config.json": "SHA256", "model.safetensors": "SHA256"}},
#              license="CC BY-SA 3.0 (weights trained on MNIST, LeCun and Cortes)",
#              command="genzoo fit {name} --dataset mnist --steps 300 --out runs/{name}")
'''

MODEL = '''"""The {name} method.

`genzoo new-plugin` wrote this file as a complete, working placeholder: independent Gaussian pixels
with the training data's per-pixel mean and spread. Replace this docstring, `summary` and the code
with your method (the paper, and its equations where the code implements them); keep the hooks
genzoo calls: sample_batch, refine_batch, training_step and configure_optimizers.
"""

from dataclasses import dataclass
from typing import Annotated

import torch
from torch import nn

import genzoo
from genzoo.configs import Positive


@dataclass
class {cls}Config:
    """Every hyperparameter; config.json stores exactly this."""

    channels: int = 1
    image_size: int = 28
    lr: Annotated[float, Positive] = 0.05


class {cls}(genzoo.Method):
    name = "{name}"
    summary = "placeholder: independent Gaussian pixels with the data's per-pixel mean and std"
    Config = {cls}Config
    capabilities = frozenset({{"fit", "sample", "refine"}})
    sample_options = {{"temperature": float}}  # genzoo sample {name} --opt temperature=0.5

    def __init__(self, config=None):
        super().__init__(config)
        shape = self.image_shape  # (channels, image_size, image_size) from the Config
        self.mean = nn.Parameter(torch.full(shape, 0.5))
        self.log_std = nn.Parameter(torch.zeros(shape))

    def sample_batch(self, noise, labels, temperature=1.0):
        # All randomness comes from `noise`, so image i depends only on (seed, i).
        eps = noise.randn(*self.image_shape, device=self.device)
        return self.mean + temperature * self.log_std.exp() * eps  # the base class clamps to [0, 1]

    def refine_batch(self, x, labels, noise, steps):
        # Pull each pixel part of the way towards the mean, once per step (default one step;
        # steps=0 returns x unchanged, as genzoo's contract requires).
        for _ in range(1 if steps is None else steps):
            x = 0.5 * (x + self.mean)
        return x

    def training_step(self, batch):
        x = batch["x"]  # float NCHW in [0, 1]
        z = (x - self.mean) / self.log_std.exp()
        nll = (0.5 * z.square() + self.log_std).mean()  # Gaussian negative log-likelihood
        return {{"loss": nll, "mean_std": self.log_std.exp().mean()}}  # every scalar is logged

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.config.lr)
'''

OWNED_UPDATE = '''
    # -- this method owns its update: two networks, each with its own optimiser (docs/plugins.md,
    # Methods with several networks); training_step above is now the loss that update accumulates

    def update(self, step):
        mean_opt, spread_opt = step.optimizers  # as configure_optimizers returns them
        with step.frozen(self.spread):  # this loss trains the mean alone
            logged = step.accumulate(self.training_step)  # over the step's micro-batches; scalars averaged
        step.step(mean_opt)  # gradients averaged over processes, clipped, then Adam
        if step.index % self.update_period == self.update_period - 1:  # the spread every second step
            with step.frozen(self.location):
                step.accumulate(self.training_step)
            step.step(spread_opt)
        return logged  # every scalar is logged (metrics.jsonl)

    def configure_optimizers(self):
        return [torch.optim.Adam(self.location.parameters(), lr=self.config.lr),
                torch.optim.Adam(self.spread.parameters(), lr=self.config.lr)]
'''


REFINER = '''"""The {name} method.

`genzoo new-plugin --refine-only` wrote this file as a complete, working placeholder refiner: it
learns the training data's per-pixel mean and pulls each image part of the way towards it. It has
no sampler: `genzoo sample` refuses it and names the verbs it supports. Replace this docstring,
`summary` and the code with your method (the paper, and its equations where the code implements
them); keep the hooks genzoo calls: refine_batch, training_step and configure_optimizers.
"""

from dataclasses import dataclass
from typing import Annotated

import torch
from torch import nn

import genzoo
from genzoo.configs import Positive, Range

Pull = Annotated[float, Range(0, 1)]  # a fraction: `--opt pull=2` is refused, naming the flag and the range


@dataclass
class {cls}Config:
    """Every hyperparameter; config.json stores exactly this."""

    channels: int = 1
    image_size: int = 28
    pull: Pull = 0.5  # how far one refine step moves a pixel towards the mean
    lr: Annotated[float, Positive] = 0.05


class {cls}(genzoo.Method):
    name = "{name}"
    summary = "placeholder: pulls each pixel part of the way towards the data's per-pixel mean"
    Config = {cls}Config
    capabilities = frozenset({{"fit", "refine"}})  # a refiner: no "sample"
    refine_options = {{"pull": Pull}}  # genzoo refine {name} --input IMAGES --opt pull=0.2

    def __init__(self, config=None):
        super().__init__(config)
        self.mean = nn.Parameter(torch.full(self.image_shape, 0.5))  # (channels, image_size, image_size)

    def refine_batch(self, x, labels, noise, steps, pull=None):
        # One pull per step (default one step; steps=0 returns x unchanged, as genzoo's contract requires).
        pull = self.config.pull if pull is None else pull
        for _ in range(1 if steps is None else steps):
            x = x + pull * (self.mean - x)
        return x

    def training_step(self, batch):
        x = batch["x"]  # float NCHW in [0, 1]
        return {{"loss": (x - self.mean).square().mean()}}  # every scalar is logged

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.config.lr)
'''

CONFTEST = '''"""Before any test runs: one thread per process, as genzoo's own test suite does.

On a machine busy with other work, several threads per process fight over the cores, and a forward
pass can take tens of times longer than on one thread. OMP_NUM_THREADS is set before torch is
imported (processes a test starts, such as check_several_processes's, inherit it), and
torch.set_num_threads(1) holds this process to one thread.
"""

import os

os.environ["OMP_NUM_THREADS"] = "1"

import torch  # noqa: E402

torch.set_num_threads(1)
'''

TESTS_HEAD = '''"""genzoo-{{name}}: genzoo's contract checks, and the command line the way a user calls it."""

{imports}
from click.testing import CliRunner

import genzoo
from genzoo.cli import cli
from genzoo.testing import check_method, check_several_processes, parametrize_with_checks

from {{package}} import {{cls}}

'''
# The contract checks and the entry-point test every new plugin's tests share ({rule}: a check a rule of its kind
# runs), then the command-line round trip of a sampler or of a refiner.
SHARED_TESTS = '''SMALL = {{"image_size": 8}}  # a tiny instance keeps the checks fast


@parametrize_with_checks([({cls}, SMALL)])
def test_contract(method_cls, config, check):
    check(method_cls, config)


def test_check_method_reports_every_rule_passed():
    assert "{rule}" in check_method({cls}, SMALL)


@pytest.mark.slow
def test_two_processes_train_as_one():
    check_several_processes({cls}, SMALL)  # genzoo fit under 2 CPU processes; about half a minute


def test_the_plugin_is_found_through_its_entry_point():
    result = CliRunner().invoke(cli, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    assert "{name}" in result.output


'''

TESTS = TESTS_HEAD.format(imports="import pytest") + SHARED_TESTS.replace("{rule}", "check_per_image_seeding") + '''def test_fit_then_sample_through_the_cli(tmp_path):
    import numpy as np

    np.savez(tmp_path / "data.npz", x=np.random.default_rng(0).integers(0, 256, (32, 8, 8), dtype=np.uint8))
    runner = CliRunner()
    fitted = runner.invoke(cli, ["fit", "{name}", "--dataset", f"npz:{{tmp_path / 'data.npz'}}", "--steps", "20",
                                 "--batch-size", "8", "--set", "image_size=8", "--out", str(tmp_path / "run"),
                                 "--no-progress", "--precision", "fp32"])
    assert fitted.exit_code == 0, fitted.output
    sampled = runner.invoke(cli, ["sample", str(tmp_path / "run"), "-n", "4", "-o", str(tmp_path / "grid.png")])
    assert sampled.exit_code == 0, sampled.output
    assert genzoo.load(str(tmp_path / "run")).sample(4, seed=0).shape == (4, 1, 8, 8)
'''

REFINER_TESTS = (TESTS_HEAD.format(imports="import numpy as np\nimport pytest\nimport torch")
                 + SHARED_TESTS.replace("{rule}", "check_refine_images") + '''def test_fit_then_refine_through_the_cli(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (32, 1, 8, 8), dtype=np.uint8)
    np.savez(tmp_path / "data.npz", x=images)
    runner = CliRunner()
    fitted = runner.invoke(cli, ["fit", "{name}", "--dataset", f"npz:{{tmp_path / 'data.npz'}}", "--steps", "20",
                                 "--batch-size", "8", "--set", "image_size=8", "--out", str(tmp_path / "run"),
                                 "--no-progress", "--precision", "fp32"])
    assert fitted.exit_code == 0, fitted.output
    refined = runner.invoke(cli, ["refine", str(tmp_path / "run"), "--input", str(tmp_path / "data.npz"),
                                  "--opt", "pull=0.2", "-o", str(tmp_path / "refined.npz")])
    assert refined.exit_code == 0, refined.output
    assert np.load(tmp_path / "refined.npz")["x"].shape == (32, 1, 8, 8)
    out_of_range = runner.invoke(cli, ["refine", str(tmp_path / "run"), "--input", str(tmp_path / "data.npz"),
                                       "--opt", "pull=2", "-o", str(tmp_path / "refused.npz")])
    assert out_of_range.exit_code == 1 and "--opt pull" in out_of_range.output
    sampled = runner.invoke(cli, ["sample", str(tmp_path / "run"), "-o", str(tmp_path / "grid.png")])
    assert sampled.exit_code == 1 and "refine" in sampled.output  # a refiner names the verbs it supports
    model = genzoo.load(str(tmp_path / "run"))  # from Python: the learned mean pulls a grey image towards the data
    grey = torch.full((2, 1, 8, 8), 0.5)
    assert torch.equal(model.refine(grey, pull=0.0), grey) and not torch.equal(model.refine(grey), grey)
''')

README = '''# genzoo-{name}

The {name} method for genzoo, as a plugin; the project was started with `genzoo new-plugin {name}`.

genzoo is not on a package index: install it first from a clone of its repository (`pip install -e
PATH/TO/genzoo` in the same environment), then this project:

    pip install -e ".[test]"                 # offline, with hatchling installed: add --no-build-isolation
    pytest                                   # genzoo's contract checks and a CLI round trip
    pytest -m slow                           # the same training under two processes
    genzoo plugins                           # {name} [ok] ...
    genzoo fit {name} --dataset mnist --data-root DATA --steps 300 --batch-size 256 --out runs/{name}
    genzoo sample runs/{name} -o grid.png

To bundle a trained model: `genzoo export runs/{name} {package}/weights/{name}-mnist --storage-dtype
float16`, paste the printed sha256 into the `register_models` hook in `{package}/__init__.py`, and
reinstall (a non-editable install copies files at install time). See genzoo's docs/plugins.md.
'''


def check_name(name: str) -> str:
    """A plugin name usable as distribution ``genzoo-NAME``, package ``genzoo_NAME`` and method ``NAME``."""
    if not NAME.fullmatch(name or ""):
        raise GenzooError(f"plugin name {name!r} is not usable: use lower-case letters and digits, words joined by "
                          f"'-' or '_', starting with a letter (e.g. 'vae' or 'flow-matching')")
    if name.startswith("genzoo"):
        raise GenzooError(f"plugin name {name!r} should not repeat 'genzoo': the distribution is named genzoo-NAME "
                          f"already (try {name.removeprefix('genzoo').strip('-_') or 'mine'!r})")
    return name


def class_name_for(name: str) -> str:
    """The method class a plugin NAME gets by default: its words capitalised (``flow-matching`` -> ``FlowMatching``)."""
    return "".join(part.capitalize() for part in re.split(r"[-_]", name))


def check_class_name(cls: str) -> str:
    if not (cls.isidentifier() and cls[:1].isupper() and not keyword.iskeyword(cls)):
        raise GenzooError(f"class name {cls!r} is not usable: give a Python class name starting with a capital "
                          f"letter (e.g. 'VAE' or 'FlowMatching')")
    return cls


def new_plugin(name: str, directory: str | Path | None = None, *, class_name: str | None = None,
               owns_update: bool = False, refine_only: bool = False) -> Path:
    """Write the ``genzoo-NAME`` project into ``directory`` (default ``./genzoo-NAME``), which must not exist.

    The method class is ``class_name`` (default: NAME's words capitalised, e.g. ``Vae``; pass ``VAE``
    for an acronym); its Config dataclass is that name + ``Config``. ``owns_update``: the method
    makes its own optimisation step (``update``) over two networks instead of returning one loss.
    ``refine_only``: the method refines images and has no sampler.
    """
    name = check_name(name)
    cls = check_class_name(class_name) if class_name is not None else class_name_for(name)
    if owns_update and refine_only:
        raise GenzooError("--owns-update and --refine-only start from different methods: choose one of them")
    root = Path(directory) if directory is not None else Path(f"genzoo-{name}")
    if root.exists():
        raise GenzooError(f"{root} already exists; choose a new folder (genzoo new-plugin {name} DIR) or remove it")
    package = "genzoo_" + name.replace("-", "_")
    fields = {"name": name, "package": package, "cls": cls, "verb": "refine" if refine_only else "sample"}
    model = REFINER if refine_only else owned_update_model() if owns_update else MODEL
    files = {
        "pyproject.toml": PYPROJECT, "README.md": refiner_readme() if refine_only else README,
        f"{package}/__init__.py": INIT, f"{package}/model.py": model, "tests/conftest.py": CONFTEST,
        f"tests/test_{package.removeprefix('genzoo_')}.py": REFINER_TESTS if refine_only else TESTS,
    }
    for relative, template in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**fields), encoding="utf-8")
    return root


def refiner_readme() -> str:
    """README with a refine in place of the sample grid: the refiner takes the bundled ign model's digits."""
    return README.replace("`genzoo new-plugin {name}`", "`genzoo new-plugin {name} --refine-only`").replace(
        "    genzoo sample runs/{name} -o grid.png\n",
        "    genzoo sample ign -n 16 --seed 0 -o digits.png     # images to refine: any model's, or PNGs of your own\n"
        "    genzoo refine runs/{name} --input digits.png --opt pull=0.2 -o refined.png\n")


def owned_update_model() -> str:
    """MODEL with the mean and the spread as two networks, each stepped by its own optimiser in ``update``."""
    text = MODEL.replace(
        "        self.mean = nn.Parameter(torch.full(shape, 0.5))\n        self.log_std = nn.Parameter(torch.zeros(shape))\n",
        "        self.location = nn.ParameterDict({{\"mean\": nn.Parameter(torch.full(shape, 0.5))}})\n"
        "        self.spread = nn.ParameterDict({{\"log_std\": nn.Parameter(torch.zeros(shape))}})\n")
    text = text.replace("self.mean", "self.location.mean").replace("self.log_std", "self.spread.log_std")
    text = text.replace("training_step and configure_optimizers", "update (with the loss it accumulates) and\n"
                        "configure_optimizers")
    text = text.replace("    sample_options = {{\"temperature\": float}}  # genzoo sample {name} --opt temperature=0.5\n",
                        "    sample_options = {{\"temperature\": float}}  # genzoo sample {name} --opt temperature=0.5\n"
                        "    update_period = 2  # steps within which update steps every optimiser (the checks cover one)\n")
    head, _, _ = text.rpartition("    def configure_optimizers(self):")
    return head.rstrip("\n") + "\n" + OWNED_UPDATE
