"""Outputs say what they replace and are written whole or not at all: -o over an existing file is announced in
the command's line, a png-dir never mixes with earlier images, and a full disk (simulated by a writer that raises
ENOSPC) is one sentence that leaves no staging file, no half set of images and the earlier output as it was."""

import errno
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import genzoo
from genzoo.cli import cli


def _sample(model_dir, *args):
    return CliRunner().invoke(cli, ["sample", str(model_dir), "--device", "cpu", *map(str, args)])


def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_sample_over_an_existing_file_says_it_replaces_it(toy_model_dir, tmp_path):
    out = tmp_path / "grid.png"
    first = _sample(toy_model_dir, "-n", 4, "-o", out)
    assert first.exit_code == 0 and first.output == f"wrote 4 images to {out}\n"
    again = _sample(toy_model_dir, "-n", 4, "-o", out)
    assert again.exit_code == 0 and again.output == f"wrote 4 images to {out} (replacing the earlier grid.png)\n"


def test_refine_over_an_existing_file_says_it_replaces_it(toy_model_dir, tmp_path):
    source = tmp_path / "in.npz"
    assert _sample(toy_model_dir, "-n", 3, "-o", source).exit_code == 0
    out = tmp_path / "out.npz"
    out.write_bytes(b"an earlier file")
    result = CliRunner().invoke(cli, ["refine", str(toy_model_dir), "-i", str(source), "-o", str(out)])
    assert result.exit_code == 0 and result.output == f"refined 3 images into {out} (replacing the earlier out.npz)\n"


def test_a_png_dir_replaces_genzoos_earlier_images_whole(toy_model_dir, tmp_path):
    out = tmp_path / "pngs"
    assert _sample(toy_model_dir, "-n", 12, "-o", out, "--format", "png-dir").exit_code == 0
    assert len(_listing(out)) == 12
    again = _sample(toy_model_dir, "-n", 3, "-o", out, "--format", "png-dir")
    assert again.exit_code == 0 and again.output == f"wrote 3 images to {out} (replacing the 12 earlier images there)\n"
    assert _listing(out) == ["00000.png", "00001.png", "00002.png"]
    assert not [name for name in _listing(tmp_path) if name.startswith(".")]


def test_a_png_dir_holding_other_files_is_refused_before_any_work(toy_model_dir, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    (out / "00000.png").write_bytes(b"x")
    result = _sample(toy_model_dir, "-n", 3, "-o", out, "--format", "png-dir")
    assert result.exit_code == 1
    assert result.output == (f"Error: -o {out} holds files genzoo did not write (notes.txt); --format png-dir writes "
                             f"into a new or empty folder, or replaces a folder of its own numbered PNGs: choose "
                             f"another folder\n")
    assert _listing(out) == ["00000.png", "notes.txt"] and (out / "00000.png").read_bytes() == b"x"


# -- a full disk ------------------------------------------------------------------------------------------------


def _assert_full_disk_sentence(result, out):
    assert result.exit_code == 1, result.output
    assert result.output == (f"Error: cannot write {out} (no space left on the device); nothing was written there: "
                             f"make room or fix the permissions, then run the command again\n")


def test_a_grid_onto_a_full_disk_keeps_the_earlier_file_and_no_staging_file(toy_model_dir, tmp_path, monkeypatch):
    from PIL import Image

    out = tmp_path / "grid.png"
    out.write_bytes(b"earlier")
    monkeypatch.setattr(Image.Image, "save", _full_disk)
    _assert_full_disk_sentence(_sample(toy_model_dir, "-n", 4, "-o", out), out)
    assert out.read_bytes() == b"earlier"
    assert not [name for name in _listing(tmp_path) if name.startswith(".")]


def test_an_npz_onto_a_full_disk_leaves_nothing(toy_model_dir, tmp_path, monkeypatch):
    import numpy as np

    out = tmp_path / "new" / "samples.npz"
    monkeypatch.setattr(np, "savez_compressed", _full_disk)
    _assert_full_disk_sentence(_sample(toy_model_dir, "-n", 4, "-o", out), out)
    assert not (tmp_path / "new").exists()


def test_a_png_dir_onto_a_full_disk_leaves_no_half_set(toy_model_dir, tmp_path, monkeypatch):
    import genzoo.images as images

    out = tmp_path / "pngs"
    assert _sample(toy_model_dir, "-n", 5, "-o", out, "--format", "png-dir").exit_code == 0
    before = {name: (out / name).read_bytes() for name in _listing(out)}
    real, calls = images.save_png, []

    def fills_after_two(image, path, **kwargs):
        calls.append(path)
        if len(calls) > 2:
            _full_disk()
        return real(image, path, **kwargs)

    monkeypatch.setattr(images, "save_png", fills_after_two)
    _assert_full_disk_sentence(_sample(toy_model_dir, "-n", 8, "-o", out, "--seed", 1, "--format", "png-dir"), out)
    assert {name: (out / name).read_bytes() for name in _listing(out)} == before  # the earlier set, whole
    assert not [name for name in _listing(tmp_path) if name.startswith(".")]
    fresh = tmp_path / "fresh"
    _assert_full_disk_sentence(_sample(toy_model_dir, "-n", 8, "-o", fresh, "--format", "png-dir"), fresh)
    assert not fresh.exists() and not [name for name in _listing(tmp_path) if name.startswith(".")]


def test_an_export_onto_a_full_disk_is_one_sentence_and_leaves_no_staging_folder(toy_model_dir, tmp_path, monkeypatch):
    import genzoo.tensorfile as tensorfile

    real_open = open

    class FullFile:
        def __init__(self, path, mode):
            self.handle = real_open(path, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            self.handle.write(data[: len(data) // 2])
            _full_disk()

    def opens(path, mode="r", *args, **kwargs):
        return FullFile(path, mode) if "w" in mode else real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(tensorfile, "open", opens, raising=False)  # the safetensors file's own writer
    dest = tmp_path / "exported"
    result = CliRunner().invoke(cli, ["export", str(toy_model_dir), str(dest)])
    assert result.exit_code == 1, repr(result.exception)
    assert result.output == (f"Error: cannot write {dest} (no space left on the device); nothing was written there: "
                             f"make room or fix the permissions, then run the command again\n")
    assert not dest.exists() and not [name for name in _listing(tmp_path) if name.startswith(".")]


# -- destinations ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux") or not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_a_folder_that_takes_no_new_files_is_not_called_missing(toy_model_dir):
    result = _sample(toy_model_dir, "-n", 1, "-o", "/proc/x.png")
    assert result.exit_code == 1
    assert "a folder on the way does not exist" not in result.output
    assert result.output.startswith("Error: cannot write /proc/x.png: /proc is not writable (") and \
        result.output.count("\n") == 1


def test_enoent_in_an_existing_folder_says_the_file_system_refuses_new_files(tmp_path, monkeypatch):
    import genzoo.destinations as destinations

    def refuses(folder):
        raise OSError(errno.ENOENT, "No such file or directory")

    monkeypatch.setattr(destinations, "prove_writable", refuses)
    with pytest.raises(genzoo.GenzooError, match=r"is not writable \(its file system does not let files be created "
                                                 r"there\)"):
        destinations.check_destination(tmp_path / "x.png")


def test_fit_grids_take_as_many_images_as_the_method_previews(toy_site, toy_npz, tmp_path, monkeypatch):
    """A method's ``preview_images`` sets the size of fit's sample grids, unless --grid-size names one."""
    import json

    from PIL import Image

    from genzoo.images import GRID_KEY
    from genzoo.plugins import get_host

    def grids(name, *args):
        run = tmp_path / name
        fitted = CliRunner().invoke(cli, ["fit", "toy", "--dataset", f"npz:{toy_npz}", "--steps", "2", "--batch-size",
                                          "8", "--sample-every", "2", "--out", str(run), "--no-progress",
                                          "--precision", "fp32", *args])
        assert fitted.exit_code == 0, fitted.output
        counts = []
        for png in sorted((run / "samples").glob("*.png")) if (run / "samples").is_dir() else []:
            with Image.open(png) as grid:
                counts.append(json.loads(grid.info[GRID_KEY])["count"])
        return counts

    monkeypatch.setattr(get_host().method("toy"), "preview_images", 5, raising=False)
    assert grids("declared") == [5]
    assert grids("asked", "--grid-size", "7") == [7]
    monkeypatch.setattr(get_host().method("toy"), "preview_images", 0, raising=False)
    assert grids("none") == []
