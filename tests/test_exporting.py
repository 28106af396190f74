"""genzoo.export from Python, the same as `genzoo export`, and a model's provenance read and made portable."""

import json

import pytest
from click.testing import CliRunner

import genzoo
from genzoo.cli import cli
from genzoo.provenance import details, portable_command, portable_provenance, training_commands
from genzoo.weights import file_hashes


def test_export_from_python_writes_the_files_the_cli_writes(tmp_path):
    assert "export" in genzoo.__all__
    out = genzoo.export("ign-mnist", tmp_path / "python", storage_dtype="float16")
    assert out == tmp_path / "python" and sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    result = CliRunner().invoke(cli, ["export", "ign-mnist", str(tmp_path / "cli"), "--storage-dtype", "float16"])
    assert result.exit_code == 0, result.output
    assert file_hashes(out) == file_hashes(tmp_path / "cli")
    assert f"model.safetensors: {file_hashes(out)['model.safetensors']}" in result.output


def test_export_set_changes_an_inference_default_and_refuses_a_network_change(tmp_path):
    out = genzoo.export("robust-mnist", tmp_path / "eps", set={"refine_eps": "0.5"})
    document = json.loads((out / "config.json").read_text())
    assert document["config"]["refine_eps"] == 0.5 and document["provenance"]["export_set"] == {"refine_eps": 0.5}
    with pytest.raises(genzoo.GenzooError, match="changes the network's tensors"):
        genzoo.export("robust-mnist", tmp_path / "wide", set={"width": "8"})
    assert not (tmp_path / "wide").exists()


def test_export_refuses_a_bad_storage_dtype_and_a_file_as_destination(tmp_path):
    with pytest.raises(genzoo.GenzooError, match="storage_dtype must be one of float32, float16, bfloat16"):
        genzoo.export("ign-mnist", tmp_path / "x", storage_dtype="int8")
    (tmp_path / "file").write_text("x")
    with pytest.raises(genzoo.GenzooError, match="is a file"):
        genzoo.export("ign-mnist", tmp_path / "file")


def test_a_portable_command_keeps_names_and_replaces_paths():
    command = ("genzoo fit ign --dataset npz:/home/me/faces.npz --data-root=/data --init /tmp/base "
               "--out /scratch/runs/ign-x --set lr=0.001")
    assert portable_command(command) == ("genzoo fit ign --dataset npz:DIR/faces.npz --data-root=DIR "
                                         "--init models/base --out runs/ign-x --set lr=0.001")
    assert portable_command("genzoo fit ign --dataset mnist --init ign-mnist") == \
        "genzoo fit ign --dataset mnist --init ign-mnist"
    assert portable_command("unbalanced 'quote") == "unbalanced 'quote"


def test_provenance_is_read_the_same_for_the_card_and_info():
    provenance = {"command": "genzoo fit ign", "dataset": "npz:/a/b.npz", "seed": 0, "steps": 10}
    assert training_commands(provenance) == ["genzoo fit ign"]
    assert training_commands({"commands": ["a", "b"]}) == ["a", "b"] and training_commands({}) == []
    assert details(provenance) == {"seed": 0, "steps": 10}
    assert portable_provenance(provenance)["dataset"] == "npz:DIR/b.npz" and portable_provenance(None) is None
