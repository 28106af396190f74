"""The colour datasets (CIFAR-10, CelebA 64x64) and the networks that work at their sizes.

The shared data may be absent: those tests skip with the reason, and npz files made here cover
the same loaders."""

from pathlib import Path

import numpy as np
import pytest
import torch

import genzoo
from genzoo.datasets.builtin import CELEBA64, CIFAR10_EXACT, CIFAR10_SUBSET
from genzoo.datasets import dataset_entry, load_dataset
from genzoo.plugins import get_host

from conftest import data_root

SHARED = data_root()  # $GENZOO_DATA_ROOT, else ../shared/data


def _fake_cifar(root: Path, n_train: int = 20, n_test: int = 10) -> None:
    rng = np.random.default_rng(0)
    (root / "cifar10").mkdir(parents=True)
    np.savez(root / CIFAR10_SUBSET, x_train=rng.integers(0, 256, (n_train, 32, 32, 3), dtype=np.uint8),
             y_train=np.arange(n_train) % 10, x_test=rng.integers(0, 256, (n_test, 32, 32, 3), dtype=np.uint8),
             y_test=np.arange(n_test) % 10)


def _fake_celeba(root: Path, n: int = 4010) -> None:
    (root / "celeba").mkdir(parents=True)
    x = np.zeros((n, 64, 64, 3), dtype=np.uint8)
    x[:, 0, 0, 0] = np.arange(n) % 256  # the face number, to check the split boundaries
    np.savez(root / CELEBA64, x=x, image_id=np.arange(1, n + 1))


def test_cifar10_entry_reads_the_subset_in_nchw_with_labels(tmp_path):
    _fake_cifar(tmp_path)
    train, test = load_dataset("cifar10", tmp_path), load_dataset("cifar10:test", tmp_path)
    assert train.images.shape == (20, 3, 32, 32) and train.images.dtype == torch.uint8
    assert test.images.shape == (10, 3, 32, 32)
    assert train.labels.tolist() == [i % 10 for i in range(20)]
    assert dataset_entry("cifar10").shape == (3, 32, 32) and dataset_entry("cifar10").num_classes == 10


def test_celeba64_splits_are_faces_1_to_4000_and_the_rest(tmp_path):
    _fake_celeba(tmp_path)
    train, test, everything = (load_dataset(f"celeba64:{s}", tmp_path) for s in ("train", "test", "all"))
    assert (len(train), len(test), len(everything)) == (4000, 10, 4010)
    assert train.labels is None and train.images.shape[1:] == (3, 64, 64)
    assert test.images[0, 0, 0, 0].item() == 4000 % 256  # the first held-out face is face 4,001


@pytest.mark.parametrize("spec, missing", [("cifar10-exact", CIFAR10_EXACT), ("celeba64", CELEBA64)])
def test_a_missing_file_is_one_sentence_naming_it_and_the_flag(tmp_path, spec, missing):
    with pytest.raises(genzoo.GenzooError) as caught:
        load_dataset(spec, tmp_path)
    message = str(caught.value)
    assert missing in message and "pass data_root" in message and "\n" not in message  # Python's keyword
    assert list(tmp_path.iterdir()) == []  # nothing left behind


@pytest.mark.skipif(not (SHARED / CIFAR10_SUBSET).is_file(), reason=f"{SHARED / CIFAR10_SUBSET} is not on this machine")
def test_the_shared_cifar10_and_celeba_files():
    train, test = load_dataset("cifar10:train", SHARED), load_dataset("cifar10:test", SHARED)
    assert (len(train), len(test)) == (10000, 10000)
    assert torch.bincount(test.labels).tolist() == [1000] * 10
    exact = load_dataset("cifar10-exact:train", SHARED)
    assert len(exact) == 4000 and exact.labels is not None
    faces = load_dataset("celeba64:test", SHARED)
    assert faces.images.shape == (1000, 3, 64, 64)


def test_fourier_noise_has_the_per_channel_spectrum_of_colour_data():
    """Three channels of different brightness and smoothness: the noise keeps each channel's mean and
    spatial correlation, and scales every channel's spread by the same factor."""
    from genzoo_ign.noise import fourier_noise, fourier_statistics

    g = torch.Generator().manual_seed(0)
    base = torch.randn(2000, 1, 16, 16, generator=g)
    smooth = torch.nn.functional.avg_pool2d(base, 3, 1, 1)
    images = torch.cat([0.5 + 0.2 * smooth, -0.3 + 0.05 * base, 0.1 * smooth + 0.1 * base], 1).clamp(-1, 1)
    mean, std = fourier_statistics(images)
    assert mean.shape == (3, 16, 16, 2)
    noise = fourier_noise(torch.randn(4000, 3, 16, 16, 2, generator=g), mean, std)
    ratios = []
    for c in range(3):
        assert noise[:, c].mean().item() == pytest.approx(images[:, c].mean().item(), abs=0.02)
        ratios.append(noise[:, c].std().item() / images[:, c].std().item())
    # Taking the real part of independently drawn coefficients halves the variance of every
    # frequency but the self-conjugate ones (docs/methods/ign.md): the same factor in each channel.
    assert all(0.6 < r < 0.85 for r in ratios), ratios
    assert max(ratios) / min(ratios) < 1.1, ratios
    neighbours = [torch.corrcoef(torch.stack([x[:, c, :, :-1].flatten(), x[:, c, :, 1:].flatten()]))[0, 1]
                  for x in (images, noise) for c in (0, 1)]
    assert neighbours[0] > 0.5 and neighbours[2] > 0.5  # the smooth channel stays smooth
    assert abs(neighbours[1]) < 0.1 and abs(neighbours[3]) < 0.1  # the white one stays white


@pytest.mark.parametrize("size, overrides", [
    (32, {"width": 64, "bottleneck": 128}),   # ign-cifar10
    (64, {"width": 32, "bottleneck": 256}),   # ign-celeba64
])
def test_ign_builds_and_maps_colour_images_at_its_size(size, overrides):
    model = get_host().method("ign")({"channels": 3, "image_size": size, "noise": "fourier", **overrides})
    with torch.no_grad():
        out = model.net(torch.zeros(2, 3, size, size))
    assert out.shape == (2, 3, size, size)


@pytest.mark.parametrize("method, config, size", [
    ("robust", {"channels": 3, "image_size": 32, "width": 32}, 32),
    ("feature-classifier", {"channels": 3, "image_size": 32, "width": 48, "feature_dim": 256, "norm": "batch"}, 32),
    ("feature-classifier", {"channels": 3, "image_size": 64, "width": 32, "feature_dim": 256, "norm": "batch",
                            "num_classes": 4, "objective": "rotation"}, 64),
])
def test_the_colour_classifiers_build_at_their_size(method, config, size):
    model = get_host().method(method)(config).eval()
    x = torch.rand(2, 3, size, size)
    with torch.no_grad():
        logits = model.classify(x) if hasattr(model, "classify") else model.net(x)
    assert logits.shape == (2, config.get("num_classes", 10))


def test_rotation_targets_stay_identifiable_under_flips_and_shifts():
    """Each training input, turned back by its target, is the image itself or its mirror: the
    augmentations come before the turn (a mirror after a quarter turn would read as the opposite one)."""
    model = get_host().method("feature-classifier")({"channels": 3, "image_size": 8, "num_classes": 4, "objective": "rotation",
                                                 "flip": True, "max_shift": 0, "width": 4, "feature_dim": 8})
    image = torch.arange(3 * 8 * 8, dtype=torch.float32).reshape(1, 3, 8, 8) / 192
    torch.manual_seed(0)
    x, y = model.training_inputs({"x": image.repeat(64, 1, 1, 1), "y": None})
    assert set(y.tolist()) == {0, 1, 2, 3}
    for xi, k in zip(x, y.tolist()):
        back = torch.rot90(xi, -k, dims=(1, 2))
        assert torch.equal(back, image[0]) or torch.equal(back, image[0].flip(2))
