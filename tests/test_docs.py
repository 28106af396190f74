"""The docs tell the truth: every verb and option is in docs/cli.md, docs/models.md is the registry's,
every hook is documented, the plugin tutorial works when followed to the letter (every command of the
README and docs/ runs: test_doc_commands.py)."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import genzoo_plugins_only

import genzoo
from genzoo import hookspecs
from genzoo.cli import cli
from genzoo.plugins import HOOK_NAMES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def tool(name: str):
    """A script of tools/ as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def every_verb() -> click.Group:
    """genzoo's verbs and the built-in plugins' in one plain group, without touching the real cli."""
    context = click.Context(cli)
    verbs = {name: cli.get_command(context, name) for name in cli.list_commands(context)}
    return click.Group(commands={**verbs, **cli.plugin_commands(context)})


def test_the_cli_reference_is_generated_from_the_commands():
    with genzoo_plugins_only():
        assert (DOCS / "cli.md").read_text() == tool("gen_cli_md").cli_reference() + "\n", \
            "regenerate it: python tools/gen_cli_md.py > docs/cli.md"


def test_every_command_and_option_is_in_the_cli_reference():
    text = (DOCS / "cli.md").read_text()
    with genzoo_plugins_only():
        group = every_verb()
    assert {"mmb", "sample", "fit"} <= set(group.commands)
    for path, command in _walk(group, "genzoo"):
        assert f"## {path}\n" in text, f"docs/cli.md lacks `{path}`: run python tools/gen_cli_md.py > docs/cli.md"
        section = text.split(f"## {path}\n")[1].split("\n## ")[0]
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert opt in section, f"docs/cli.md: `{path}` lacks {opt}"


def _walk(group: click.Group, path: str):
    for name, command in group.commands.items():
        yield f"{path} {name}", command
        if isinstance(command, click.Group):
            yield from _walk(command, f"{path} {name}")


def test_the_model_zoo_page_is_generated_from_the_registry():
    with genzoo_plugins_only():
        page = tool("gen_models_md").models_page(genzoo.list_models())
    assert (DOCS / "models.md").read_text() == page, "regenerate it: python tools/gen_models_md.py > docs/models.md"


def test_every_hook_is_specified_and_documented():
    specified = {name for name in dir(hookspecs) if name.startswith("register_")}
    assert specified == set(HOOK_NAMES)
    reference = (DOCS / "plugins-reference.md").read_text()
    for hook in specified:
        assert f"`{hook}(" in reference


def tutorial_files() -> dict[str, str]:
    """The files the tutorial asks the reader to create: a `File: PATH` line, then a fenced block."""
    text = (DOCS / "plugins.md").read_text()
    return {m.group(1): m.group(2) for m in re.finditer(r"^File: (\S+)\n\n```\w*\n(.*?)^```", text, re.S | re.M)}


@pytest.mark.slow
def test_the_plugin_tutorial_works_as_written(tmp_path, monkeypatch):
    project = tmp_path / "genzoo-pixelstats"
    for rel, content in tutorial_files().items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(content)
    assert {"pyproject.toml", "genzoo_pixelstats/__init__.py", "genzoo_pixelstats/model.py"} <= set(tutorial_files())
    data = tmp_path / "digits.npz"
    rng = np.random.default_rng(0)
    np.savez(data, x=(rng.random((256, 28, 28)) * 255).astype(np.uint8))

    def install():
        site = tmp_path / "site"
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                               "--upgrade", "--target", str(site), str(project)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return site

    monkeypatch.syspath_prepend(str(install()))
    runner = CliRunner()
    fit = runner.invoke(cli, ["fit", "pixelstats", "--dataset", f"npz:{data}", "--steps", "30", "--batch-size", "64",
                              "--out", str(tmp_path / "runs" / "pixelstats"), "--no-progress"])
    assert fit.exit_code == 0, fit.output
    weights = project / "genzoo_pixelstats" / "weights" / "pixelstats-mnist"
    export = runner.invoke(cli, ["export", str(tmp_path / "runs" / "pixelstats"), str(weights)])
    assert export.exit_code == 0, export.output
    hashes = dict(re.findall(r"(config\.json|model\.safetensors): ([0-9a-f]{64})", export.output))
    init = project / "genzoo_pixelstats" / "__init__.py"
    init.write_text(init.read_text().replace("CONFIG_SHA256", hashes["config.json"])
                    .replace("WEIGHTS_SHA256", hashes["model.safetensors"]))
    for name in list(sys.modules):
        if name.startswith("genzoo_pixelstats"):
            del sys.modules[name]
    install()  # reinstall with the bundled weights, as the reader does
    from genzoo.plugins import reset_host

    reset_host()
    try:
        listed = runner.invoke(cli, ["list"])
        assert "pixelstats-mnist" in listed.output and "bundled" in listed.output
        plugins = runner.invoke(cli, ["plugins"])
        assert "pixelstats [ok]" in plugins.output
        out = tmp_path / "samples.png"
        sample = runner.invoke(cli, ["sample", "pixelstats", "-n", "16", "-o", str(out), "--opt", "temperature=0.8"])
        assert sample.exit_code == 0, sample.output
        assert out.is_file()
        show = runner.invoke(cli, ["pixelstats-show"])
        assert show.exit_code == 0 and "mean intensity" in show.output
    finally:
        reset_host()


def test_the_long_commands_state_their_time_with_the_cpu_named_and_how_they_report_progress():
    for page in (ROOT / "README.md", DOCS / "cli.md"):
        text = " ".join(page.read_text().split())
        for figure in ("(`genzoo eval ign -n 10000`) took 169 s", "about 6 minutes"):
            assert figure in text, (page.name, figure)
            around = text[text.index(figure) - 300:text.index(figure) + 300]
            assert "AMD EPYC" in around or "CPU cores" in around, (page.name, figure)
        assert "scaled from" in text and "a line at most every 30 s and every 10%" in text
