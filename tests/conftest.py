import contextlib
import importlib.metadata
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

# Keep every test away from the user's Hugging Face cache, genzoo's cache and the network.
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="genzoo-test-hf-")
os.environ["GENZOO_CACHE"] = tempfile.mkdtemp(prefix="genzoo-test-cache-")
# One thread per process: on a machine that is busy with other work, several threads per process
# fight over the cores and a suite of a few minutes took forty (subprocesses inherit this too).
os.environ["OMP_NUM_THREADS"] = "1"
os.environ.pop("GENZOO_LOAD_PLUGINS", None)

import torch  # noqa: E402

import genzoo  # noqa: E402
from genzoo.plugins import ALLOW_ENV, reset_host  # noqa: E402

torch.set_num_threads(1)

TESTS = Path(__file__).resolve().parent
SHARED_DATA = TESTS.parent.parent / "shared" / "data"


@contextlib.contextmanager
def genzoo_plugins_only() -> Iterator[None]:
    """Load only genzoo's own plugins (the entry points of the genzoo distribution), whatever else is installed:
    for the tests that check genzoo's own catalogue, pages and verbs, which an outside plugin would change."""
    own = sorted(ep.name for ep in importlib.metadata.distribution("genzoo").entry_points if ep.group == "genzoo")
    before = os.environ.get(ALLOW_ENV)
    os.environ[ALLOW_ENV] = ",".join(own)
    reset_host()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ALLOW_ENV, None)
        else:
            os.environ[ALLOW_ENV] = before
        reset_host()


def data_root() -> Path:
    """Where the real-data tests look for datasets: $GENZOO_DATA_ROOT, else ../shared/data beside the repository."""
    return Path(os.environ.get("GENZOO_DATA_ROOT") or SHARED_DATA)


@pytest.fixture(autouse=True)
def fresh_plugins(monkeypatch):
    """Every test starts with freshly loaded plugins and no allow-list."""
    monkeypatch.delenv("GENZOO_LOAD_PLUGINS", raising=False)
    reset_host()
    yield
    reset_host()


def make_distribution(site: Path, dist_name: str, module_name: str, source: Path, entry_name: str) -> None:
    """A minimal installed distribution (dist-info + module) that importlib.metadata discovers."""
    shutil.copy(source, site / f"{module_name}.py")
    info = site / f"{dist_name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[genzoo]\n{entry_name} = {module_name}\n")


@pytest.fixture
def toy_site(tmp_path, monkeypatch):
    """Installs the toy plugin (tests/toyzoo.py) as distribution genzoo-toy, entry point 'toy'."""
    site = tmp_path / "site"
    site.mkdir()
    make_distribution(site, "genzoo-toy", "toyzoo", TESTS / "toyzoo.py", "toy")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    sys.modules.pop("toyzoo", None)
    reset_host()
    yield site
    sys.modules.pop("toyzoo", None)


@pytest.fixture
def toy_npz(tmp_path):
    """64 structured 8x8 grayscale images with labels 0..3, as an .npz dataset."""
    rng = np.random.default_rng(0)
    y = np.arange(64) % 4
    base = np.zeros((4, 8, 8))
    for c in range(4):
        base[c, c * 2:(c + 1) * 2, :] = 1.0
    x = np.clip(base[y] * 200 + rng.normal(0, 20, (64, 8, 8)), 0, 255).astype(np.uint8)
    path = tmp_path / "toy.npz"
    np.savez(path, x=x, y=y)
    return path


@pytest.fixture
def toy_model_dir(toy_site, tmp_path):
    """An untrained toy model saved as a model directory."""
    import torch
    from genzoo.plugins import get_host

    torch.manual_seed(0)
    model = get_host().method("toy")()
    return genzoo.save_pretrained(model, tmp_path / "toy-model")


@pytest.fixture
def mnist_root():
    root = data_root()
    if not (root / "MNIST" / "raw" / "train-images-idx3-ubyte").is_file():
        pytest.skip(f"real MNIST not found under {root} ($GENZOO_DATA_ROOT or ../shared/data); "
                    f"the toy-data tests cover the same code")
    return root
