"""A user's own images: `fit` on folder:PATH and npz:PATH takes its image shape from them, `eval` scores against them
with no feature network (pixels), `genzoo datasets` lists both forms, and a request too large for the machine's
memory is refused before anything is allocated."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import genzoo
from genzoo.cli import cli
from genzoo.datasets import load_dataset


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_error(result) -> str:
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


def write_folder(folder, n=16, size=12, mode="RGB", classes=()):
    """``n`` random images of ``size`` x ``size`` as PNGs in ``folder`` (or spread over sub-folders ``classes``)."""
    rng = np.random.default_rng(0)
    channels = 3 if mode == "RGB" else 1
    for i in range(n):
        where = folder / classes[i % len(classes)] if classes else folder
        where.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (size, size, channels), dtype=np.uint8)
        Image.fromarray(pixels if channels == 3 else pixels[..., 0], mode).save(where / f"{i:03d}.png")
    return folder


def fitted_config(out) -> dict:
    return json.loads((out / "config.json").read_text())["config"]


# -- fit takes the shape from the data ----------------------------------------------------------------------------


def test_fit_on_a_folder_takes_channels_and_image_size_from_its_images(tmp_path, toy_site):
    images = write_folder(tmp_path / "photos", size=12, mode="RGB")
    result = run("fit", "toy", "--dataset", f"folder:{images}", "--steps", "1", "--batch-size", "8",
                 "--out", tmp_path / "run", "--no-progress")
    assert result.exit_code == 0, result.output
    config = fitted_config(tmp_path / "run")
    assert (config["channels"], config["image_size"]) == (3, 12)  # the toy's defaults are 1 and 8
    assert genzoo.load(tmp_path / "run").sample(2, seed=0).shape == (2, 3, 12, 12)


def test_fit_on_an_npz_takes_them_from_its_array(tmp_path, toy_site):
    np.savez(tmp_path / "mine.npz", x_train=np.random.default_rng(0).integers(0, 256, (16, 10, 10, 3), np.uint8))
    result = run("fit", "toy", "--dataset", f"npz:{tmp_path / 'mine.npz'}:train", "--steps", "1", "--batch-size", "8",
                 "--out", tmp_path / "run", "--no-progress")
    assert result.exit_code == 0, result.output
    assert (fitted_config(tmp_path / "run")["channels"], fitted_config(tmp_path / "run")["image_size"]) == (3, 10)


def test_a_set_value_wins_over_the_data_s_and_the_data_names_the_classes(tmp_path):
    from genzoo.blocks.denoiser import DenoiserConfig
    from genzoo.training.start import config_for_data

    data = load_dataset(f"folder:{write_folder(tmp_path / 'pets', n=6, size=16, classes=('cat', 'dog'))}")
    config = config_for_data(DenoiserConfig(num_classes=2), {}, data, "test")
    assert (config.channels, config.image_size, config.class_names) == (3, 16, ("cat", "dog"))
    config = config_for_data(DenoiserConfig(image_size=8), {"image_size": 8}, data, "test")
    assert (config.channels, config.image_size, config.class_names) == (3, 8, ())


def test_init_from_a_model_of_another_shape_is_refused_in_one_line(tmp_path, toy_site, toy_model_dir):
    images = write_folder(tmp_path / "photos", size=12, mode="RGB")  # the toy model makes 1 x 8 x 8 images
    line = one_error(run("fit", "toy", "--dataset", f"folder:{images}", "--init", toy_model_dir, "--steps", "1",
                         "--batch-size", "8", "--out", tmp_path / "run", "--no-progress"))
    assert f"--init {toy_model_dir} does not fit this config's network" in line
    assert not (tmp_path / "run" / "config.json").exists()


def test_a_folder_of_class_folders_names_its_classes(tmp_path):
    data = load_dataset(f"folder:{write_folder(tmp_path / 'pets', n=6, mode='L', classes=('cat', 'dog'))}")
    assert data.class_names == ("cat", "dog") and data.labels.tolist() == [0, 0, 0, 1, 1, 1]
    assert data.image_shape == (1, 12, 12)


# -- eval against your own images ---------------------------------------------------------------------------------


def test_eval_against_a_folder_compares_pixels_without_a_feature_network_and_says_how_to_get_fid(tmp_path):
    images = write_folder(tmp_path / "mine", n=24, size=16, mode="L")
    np.savez(tmp_path / "samples.npz", x=np.random.default_rng(1).integers(0, 256, (24, 16, 16), np.uint8))
    for metrics in ([], ["--metrics", "swd"]):  # by default, and asked for
        result = run("eval", f"npz:{tmp_path / 'samples.npz'}", "-n", "24", "--ref", f"folder:{images}",
                     "--no-progress", "--json", tmp_path / "eval.json", *metrics)
        assert result.exit_code == 0, result.output
        report = json.loads((tmp_path / "eval.json").read_text())
        assert list(report["metrics"]) == ["swd", "swd_per_level"] and report["metrics"]["swd"] > 0
        assert report["features"]["name"] == "pixels"
        notes = [line for line in result.output.splitlines() if line.startswith("note: ")]
        assert len(notes) == 1 and "for FID" in notes[0] and "--features NAME" in notes[0], result.output
        assert "features-mnist: 1x28x28 images" in notes[0] and report["notes"] == [notes[0][len("note: "):]]


def test_eval_of_feature_metrics_against_a_folder_names_both_ways_out(tmp_path):
    images = write_folder(tmp_path / "mine", n=24, size=16, mode="L")
    line = one_error(run("eval", f"folder:{images}", "-n", "24", "--ref", f"folder:{images}", "--metrics", "fid,swd"))
    assert "fid compares features, and no feature network is registered for --ref folder:" in line
    assert "--features NAME" in line and "--metrics swd" in line
    line = one_error(run("eval", f"folder:{images}", "-n", "24", "--ref", f"folder:{images}", "--features",
                         "features-mnist", "--metrics", "memorization"))
    assert "name them with --train" in line


def test_eval_against_a_folder_scores_features_with_a_named_network(tmp_path):
    images = write_folder(tmp_path / "mine", n=24, size=28, mode="L")
    report = genzoo.evaluate(f"folder:{images}", n=24, ref=f"folder:{images}", features="features-mnist",
                             metrics="fid,swd", progress=False)
    assert report["features"]["name"] == "features-mnist" and report["notes"] == []
    assert report["metrics"]["fid"] == pytest.approx(0, abs=1e-2) and report["metrics"]["swd"] > 0


# -- genzoo datasets ----------------------------------------------------------------------------------------------


def test_datasets_lists_the_forms_that_read_your_own_files():
    text = run("datasets")
    assert text.exit_code == 0, text.output
    joined = " ".join(text.output.split())
    assert "folder:PATH: your own images" in joined and "npz:PATH[:SPLIT]: your own images in an .npz" in joined
    assert joined.index("mnist:") < joined.index("folder:PATH")  # after the named datasets
    listed = run("datasets", "--json")
    rows = {row["name"]: row for row in json.loads(listed.output)}
    assert {"folder:PATH", "npz:PATH[:SPLIT]", "mnist"} <= set(rows)
    assert rows["folder:PATH"]["found"] is None and rows["npz:PATH[:SPLIT]"]["shape"] is None
    assert set(rows["folder:PATH"]) == set(rows["mnist"])
