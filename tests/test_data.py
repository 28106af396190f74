"""Datasets: npz splits and layouts, folders, real MNIST when present, and clear errors."""

import numpy as np
import pytest
import torch
from PIL import Image

from genzoo.datasets import load_dataset
from genzoo.errors import GenzooError


def test_npz_with_splits_and_nhwc_layout(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, x_train=np.zeros((5, 4, 4, 3), np.uint8), y_train=np.arange(5), x_test=np.ones((2, 4, 4, 3), np.uint8))
    train = load_dataset(f"npz:{path}:train")
    assert train.images.shape == (5, 3, 4, 4) and train.labels.tolist() == [0, 1, 2, 3, 4]
    assert load_dataset(f"npz:{path}:test").labels is None
    with pytest.raises(GenzooError, match=r"has no array 'x'.*splits \['test', 'train'\]"):
        load_dataset(f"npz:{path}")


def test_float_npz_in_unit_range_is_quantised_by_rounding(tmp_path):
    path = tmp_path / "f.npz"
    np.savez(path, x=np.full((2, 3, 3), 0.5019608, np.float32))
    assert load_dataset(f"npz:{path}").images.unique().tolist() == [128]
    np.savez(path, x=np.full((2, 3, 3), 2.0, np.float32))
    with pytest.raises(GenzooError, match=r"\[0, 1\]"):
        load_dataset(f"npz:{path}")


def test_image_folder_with_class_subfolders(tmp_path):
    for label in ("cat", "dog"):
        (tmp_path / label).mkdir()
        for i in range(2):
            Image.new("L", (6, 6), color=40 * i).save(tmp_path / label / f"{i}.png")
    data = load_dataset(f"folder:{tmp_path}")
    assert data.images.shape == (4, 1, 6, 6) and data.labels.tolist() == [0, 0, 1, 1]


def test_missing_mnist_offline_names_the_folder_in_full_the_files_the_reason_and_the_keyword(tmp_path, monkeypatch):
    monkeypatch.setenv("GENZOO_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GenzooError) as error:
        load_dataset("mnist", "relative/root")
    message = str(error.value)
    assert f"MNIST is not under {tmp_path.resolve() / 'relative' / 'root'} (looked for MNIST/raw" in message
    assert "(offline: GENZOO_OFFLINE=1)" in message and "pass data_root" in message and "--data-root" not in message


def test_missing_mnist_for_the_test_split_names_the_test_files_and_the_flag(tmp_path):
    from click.testing import CliRunner

    from genzoo.cli import cli

    result = CliRunner().invoke(cli, ["eval", "ign", "-n", "16", "--data-root", str(tmp_path), "--no-progress"],
                                env={"GENZOO_OFFLINE": "1"})
    assert result.exit_code == 1 and result.output.startswith("Error: MNIST is not under"), result.output
    assert "t10k-images-idx3-ubyte" in result.output and "train-images" not in result.output
    assert "pass --data-root" in result.output and len(result.output.splitlines()) == 1


def test_a_failed_download_says_why_after_torchvision_s_header():
    """torchvision's message is a header ending in a colon, the cause on the lines after it."""
    from genzoo.datasets.download import download_failure

    header_only = RuntimeError("Error downloading train-images-idx3-ubyte.gz:\nTried https://a.example/, got:\n"
                               "<urlopen error [Errno -3] Temporary failure in name resolution>\n")
    assert download_failure(header_only) == "<urlopen error [Errno -3] Temporary failure in name resolution>"
    assert download_failure(RuntimeError("")) == "RuntimeError"
    assert download_failure(OSError("disk full")) == "disk full"


def test_the_spec_list_of_the_package_docstring_is_the_table():
    import genzoo.datasets
    from genzoo.datasets import known_datasets

    for entry in known_datasets():
        assert f"{entry.name}[:{'|'.join(entry.splits)}]" in genzoo.datasets.__doc__


def test_unknown_dataset_and_split(tmp_path):
    with pytest.raises(GenzooError, match="unknown dataset 'imagenet'"):
        load_dataset("imagenet", tmp_path)
    with pytest.raises(GenzooError, match="mnist splits are train, test"):
        load_dataset("mnist:valid", tmp_path)


def test_real_mnist_from_shared_data(mnist_root):
    train = load_dataset("mnist", mnist_root)
    test = load_dataset("mnist:test", mnist_root)
    assert train.images.shape == (60000, 1, 28, 28) and len(test) == 10000
    assert train.labels.bincount().min() > 5000
    assert train.images.dtype == torch.uint8


def test_each_cifar10_name_means_one_dataset_whatever_files_are_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("GENZOO_OFFLINE", "1")
    (tmp_path / "cifar-10-batches-py").mkdir()  # torchvision's folder, empty: not genzoo's subset
    with pytest.raises(GenzooError) as error:
        load_dataset("cifar10", tmp_path)
    message = str(error.value)
    assert "\n" not in message and "cifar10 needs" in message and "cifar10/cifar10_jpeg.npz" in message
    assert "use cifar10-full for torchvision's CIFAR-10" in message
    (tmp_path / "cifar10").mkdir()
    np.savez(tmp_path / "cifar10" / "cifar10_jpeg.npz", x_train=np.zeros((4, 32, 32, 3), np.uint8), y_train=np.arange(4))
    assert load_dataset("cifar10", tmp_path).name == "cifar10:train"
    with pytest.raises(GenzooError, match=r"CIFAR-10 is not under .* \(looked for cifar-10-batches-py\)"):
        load_dataset("cifar10-full", tmp_path)  # the subset beside it is not the full set
