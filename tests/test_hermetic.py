"""The suite checks genzoo's own catalogue, pages and verbs, whatever else is installed beside it.

An outside plugin, installed as its own distribution, brings a bundled model of its own (with an
FID that has no reference rows in genzoo's registry) and a verb. The tests that read the catalogue
and the command line (the registry's reference rows, docs/cli.md, docs/models.md, the model cards
and `genzoo info`) still pass, because they load genzoo's own plugins only.
"""

import shutil
import sys

import click
import pytest
import test_catalogue
import test_docs
import test_shipped_text
from conftest import genzoo_plugins_only

from genzoo.plugins import get_host, reset_host
from genzoo.weights import file_hashes

PLUGIN = '''"""An outside genzoo plugin: a bundled model and a verb of its own."""
import click

import genzoo


@genzoo.hookimpl
def register_models(register):
    register("outside-mnist", method="ign", summary="an outside plugin's copy of ign-mnist",
             bundled="genzoo_outside:weights/outside-mnist", files={FILES!r}, status="stable",
             limitations="A copy made to test that genzoo's suite ignores what it does not own.",
             command=["genzoo fit ign --dataset mnist --out runs/outside"],
             metrics=[{{"metric": "fid", "value": 12.5, "features": "outside-features", "n": 500,
                        "reference": "outside:test"}}])


@genzoo.hookimpl
def register_commands(cli):
    @click.command("outside-hello")
    @click.option("--loud", is_flag=True, help="Shout.")
    def hello(loud):
        """Say hello from outside."""
        click.echo("HELLO" if loud else "hello")

    cli.add_command(hello)
'''


@pytest.fixture
def outside_plugin(tmp_path, monkeypatch):
    """genzoo-outside 0.1, installed into a folder on sys.path, with ign-mnist's weights bundled as its own."""
    site = tmp_path / "site"
    package = site / "genzoo_outside"
    weights = package / "weights" / "outside-mnist"
    shutil.copytree(get_host().model("ign-mnist").bundled_dir(), weights)
    (package / "__init__.py").write_text(PLUGIN.format(FILES=file_hashes(weights)))
    info = site / "genzoo_outside-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: genzoo-outside\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[genzoo]\noutside = genzoo_outside\n")
    monkeypatch.syspath_prepend(str(site))
    sys.modules.pop("genzoo_outside", None)
    reset_host()
    yield
    sys.modules.pop("genzoo_outside", None)
    reset_host()


def test_an_outside_plugin_leaves_the_tests_of_genzoo_s_own_catalogue_and_pages_passing(outside_plugin):
    assert "outside-mnist" in get_host().all_models()  # installed and loaded when nothing restricts plugins
    assert "outside-hello" in test_docs.every_verb().commands
    with genzoo_plugins_only():
        assert "outside-mnist" not in get_host().all_models()
        assert "outside-hello" not in test_docs.every_verb().commands
    assert "outside-mnist" in get_host().all_models()  # and back again afterwards
    test_catalogue.test_every_distance_in_the_registry_has_its_reference_rows()
    test_docs.test_the_cli_reference_is_generated_from_the_commands()
    test_docs.test_every_command_and_option_is_in_the_cli_reference()
    test_docs.test_the_model_zoo_page_is_generated_from_the_registry()
    test_shipped_text.test_model_cards_and_info_state_what_is_with_every_distance_beside_its_reference_rows()


def test_the_outside_plugin_would_fail_those_tests_were_they_to_read_it(outside_plugin):
    """The other half of the proof: what the outside plugin brings breaks each check the tests make."""
    entry = get_host().all_models()["outside-mnist"]
    assert test_catalogue.reference_set(entry.metrics[0]) is None  # no reference rows for its FID
    context = click.Context(test_docs.cli)
    assert "outside-hello" in test_docs.cli.plugin_commands(context)  # a verb docs/cli.md does not list
    assert "## genzoo outside-hello" not in (test_docs.DOCS / "cli.md").read_text()
    assert "`outside-mnist`" not in (test_docs.DOCS / "models.md").read_text()
