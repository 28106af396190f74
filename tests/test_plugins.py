"""The plugin host: entry points, pm.register, failures, duplicates, the allow-list, every hook."""

import json
import re
import types

import numpy as np

import pytest
import torch
from click.testing import CliRunner

import genzoo
from genzoo.cli import cli
from genzoo.plugins import PluginHost, get_host

from conftest import TESTS, make_distribution


def test_builtin_plugins_arrive_through_entry_points():
    host = get_host()
    assert "features" in host.plugins
    assert host.plugins["features"].distribution == "genzoo"
    assert "feature-classifier" in host.methods


def test_entry_point_plugin_is_discovered_with_its_version_and_hooks(toy_site):
    info = get_host().plugins["toy"]
    assert info.distribution == "genzoo-toy" and info.version == "0.1"
    assert info.hooks == ["register_commands", "register_feature_extractors", "register_methods", "register_models"]
    assert info.methods == ["toy", "sample-only"] and info.error is None


def test_plugin_registered_directly_like_pm_register():
    from dataclasses import dataclass

    @dataclass
    class Cfg:
        x: int = 1

    class Direct(genzoo.Method):
        name = "direct"
        Config = Cfg

    plugin = types.SimpleNamespace()
    plugin.register_methods = genzoo.hookimpl(lambda register: register(Direct))
    host = PluginHost(load_entry_points=False)
    info = host.add(plugin, name="direct-plugin")
    assert info.error is None and host.method("direct") is Direct


def test_register_methods_hook_with_alias(toy_site):
    host = get_host()
    assert host.method("toy-alias") is host.method("toy")


def test_register_models_hook(toy_site):
    entry = genzoo.find_model("tiny")
    assert entry.name == "toy-tiny" and entry.source == "plugin 'toy'"


def test_register_feature_extractors_hook(toy_site):
    record = get_host().feature_extractors["toy-features"]
    assert record.plugin == "toy" and record.datasets == ("toy",)
    assert record.factory()(torch.zeros(2, 1, 8, 8)).shape == (2, 64)


def test_register_commands_hook(toy_site):
    before = dict(cli.commands)
    get_host().add_commands(cli)
    try:
        result = CliRunner().invoke(cli, ["toy-hello"])
        assert result.exit_code == 0 and "hello from toy" in result.output
    finally:
        cli.commands.clear()
        cli.commands.update(before)


def test_plugin_that_fails_to_import_is_reported_and_others_keep_working(tmp_path, monkeypatch, toy_site):
    broken = tmp_path / "broken_src.py"
    broken.write_text("raise RuntimeError('boom at import')\n")
    make_distribution(toy_site, "genzoo-broken", "brokenplug", broken, "broken")
    host = get_host()
    assert "boom at import" in host.plugins["broken"].error
    assert "toy" in host.methods
    result = CliRunner().invoke(cli, ["plugins", "--json"])
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert "boom at import" in rows["broken"]["error"] and rows["toy"]["error"] is None


def test_plugin_that_fails_to_register_keeps_nothing_half_registered():
    from dataclasses import dataclass

    @dataclass
    class Cfg:
        x: int = 1

    class Good(genzoo.Method):
        name = "half-good"
        Config = Cfg

    def register_methods(register):
        register(Good)
        raise ValueError("second registration exploded")

    plugin = types.SimpleNamespace(register_methods=genzoo.hookimpl(register_methods))
    host = PluginHost(load_entry_points=False)
    info = host.add(plugin, name="half")
    assert "exploded" in info.error
    assert "half-good" not in host.methods


def test_duplicate_method_names_are_an_error_naming_both_plugins(toy_site, tmp_path):
    make_distribution(toy_site, "genzoo-toy-two", "toyzoo_two", TESTS / "toyzoo.py", "zz-toy-two")
    host = get_host()
    error = host.plugins["zz-toy-two"].error
    assert "'toy'" in error and "zz-toy-two" in error and "already registered by plugin 'toy'" in error
    assert host.methods["toy"].plugin == "toy"


def test_allow_list_empty_loads_nothing(monkeypatch, toy_site):
    monkeypatch.setenv("GENZOO_LOAD_PLUGINS", "")
    host = PluginHost()
    assert host.plugins == {} and host.methods == {}


def test_allow_list_names_entry_points(monkeypatch, toy_site):
    monkeypatch.setenv("GENZOO_LOAD_PLUGINS", "toy")
    host = PluginHost()
    assert set(host.plugins) == {"toy"}


def test_missing_method_gives_a_clear_message(monkeypatch):
    monkeypatch.setenv("GENZOO_LOAD_PLUGINS", "")
    result = CliRunner().invoke(cli, ["sample", "ign"])
    assert result.exit_code == 1
    assert "'ign'" in result.output and "plugin" in result.output
    assert "Traceback" not in result.output


def _plugin(**hooks):
    plugin = types.SimpleNamespace()
    for name, function in hooks.items():
        setattr(plugin, name, genzoo.hookimpl(function))
    return plugin


def test_register_datasets_hook_adds_a_named_dataset_checked_against_its_declaration(tmp_path):
    import numpy as np

    from genzoo.datasets import load_dataset

    def load(root, split):
        return np.full((6, 4, 4), 7 if split == "train" else 9, np.uint8), np.arange(6) % 2

    host = get_host()
    info = host.add(_plugin(register_datasets=lambda register: (
        register("sevens", load, shape=(1, 4, 4), num_classes=2, splits={"train": 6, "test": 6}, files="nothing"),
        register("liars", load, shape=(3, 4, 4), num_classes=2))), name="data-plugin")
    assert info.error is None and info.datasets == ["sevens", "liars"]
    data = load_dataset("sevens:test", tmp_path)
    assert data.images.shape == (6, 1, 4, 4) and int(data.images.max()) == 9 and data.labels.tolist() == [0, 1] * 3
    with pytest.raises(genzoo.GenzooError, match=r"declared as \(3, 4, 4\) .* hold \(1, 4, 4\)"):
        load_dataset("liars", tmp_path)
    bad = host.add(_plugin(register_datasets=lambda register: register("Capitals", load, shape=(1, 4, 4))), name="bad")
    assert "lower-case" in bad.error and "Capitals" not in host.datasets
    result = CliRunner().invoke(cli, ["datasets"])
    assert result.exit_code == 0 and "sevens:" in result.output and "celeba64:" in result.output


def test_register_metrics_hook_adds_a_metric_eval_can_name(toy_site, toy_npz):
    host = get_host()
    host.add(_plugin(register_metrics=lambda register: register(
        "mean-brightness", lambda scoring: float(scoring.images.mean()), summary="mean pixel")), name="metric-plugin")
    report = genzoo.evaluate(f"npz:{toy_npz}", n=64, ref=f"npz:{toy_npz}", features="toy-features",
                             metrics="fid,mean-brightness", progress=False)
    assert report["metrics"]["mean-brightness"] == pytest.approx(float(np.load(toy_npz)["x"].mean() / 255), abs=1e-6)
    bad = host.add(_plugin(register_metrics=lambda register: register("fid", lambda s: 0.0)), name="clash")
    assert "already registered by genzoo" in bad.error


def test_a_plugin_command_may_not_replace_a_built_in_verb():
    import click

    def replace_sample(cli):  # pluggy matches hook arguments by name
        cli.add_command(click.Command("sample", callback=lambda: None))

    from genzoo.cli import sample_cmd

    host = PluginHost(load_entry_points=False)
    info = host.add(_plugin(register_commands=replace_sample), name="hijack")
    host.add_commands(cli)
    assert cli.get_command(click.Context(cli), "sample") is sample_cmd.command and "sample" not in cli.commands
    assert "tried to replace the command(s) ['sample']" in info.error


def test_a_plugin_adds_datasets_and_metrics_exactly_as_the_core_does(toy_site, toy_npz, tmp_path):
    """The core's own datasets and metrics arrive through register_datasets/register_metrics; a plugin
    making the same calls under other names gets the same rows and the same results."""
    from genzoo.datasets import builtin as core_datasets
    from genzoo.datasets import load_dataset
    from genzoo.metrics import builtin as core_metrics

    host = get_host()
    assert set(host.builtins["genzoo.datasets.builtin"].datasets) == set(host.datasets)
    assert set(host.builtins["genzoo.metrics.builtin"].metrics) == set(host.metrics)
    dataset_calls, metric_calls = [], []
    core_datasets.register_datasets(lambda name, load, **fields: dataset_calls.append((name, load, fields)))
    core_metrics.register_metrics(lambda name, compute, **fields: metric_calls.append((name, compute, fields)))
    info = host.add(_plugin(
        register_datasets=lambda register: [register(f"copy-{n}", load, **f) for n, load, f in dataset_calls],
        register_metrics=lambda register: [register(f"copy-{n}", compute, **f) for n, compute, f in metric_calls]),
        name="copy")
    assert info.error is None
    for name, *_ in dataset_calls:
        copy = host.datasets[f"copy-{name}"].as_dict()
        assert copy.pop("source") == "plugin 'copy'" and copy.pop("name") == f"copy-{name}"
        core = host.datasets[name].as_dict()
        assert (core.pop("source"), core.pop("name")) == ("genzoo", name) and copy == core
    root = tmp_path / "root"
    (root / "cifar10").mkdir(parents=True)
    rng = np.random.default_rng(0)
    np.savez(root / "cifar10" / "cifar10_exact_5k.npz", x_train=rng.integers(0, 256, (5, 32, 32, 3), dtype=np.uint8),
             y_train=np.arange(5))
    core, copied = load_dataset("cifar10-exact:train", root), load_dataset("copy-cifar10-exact:train", root)
    assert torch.equal(core.images, copied.images) and torch.equal(core.labels, copied.labels)

    common = dict(n=64, ref=f"npz:{toy_npz}", features="toy-features", progress=False)
    ours = genzoo.evaluate(f"npz:{toy_npz}", metrics="fid,precision,recall", **common)["metrics"]
    theirs = genzoo.evaluate(f"npz:{toy_npz}", metrics="copy-fid,copy-precision,copy-recall", **common)["metrics"]
    assert theirs == {f"copy-{name}": value for name, value in ours.items() if name != "classes"} | \
        ({"classes": ours["classes"]} if "classes" in ours else {})
    for metrics in ("precision", "copy-precision"):  # the copy's check refuses what the core's refuses
        with pytest.raises(genzoo.ArgumentError, match="nearest neighbour"):
            genzoo.evaluate(f"npz:{toy_npz}", metrics=metrics, k=64, **common)
    listed = CliRunner().invoke(cli, ["datasets"])
    assert "copy-mnist: handwritten digits" in listed.output and "from plugin 'copy'" in listed.output


# -- the tables: one duplicate error, one lookup ------------------------------------------------------------


def _register_each_kind(name, dataset):
    """A plugin that registers one row of every kind under ``name`` (a dataset under ``dataset``: lower case only)."""
    from dataclasses import dataclass

    @dataclass
    class Cfg:
        x: int = 1

    method = type("Clash", (genzoo.Method,), {"name": name, "Config": Cfg})
    return _plugin(register_methods=lambda register: register(method),
                   register_models=lambda register: register(name, method="ign"),
                   register_datasets=lambda register: register(dataset, lambda root, split: None, shape=(1, 2, 2)),
                   register_metrics=lambda register: register(name, lambda scoring: 0.0),
                   register_feature_extractors=lambda register: register(name, lambda: None))


def test_every_kind_refuses_a_taken_name_naming_both_sources_whatever_the_case():
    host = PluginHost(load_entry_points=False)
    assert host.add(_register_each_kind("twin", "twin"), name="first").error is None
    info = host.add(_register_each_kind("TWIN", "twin"), name="second")
    for kind in ("method", "model", "dataset", "metric", "feature network"):
        name = "twin" if kind == "dataset" else "TWIN"
        assert f"{kind} name '{name}' from plugin 'second' is already registered by plugin 'first'" in info.error
    assert info.methods == info.models == info.datasets == info.metrics == info.feature_extractors == []


@pytest.mark.parametrize("lookup, name, guess", [
    ("method", "ing", "ign"), ("model", "ign-mnsit", "ign-mnist"), ("dataset", "minst", "mnist"),
    ("metric", "fdi", "fid"), ("feature_extractor", "features-mnst", "features-mnist"),
])
def test_every_kind_answers_an_unknown_name_in_one_shape_with_the_closest_name(lookup, name, guess):
    host = get_host()
    with pytest.raises(genzoo.GenzooError) as error:
        getattr(host, lookup)(name)
    kind = {"feature_extractor": "feature network"}.get(lookup, lookup)
    shape = rf"unknown {kind} '{name}'; did you mean {guess}\? \(known {kind}s: [^)]+\); .+"
    assert re.fullmatch(shape, str(error.value))
    assert "did you mean" not in _error(lambda: getattr(host, lookup)("zzzzzzzz"))


def _error(call):
    with pytest.raises(genzoo.GenzooError) as error:
        call()
    return str(error.value)


def test_every_table_holds_one_row_type():
    from genzoo.table import Entry

    host = get_host()
    tables = (host.methods, host.models, host.datasets, host.metrics, host.feature_extractors)
    assert all(table and all(isinstance(row, Entry) for row in table.values()) for table in tables)
    assert host.methods["ign"].names() == ("ign",) and host.models["ign-mnist"].names()[0] == "ign-mnist"


def test_names_are_found_whatever_their_case():
    host = get_host()
    assert host.method("IGN").name == "ign" and host.model("IGN").name == "ign-mnist"
    assert host.model("Ign-MNIST").name == "ign-mnist" and host.dataset("MNIST").name == "mnist"
    assert host.metric("FID").name == "fid"


def test_the_cli_finds_a_name_in_another_case_and_suggests_a_misspelt_one(tmp_path):
    runner = CliRunner()
    sampled = runner.invoke(cli, ["sample", "IGN", "-n", "4", "-o", str(tmp_path / "s.png")])
    assert sampled.exit_code == 0, sampled.output
    misspelt = runner.invoke(cli, ["fit", "ing", "--dataset", "mnist", "--steps", "1", "--out", str(tmp_path / "r")])
    assert misspelt.exit_code == 1 and "unknown method 'ing'; did you mean ign?" in misspelt.output


def test_a_model_name_where_a_method_is_expected_points_to_init(tmp_path):
    result = CliRunner().invoke(cli, ["fit", "ign-mnist", "--dataset", "mnist", "--steps", "1",
                                      "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert "'ign-mnist' is a model of method 'ign'" in result.output and "genzoo fit ign --init DIR" in result.output
    assert not (tmp_path / "r").exists()


def test_genzoo_plugins_lists_every_plugins_verbs_in_text_and_json(toy_site, tmp_path):
    """An outside plugin's verb (register_commands) and a built-in plugin's (mmb) are read back from
    `genzoo plugins`, with no verb of a plugin run first."""
    _install_verb_plugin(toy_site, tmp_path, "zz-genzoo-test-verbs", "zz-genzoo-test-walk")
    rows = {row["name"]: row for row in json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)}
    verbs = rows["zz-genzoo-test-verbs"]
    assert verbs["commands"] == ["zz-genzoo-test-walk"] and verbs["hooks"] == ["register_commands"]
    assert rows["toy"]["commands"] == ["toy-hello"] and rows["mmb"]["commands"] == ["mmb"]
    assert verbs["error"] is None
    text = CliRunner().invoke(cli, ["plugins"]).output
    assert "  commands: zz-genzoo-test-walk" in text and "  commands: mmb" in text
    walked = CliRunner().invoke(cli, ["zz-genzoo-test-walk"])
    assert walked.exit_code == 0 and walked.output == "zz-genzoo-test-verbs walked\n"


def _install_verb_plugin(site, tmp_path, entry_name, verb):
    """Installs distribution genzoo-ENTRY_NAME, whose register_commands adds ``verb`` (it echoes "ENTRY_NAME walked")."""
    module = entry_name.replace("-", "_")
    make_distribution(site, f"genzoo-{entry_name}", module, _source(tmp_path, module, f"""
        import click
        import genzoo

        @genzoo.hookimpl
        def register_commands(cli):
            cli.add_command(click.Command({verb!r}, callback=lambda: click.echo({entry_name + " walked"!r})))
        """), entry_name)


def test_of_two_plugins_adding_one_verb_the_first_keeps_it_and_both_say_so():
    import click

    def hello(cli):
        cli.add_command(click.Command("hello", callback=lambda: None))

    def hello_and_bye(cli):
        hello(cli)
        cli.add_command(click.Command("bye", callback=lambda: None))

    host = PluginHost(load_entry_points=False)
    first = host.add(_plugin(register_commands=hello), name="a")
    second = host.add(_plugin(register_commands=hello_and_bye), name="b")
    assert first.commands == ["hello"] and set(host.commands()) == {"hello"}
    assert first.error == ("plugin 'b' also adds the command 'hello', which this plugin keeps (it loads first), so "
                           "plugin 'b' adds none of its commands; give one plugin's commands other names, or leave "
                           "one plugin out of GENZOO_LOAD_PLUGINS")
    assert second.commands == []
    assert second.error == ("register_commands failed: plugin 'a' loads first and keeps the command 'hello', so this "
                            "plugin adds none of its commands; give one plugin's commands other names, or leave one "
                            "plugin out of GENZOO_LOAD_PLUGINS")


def test_genzoo_plugins_names_both_plugins_adding_one_verb_and_the_first_by_name_runs_it(toy_site, tmp_path,
                                                                                         monkeypatch):
    """An outside plugin adding `tinyvae-walk`, and a second one adding it too: entry points load in name order,
    so the first keeps the verb, and both rows of `genzoo plugins` (text and JSON) say so in one line each.
    The allow-list keeps any other installed plugin (a real one adding `tinyvae-walk` included) out."""
    first, later = "zz-genzoo-test-tinyvae", "zz-genzoo-test-walker"
    for name in (later, first):
        _install_verb_plugin(toy_site, tmp_path, name, "tinyvae-walk")
    monkeypatch.setenv("GENZOO_LOAD_PLUGINS", f"{first},{later}")
    kept = (f"plugin '{later}' also adds the command 'tinyvae-walk', which this plugin keeps (it loads first), so "
            f"plugin '{later}' adds none of its commands")
    lost = f"register_commands failed: plugin '{first}' loads first and keeps the command 'tinyvae-walk'"
    listed = CliRunner().invoke(cli, ["plugins", "--json"])
    rows = {row["name"]: row for row in json.loads(listed.output)}
    assert rows[first]["commands"] == ["tinyvae-walk"] and rows[later]["commands"] == []
    assert kept in rows[first]["error"] and lost in rows[later]["error"]
    assert "\n" not in rows[first]["error"] + rows[later]["error"]
    text = " ".join(CliRunner().invoke(cli, ["plugins"]).output.split())
    assert f"{first} [ERROR]" in text and f"{later} [ERROR]" in text
    assert f"error: {kept}" in text and f"error: {lost}" in text
    walked = CliRunner().invoke(cli, ["tinyvae-walk"])
    assert walked.exit_code == 0 and walked.output == f"{first} walked\n"


def test_of_two_plugins_registering_one_method_and_model_name_the_first_by_name_keeps_both(toy_site, tmp_path,
                                                                                           monkeypatch):
    first, later = "zz-genzoo-test-twin-a", "zz-genzoo-test-twin-b"
    for name in (later, first):
        module = name.replace("-", "_")
        make_distribution(toy_site, f"genzoo-{name}", module, _source(tmp_path, module, """
            from dataclasses import dataclass
            import genzoo

            @dataclass
            class Cfg:
                x: int = 1

            class Twin(genzoo.Method):
                name = "zz-genzoo-test-twin"
                Config = Cfg

            @genzoo.hookimpl
            def register_methods(register):
                register(Twin)

            @genzoo.hookimpl
            def register_models(register):
                register("zz-genzoo-test-twin-model", method="zz-genzoo-test-twin")
            """), name)
    monkeypatch.setenv("GENZOO_LOAD_PLUGINS", f"{first},{later}")
    host = get_host()
    assert host.methods["zz-genzoo-test-twin"].plugin == first and host.plugins[first].error is None
    assert host.models["zz-genzoo-test-twin-model"].source == f"plugin '{first}'"
    error = host.plugins[later].error
    assert f"method name 'zz-genzoo-test-twin' from plugin '{later}' is already registered by plugin '{first}'" in error
    assert (f"model name 'zz-genzoo-test-twin-model' from plugin '{later}' is already registered by plugin '{first}'"
            in error)
    assert host.plugins[later].methods == host.plugins[later].models == []


def test_genzoo_plugins_shows_a_verb_that_would_replace_one_of_genzoos_own():
    import click

    host = get_host()
    info = host.add(_plugin(register_commands=lambda cli: cli.add_command(click.Command("fit"))), name="hijack")
    rows = {row["name"]: row for row in json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)}
    assert "tried to replace the command(s) ['fit']" in rows["hijack"]["error"] and rows["hijack"]["commands"] == []
    assert info.commands == []


def _source(tmp_path, name, text):
    import textwrap

    path = tmp_path / f"{name}_src.py"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("body", ["import sys\nsys.exit(2)\n", "raise SystemExit('usage: argparse')\n",
                                  "class Odd(BaseException):\n    pass\nraise Odd('not an Exception')\n"])
def test_a_plugin_that_exits_or_raises_a_base_exception_at_import_takes_nothing_down(toy_site, tmp_path, body):
    make_distribution(toy_site, "genzoo-exits", "exitsplug", _source(tmp_path, "exitsplug", body), "exits")
    runner = CliRunner()
    result = runner.invoke(cli, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    error = {row["name"]: row for row in json.loads(result.output)}["exits"]["error"]
    assert error.startswith("failed to import exitsplug: ")
    assert re.search(r"sys\.exit\(2\)|sys\.exit\('usage: argparse'\)|Odd: not an Exception", error)
    assert runner.invoke(cli, ["list"]).exit_code == 0 and "toy" in get_host().methods


def test_a_hook_that_exits_is_reported_and_ctrl_c_still_stops_genzoo():
    import sys

    host = PluginHost(load_entry_points=False)
    info = host.add(_plugin(register_methods=lambda register: sys.exit(3)), name="exits")
    assert info.error == "register_methods failed: it called sys.exit(3)"

    def interrupted(register):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        host.add(_plugin(register_methods=interrupted), name="interrupted")


def test_an_outside_plugin_sorting_first_cannot_take_a_built_in_methods_name(toy_site, tmp_path):
    """Entry points load in name order, genzoo's own first: "aaa" registering "ign" fails, naming both."""
    make_distribution(toy_site, "genzoo-aaa", "aaaplug", _source(tmp_path, "aaaplug", """
        from dataclasses import dataclass
        import genzoo

        @dataclass
        class Cfg:
            x: int = 1

        class Impostor(genzoo.Method):
            name = "ign"
            Config = Cfg

        @genzoo.hookimpl
        def register_methods(register):
            register(Impostor)
        """), "aaa")
    host = get_host()
    from genzoo_ign import IGN

    assert host.method("ign") is IGN and host.methods["ign"].plugin == "ign"
    assert list(host.plugins).index("ign") < list(host.plugins).index("aaa")
    error = host.plugins["aaa"].error
    assert "method name 'ign' from plugin 'aaa' is already registered by plugin 'ign'" in error
    result = CliRunner().invoke(cli, ["plugins"])
    assert "aaa [ERROR]" in result.output
