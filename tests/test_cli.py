"""The CLI as a user runs it: sample in every format, refine from files, errors (list and info: test_catalogue.py)."""

import json

import click
import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

import genzoo
from genzoo.cli import cli


@pytest.fixture
def runner():
    return CliRunner()


def test_sample_writes_a_grid_npz_and_png_dir_from_a_model_directory(runner, toy_model_dir, tmp_path):
    grid = tmp_path / "grid.png"
    assert runner.invoke(cli, ["sample", str(toy_model_dir), "-n", "9", "-o", str(grid)]).exit_code == 0
    assert Image.open(grid).size == (3 * 8 + 4 * 2, 3 * 8 + 4 * 2)  # 3x3 grid of 8x8 with 2-pixel padding
    npz = tmp_path / "s.npz"
    result = runner.invoke(cli, ["sample", str(toy_model_dir), "-n", "5", "--seed", "3", "--format", "npz", "-o", str(npz)])
    assert result.exit_code == 0, result.output
    x = np.load(npz)["x"]
    assert x.shape == (5, 1, 8, 8) and x.dtype == np.uint8
    expected = genzoo.load(toy_model_dir).sample(5, seed=3)
    assert np.array_equal(x, (expected * 255).round().to(torch.uint8).numpy())
    floats = tmp_path / "f.npz"
    runner.invoke(cli, ["sample", str(toy_model_dir), "-n", "5", "--seed", "3", "--format", "npz", "--float", "-o", str(floats)])
    assert np.allclose(np.load(floats)["x"], expected.numpy())
    folder = tmp_path / "pngs"
    runner.invoke(cli, ["sample", str(toy_model_dir), "-n", "3", "--format", "png-dir", "-o", str(folder)])
    assert sorted(p.name for p in folder.iterdir()) == ["00000.png", "00001.png", "00002.png"]


def test_sample_options_labels_and_apply(runner, toy_model_dir, tmp_path):
    out = tmp_path / "s.npz"
    ok = runner.invoke(cli, ["sample", str(toy_model_dir), "-n", "2", "--opt", "temperature=0", "--apply", "2",
                             "--format", "npz", "-o", str(out)])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(cli, ["sample", str(toy_model_dir), "--opt", "heat=1"])
    assert bad.exit_code == 1 and "options: temperature" in bad.output
    labels = runner.invoke(cli, ["sample", str(toy_model_dir), "--labels", "1,2"])
    assert labels.exit_code == 1 and "unconditional" in labels.output


def test_a_label_list_longer_than_a_file_name_is_still_a_list():
    from genzoo.cli.options import parse_labels

    text = ",".join(str(i % 10) for i in range(5000))  # about 10,000 characters: stat() fails on it
    assert parse_labels(text).tolist() == [i % 10 for i in range(5000)]


def test_refine_reads_png_files_folders_and_npz_and_refuses_wrong_sizes(runner, toy_model_dir, tmp_path):
    model = genzoo.load(toy_model_dir)
    images = model.sample(3, seed=0)
    genzoo_images = __import__("genzoo.images", fromlist=["save_images"])
    genzoo_images.save_images(images, tmp_path / "in", "png-dir")
    genzoo_images.save_images(images, tmp_path / "in.npz", "npz")
    for source in (tmp_path / "in", tmp_path / "in" / "00000.png", tmp_path / "in.npz"):
        out = tmp_path / "out.npz"
        result = runner.invoke(cli, ["refine", str(toy_model_dir), "--input", str(source), "--format", "npz", "-o", str(out)])
        assert result.exit_code == 0, result.output
        refined = np.load(out)["x"]
        assert refined.shape[1:] == (1, 8, 8)
    Image.new("RGB", (16, 16)).save(tmp_path / "big.png")
    wrong = runner.invoke(cli, ["refine", str(toy_model_dir), "--input", str(tmp_path / "big.png")])
    assert wrong.exit_code == 1 and "holds one 3x16x16 image" in wrong.output and "refines 1x8x8 images" in wrong.output
    missing = runner.invoke(cli, ["refine", str(toy_model_dir), "--input", str(tmp_path / "nope.png")])
    assert missing.exit_code == 1 and "does not exist" in missing.output


def test_fit_through_the_cli_then_sample_the_run_directory(runner, toy_site, toy_npz, tmp_path):
    out = tmp_path / "run"
    fit = runner.invoke(cli, ["fit", "toy", "--dataset", f"npz:{toy_npz}", "--steps", "4", "--batch-size", "8",
                              "--out", str(out), "--set", "lr=0.05", "--no-progress"])
    assert fit.exit_code == 0, fit.output
    assert json.loads((out / "fit.json").read_text())["commands"][0].startswith("genzoo fit toy")
    assert runner.invoke(cli, ["sample", str(out), "-o", str(tmp_path / "g.png")]).exit_code == 0
    bad = runner.invoke(cli, ["fit", "toy", "--dataset", f"npz:{toy_npz}", "--steps", "4", "--out", str(tmp_path / "x"),
                              "--set", "lr=fast"])
    assert bad.exit_code == 1 and "field 'lr' must be a number" in bad.output


def test_unknown_model_and_missing_directory_are_one_line_errors(runner):
    unknown = runner.invoke(cli, ["sample", "no-such-model"])
    assert unknown.exit_code == 1 and "unknown model 'no-such-model'" in unknown.output
    assert len(unknown.output.strip().splitlines()) == 1
    missing = runner.invoke(cli, ["sample", "./no/such/dir"])
    assert missing.exit_code == 1 and "does not exist" in missing.output


def test_every_verb_has_help_and_the_table_s_one_line_is_its_docstring_s(runner):
    from genzoo.cli import VERBS

    context = click.Context(cli)
    assert set(cli.list_commands(context)) >= set(VERBS)
    for name, verb in VERBS.items():
        command = cli.get_command(context, name)
        assert command.name == name
        assert verb.stand_in(name).get_short_help_str(200) == command.get_short_help_str(200), name
        result = runner.invoke(cli, [name, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.output


def test_genzoo_help_fits_an_80_column_terminal(runner):
    result = runner.invoke(cli, ["--help"], env={"COLUMNS": "80"})
    too_long = [line for line in result.output.splitlines() if len(line) > 80]
    assert result.exit_code == 0 and too_long == [], too_long


def test_a_plugin_s_verb_runs_without_being_added_by_hand(runner):
    result = runner.invoke(cli, ["mmb", "--help"])
    assert result.exit_code == 0 and "lambda" in result.output
    assert "mmb" not in cli.commands  # kept apart, per plugin host
    unknown = runner.invoke(cli, ["no-such-verb"])
    assert unknown.exit_code == 1 and "No such command 'no-such-verb'." in unknown.output
    assert "Did you mean" not in unknown.output
    misspelt = runner.invoke(cli, ["smaple", "ign"])
    assert misspelt.exit_code == 1 and "No such command 'smaple'. Did you mean 'sample'?" in misspelt.output


@pytest.mark.parametrize("argv, says", [
    (["sample", "ign", "-n", "0"], "Error: Invalid value for '-n' / '--num': 0 is not in the range x>=1. "
                                   "(see `genzoo sample --help`)"),
    (["sample", "ign", "--precision", "fp8"], "Error: Invalid value for '--precision': 'fp8' is not one of"),
    (["sample"], "Error: Missing argument 'NAME'. (see `genzoo sample --help`)"),
    (["--bogus"], "Error: No such option '--bogus'. (see `genzoo --help`)"),
    (["eval", "ign", "--no-such-flag"], "Error: No such option '--no-such-flag'. (see `genzoo eval --help`)"),
    (["mmb", "lambda"], "Error: Missing argument 'CLASSIFIER'. (see `genzoo mmb lambda --help`)"),
])
def test_a_usage_mistake_is_one_error_line_with_status_1_as_docs_cli_promises(runner, argv, says):
    result = runner.invoke(cli, argv, prog_name="genzoo")
    assert result.exit_code == 1 and result.output.startswith(says), result.output
    assert len(result.output.strip().splitlines()) == 1 and "Usage:" not in result.output


def test_ctrl_c_says_what_was_interrupted_and_that_nothing_half_written_is_left(runner, toy_model_dir, tmp_path,
                                                                              monkeypatch):
    toy = genzoo.get_host().method("toy")

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(toy, "sample_batch", interrupted)
    out = tmp_path / "out" / "s.png"
    out.parent.mkdir()
    result = runner.invoke(cli, ["sample", str(toy_model_dir), "-n", "4", "-o", str(out)])
    assert result.exit_code == 130 and "Aborted!" not in result.output
    assert result.stderr.strip() == ("Interrupted: genzoo sample stopped before it finished; nothing was written "
                                     "(genzoo writes each output whole at the end, or not at all)")
    assert list(out.parent.iterdir()) == []


# What `genzoo --help` may import (no verb module, no torch), then what `genzoo sample` may not.
IMPORTS_PROBE = """
import json, sys
from genzoo.cli import cli
cli.main(["--help"], standalone_mode=False)
after_help = sorted(sys.modules)
cli.main(["sample", "ign", "-n", "4", "-o", sys.argv[1]], standalone_mode=False)
print(json.dumps({"help": after_help, "sample": sorted(sys.modules)}))
"""
TRAINING_MODULES = ("genzoo.training.loop", "genzoo.training.options", "genzoo.training.checkpoints", "genzoo.metrics.evaluation",
                    "genzoo.metrics.features", "accelerate", "torchmetrics")


@pytest.mark.slow  # over 5 s on 2 cores: the default suite stays under 3 minutes
def test_help_imports_no_verb_nor_torch_and_sample_imports_no_training_code(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", IMPORTS_PROBE, str(tmp_path / "s.png")], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    modules = json.loads(done.stdout.splitlines()[-1])
    assert "genzoo.cli" in modules["help"] and "torch" not in modules["help"]
    assert not [m for m in modules["help"] if m.startswith("genzoo.cli.") and m.endswith("_cmd")]
    assert "genzoo.cli.sample_cmd" in modules["sample"] and (tmp_path / "s.png").is_file()
    loaded = [m for m in modules["sample"] if m.startswith(TRAINING_MODULES)]
    assert loaded == [], f"genzoo sample imported training code: {loaded}"


def test_the_inference_verbs_offer_exactly_the_precisions_genzoo_knows():
    import typing

    from genzoo.generate import RefineOptions, SampleOptions
    from genzoo.precision import PRECISIONS

    for options in (SampleOptions, RefineOptions):
        assert typing.get_args(typing.get_type_hints(options)["precision"]) == PRECISIONS


def test_an_unknown_refine_option_is_refused_by_the_refiner_before_any_sample(runner, toy_model_dir, monkeypatch):
    toy = genzoo.get_host().method("toy")
    drawn = []
    monkeypatch.setattr(toy, "sample_batch", lambda self, *a, **k: drawn.append(1))
    result = runner.invoke(cli, ["sample", str(toy_model_dir), "-n", "2", "--refine", str(toy_model_dir),
                                 "--refine-opt", "heat=1"])
    assert result.exit_code == 1 and "--refine-opt heat: toy refine has no option 'heat'; its options:" in result.output
    assert drawn == []


def test_refine_options_are_range_checked_naming_the_flag_the_user_typed(runner, tmp_path):
    out = str(tmp_path / "s.png")
    typed = runner.invoke(cli, ["sample", "ign", "-n", "2", "--refine", "robust-mnist", "--refine-opt", "eps=abc",
                                "-o", out])
    assert typed.exit_code == 1 and "Error: --refine-opt eps must be a number, got 'abc'" in typed.output
    negative = runner.invoke(cli, ["sample", "ign", "-n", "2", "--refine", "robust-mnist", "--refine-opt", "eps=-1",
                                   "-o", out])
    assert negative.exit_code == 1 and "Error: --refine-opt eps must be zero or more, got -1.0" in negative.output
    refine = runner.invoke(cli, ["refine", "robust-mnist", "--input", "nothing.npz", "--opt", "step_size=0"])
    assert refine.exit_code == 1 and "Error: --opt step_size must be positive, got 0.0" in refine.output
    assert not (tmp_path / "s.png").exists()
    with pytest.raises(genzoo.GenzooError, match="robust refine option eps must be zero or more, got -1"):
        genzoo.load("robust-mnist").refine(torch.zeros(1, 1, 28, 28), eps=-1.0)


def test_a_method_declares_option_ranges_with_annotated_types():
    from typing import Annotated

    from genzoo.configs import Positive, Range

    class Ranged(genzoo.Method):
        name = "ranged"
        Config = genzoo.get_host().method("ign").Config
        capabilities = frozenset({"sample"})
        sample_options = {"temperature": Annotated[float, Positive], "steps": Annotated[int, Range(1, 8)]}

        def sample_batch(self, noise, labels, temperature: float = 1.0, steps: int = 1):
            return torch.zeros(len(noise), *self.image_shape)

    Ranged.check_declaration()
    with pytest.raises(genzoo.GenzooError, match="ranged sample option steps must be in \\[1, 8\\], got 9"):
        Ranged().sample(1, steps=9)

    class Unruly(Ranged):
        sample_options = {"temperature": Annotated[float, "hot"]}

    with pytest.raises(genzoo.GenzooError, match="must map option names to types"):
        Unruly.check_declaration()


def test_the_emulated_bf16_warning_is_one_clean_line_on_stderr(tmp_path, monkeypatch):
    import genzoo.precision as precision

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    precision._warned.clear()
    result = CliRunner().invoke(cli, ["sample", "ign", "-n", "2", "--precision", "bf16", "--device", "cpu",
                                      "-o", str(tmp_path / "s.png")])
    assert result.exit_code == 0, result.output
    warning = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(warning) == 1 and warning[0].startswith("Warning: bf16 is emulated on this CPU"), result.stderr
    assert "UserWarning" not in result.stderr and "warnings.warn" not in result.stderr


def test_datasets_marks_missing_files_and_a_data_root_without_any_is_an_error(runner, tmp_path):
    empty = runner.invoke(cli, ["datasets", "--data-root", str(tmp_path / "nope")], env={"COLUMNS": "80"})
    assert empty.exit_code == 1 and f"data root: {tmp_path / 'nope'} (no such folder)" in empty.output
    assert "MISSING" in empty.output and "found" not in empty.output
    assert empty.output.strip().splitlines()[-1].startswith(f"Error: --data-root {tmp_path / 'nope'} holds the files "
                                                            "of no dataset above")
    assert max(map(len, empty.output.splitlines()[1:-1])) <= 80  # the first names the (long) folder
    (tmp_path / "some" / "celeba").mkdir(parents=True)
    (tmp_path / "some" / "celeba" / "celeba64_5k.npz").write_bytes(b"")
    some = runner.invoke(cli, ["datasets", "--data-root", str(tmp_path / "some")])
    assert some.exit_code == 0 and "celeba/celeba64_5k.npz under the data root: found" in " ".join(some.output.split())
    assert "MNIST/raw/*-ubyte under the data root: MISSING" in " ".join(some.output.split())
    listed = runner.invoke(cli, ["datasets", "--json", "--data-root", str(tmp_path / "some")])
    assert {row["name"]: row["found"] for row in json.loads(listed.output)}["celeba64"] is True


@pytest.mark.parametrize("verb", [["plugins"], ["datasets", "--metrics"], ["datasets"]])
def test_the_cli_s_listings_fit_the_terminal(runner, verb):
    for columns in (60, 80):
        result = runner.invoke(cli, verb, env={"COLUMNS": str(columns)})
        assert result.exit_code == 0 and max(map(len, result.output.splitlines())) <= columns, result.output


def _add_model(name: str, **fields):
    from genzoo.registry import ModelEntry

    entry = ModelEntry.from_dict(name, {"method": "toy", **fields}, source="plugin 'toy'")
    genzoo.get_host().all_models()[name] = entry
    return entry


def test_a_plugin_s_model_whose_sha256_is_not_pasted_yet_says_so_not_reinstall_genzoo(runner, toy_model_dir,
                                                                                    monkeypatch):
    from genzoo.registry import ModelEntry
    from genzoo.weights import file_hashes

    monkeypatch.setattr(ModelEntry, "bundled_dir", lambda self: toy_model_dir)
    _add_model("toy-placeholder", bundled="toyzoo:weights/toy", files={"config.json": "CONFIG_SHA256",
                                                                      "model.safetensors": "WEIGHTS_SHA256"})
    result = runner.invoke(cli, ["sample", "toy-placeholder", "-o", "never.png"])
    assert result.exit_code == 1 and "reinstall genzoo" not in result.output
    assert ("its entry gives 'CONFIG_SHA256' as the sha256 of config.json, which is no sha256: paste the one "
            "`genzoo export` printed for config.json into the entry") in result.output
    wrong = {**file_hashes(toy_model_dir), "model.safetensors": "0" * 64}
    _add_model("toy-changed", bundled="toyzoo:weights/toy", files=wrong)
    changed = runner.invoke(cli, ["sample", "toy-changed", "-o", "never.png"])
    assert "reinstall the plugin that provides 'toy' (plugin 'toy')" in changed.output
    assert "reinstall genzoo" not in changed.output


def test_pull_with_the_hub_unreachable_says_what_to_check_not_to_pull(runner, monkeypatch):
    from huggingface_hub import constants

    dead = "http://127.0.0.1:9"  # nothing listens there
    monkeypatch.setattr(constants, "ENDPOINT", dead)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", dead)
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    result = runner.invoke(cli, ["pull", "nobody/nothing"])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert f"could not reach the Hub at {dead} (as HF_ENDPOINT sets it)" in result.output
    assert "check the network, that address and whether a proxy is needed (HTTPS_PROXY)" in result.output
    assert "genzoo pull" not in result.output
    from genzoo.hub import _not_cached

    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy.example:3128")  # named, its value (a password) not
    behind = _not_cached("nobody/nothing", None, "hf://nobody/nothing", None)
    assert "the proxy that HTTPS_PROXY names" in behind and "secret" not in behind
