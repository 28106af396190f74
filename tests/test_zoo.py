"""Every bundled model of the registry: its files are the ones pinned by sha256, it loads offline,
and each one that samples does so through `genzoo sample` at its own image size."""

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import genzoo
import genzoo.hub
from genzoo.cli import cli
from genzoo.plugins import get_host
from genzoo.weights import sha256_file

BUNDLED = sorted(name for name, entry in get_host().all_models().items() if entry.bundled_dir() is not None)


def test_the_colour_models_are_in_the_zoo():
    assert {"features-mnist", "features-cifar10", "features-celeba64", "ign-cifar10", "ign-celeba64", "robust-cifar10",
            "robust-consistency-cifar10"} <= set(BUNDLED)


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_files_are_the_pinned_ones(name):
    entry = get_host().all_models()[name]
    directory = entry.bundled_dir()
    assert set(entry.files) == {"config.json", "model.safetensors"}
    for file, digest in entry.files.items():
        assert sha256_file(directory / file) == digest, f"{name}/{file}: re-export or update registry.yaml"
    assert (directory / "model.safetensors").stat().st_size < 15 * 2**20, f"{name} is over the 15 MB bundling limit"


@pytest.mark.parametrize("name", [n for n in BUNDLED
                                  if "sample" in get_host().method(get_host().all_models()[n].method).capabilities])
def test_genzoo_sample_of_each_bundled_model(name, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(genzoo.hub, "download", lambda *a, **k: pytest.fail("a bundled model must not touch the Hub"))
    model = genzoo.load(name)
    channels, size, _ = model.image_shape
    out = tmp_path / "grid.png"
    result = CliRunner().invoke(cli, ["sample", name, "-n", "4", "--seed", "0", "-o", str(out)])
    assert result.exit_code == 0, result.output
    image = Image.open(out)
    assert image.size == (2 * size + 3 * 2, 2 * size + 3 * 2)
    pixels = np.asarray(image.convert("RGB")).astype(int)
    grey = (pixels[..., 0] == pixels[..., 1]).all() and (pixels[..., 1] == pixels[..., 2]).all()
    assert grey == (channels == 1)
