"""Model files are untrusted input: a config.json is typed and range-checked field by field, a model that cannot
fit in memory is refused before anything is built, and every refusal is one sentence true to its own case that
quotes the file's text and never offers it as a command."""

import json

import pytest

import genzoo


def _edit(directory, **changes):
    path = directory / "config.json"
    document = json.loads(path.read_text())
    for key, value in changes.items():
        if key == "config":
            document["config"].update(value)
        else:
            document[key] = value
    path.write_text(json.dumps(document))


def _refusal(directory) -> str:
    with pytest.raises(genzoo.GenzooError) as info:
        genzoo.load(directory)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("field, value, said", [
    ("latent", "4", "field 'latent' must be an integer, got '4' (a string)"),
    ("latent", 4.0, "field 'latent' must be an integer, got 4.0 (a number)"),
    ("latent", True, "field 'latent' must be an integer, got True (a boolean)"),
    ("noise_weight", "0.1", "field 'noise_weight' must be a number, got '0.1' (a string)"),
    ("schedule", "false", "field 'schedule' must be true or false, got 'false' (a string)"),
    ("channels", 0, "field 'channels' must be at least 1, got 0"),
    ("lr", [1], "field 'lr' must be a number, got [1] (a list)"),
])
def test_a_config_value_of_the_wrong_type_is_refused_naming_the_field(toy_model_dir, field, value, said):
    _edit(toy_model_dir, config={field: value})
    assert said in _refusal(toy_model_dir)


def test_an_int_stands_for_a_float_in_a_config(toy_model_dir):
    _edit(toy_model_dir, config={"noise_weight": 1})
    assert genzoo.load(toy_model_dir).config.noise_weight == 1.0


def test_an_enormous_image_size_is_refused_by_memory_before_anything_is_built(toy_model_dir, monkeypatch):
    from genzoo.plugins import get_host

    built = []
    toy = get_host().method("toy")
    monkeypatch.setattr(toy, "__init__", lambda self, config=None: built.append(config))
    _edit(toy_model_dir, config={"image_size": 10**7})
    message = _refusal(toy_model_dir)
    assert "asks for 1 x 10000000 x 10000000 images: one alone takes 372,529.0 GiB as float32, more than this " \
           "machine's" in message
    assert built == []


def test_an_enormous_network_is_refused_by_memory_before_any_weight_is_allocated(toy_model_dir):
    _edit(toy_model_dir, config={"latent": 10**11})
    message = _refusal(toy_model_dir)
    assert "describes a model of 48,056.2 GiB of weights, more than this machine's" in message


@pytest.mark.parametrize("version, said, unsaid", [
    ("1", "gives format_version as '1' (a string), not a whole number such as 1", "upgrade genzoo"),
    (1.0, "gives format_version as 1.0 (a number), not a whole number", "upgrade genzoo"),
    (2, "has format_version 2, newer than the version 1 this genzoo reads: upgrade genzoo", "damaged"),
    (0, "has format_version 0, which no genzoo writes (the first is 1); the file is damaged", "upgrade genzoo"),
])
def test_format_version_messages_are_true_to_their_case(toy_model_dir, version, said, unsaid):
    _edit(toy_model_dir, format_version=version)
    message = _refusal(toy_model_dir)
    assert said in message and unsaid not in message


@pytest.mark.parametrize("method", [["toy", "ign"], 7, None, ""])
def test_a_method_that_is_not_a_name_is_called_damaged_not_missing(toy_model_dir, method):
    _edit(toy_model_dir, method=method)
    message = _refusal(toy_model_dir)
    assert f"gives method as {method!r}" in message and "pip install" not in message


@pytest.mark.parametrize("plugin", ["genzoo-vae2 --index-url http://evil.example/simple", "requests", "genzoo-X",
                                    "genzoo-ok; rm -rf ~", ["genzoo-a"]])
def test_a_plugin_name_outside_the_naming_rule_is_quoted_never_offered_to_install(toy_model_dir, plugin):
    _edit(toy_model_dir, method="martian", plugin=plugin)
    message = _refusal(toy_model_dir)
    assert "pip install" not in message
    if isinstance(plugin, str):
        assert f"names its plugin as {plugin!r}" in message and "not a genzoo plugin name (genzoo-NAME)" in message
    else:
        assert "gives plugin as ['genzoo-a'] (a list)" in message


def test_a_method_name_outside_the_naming_rule_gives_no_install_command(toy_model_dir):
    _edit(toy_model_dir, method="Mars Rover", plugin=None)
    message = _refusal(toy_model_dir)
    assert "pip install" not in message and "the method's name makes no genzoo plugin name" in message


# -- references between models ------------------------------------------------------------------------------


def _robust(base: str):
    import torch
    from genzoo_robust import RobustRefiner

    torch.manual_seed(0)
    return RobustRefiner({"width": 8, "base": base})


def test_a_refiner_whose_base_is_itself_is_one_sentence_not_a_recursion_error(tmp_path):
    from click.testing import CliRunner

    from genzoo.cli import cli

    own = tmp_path / "self-based"
    genzoo.save_pretrained(_robust(str(own)), own)
    result = CliRunner().invoke(cli, ["sample", str(own), "-n", "2", "-o", str(tmp_path / "x.png")])
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [
        f"Error: robust's base generator leads back to itself ({str(own)!r} -> {str(own)!r}): a refiner's base must "
        f"be a model that samples without it; export the refiner with --set base=MODEL naming another generator"]
    assert not (tmp_path / "x.png").exists()


def test_two_refiners_based_on_each_other_are_named_as_a_cycle(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    genzoo.save_pretrained(_robust(str(b)), a)
    genzoo.save_pretrained(_robust(str(a)), b)
    with pytest.raises(genzoo.GenzooError, match=r"leads back to itself \('.*b' -> '.*a' -> '.*b'\)"):
        genzoo.load(a).sample(2)
