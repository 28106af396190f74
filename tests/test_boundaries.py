"""Every boundary answers in one sentence: the mistakes a new user makes, through the CLI as they make them.

Each case gives exit status 1 (2 for click's own usage errors), one ``Error:`` line, no traceback,
and leaves no file or folder behind.
"""

import hashlib
import json
import os
import time

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import genzoo
from genzoo.cli import cli
from genzoo.modelcard import license_metadata


def run(*args, env=None):
    result = CliRunner().invoke(cli, [str(a) for a in args], env=env)
    return result


def one_error(result, *fragments, code=1):
    """The result failed with one Error: line holding every fragment, and no traceback."""
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def files_under(path):
    return sorted(p.relative_to(path) for p in path.rglob("*"))


# -- outputs ---------------------------------------------------------------------------------------


def test_sampling_no_images_is_refused(tmp_path):
    one_error(run("sample", "ign", "-n", "0", "-o", tmp_path / "zero.png"), "-n")  # one Error: line, exit 1, as every mistake
    assert files_under(tmp_path) == []


def test_png_dir_onto_a_file_and_a_grid_onto_a_folder_are_refused_before_sampling(tmp_path):
    existing = tmp_path / "existing.txt"
    existing.write_text("keep me")
    one_error(run("sample", "ign", "-n", "4", "--format", "png-dir", "-o", existing), "existing file", "png-dir")
    assert existing.read_text() == "keep me"
    folder = tmp_path / "adir"
    folder.mkdir()
    one_error(run("sample", "ign", "-n", "4", "-o", folder), "is a folder", "--format png-dir")
    one_error(run("sample", "ign", "-n", "4", "--format", "grid", "-o", folder), "is a folder")
    assert [p.name for p in files_under(tmp_path)] == ["adir", "existing.txt"]


def test_the_output_suffix_decides_the_format_or_a_mismatch_is_refused(tmp_path):
    jpg = tmp_path / "out.jpg"
    assert run("sample", "ign", "-n", "4", "-o", jpg).exit_code == 0
    assert jpg.read_bytes()[:3] == b"\xff\xd8\xff"  # JPEG, not PNG bytes
    npz = tmp_path / "out.npz"
    assert run("sample", "ign", "-n", "4", "-o", npz).exit_code == 0
    assert np.load(npz)["x"].shape == (4, 1, 28, 28)
    one_error(run("sample", "ign", "-n", "4", "--format", "npz", "-o", tmp_path / "x.png"), "--format npz", "x.npz")
    one_error(run("sample", "ign", "-n", "4", "--format", "grid", "-o", tmp_path / "x.npz"), "--format grid")
    one_error(run("sample", "ign", "-n", "4", "-o", tmp_path / "noext"), "cannot tell the output format")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jpg", "out.npz"]


def test_a_grid_written_by_sample_is_read_back_by_refine(tmp_path):
    grid = tmp_path / "grid.png"
    assert run("sample", "ign", "-n", "10", "--seed", "3", "-o", grid).exit_code == 0
    from genzoo.datasets import load_images

    images, _ = load_images(grid)
    expected = genzoo.load("ign").sample(10, seed=3)
    assert images.shape == (10, 1, 28, 28)
    assert (images - expected).abs().max() <= 0.5 / 255 + 1e-6  # the PNG's 8 bits, nothing else
    result = run("refine", "ign", "--input", grid, "-o", tmp_path / "refined.npz")
    assert result.exit_code == 0, result.output
    assert np.load(tmp_path / "refined.npz")["x"].shape == (10, 1, 28, 28)


def test_a_picture_of_the_wrong_shape_says_how_to_pass_images(tmp_path):
    from PIL import Image

    Image.new("RGB", (40, 30)).save(tmp_path / "photo.png")
    one_error(run("refine", "ign", "--input", tmp_path / "photo.png", "-o", tmp_path / "r.png"),
              "one 3x30x40 image", "1x28x28", "one image per PNG file")


# -- inputs that are not what they claim --------------------------------------------------------------


@pytest.mark.parametrize("content, why", [
    (b"PK\x03\x04 this is no zip", "not an .npz archive"),
    (os.urandom(200), "not an .npz archive"),
    (b"a plain text file\n", "not an .npz archive"),
])
def test_a_corrupt_npz_is_refused_without_suggesting_to_unpickle(tmp_path, content, why):
    path = tmp_path / "bad.npz"
    path.write_bytes(content)
    line = one_error(run("refine", "ign", "--input", path, "-o", tmp_path / "r.png"), "not an image array", why)
    assert "pickle" not in line.lower()
    assert not (tmp_path / "r.png").exists()


def test_an_npz_of_object_arrays_is_refused(tmp_path):
    path = tmp_path / "objects.npz"
    np.savez(path, x=np.array([object()], dtype=object))
    line = one_error(run("refine", "ign", "--input", path, "-o", tmp_path / "r.png"), "object arrays")
    assert "allow_pickle" not in line


def test_a_text_file_given_as_an_image_is_refused(tmp_path):
    path = tmp_path / "notes.png"
    path.write_text("not an image")
    one_error(run("refine", "ign", "--input", path, "-o", tmp_path / "r.png"), "not an image genzoo can read")


# -- model directories ---------------------------------------------------------------------------------


def _edited_ign(tmp_path, name, **config):
    directory = genzoo.save_pretrained(genzoo.load("ign"), tmp_path / name)
    document = json.loads((directory / "config.json").read_text())
    document["config"].update(config)
    (directory / "config.json").write_text(json.dumps(document))
    return directory


@pytest.mark.parametrize("field, value, fragment", [
    ("channels", -3, "'channels' must be positive, got -3"),
    ("width", 0, "'width' must be positive"),
    ("lambda_tight", -1.0, "'lambda_tight' must be zero or more"),
    ("beta2", 1.0, "'beta2' must be in [0, 1)"),
    ("norm", "layer", "'norm' must be one of"),
    ("lr", "fast", "'lr' must be a number"),
])
def test_config_fields_are_range_checked_before_anything_is_built(tmp_path, field, value, fragment):
    directory = _edited_ign(tmp_path, "bad", **{field: value})
    one_error(run("sample", directory, "-o", tmp_path / "s.png"), fragment)


def test_an_enormous_network_in_config_json_is_refused_without_allocating_it(tmp_path):
    directory = _edited_ign(tmp_path, "huge", width=1_000_000)  # about 10^13 parameters if it were built
    start = time.perf_counter()
    with pytest.raises(genzoo.WeightsError, match="has shape .* the config needs|describes a model of .* GiB of weights, more than this machine"):
        genzoo.load(directory)
    assert time.perf_counter() - start < 5  # checked on the meta device, from the file's header


def test_exporting_twice_gives_byte_identical_files(tmp_path):
    digests = set()
    for i in range(4):
        result = run("export", "ign-mnist", tmp_path / f"copy{i}")
        assert result.exit_code == 0, result.output
        digests.add(hashlib.sha256((tmp_path / f"copy{i}" / "model.safetensors").read_bytes()).hexdigest())
    assert len(digests) == 1
    from safetensors import safe_open

    with safe_open(str(tmp_path / "copy0" / "model.safetensors"), "pt") as fh:
        assert fh.metadata() == {"format": "pt"}  # one key at most: the library writes it the same every time


def test_tensor_files_take_one_metadata_key_and_tied_tensors(tmp_path):
    from safetensors.torch import load_file

    from genzoo.tensorfile import write_tensors

    weight = torch.arange(6.0).view(2, 3)
    with pytest.raises(genzoo.WeightsError, match="more than one key"):
        write_tensors({"w": weight}, tmp_path / "two.safetensors", metadata={"format": "pt", "other": "x"})
    write_tensors({"w": weight, "tied": weight, "row": weight[1]}, tmp_path / "tied.safetensors", metadata={"format": "pt"})
    loaded = load_file(str(tmp_path / "tied.safetensors"))
    assert torch.equal(loaded["tied"], weight) and torch.equal(loaded["row"], weight[1])


def test_export_onto_a_file_is_refused(tmp_path):
    existing = tmp_path / "existing.txt"
    existing.write_text("x")
    one_error(run("export", "ign-mnist", existing), "is a file")


# -- names, defaults and argument checks --------------------------------------------------------------


def test_every_method_with_a_bundled_model_names_it_as_default():
    host = genzoo.get_host()
    for entry in host.all_models().values():
        if entry.bundled_dir() is not None:
            cls = host.method(entry.method)
            assert cls.default_model is not None, f"{cls.name} has a bundled model but no default_model"
            assert cls.default_model in host.models


def test_sample_mmb_uses_its_bundled_model(tmp_path):
    result = run("sample", "mmb", "-n", "10", "-o", tmp_path / "m.png")
    assert result.exit_code == 0, result.output


def test_eval_checks_its_arguments_before_generating(toy_site, toy_npz, toy_model_dir, monkeypatch):
    calls = []
    toy = genzoo.get_host().method("toy")
    monkeypatch.setattr(toy, "sample_batch", lambda self, *a, **k: calls.append(1))
    with pytest.raises(genzoo.ArgumentError, match="kid_subset_size=1000"):
        genzoo.evaluate(str(toy_model_dir), n=50, ref=f"npz:{toy_npz}", features="toy-features", progress=False,
                        kid_subset_size=1000)
    line = one_error(run("eval", toy_model_dir, "-n", "50", "--ref", f"npz:{toy_npz}", "--features", "toy-features",
                         "--kid-subset-size", "1000"), "--kid-subset-size=1000")
    assert "kid_subset_size" not in line
    one_error(run("eval", toy_model_dir, "-n", "50", "--ref", f"npz:{toy_npz}", "--features", "toy-features",
                  "--metrics", "fid,precision", "--k", "60"), "--k")
    assert calls == []


def test_eval_prints_kid_on_the_catalogue_s_scale(toy_site, toy_npz):
    result = run("eval", f"npz:{toy_npz}", "-n", "64", "--ref", f"npz:{toy_npz}", "--features", "toy-features",
                 "--metrics", "kid", "--kid-subset-size", "32", "--kid-subsets", "5")
    assert result.exit_code == 0, result.output
    assert "  kid: " in result.output and "(std " in result.output and "5 subsets of 32 images" in result.output
    assert "x1e3" not in result.output


def test_a_missing_data_root_leaves_no_folders_behind(tmp_path, monkeypatch):
    """torchvision creates ROOT/MNIST/raw before downloading; a failed download must take them back."""
    from torchvision.datasets import MNIST

    def failing_download(self):
        os.makedirs(self.raw_folder, exist_ok=True)
        (tmp_path / "root" / "MNIST" / "raw" / "partial.gz").write_bytes(b"half a file")
        raise RuntimeError("no network here")

    monkeypatch.setattr(MNIST, "download", failing_download)
    monkeypatch.delenv("GENZOO_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    root = tmp_path / "root"
    one_error(run("fit", "ign", "--dataset", "mnist", "--data-root", root, "--steps", "1", "--out", tmp_path / "run"),
              "MNIST is not under", "(downloading failed: no network here)", "--data-root")
    assert files_under(tmp_path) == []
    existing = tmp_path / "data"  # a data root that exists keeps what was there, and only that
    existing.mkdir()
    (existing / "mine.txt").write_text("keep")

    def failing_download_inside(self):
        os.makedirs(self.raw_folder)
        raise RuntimeError("no network here")

    monkeypatch.setattr(MNIST, "download", failing_download_inside)
    one_error(run("eval", "ign", "-n", "10", "--data-root", existing, "--kid-subset-size", "5"), "MNIST is not under")
    assert [p.name for p in existing.iterdir()] == ["mine.txt"]


def test_an_unreachable_hub_fails_at_once_in_one_sentence(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}  # nothing listens
    env.pop("HF_HUB_OFFLINE", None)
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "genzoo", "sample", "hf://nobody/nothing", "-o",
                             str(tmp_path / "s.png")], env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    assert result.returncode == 1 and "Retrying" not in result.stderr, result.stderr
    assert [line for line in result.stderr.splitlines() if line.strip()] == [result.stderr.strip()]
    assert "could not reach the Hub at http://127.0.0.1:9 (as HF_ENDPOINT sets it)" in result.stderr
    assert "check the network, that address and whether a proxy is needed" in result.stderr
    assert elapsed < 30  # the interpreter's start-up; the Hub itself is asked once
    offline = run("info", "hf://nobody/nothing", env={"HF_HUB_OFFLINE": "1"})
    assert offline.exit_code == 1 and "Error:" in offline.output


def test_bad_devices_and_precisions_are_one_sentence(tmp_path):
    if not torch.cuda.is_available():
        one_error(run("sample", "ign", "--device", "cuda:7", "-o", tmp_path / "s.png"), "--device cuda:7", "no CUDA")
    one_error(run("sample", "ign", "--device", "tpu", "-o", tmp_path / "s.png"), "--device must be one of")
    one_error(run("sample", "ign", "--precision", "fp16", "--device", "cpu", "-o", tmp_path / "s.png"),
              "--precision fp16 is for GPUs")
    assert files_under(tmp_path) == []


def test_fit_refusals_name_the_flag(tmp_path, toy_site, toy_npz):
    existing = tmp_path / "file"
    existing.write_text("x")
    one_error(run("fit", "toy", "--dataset", f"npz:{toy_npz}", "--steps", "1", "--out", existing), "--out", "is a file")
    one_error(run("fit", "toy", "--dataset", f"npz:{toy_npz}", "--steps", "0", "--out", tmp_path / "r"), "--steps")
    one_error(run("fit", "toy", "--dataset", f"npz:{toy_npz}", "--steps", "1", "--grad-accum", "0",
                  "--out", tmp_path / "r"), "--grad-accum")
    one_error(run("fit", "toy", "--dataset", f"npz:{toy_npz}", "--steps", "1", "--set", "lr=nan",
                  "--out", tmp_path / "r"), "'lr' must be a finite number")
    one_error(run("fit", "toy", "--dataset", f"npz:{toy_npz}", "--steps", "1", "--log-with", "nosuch",
                  "--out", tmp_path / "r"), "--log-with")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "site", "toy.npz"]


@pytest.mark.parametrize("text, expected", [
    ("CC BY-SA 3.0 (weights trained on MNIST, LeCun and Cortes)", {"license": "cc-by-sa-3.0"}),
    ("cc-by-sa-4.0", {"license": "cc-by-sa-4.0"}),
    ("MIT", {"license": "mit"}),
    ("CelebA: non-commercial research use only", {"license": "other"}),
])
def test_licence_strings_map_to_the_hubs_identifiers(text, expected):
    meta = license_metadata(text)
    assert meta["license"] == expected["license"]
    if meta["license"] == "other":
        assert meta["license_name"]


def test_written_images_get_the_usual_file_permissions(tmp_path):
    """Atomic writes go through a temp file; the result is as readable as any file the user makes."""
    from genzoo.images import save_images, save_png

    mask = os.umask(0o022)
    try:
        png = save_png(torch.rand(3, 4, 4), tmp_path / "a.png")
        npz = save_images(torch.rand(2, 1, 4, 4), tmp_path / "a.npz", fmt="npz")
    finally:
        os.umask(mask)
    for path in (png, npz):
        assert path.stat().st_mode & 0o777 == 0o644


# -- where output goes: refused in one sentence naming the path, before the work, nothing half-written -----------

OUTPUT_COMMANDS = {  # each writes DEST; {model} is a small bundled model
    "sample -o": ["sample", "ign", "-n", "4", "-o", "{dest}/grid.png"],
    "sample --format png-dir": ["sample", "ign", "-n", "4", "--format", "png-dir", "-o", "{dest}/pngs"],
    "export DEST": ["export", "ign-mnist", "{dest}/model"],
    "push --dry-run": ["push", "ign-mnist", "org/name", "--dry-run", "{dest}/staged"],
}


def _command(template, dest):
    return [part.format(dest=dest) for part in template]


@pytest.mark.parametrize("verb", OUTPUT_COMMANDS)
def test_an_output_under_a_file_is_refused_before_any_work(tmp_path, verb, monkeypatch):
    import genzoo.loading

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    loaded = []
    monkeypatch.setattr(genzoo.loading, "load_model_dir", lambda *a, **k: loaded.append(1))
    line = one_error(run(*_command(OUTPUT_COMMANDS[verb], blocker / "new")), f"cannot write {blocker}/new/",
                     f"{blocker} is a file, not a folder")
    assert loaded == [] and "Traceback" not in line
    assert files_under(tmp_path) == [blocker.relative_to(tmp_path)]


@pytest.mark.parametrize("verb", OUTPUT_COMMANDS)
def test_a_full_disk_is_one_sentence_naming_the_path_and_leaves_nothing(tmp_path, verb, monkeypatch):
    import errno
    import shutil

    import genzoo.weights
    from PIL import Image

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "some-temporary-name"))

    monkeypatch.setattr(Image.Image, "save", full)
    monkeypatch.setattr(genzoo.weights, "write_tensors", full)
    monkeypatch.setattr(shutil, "copyfile", full)
    dest = tmp_path / "out"
    one_error(run(*_command(OUTPUT_COMMANDS[verb], dest)), f"cannot write {dest}/", "(no space left on the device)",
              "nothing was written there")
    assert files_under(tmp_path) == []


def test_a_read_only_folder_and_a_missing_parent_in_it_are_refused_for_a_user_without_override(tmp_path):
    """Root ignores permission bits; setpriv drops that power (CAP_DAC_OVERRIDE) for one process, which runs
    every output verb against a read-only folder and a missing folder inside it."""
    import shutil
    import subprocess
    import sys

    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed; the tests of an output under a file cover the refusal")
    locked = tmp_path / "locked"
    locked.mkdir()
    cases = [_command(template, where) for template in OUTPUT_COMMANDS.values()
             for where in (locked, locked / "missing" / "deeper")]
    script = ("import json, sys\nfrom click.testing import CliRunner\nfrom genzoo.cli import cli\n"
              "print(json.dumps([[r.exit_code, r.output] for r in (CliRunner().invoke(cli, c) "
              "for c in json.loads(sys.argv[1]))]))")
    os.chmod(locked, 0o555)
    try:
        done = subprocess.run(["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps",
                               "-dac_override,-dac_read_search", "--", sys.executable, "-c", script, json.dumps(cases)],
                              capture_output=True, text=True, timeout=300)
    finally:
        os.chmod(locked, 0o755)
    if done.returncode != 0 and "setpriv" in done.stderr:
        pytest.skip(f"setpriv cannot drop capabilities here: {done.stderr.strip()[:200]}")
    assert done.returncode == 0, done.stderr[-2000:]
    for case, (code, output) in zip(cases, json.loads(done.stdout.splitlines()[-1])):
        errors = [line for line in output.splitlines() if line.startswith("Error:")]
        assert code == 1 and len(errors) == 1 and "Traceback" not in output, (case, output)
        assert f"{locked} is not writable (permission denied)" in errors[0], (case, errors[0])
    assert list(locked.iterdir()) == []


# -- memory --------------------------------------------------------------------------------------------------------


def _with_memory(monkeypatch, size, *, loader=False):
    """This machine as one of ``size`` bytes to the estimate of a request (and with ``loader``, to the loader's check
    of a model's weights)."""
    from genzoo import memory, weights

    monkeypatch.setattr(memory, "machine_memory", lambda: size)
    if loader:
        monkeypatch.setattr(weights, "machine_memory", lambda: size)


def test_sampling_an_image_size_of_40000_on_the_same_tensors_fails_fast_in_one_line(tmp_path, monkeypatch):
    import resource

    _with_memory(monkeypatch, 16 * 2**30, loader=True)
    directory = genzoo.save_pretrained(genzoo.load("edm-mnist-small"), tmp_path / "edm")
    document = json.loads((directory / "config.json").read_text())
    document["config"]["image_size"] = 40000  # a U-Net takes any size: the weights load
    (directory / "config.json").write_text(json.dumps(document))
    monkeypatch.setattr(genzoo.get_host().method("edm"), "sample_batch", lambda *a, **k: pytest.fail("a batch started"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    one_error(run("sample", directory, "-n", "4", "-o", tmp_path / "s.png"), f"{directory} works on 1 x 40000 x 40000 "
              "images", "even one at a time takes at least 202.7 GiB, more than the 16.0 GiB", "image_size is damaged")
    one_error(run("eval", directory, "-n", "4", "--metrics", "swd"), "even one at a time takes at least 202.7 GiB")
    assert time.perf_counter() - start < 60
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 2**20  # KiB: less than 1 GiB more than before
    assert not (tmp_path / "s.png").exists()


def test_a_batch_or_a_count_too_large_for_memory_names_the_flag_to_lower(tmp_path, monkeypatch):
    np.savez(tmp_path / "digits.npz", x=np.zeros((300, 28, 28), np.uint8))
    _with_memory(monkeypatch, 5 * 2**20)
    line = one_error(run("refine", "ign", "--input", tmp_path / "digits.npz", "-o", tmp_path / "r.png"))
    assert "refining ign's 1 x 28 x 28 images 256 at a time takes at least" in line and "lower --batch-size to" in line
    _with_memory(monkeypatch, 100 * 2**20)
    one_error(run("sample", "ign", "-n", "100000", "-o", tmp_path / "s.npz"), "sampling 100,000 images of 1 x 28 x 28 "
              "keeps at least 0.3 GiB of them in memory, more than the 0.1 GiB here; lower -n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["digits.npz"]
