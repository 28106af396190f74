"""The built wheel carries registry.yaml, the built-in plugins, their bundled weights and entry points."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_holds_the_registry_plugins_and_bundled_weights(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                           "--wheel-dir", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    wheel = next(tmp_path.glob("genzoo-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "genzoo/registry.yaml" in names
    for package in ("genzoo_features", "genzoo_ign", "genzoo_mmb", "genzoo_robust"):
        assert f"{package}/__init__.py" in names
    import yaml

    models = yaml.safe_load((ROOT / "registry.yaml").read_text())["models"]
    for name, entry in models.items():
        if entry.get("bundled"):
            package, _, rel = entry["bundled"].partition(":")
            for file in entry["files"]:
                assert f"{package}/{rel}/{file}" in names, f"{name}: {file} is not in the wheel"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[genzoo]" in text and "ign = genzoo_ign" in text
