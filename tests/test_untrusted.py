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


# -- images in ----------------------------------------------------------------------------------------------


def test_a_16_bit_png_is_scaled_to_the_full_range_not_clipped(tmp_path):
    import numpy as np
    from PIL import Image

    from genzoo.images import read_image_files

    values = np.array([[0, 257, 32768, 65535]], dtype=np.uint16)
    Image.fromarray(values).save(tmp_path / "deep.png")
    with Image.open(tmp_path / "deep.png") as im:
        assert im.mode.startswith("I")  # what Pillow makes of a 16-bit grayscale PNG
    assert read_image_files([tmp_path / "deep.png"]).tolist() == [[[[0, 1, 128, 255]]]]


@pytest.mark.parametrize("mode, make, expected", [
    ("I", lambda np: np.array([[0, 65535, 13107]], dtype=np.int32), [[[0, 255, 51]]]),
    ("F", lambda np: np.array([[0.0, 1.0, 0.2]], dtype=np.float32), [[[0, 255, 51]]]),
    ("LA", lambda np: np.array([[[0, 9], [255, 0], [51, 200]]], dtype=np.uint8), [[[0, 255, 51]]]),
    ("RGBA", lambda np: np.array([[[0, 0, 0, 0], [255, 128, 1, 9]]], dtype=np.uint8), [[[0, 255]], [[0, 128]], [[0, 1]]]),
])
def test_other_image_modes_are_scaled_to_0_255(tmp_path, mode, make, expected):
    import numpy as np
    from PIL import Image

    from genzoo.images import read_image_files

    path = tmp_path / f"image.{'tiff' if mode in ('I', 'F') else 'png'}"
    Image.fromarray(make(np), mode).save(path)
    assert read_image_files([path]).tolist() == [expected]


def test_a_palette_image_is_looked_up(tmp_path):
    import numpy as np
    from PIL import Image

    from genzoo.images import read_image_files

    image = Image.fromarray(np.array([[0, 1]], dtype=np.uint8), "P")
    image.putpalette([10, 20, 30, 200, 100, 0] + [0] * 762)
    image.save(tmp_path / "palette.png")
    assert read_image_files([tmp_path / "palette.png"]).tolist() == [[[[10, 200]], [[20, 100]], [[30, 0]]]]


@pytest.mark.parametrize("values, said", [
    ([[0.5, float("nan")]], "holds NaN or infinite pixel values"),
    ([[0.5, float("inf")]], "holds NaN or infinite pixel values"),
    ([[0.5, 2.0]], r"is a floating-point image \(F\) with pixel values in \[0.5, 2\], outside \[0, 1\]"),
])
def test_floating_point_images_must_hold_numbers_in_range(tmp_path, values, said):
    import numpy as np
    from PIL import Image

    from genzoo.images import read_image_files

    Image.fromarray(np.array(values, dtype=np.float32), "F").save(tmp_path / "f.tiff")
    with pytest.raises(genzoo.GenzooError, match=said):
        read_image_files([tmp_path / "f.tiff"])


@pytest.mark.parametrize("limit", [300, 500])  # 784 pixels: past twice the limit Pillow raises, past it it warns
def test_a_decompression_bomb_is_one_sentence(tmp_path, monkeypatch, limit):
    import numpy as np
    from PIL import Image

    from genzoo.datasets import load_images

    Image.fromarray(np.zeros((28, 28), dtype=np.uint8)).save(tmp_path / "bomb.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", limit)
    with pytest.raises(genzoo.GenzooError, match=rf"bomb.png claims more than {limit} pixels, the most Pillow decodes "
                                                 r"safely \(a decompression bomb"):
        load_images(tmp_path / "bomb.png")


@pytest.mark.parametrize("x, said", [
    ("nan", "array 'x' holds 128 NaN or infinite values"),
    ("empty", r"array 'x' holds no images \(its shape is \(0, 8, 8\)\); give at least one image"),
    ("two-channel", r"array 'x' of shape \(5, 8, 8, 2\) does not read as images of 1 or 3 channels"),
])
def test_an_npz_of_no_images_nan_or_no_image_shape_is_refused(tmp_path, x, said):
    import numpy as np

    from genzoo.datasets import load_images

    arrays = {"nan": np.full((2, 8, 8), np.nan), "empty": np.zeros((0, 8, 8), np.uint8),
              "two-channel": np.zeros((5, 8, 8, 2), np.uint8)}
    np.savez(tmp_path / "x.npz", x=arrays[x])
    with pytest.raises(genzoo.GenzooError, match=said):
        load_images(tmp_path / "x.npz")


@pytest.fixture
def no_network_runs(monkeypatch):
    """Fail the test if a feature network or a model is asked for anything."""
    import genzoo.metrics.evaluation as evaluation

    monkeypatch.setattr(evaluation, "extract", lambda *a, **k: pytest.fail("a feature network ran"))
    monkeypatch.setattr(evaluation, "generate", lambda *a, **k: pytest.fail("a model ran"))


def _npz(path, shape, dtype="uint8"):
    import numpy as np

    np.savez(path, x=np.random.default_rng(0).integers(0, 255, shape).astype(dtype))
    return path


def test_images_of_another_shape_than_the_reference_are_refused_before_any_network_runs(tmp_path, no_network_runs):
    given, ref = _npz(tmp_path / "given.npz", (20, 3, 28, 28)), _npz(tmp_path / "ref.npz", (20, 28, 28))
    with pytest.raises(genzoo.GenzooError, match=r"the images of npz:.*given.npz have shape \(3, 28, 28\) \(C, H, W\) "
                                                 r"but ref npz:.*ref.npz holds \(1, 28, 28\)"):
        genzoo.evaluate(f"npz:{given}", ref=f"npz:{ref}", n=10, metrics="fid", features="features-mnist")


def test_a_reference_the_feature_network_cannot_take_is_refused_before_any_network_runs(tmp_path, no_network_runs):
    given, ref = _npz(tmp_path / "given.npz", (20, 16, 16)), _npz(tmp_path / "ref.npz", (20, 16, 16))
    with pytest.raises(genzoo.GenzooError, match=r"ref npz:.*ref.npz holds images of shape \(1, 16, 16\) \(C, H, W\), "
                                                 r"but feature network features-mnist takes \(1, 28, 28\)"):
        genzoo.evaluate(f"npz:{given}", ref=f"npz:{ref}", n=10, metrics="fid", features="features-mnist")


def test_a_tensor_holding_nan_is_not_scored(tmp_path, no_network_runs):
    import torch

    images = torch.rand(10, 1, 28, 28)
    images[3, 0, 5, 5] = float("nan")
    ref = _npz(tmp_path / "ref.npz", (20, 28, 28))
    with pytest.raises(genzoo.GenzooError, match="the tensor holds 1 NaN or infinite pixel values"):
        genzoo.evaluate(images, ref=f"npz:{ref}", n=10, metrics="fid", features="features-mnist")


def test_identical_16_bit_images_score_fid_zero_against_themselves(tmp_path):
    import numpy as np
    from PIL import Image

    folder = tmp_path / "deep"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(24):
        Image.fromarray((rng.random((28, 28)) * 65535).astype(np.uint16)).save(folder / f"{i:03d}.png")
    report = genzoo.evaluate(f"folder:{folder}", ref=f"folder:{folder}", n=24, metrics="fid",
                             features="features-mnist", progress=False)
    assert abs(report["metrics"]["fid"]) < 1e-3


def _edm_of_size(tmp_path, monkeypatch, image_size):
    """edm-mnist-small's tensors under a config.json that says ``image_size``, on a machine of 16 GiB; a U-Net
    takes any size, so it loads."""
    from genzoo import memory, weights

    monkeypatch.setattr(weights, "machine_memory", lambda: 16 * 2**30)
    monkeypatch.setattr(memory, "machine_memory", lambda: 16 * 2**30)
    directory = genzoo.save_pretrained(genzoo.load("edm-mnist-small"), tmp_path / "edm")
    _edit(directory, config={"image_size": image_size})
    return directory


def test_an_image_size_the_same_tensors_take_is_refused_by_memory_before_any_batch(tmp_path, monkeypatch):
    from genzoo.memory import check_images_fit

    directory = _edm_of_size(tmp_path, monkeypatch, 40000)
    model = genzoo.load(directory)
    monkeypatch.setattr(type(model), "sample_batch", lambda *a, **k: pytest.fail("a batch started"))
    with pytest.raises(genzoo.GenzooError) as info:
        check_images_fit([model], 1, batch_size=1, where=str(directory))
    message = str(info.value)
    assert "\n" not in message and f"{directory} works on 1 x 40000 x 40000 images (C x H x W)" in message
    assert "even one at a time takes at least 202.7 GiB, more than the 16.0 GiB of memory here" in message
    assert "image_size is damaged" in message
    with pytest.raises(genzoo.GenzooError, match="even one at a time takes at least 202.7 GiB"):
        genzoo.evaluate(str(directory), n=4, metrics="swd", progress=False)


def test_the_memory_estimate_is_a_lower_bound_that_passes_the_catalogue_s_own_requests(tmp_path, monkeypatch):
    from genzoo.memory import check_images_fit, per_image_bytes

    directory = _edm_of_size(tmp_path, monkeypatch, 28)
    model = genzoo.load(directory)
    # the image in and out (float32) and the first convolution's 32 channels at full resolution
    assert per_image_bytes(model) == 2 * 4 * 28 * 28 + 32 * 28 * 28 * 4
    assert per_image_bytes(model, "bf16") == 2 * 4 * 28 * 28 + 32 * 28 * 28 * 2
    check_images_fit([model], 10_000, batch_size=256)  # genzoo eval's default request
    with pytest.raises(genzoo.ArgumentError, match=r"lower batch_size to [\d,]+ or less"):
        check_images_fit([model], 10**6, batch_size=10**6)
    with pytest.raises(genzoo.ArgumentError, match=r"keeps at least 23.4 GiB of them in memory.*lower n"):
        check_images_fit([model], 8 * 10**6, batch_size=256)
