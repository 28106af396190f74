"""Model directories: round trip, strict loading, sha256 checks, no pickles."""

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import genzoo
from genzoo.weights import file_hashes, load_model_dir


def test_round_trip_is_exact(toy_model_dir):
    model = genzoo.load(toy_model_dir)
    saved = load_file(str(toy_model_dir / "model.safetensors"))
    for key, value in model.state_dict().items():
        assert torch.equal(value, saved[key])
    document = json.loads((toy_model_dir / "config.json").read_text())
    assert document["format_version"] == 1 and document["method"] == "toy" and document["plugin"] == "genzoo-toy"
    assert document["config"]["latent"] == 4


def test_fp16_storage_is_upcast_to_the_declared_dtype(toy_site, tmp_path):
    model = genzoo.load(genzoo.save_pretrained(_toy(), tmp_path / "half", storage_dtype="float16"))
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert json.loads((tmp_path / "half" / "config.json").read_text())["storage_dtype"] == "float16"


def _toy():
    from genzoo.plugins import get_host

    return get_host().method("toy")()


def _edit_weights(directory, edit):
    tensors = load_file(str(directory / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(directory / "model.safetensors"))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.pop("encoder.bias"), "missing tensors encoder.bias"),
        (lambda t: t.update(extra=torch.zeros(1)), "unexpected tensors extra"),
        (lambda t: t.update({"encoder.bias": torch.zeros(5)}), r"'encoder.bias' has shape \(5,\), the config needs \(4,\)"),
        (lambda t: t.update({"encoder.bias": torch.zeros(4, dtype=torch.float64)}), "'encoder.bias' has dtype torch.float64"),
    ],
)
def test_mismatched_weights_are_refused_with_the_difference(toy_model_dir, edit, message):
    _edit_weights(toy_model_dir, edit)
    with pytest.raises(genzoo.WeightsError, match=message) as info:
        genzoo.load(toy_model_dir)
    assert "model.safetensors" in str(info.value)


def test_config_with_unknown_field_is_refused(toy_model_dir):
    path = toy_model_dir / "config.json"
    document = json.loads(path.read_text())
    document["config"]["bogus"] = 1
    path.write_text(json.dumps(document))
    with pytest.raises(genzoo.GenzooError, match=r"unknown field\(s\) \['bogus'\]"):
        genzoo.load(toy_model_dir)


def test_config_with_wrong_type_is_refused(toy_model_dir):
    path = toy_model_dir / "config.json"
    document = json.loads(path.read_text())
    document["config"]["latent"] = "four"
    path.write_text(json.dumps(document))
    with pytest.raises(genzoo.GenzooError, match="field 'latent' must be an integer"):
        genzoo.load(toy_model_dir)


def test_older_config_missing_fields_takes_defaults(toy_model_dir):
    path = toy_model_dir / "config.json"
    document = json.loads(path.read_text())
    del document["config"]["noise_weight"]
    path.write_text(json.dumps(document))
    assert genzoo.load(toy_model_dir).config.noise_weight == 0.1


def test_sha256_mismatch_is_refused(toy_model_dir):
    expected = file_hashes(toy_model_dir)
    _edit_weights(toy_model_dir, lambda t: t["encoder.bias"].add_(1))
    with pytest.raises(genzoo.WeightsError, match="sha256 of .*model.safetensors"):
        load_model_dir(toy_model_dir, expected_hashes=expected)


def test_corrupt_safetensors_is_refused(toy_model_dir):
    (toy_model_dir / "model.safetensors").write_bytes(b"not a safetensors file at all")
    with pytest.raises(genzoo.WeightsError, match="corrupt"):
        genzoo.load(toy_model_dir)


def test_pickle_only_directory_is_refused_without_unpickling(toy_model_dir, monkeypatch):
    (toy_model_dir / "model.safetensors").unlink()
    (toy_model_dir / "pytorch_model.bin").write_bytes(b"\x80\x04 would be a pickle")
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load must never be called"))
    with pytest.raises(genzoo.WeightsError, match="pickle weights are refused"):
        genzoo.load(toy_model_dir)


def test_directory_without_config_is_not_a_genzoo_model(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(b"x")
    with pytest.raises(genzoo.WeightsError, match="not a genzoo model.*pickle files are never loaded"):
        genzoo.load(tmp_path)


def test_unknown_method_names_the_plugin_to_install(toy_model_dir):
    path = toy_model_dir / "config.json"
    document = json.loads(path.read_text())
    document["method"], document["plugin"] = "martian", "genzoo-martian"
    path.write_text(json.dumps(document))
    with pytest.raises(genzoo.WeightsError, match="pip install genzoo-martian"):
        genzoo.load(toy_model_dir)


def test_save_is_atomic_and_leaves_no_staging_files(toy_site, tmp_path):
    genzoo.save_pretrained(_toy(), tmp_path / "out" / "m")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["m"]
    assert sorted(p.name for p in (tmp_path / "out" / "m").iterdir()) == ["config.json", "model.safetensors"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_weights_holding_nan_or_inf_are_refused_by_every_verb_naming_the_tensor(toy_model_dir, tmp_path, bad):
    from click.testing import CliRunner

    from genzoo.cli import cli

    name = sorted(name for name, _ in genzoo.load(toy_model_dir).named_parameters())[0]
    _edit_weights(toy_model_dir, lambda tensors: tensors[name].view(-1).__setitem__(0, bad))
    kind = "NaN" if bad != bad else "inf"
    images = tmp_path / "images.npz"
    np.savez(images, x=np.zeros((2, 8, 8), dtype=np.uint8))
    d = str(toy_model_dir)
    commands = {"sample": ["sample", d, "-n", "2", "-o", str(tmp_path / "s.png")],
                "refine": ["refine", d, "--input", str(images), "-o", str(tmp_path / "r.png")],
                "eval": ["eval", d, "-n", "16", "--ref", f"npz:{images}", "--metrics", "fid"],
                "export": ["export", d, str(tmp_path / "exported")],
                "push": ["push", d, "org/nan", "--dry-run", str(tmp_path / "staged")]}
    for verb, args in commands.items():
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1, (verb, result.output)
        assert f"tensor {name!r} holds {kind} (1 of" in result.output and len(result.output.splitlines()) == 1, verb
    assert not any((tmp_path / p).exists() for p in ("s.png", "r.png", "exported", "staged"))
    with pytest.raises(genzoo.WeightsError, match=f"tensor {name!r} holds {kind}"):
        genzoo.load(toy_model_dir)


def test_a_method_object_holding_nan_is_not_pushed(toy_site, tmp_path):
    from genzoo.pushing import stage_push

    model = _toy()
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] = float("nan")
    with pytest.raises(genzoo.WeightsError, match="holds NaN"):
        stage_push(model, tmp_path / "staged")
    assert not (tmp_path / "staged").exists()


def test_a_buffer_left_unset_as_nan_loads_but_a_partly_nan_one_does_not(toy_model_dir):
    from genzoo.weights import check_finite

    check_finite({"margin": torch.tensor(float("nan"))}, "m")  # a statistic not computed yet
    with pytest.raises(genzoo.WeightsError, match="tensor 'stats' holds NaN \\(1 of 2 values\\)"):
        check_finite({"stats": torch.tensor([1.0, float("nan")])}, "m")
    with pytest.raises(genzoo.WeightsError, match="tensor 'scale' holds NaN"):
        check_finite({"scale": torch.tensor(float("nan"))}, "m", parameters={"scale"})
    with pytest.raises(genzoo.WeightsError, match="tensor 'stats' holds inf"):
        check_finite({"stats": torch.tensor([float("inf")])}, "m")
