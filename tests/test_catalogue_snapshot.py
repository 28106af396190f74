"""`genzoo list` and `genzoo info` in a fresh process read the catalogue snapshot (genzoo.catalogue.catalogue)
instead of loading every plugin and torch; the snapshot says what the plugins say, and is rebuilt when they,
genzoo or registry.yaml change."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from genzoo.catalogue import Catalogue, snapshot_key, snapshot_path

TESTS = Path(__file__).resolve().parent
PROBE = ("import sys; from genzoo.cli import cli; cli.main({args!r}, standalone_mode=False); "
         "print('imports torch:', 'torch' in sys.modules)")


def fresh_process(args: list[str], cache: Path) -> tuple[str, bool]:
    """The output of `genzoo ARGS` in a new interpreter with ``cache`` as genzoo's cache, and whether it imported
    torch."""
    env = {**os.environ, "GENZOO_CACHE": str(cache), "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    output, _, last = done.stdout.rstrip("\n").rpartition("\n")
    return output, last == "imports torch: True"


def test_the_snapshot_holds_what_the_plugins_register(toy_site):
    from genzoo.plugins import get_host

    live = Catalogue.from_host(get_host())
    assert "toy-tiny" in live.models and live.method("toy").capabilities == ["fit", "refine", "sample"]
    read_back = Catalogue.from_json(json.loads(json.dumps(live.to_json(), default=str)))
    assert read_back.to_json() == json.loads(json.dumps(live.to_json(), default=str))
    assert read_back.find_model("toy") == live.models["toy-tiny"]  # a method finds its default model
    assert read_back.find_model("no-such-model") is None


def test_the_snapshot_goes_stale_when_a_plugin_or_the_allow_list_changes(toy_site, monkeypatch):
    before = snapshot_key()
    assert snapshot_key() == before
    plugin = toy_site / "toyzoo.py"
    plugin.write_text(plugin.read_text() + "\n# an edit\n")
    edited = snapshot_key()
    assert edited != before
    monkeypatch.setenv("GENZOO_LOAD_PLUGINS", "toy")
    assert snapshot_key() != edited


def test_the_names_repeated_for_the_snapshot_are_their_owners(monkeypatch, tmp_path):
    from genzoo import catalogue, plugins, precision

    assert (catalogue.ENTRY_POINT_GROUP, catalogue.ALLOW_ENV) == (plugins.ENTRY_POINT_GROUP, plugins.ALLOW_ENV)
    assert catalogue.CACHE_ENV == precision.CACHE_ENV
    monkeypatch.setenv("GENZOO_CACHE", str(tmp_path))
    assert snapshot_path().parent == precision.cache_folder() == tmp_path


def test_list_and_info_in_a_fresh_process_read_the_snapshot_without_torch(tmp_path):
    cache = tmp_path / "cache"
    listed, loaded = fresh_process(["list"], cache)
    assert loaded and snapshot_path().name in os.listdir(cache)  # the first run loads the plugins and saves them
    again, loaded_again = fresh_process(["list"], cache)
    assert again == listed and not loaded_again
    assert "ign-mnist" in listed and "bundled" in listed
    info, loaded = fresh_process(["info", "ign-mnist"], cache)
    assert not loaded and info.startswith("ign-mnist: ") and "weights: bundled" in info
    assert "genzoo sample ign-mnist" in info


@pytest.mark.slow
def test_a_plugin_that_fails_to_load_leaves_the_snapshot_alone(tmp_path, monkeypatch):
    """A catalogue missing a broken plugin's models is not saved: the next process loads the plugins again."""
    from conftest import make_distribution

    cache = tmp_path / "cache"
    fresh_process(["list"], cache)
    saved = json.loads((cache / snapshot_path().name).read_text())["key"]
    site = tmp_path / "site"
    site.mkdir()
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('this plugin is broken')\n")
    make_distribution(site, "genzoo-broken", "brokenzoo", broken, "broken")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    _, loaded = fresh_process(["list"], cache)
    assert loaded and json.loads((cache / snapshot_path().name).read_text())["key"] == saved
    _, loaded = fresh_process(["list"], cache)
    assert loaded  # still no current snapshot: the plugins load every time until the plugin is fixed or removed
