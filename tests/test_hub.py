"""The Hub: push and pull through huggingface_hub against a fake Hub on 127.0.0.1 (tests/hub_server.py).

huggingface_hub reads HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE when it is imported, and something
(accelerate, another test) may have imported it before these tests run; so the ``hub`` fixture
points huggingface_hub.constants at the fake Hub and a fresh HF_HOME, and sets the variables too
for subprocesses. One test runs the CLI in a fresh interpreter with nothing but the variables.
"""

import io
import json
import os
import socket
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner
from PIL import Image
from safetensors.torch import load_file, save_file

import genzoo
from genzoo.loading import pull
from genzoo.weights import file_hashes

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hub_server import HubServer  # noqa: E402


def point_huggingface_hub(monkeypatch, endpoint: str, home: Path) -> None:
    """Send huggingface_hub (already imported or not) to ``endpoint``, with its cache under ``home``."""
    from huggingface_hub import constants

    for name, value in {"HF_ENDPOINT": endpoint, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1"}.items():
        monkeypatch.setenv(name, value)
    for name in ("HF_HUB_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    patches = {
        "ENDPOINT": endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_ASSETS_CACHE": str(home / "assets"),
        "HF_XET_CACHE": str(home / "xet"),
        "HF_TOKEN_PATH": str(home / "token"),
        "HF_STORED_TOKENS_PATH": str(home / "stored_tokens"),
        "AGENT_HARNESSES_PATH": str(home / ".agent_harnesses.json"),
        "HF_HUB_OFFLINE": False,
    }
    for name, value in patches.items():
        monkeypatch.setattr(constants, name, value, raising=False)


@pytest.fixture
def hf_home(tmp_path):
    return tmp_path / "hf-home"


@pytest.fixture
def hub(toy_site, hf_home, monkeypatch):
    """A fake Hub on 127.0.0.1, huggingface_hub pointed at it, a fresh HF_HOME, the toy plugin installed."""
    with HubServer() as server:
        point_huggingface_hub(monkeypatch, server.url, hf_home)
        yield server


def offline(monkeypatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def toy(seed: int = 0):
    from genzoo.plugins import get_host

    torch.manual_seed(seed)
    return get_host().method("toy")()


def same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def register(name: str, **fields):
    """Add a model to the catalogue, as registry.yaml or a plugin would."""
    from genzoo.plugins import get_host
    from genzoo.registry import ModelEntry

    entry = ModelEntry.from_dict(name, {"method": "toy", **fields}, source="test registry")
    get_host().all_models()[name] = entry
    return entry


def cache_files(home: Path) -> list[Path]:
    return sorted(p for p in (home / "hub").rglob("*") if p.is_file() or p.is_symlink())


def assert_nothing_half_written(home: Path) -> None:
    names = [p.name for p in cache_files(home)]
    assert not [n for n in names if n.endswith(".incomplete")], names
    assert not [n for n in names if n.endswith((".bin", ".pt", ".pkl"))], names


def genzoo_config(method: str = "toy", plugin: str = "genzoo-toy") -> bytes:
    return json.dumps({"format_version": 1, "method": method, "plugin": plugin, "genzoo_version": "0",
                       "config": {}}).encode()


# -- push and pull ----------------------------------------------------------------------------------------


def test_push_then_pull_round_trip_is_bit_identical(hub, toy_model_dir, hf_home):
    commit = genzoo.push_to_hub(str(toy_model_dir), "org/toy")
    initial = hub.hub.history("org/toy")[1]
    assert hub.hub.history("org/toy") == [commit, initial]  # the repo's initial commit, then ours: one commit
    assert set(hub.hub.files("org/toy", initial)) == {".gitattributes"}
    files = hub.hub.files("org/toy", commit)
    assert set(files) == {".gitattributes", "config.json", "model.safetensors", "README.md", "samples.png"}
    assert files["model.safetensors"] == (toy_model_dir / "model.safetensors").read_bytes()
    assert files["config.json"] == (toy_model_dir / "config.json").read_bytes()

    model = genzoo.load("hf://org/toy")
    saved = load_file(str(toy_model_dir / "model.safetensors"))
    assert model.state_dict().keys() == saved.keys()
    assert all(torch.equal(model.state_dict()[k], saved[k]) for k in saved)
    cached = list((hf_home / "hub").rglob("model.safetensors"))
    assert len(cached) == 1 and cached[0].parent.name == commit
    assert cached[0].read_bytes() == (toy_model_dir / "model.safetensors").read_bytes()


def test_method_push_to_hub_from_python(hub):
    model = toy(1)
    commit = genzoo.push_to_hub(model, "org/from-python", message="from python")
    assert hub.hub.repos["org/from-python"].commits[commit].title == "from python"
    assert same_weights(genzoo.load(f"hf://org/from-python@{commit}"), model)


def test_sample_grid_is_64_samples_with_seed_0(hub, toy_model_dir):
    from PIL import Image

    from genzoo.images import make_grid, to_uint8

    commit = genzoo.push_to_hub(toy_model_dir, "org/grid")
    png = Image.open(io.BytesIO(hub.hub.files("org/grid", commit)["samples.png"]))
    expected = to_uint8(make_grid(genzoo.load(toy_model_dir).sample(64, seed=0))).permute(1, 2, 0).numpy()
    assert np.array_equal(np.asarray(png), expected)


def test_method_that_cannot_sample_is_pushed_without_a_grid(hub, toy_model_dir, monkeypatch):
    from genzoo.plugins import get_host

    monkeypatch.setattr(get_host().method("toy"), "capabilities", frozenset({"fit", "refine"}))
    commit = genzoo.push_to_hub(toy_model_dir, "org/no-grid")
    files = hub.hub.files("org/no-grid", commit)
    assert "samples.png" not in files and "genzoo sample" not in files["README.md"].decode()


def test_pushing_unchanged_files_makes_no_empty_commit(hub, toy_model_dir):
    first = genzoo.push_to_hub(toy_model_dir, "org/same")
    assert genzoo.push_to_hub(toy_model_dir, "org/same") == first
    assert len(hub.hub.history("org/same")) == 2


def test_revision_pinning_loads_the_first_commit(hub, tmp_path):
    first_model, second_model = toy(1), toy(2)
    first = genzoo.push_to_hub(genzoo.save_pretrained(first_model, tmp_path / "a"), "org/pin")
    second = genzoo.push_to_hub(genzoo.save_pretrained(second_model, tmp_path / "b"), "org/pin")
    assert first != second
    assert same_weights(genzoo.load(f"hf://org/pin@{first}"), first_model)
    assert same_weights(genzoo.load("hf://org/pin"), second_model)
    assert same_weights(genzoo.load(f"hf://org/pin@{second}"), second_model)


def test_push_to_a_branch_creates_it_and_leaves_main_alone(hub, tmp_path):
    main_model, dev_model = toy(1), toy(2)
    main_commit = genzoo.push_to_hub(genzoo.save_pretrained(main_model, tmp_path / "a"), "org/branchy")
    dev_commit = genzoo.push_to_hub(genzoo.save_pretrained(dev_model, tmp_path / "b"), "org/branchy", revision="dev")
    assert hub.hub.repos["org/branchy"].branches == {"main": main_commit, "dev": dev_commit}
    assert same_weights(genzoo.load("hf://org/branchy@dev"), dev_model)
    assert same_weights(genzoo.load("hf://org/branchy"), main_model)
    assert "genzoo sample hf://org/branchy@dev" in hub.hub.files("org/branchy", "dev")["README.md"].decode()
    again = genzoo.push_to_hub(genzoo.save_pretrained(toy(3), tmp_path / "c"), "org/branchy", revision="dev")
    assert hub.hub.history("org/branchy", "dev")[:2] == [again, dev_commit]  # an existing branch is reused


def test_fake_hub_serves_snapshot_download(hub, toy_model_dir):
    from huggingface_hub import snapshot_download

    commit = genzoo.push_to_hub(toy_model_dir, "org/snap")
    folder = Path(snapshot_download("org/snap"))
    assert folder.name == commit
    assert (folder / "model.safetensors").read_bytes() == (toy_model_dir / "model.safetensors").read_bytes()
    assert {p.name for p in folder.iterdir()} == set(hub.hub.files("org/snap"))


# -- the model card -------------------------------------------------------------------------------------------


PAPER = "@article{toy2024,\n  title = {A Toy Autoencoder},\n  year = {2024}\n}"


def test_model_card_metadata_and_body_from_provenance(hub, tmp_path, monkeypatch):
    from genzoo.plugins import get_host

    monkeypatch.setattr(get_host().method("toy"), "paper", PAPER)
    provenance = {"dataset": "mnist:train", "seed": 3, "weights": "raw", "commands": ["genzoo fit toy --dataset mnist"],
                  "metrics": {"fid": 12.5, "kid": 0.01}, "evaluation": "1,000 samples against the MNIST test set"}
    directory = genzoo.save_pretrained(toy(), tmp_path / "card", provenance=provenance)
    commit = genzoo.push_to_hub(directory, "org/card")
    text = hub.hub.files("org/card", commit)["README.md"].decode()
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n")[1])
    assert meta["library_name"] == "genzoo"
    assert {"genzoo", "toy"} <= set(meta["tags"])
    assert meta["datasets"] == ["mnist"]
    assert meta["license"] == "cc-by-sa-3.0"  # MNIST's licence, as DESIGN states
    assert meta["metrics"] == ["fid", "kid"]
    assert meta["genzoo"]["metrics"] == {"fid": 12.5, "kid": 0.01}
    assert meta["genzoo"]["evaluation"] == "1,000 samples against the MNIST test set"
    assert meta["genzoo"]["method"] == "toy" and meta["genzoo"]["plugin"] == "genzoo-toy"
    body = text.split("---\n", 2)[2]
    assert "genzoo sample hf://org/card" in body
    assert "genzoo fit toy --dataset mnist" in body
    assert "![64 samples, seed 0](samples.png)" in body
    assert PAPER in body and "```bibtex" in body
    assert "1,000 samples against the MNIST test set" in body


def test_model_card_of_a_registry_model_uses_the_registry_entry(hub, toy_model_dir):
    source = genzoo.push_to_hub(toy_model_dir, "org/zoo-src")
    register("toy-zoo", summary="a zoo toy", dataset="celeba", license="non-commercial research only",
             metrics={"fid": 3.25}, evaluation="10k samples, genzoo eval", command="genzoo fit toy --steps 5",
             hub={"repo_id": "org/zoo-src", "revision": source}, files=file_hashes(toy_model_dir))
    commit = genzoo.push_to_hub("toy-zoo", "org/zoo-mirror")
    from genzoo.modelcard import parse_card

    meta, body = parse_card(hub.hub.files("org/zoo-mirror", commit)["README.md"].decode())
    assert meta["license"] == "other" and meta["license_name"] == "non-commercial-research-only"
    assert meta["datasets"] == ["celeba"] and meta["metrics"] == ["fid"]
    assert meta["genzoo"]["model"] == "toy-zoo" and meta["genzoo"]["evaluation"] == "10k samples, genzoo eval"
    assert "genzoo fit toy --steps 5" in body and "a zoo toy" in body and "non-commercial research only" in body
    assert hub.hub.files("org/zoo-mirror")["model.safetensors"] == (toy_model_dir / "model.safetensors").read_bytes()


# -- registry entries with a hub field -----------------------------------------------------------------------


def test_registry_model_on_the_hub_loads_pinned_and_verified(hub, toy_model_dir, monkeypatch):
    commit = genzoo.push_to_hub(toy_model_dir, "org/reg")
    genzoo.push_to_hub(genzoo.save_pretrained(toy(5), toy_model_dir.parent / "other"), "org/reg")  # main moves on
    register("toy-reg", hub={"repo_id": "org/reg", "revision": commit}, files=file_hashes(toy_model_dir))
    assert same_weights(genzoo.load("toy-reg"), genzoo.load(toy_model_dir))
    hub.hub.log.clear()
    offline(monkeypatch)
    assert same_weights(genzoo.load("toy-reg"), genzoo.load(toy_model_dir))  # from the cache, no network
    assert hub.hub.log == []


def test_registry_sha256_mismatch_is_refused_and_not_kept(hub, toy_model_dir, hf_home):
    commit = genzoo.push_to_hub(toy_model_dir, "org/bad-sha")
    hashes = {**file_hashes(toy_model_dir), "model.safetensors": "0" * 64}
    register("toy-bad", hub={"repo_id": "org/bad-sha", "revision": commit}, files=hashes)
    with pytest.raises(genzoo.WeightsError, match=r"sha256 of model.safetensors from hf://org/bad-sha@[0-9a-f]{40} "
                                                  r"is [0-9a-f]{16}\.\.\., test registry expects 0000"):
        genzoo.load("toy-bad")
    assert not [p for p in cache_files(hf_home) if p.name == "model.safetensors"]
    weights_sha = file_hashes(toy_model_dir)["model.safetensors"]  # the blob's name in the cache (its ETag)
    assert not [p for p in cache_files(hf_home) if p.name == weights_sha]
    assert_nothing_half_written(hf_home)


def _alter_cached(home: Path, name: str = "model.safetensors") -> Path:
    """Change a cached file after its download, as a disk fault or another program might; returns its blob."""
    (cached,) = [p for p in cache_files(home) if p.name == name]
    blob = cached.resolve()
    blob.chmod(0o644)
    if name == "model.safetensors":
        tensors = load_file(str(blob))
        tensors["encoder.bias"] += 1
        save_file(tensors, str(blob))
    else:
        blob.write_bytes(blob.read_bytes().replace(b'"config": {', b'"config": {"latent": 4, ', 1))
    return blob


def test_a_cached_file_changed_after_download_is_refused_until_pull_force(hub, toy_model_dir, hf_home, monkeypatch):
    from genzoo.cli import cli

    commit = genzoo.push_to_hub(toy_model_dir, "org/heal")
    register("toy-heal", hub={"repo_id": "org/heal", "revision": commit}, files=file_hashes(toy_model_dir))
    genzoo.load("toy-heal")
    blob = _alter_cached(hf_home)
    assert blob.name == file_hashes(toy_model_dir)["model.safetensors"]  # LFS files are cached under their sha256
    said = (rf"the cached model.safetensors of hf://org/heal@{commit} was changed after it was downloaded \(it hashes "
            rf"to [0-9a-f]{{16}}\.\.\., the download recorded {blob.name[:16]}\.\.\.\); run `genzoo pull --force "
            rf"toy-heal` to download it again")
    with pytest.raises(genzoo.WeightsError, match=said):
        genzoo.load("toy-heal")
    offline(monkeypatch)
    with pytest.raises(genzoo.WeightsError, match=said):  # offline too: the cache is checked, not trusted
        genzoo.load("toy-heal")
    forced = CliRunner().invoke(cli, ["pull", "--force", "toy-heal"])
    assert forced.exit_code == 1 and forced.output.startswith("Error: downloading hf://org/heal@") and \
        "needs the network, and HF_HUB_OFFLINE is set" in forced.output
    monkeypatch.undo()
    point_huggingface_hub(monkeypatch, hub.url, hf_home)
    forced = CliRunner().invoke(cli, ["pull", "--force", "toy-heal"])
    assert forced.exit_code == 0, forced.output
    assert same_weights(genzoo.load("toy-heal"), genzoo.load(toy_model_dir))  # fetched afresh


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_a_changed_cached_file_of_a_repo_is_refused_online_and_offline(hub, toy_model_dir, hf_home, monkeypatch, name):
    genzoo.push_to_hub(toy_model_dir, "org/plain-heal")
    genzoo.load("hf://org/plain-heal")
    blob = _alter_cached(hf_home, name)
    assert len(blob.name) == (64 if name == "model.safetensors" else 40)  # sha256 of an LFS file, git's sha1 else
    said = f"the cached {name} of hf://org/plain-heal was changed after it was downloaded .* `genzoo pull --force " \
           f"org/plain-heal`"
    with pytest.raises(genzoo.WeightsError, match=said):
        genzoo.load("hf://org/plain-heal")
    offline(monkeypatch)
    with pytest.raises(genzoo.WeightsError, match=said):
        genzoo.load("hf://org/plain-heal")
    monkeypatch.setattr(__import__("huggingface_hub").constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    pull("org/plain-heal", force=True)
    assert same_weights(genzoo.load("hf://org/plain-heal"), genzoo.load(toy_model_dir))


def test_a_full_disk_while_downloading_is_one_sentence_and_keeps_no_partial_file(hub, toy_model_dir, hf_home,
                                                                                  monkeypatch):
    import errno

    import huggingface_hub.file_download as file_download

    genzoo.push_to_hub(toy_model_dir, "org/full")

    def fills_the_disk(url, temp_file, **kwargs):
        temp_file.write(b"half a file")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(file_download, "http_get", fills_the_disk)
    with pytest.raises(genzoo.GenzooError) as info:
        genzoo.load("hf://org/full")
    assert str(info.value).startswith("cannot write config.json of hf://org/full into the Hugging Face cache (")
    assert "no space left on the device; nothing of it was kept: make room or set HF_HOME" in str(info.value)
    assert not [p for p in cache_files(hf_home) if p.name.endswith(".incomplete")]
    assert not [p for p in cache_files(hf_home) if p.name in ("config.json", "model.safetensors")]


def test_a_repo_cannot_put_a_command_into_the_install_advice(hub, tmp_path):
    save_file({"w": torch.zeros(2)}, str(tmp_path / "w.safetensors"))
    hub.hub.commit("org/lure", {"config.json": genzoo_config("vae2", "genzoo-vae2 --index-url http://evil.example/s"),
                                "model.safetensors": (tmp_path / "w.safetensors").read_bytes()})
    with pytest.raises(genzoo.WeightsError) as info:
        genzoo.load("hf://org/lure")
    message = str(info.value)
    assert "pip install" not in message
    assert "names its plugin as 'genzoo-vae2 --index-url http://evil.example/s', which is not a genzoo plugin " \
           "name (genzoo-NAME), so genzoo offers no install command" in message


# -- failure modes ------------------------------------------------------------------------------------------------


def test_offline_and_not_cached_says_to_pull(hub, monkeypatch, hf_home):
    offline(monkeypatch)
    with pytest.raises(genzoo.GenzooError) as info:
        genzoo.load("hf://org/elsewhere@v2")
    message = str(info.value)
    assert "HF_HUB_OFFLINE is set" in message and "genzoo pull org/elsewhere@v2" in message
    assert "\n" not in message and hub.hub.log == []
    assert_nothing_half_written(hf_home)


def test_offline_registry_model_mentions_its_bundled_copy(hub, monkeypatch):
    register("toy-away", bundled="genzoo_not_installed:weights/toy-away",
             hub={"repo_id": "org/away", "revision": "main"})
    offline(monkeypatch)
    with pytest.raises(genzoo.GenzooError, match=r"genzoo pull toy-away.*bundled copy \(genzoo_not_installed:"):
        genzoo.load("toy-away")


def test_pulled_model_loads_offline_without_network(hub, toy_model_dir, monkeypatch):
    genzoo.push_to_hub(toy_model_dir, "org/travel")
    directory, label = pull("org/travel")
    assert label == "hf://org/travel" and (directory / "model.safetensors").is_file()
    hub.hub.log.clear()
    offline(monkeypatch)
    assert same_weights(genzoo.load("hf://org/travel"), genzoo.load(toy_model_dir))
    assert hub.hub.log == []


def test_unreachable_hub_uses_the_cache_or_says_so(hub, toy_model_dir, monkeypatch):
    import huggingface_hub.utils._http as http

    genzoo.push_to_hub(toy_model_dir, "org/net")
    pull("org/net")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", dead)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", dead + "/{repo_id}/resolve/{revision}/{filename}")
    fast = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith("_")})
    fast.sleep = lambda seconds: None  # huggingface_hub retries with backoff; skip the waiting
    monkeypatch.setattr(http, "time", fast)
    assert same_weights(genzoo.load("hf://org/net"), genzoo.load(toy_model_dir))
    with pytest.raises(genzoo.GenzooError, match=r"could not reach the Hub at http://127\.0\.0\.1:\d+ \(.*\), and "
                                                 r"hf://org/other is not in the local cache"):
        genzoo.load("hf://org/other")


def test_repo_not_found(hub):
    with pytest.raises(genzoo.GenzooError, match=r"hf://org/missing was not found on http://127\.0\.0\.1:\d+: "
                                                 r"check the repo id; if the repo is private"):
        genzoo.load("hf://org/missing")


def test_revision_not_found(hub, toy_model_dir):
    genzoo.push_to_hub(toy_model_dir, "org/revs")
    with pytest.raises(genzoo.GenzooError, match="hf://org/revs has no revision 'nope' .*drop @nope"):
        genzoo.load("hf://org/revs@nope")
    with pytest.raises(genzoo.GenzooError, match="has no revision '" + "a" * 40):
        genzoo.load("hf://org/revs@" + "a" * 40)


def test_weights_file_not_found(hub, hf_home):
    hub.hub.commit("org/half", {"config.json": genzoo_config()})
    with pytest.raises(genzoo.WeightsError, match="hf://org/half has config.json but no model.safetensors"):
        genzoo.load("hf://org/half")
    assert not [p for p in hub.hub.requested() if "/resolve/" in p]  # refused before downloading anything
    assert_nothing_half_written(hf_home)


def test_repo_without_config_is_not_a_genzoo_model(hub, tmp_path):
    save_file({"w": torch.zeros(2)}, str(tmp_path / "w.safetensors"))
    weights = (tmp_path / "w.safetensors").read_bytes()
    hub.hub.commit("org/plain", {"README.md": b"# hi\n", "model.safetensors": weights})
    with pytest.raises(genzoo.WeightsError, match="hf://org/plain is not a genzoo model: it has no config.json"):
        genzoo.load("hf://org/plain")
    assert not [p for p in hub.hub.requested() if "/resolve/" in p]  # refused before downloading anything


def test_config_of_another_library_is_not_a_genzoo_model(hub, tmp_path):
    save_file({"w": torch.zeros(2)}, str(tmp_path / "w.safetensors"))
    hub.hub.commit("org/bert", {"config.json": b'{"model_type": "bert"}',
                                "model.safetensors": (tmp_path / "w.safetensors").read_bytes()})
    with pytest.raises(genzoo.WeightsError, match="hf://org/bert is not a genzoo model: its config.json has no "
                                                  "'method' and 'config'"):
        genzoo.load("hf://org/bert")
    assert not [p for p in hub.hub.requested("GET") if p.endswith("model.safetensors")]


def test_method_whose_plugin_is_missing_names_the_plugin(hub, tmp_path):
    save_file({"w": torch.zeros(2)}, str(tmp_path / "w.safetensors"))
    hub.hub.commit("org/alien", {"config.json": genzoo_config("alien", "genzoo-alien"),
                                 "model.safetensors": (tmp_path / "w.safetensors").read_bytes()})
    with pytest.raises(genzoo.WeightsError, match=r"needs method 'alien', .*pip install genzoo-alien"):
        genzoo.load("hf://org/alien")
    assert not [p for p in hub.hub.requested("GET") if p.endswith("model.safetensors")]


def test_pickle_only_weights_are_refused_and_never_downloaded(hub, hf_home):
    hub.hub.commit("org/pickled", {"config.json": genzoo_config(), "pytorch_model.bin": b"\x80\x02pickle bytes"})
    with pytest.raises(genzoo.WeightsError, match=r"holds only pickle weights \(pytorch_model.bin\), which genzoo "
                                                  r"never downloads or unpickles"):
        genzoo.load("hf://org/pickled")
    assert not [p for p in hub.hub.requested() if p.endswith(".bin")]
    assert_nothing_half_written(hf_home)


def test_private_repo_needs_a_token(hub, toy_model_dir, monkeypatch):
    from genzoo.cli import cli

    result = CliRunner().invoke(cli, ["push", str(toy_model_dir), "--repo-id", "org/secret", "--private",
                                                 "--token", "hf_secret"])
    assert result.exit_code == 0, result.output
    assert hub.hub.repos["org/secret"].private
    assert {auth for method, _, auth in hub.hub.log if method == "POST"} == {"Bearer hf_secret"}
    with pytest.raises(genzoo.GenzooError, match="org/secret was not found .* set HF_TOKEN"):
        genzoo.load("hf://org/secret")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    assert same_weights(genzoo.load("hf://org/secret"), genzoo.load(toy_model_dir))


def test_push_refusals(hub, toy_model_dir, monkeypatch):
    with pytest.raises(genzoo.GenzooError, match="expected a Hub repo id as ORG/NAME"):
        genzoo.push_to_hub(toy_model_dir, "no-org")
    with pytest.raises(genzoo.GenzooError, match="names a revision; give ORG/NAME and the branch with --revision"):
        genzoo.push_to_hub(toy_model_dir, "org/x@dev")
    with pytest.raises(genzoo.GenzooError, match="looks like a commit id"):
        genzoo.push_to_hub(toy_model_dir, "org/x", revision="b" * 40)
    offline(monkeypatch)
    with pytest.raises(genzoo.GenzooError, match="HF_HUB_OFFLINE is set, and pushing needs the network"):
        genzoo.push_to_hub(toy_model_dir, "org/x")
    assert "org/x" not in hub.hub.repos


def test_push_dry_run_stages_the_commit_and_uploads_nothing(hub, toy_model_dir, tmp_path, monkeypatch):
    from genzoo.cli import cli

    offline(monkeypatch)  # staging needs no network
    staged = tmp_path / "staged"
    result = CliRunner().invoke(cli, ["push", str(toy_model_dir), "--repo-id", "org/dry", "--dry-run", str(staged)])
    assert result.exit_code == 0, result.output
    assert "for hf://org/dry in" in result.output and "nothing was uploaded" in result.output
    assert sorted(p.name for p in staged.iterdir()) == ["README.md", "config.json", "model.safetensors", "samples.png"]
    for name in ("config.json", "model.safetensors"):
        assert (staged / name).read_bytes() == (toy_model_dir / name).read_bytes()
    card = (staged / "README.md").read_text()
    assert card.startswith("---\n") and "genzoo sample hf://org/dry" in card
    with Image.open(staged / "samples.png") as grid:
        assert grid.size[0] > 8
    assert not hub.hub.repos and not hub.hub.log  # the Hub heard nothing
    again = CliRunner().invoke(cli, ["push", str(toy_model_dir), "--dry-run", str(staged)])
    assert again.exit_code == 1 and "is not an empty folder" in again.output
    unnamed = CliRunner().invoke(cli, ["push", str(toy_model_dir), "--dry-run", str(tmp_path / "unnamed")])
    assert unnamed.exit_code == 0 and "hf://ORG/NAME (name the repo after MODEL)" in unnamed.output
    assert "# ORG/NAME" in (tmp_path / "unnamed" / "README.md").read_text()
    missing = CliRunner().invoke(cli, ["push", str(toy_model_dir)])
    assert missing.exit_code == 1 and "Missing argument 'ORG/NAME'" in missing.output


def test_push_takes_the_repo_as_python_does_and_dry_run_without_a_folder(hub, toy_model_dir, tmp_path, monkeypatch):
    from genzoo.cli import cli

    offline(monkeypatch)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["push", str(toy_model_dir), "org/positional", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "for hf://org/positional in staged:" in result.output and (tmp_path / "staged" / "README.md").is_file()
    assert "genzoo sample hf://org/positional" in (tmp_path / "staged" / "README.md").read_text()
    twice = CliRunner().invoke(cli, ["push", str(toy_model_dir), "org/a", "--repo-id", "org/b", "--dry-run", "x"])
    assert twice.exit_code == 1 and "the repo is named twice, org/a and --repo-id org/b" in twice.output
    assert not hub.hub.log


# -- the command line ---------------------------------------------------------------------------------------


def test_cli_push_pull_and_sample(hub, toy_model_dir, tmp_path, hf_home):
    from genzoo.cli import cli

    runner = CliRunner()
    pushed = runner.invoke(cli, ["push", str(toy_model_dir), "--repo-id", "org/cli", "-m", "first upload"])
    assert pushed.exit_code == 0, pushed.output
    commit = hub.hub.history("org/cli")[0]
    assert f"in commit {commit}" in pushed.output and hub.hub.repos["org/cli"].commits[commit].title == "first upload"

    pulled = runner.invoke(cli, ["pull", "org/cli"])
    assert pulled.exit_code == 0, pulled.output
    directory = Path(pulled.output.strip().rsplit(" into ", 1)[1])
    assert directory.name == commit and (directory / "model.safetensors").is_file()
    assert str(hf_home) in str(directory)

    out = tmp_path / "grid.png"
    sampled = runner.invoke(cli, ["sample", f"hf://org/cli@{commit}", "-n", "4", "-o", str(out), "--device", "cpu"])
    assert sampled.exit_code == 0, sampled.output
    assert out.is_file()

    branch = runner.invoke(cli, ["push", str(toy_model_dir), "--repo-id", "hf://org/cli", "--revision", "exp"])
    assert branch.exit_code == 0, branch.output
    assert "hf://org/cli@exp" in branch.output and "exp" in hub.hub.repos["org/cli"].branches


def test_cli_errors_are_one_line(hub):
    from genzoo.cli import cli

    for args in (["pull", "org/missing"], ["pull", "hf://org/missing@dev"], ["sample", "hf://org/missing"],
                 ["push", "tiny", "--repo-id", "bad"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1, (args, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), (args, result.output)


def test_cli_pull_of_a_registry_model(hub, toy_model_dir):
    from genzoo.cli import cli

    commit = genzoo.push_to_hub(toy_model_dir, "org/named")
    register("toy-named", hub={"repo_id": "org/named", "revision": commit}, files=file_hashes(toy_model_dir))
    result = CliRunner().invoke(cli, ["pull", "toy-named"])
    assert result.exit_code == 0, result.output
    assert f"toy-named (hf://org/named@{commit})" in result.output
    result = CliRunner().invoke(cli, ["pull", "toy-tiny"])  # registered by the toy plugin without a Hub repo
    assert result.exit_code == 1 and "has no Hub repo" in result.output


@pytest.mark.slow  # over 5 s on 2 cores: the default suite stays under 3 minutes
def test_cli_in_a_fresh_process_honours_the_environment(hub, toy_model_dir, tmp_path, hf_home):
    """No patching here: a new interpreter reads HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE itself."""
    commit = genzoo.push_to_hub(toy_model_dir, "org/proc")
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "fresh-home")}
    env.pop("HF_HUB_OFFLINE", None)
    pulled = subprocess.run([sys.executable, "-m", "genzoo", "pull", "org/proc"], env=env, capture_output=True,
                            text=True, timeout=120)
    assert pulled.returncode == 0, pulled.stderr
    assert str(tmp_path / "fresh-home") in pulled.stdout and commit in pulled.stdout
    hub.hub.log.clear()
    out = tmp_path / "offline.png"
    sampled = subprocess.run([sys.executable, "-m", "genzoo", "sample", "hf://org/proc", "-n", "4", "-o", str(out),
                              "--device", "cpu"], env={**env, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True,
                             timeout=120)
    assert sampled.returncode == 0, sampled.stderr
    assert out.is_file() and hub.hub.log == []


def test_a_full_disk_while_staging_a_push_is_one_sentence_and_pushes_nothing(hub, toy_model_dir, monkeypatch):
    import errno

    import genzoo.pushing as pushing

    def fills_the_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pushing, "save_grid", fills_the_disk)
    with pytest.raises(genzoo.GenzooError, match=r"cannot write .*genzoo-push-.* \(no space left on the device\)"):
        genzoo.push_to_hub(toy_model_dir, "org/full-push")
    assert "org/full-push" not in hub.hub.repos


# -- what a push publishes: no local paths, the sources, the licence, the preview, the verbs ---------------------------


def _folder_of_images(folder: Path, count: int = 16) -> Path:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(count):
        Image.fromarray(rng.integers(0, 256, (8, 8), dtype=np.uint8)).save(folder / f"{i:02d}.png")
    return folder


def _texts_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_run_trained_on_a_folder_is_pushed_and_exported_without_local_paths(hub, tmp_path, monkeypatch):
    """A run whose --dataset and --out are absolute paths under a folder of the user's: the staged push (every file,
    the grid included) and the exported model name the folder by its name and the images by their fingerprint."""
    from genzoo.cli import cli
    from genzoo.provenance import ABSOLUTE_PATH

    offline(monkeypatch)
    real_home = Path.home()
    home = tmp_path / "home" / "someone"
    monkeypatch.setenv("HOME", str(home))
    images = _folder_of_images(home / "my digits")
    run = home / "runs" / "folder-toy"
    runner = CliRunner()
    fitted = runner.invoke(cli, ["fit", "toy", "--dataset", f"folder:{images}", "--steps", "2", "--batch-size", "4",
                                 "--out", str(run), "--no-progress", "--precision", "fp32"])
    assert fitted.exit_code == 0, fitted.output
    assert str(images) in (run / "config.json").read_text()  # the run itself records where its data is

    staged, exported = tmp_path / "staged", tmp_path / "exported"
    pushed = runner.invoke(cli, ["push", str(run), "org/folder-toy", "--dry-run", str(staged)])
    assert pushed.exit_code == 0, pushed.output
    assert runner.invoke(cli, ["export", str(run), str(exported)]).exit_code == 0
    published = {f"staged/{name}": data for name, data in _texts_of(staged).items()}
    published.update({f"exported/{name}": data for name, data in _texts_of(exported).items()})
    assert set(published) >= {"staged/README.md", "staged/config.json", "staged/samples.png", "exported/config.json"}
    for name, data in published.items():
        for local in (str(tmp_path), str(home), str(real_home), "/tmp/"):
            assert local.encode() not in data, f"{name} holds {local}"
        if name.endswith((".md", ".json")):
            assert not ABSOLUTE_PATH.search(data.decode()), f"{name}: {ABSOLUTE_PATH.search(data.decode())}"
    card = (staged / "README.md").read_text()
    provenance = json.loads((staged / "config.json").read_text())["provenance"]
    assert provenance["dataset"] == "folder:DIR/my digits"
    assert provenance["data"]["images"] == 16 and len(provenance["data"]["sha256"]) == 16
    assert json.loads((exported / "config.json").read_text())["provenance"]["data"] == provenance["data"]
    assert "--dataset 'folder:DIR/my digits'" in card and "--out runs/folder-toy" in card
    assert f"16 images of 1x8x8, sha256 {provenance['data']['sha256']}" in card


def test_a_provenance_without_local_paths_is_published_byte_for_byte(hub, tmp_path, monkeypatch):
    offline(monkeypatch)
    provenance = {"dataset": "mnist", "commands": ["genzoo fit toy --dataset mnist --data-root DIR --init runs/first "
                                                   "--out runs/second"], "evaluation": "fid of 1/2 the samples"}
    directory = genzoo.save_pretrained(toy(), tmp_path / "model", provenance=provenance)
    staged = genzoo.pushing.stage_push(directory, tmp_path / "staged")
    assert (staged / "config.json").read_bytes() == (directory / "config.json").read_bytes()


def test_a_config_field_holding_an_absolute_path_is_not_published(hub, tmp_path, monkeypatch):
    from dataclasses import dataclass

    from genzoo.testing import registered
    from toyzoo import Toy, ToyConfig

    @dataclass
    class GuidedConfig(ToyConfig):
        guide: str = ""  # a model name or directory, as edm's autoguidance takes one

    class Guided(Toy):
        name = "guided-toy"
        Config = GuidedConfig
        default_model = None

    offline(monkeypatch)
    with registered(Guided):
        model = Guided({"guide": str(tmp_path / "runs" / "weak")})
        with pytest.raises(genzoo.GenzooError, match=r"Config field guide=.* names a path of this machine.*"
                                                     r"--set guide=NAME"):
            genzoo.pushing.stage_push(model, tmp_path / "staged")
        assert not (tmp_path / "staged").exists()
        staged = genzoo.pushing.stage_push(Guided({"guide": "runs/weak"}), tmp_path / "relative")
        assert json.loads((staged / "config.json").read_text())["config"]["guide"] == "runs/weak"


def test_the_card_names_the_sources_and_asks_for_a_missing_licence(hub, toy_site, toy_model_dir, tmp_path, monkeypatch):
    from genzoo.cli import cli
    from genzoo.modelcard import parse_card

    offline(monkeypatch)
    metadata = next(toy_site.glob("genzoo_toy-*.dist-info")) / "METADATA"
    metadata.write_text(metadata.read_text() + "Project-URL: Homepage, https://example.org/genzoo-toy\n"
                                               "Project-URL: Source, https://example.org/genzoo-toy/code\n")
    runner = CliRunner()
    bare = runner.invoke(cli, ["push", str(toy_model_dir), "org/toy", "--dry-run", str(tmp_path / "bare")])
    assert bare.exit_code == 0, bare.output
    assert "the card states no licence for the weights: name one with --license" in bare.output
    meta, body = parse_card((tmp_path / "bare" / "README.md").read_text())
    assert "license" not in meta
    licence_lines = [line for line in body.splitlines() if "licence" in line.lower() and not line.startswith("#")]
    assert licence_lines == ["No licence is stated for these weights: ask the author before reusing them (the "
                             "author states one by pushing again with `genzoo push MODEL ORG/NAME --license "
                             "LICENCE`)."]
    assert "install it into the same environment from <https://example.org/genzoo-toy/code>" in body

    stated = runner.invoke(cli, ["push", str(toy_model_dir), "org/toy", "--dry-run", str(tmp_path / "stated"),
                                 "--source", "https://example.org/toy-recipe", "--license", "cc-by-4.0"])
    assert stated.exit_code == 0 and "no licence" not in stated.output
    meta, body = parse_card((tmp_path / "stated" / "README.md").read_text())
    assert meta["license"] == "cc-by-4.0" and meta["genzoo"]["source"] == "https://example.org/toy-recipe"
    assert "The model's source: <https://example.org/toy-recipe>." in body and "released under: cc-by-4.0" in body
    provenance = json.loads((tmp_path / "stated" / "config.json").read_text())["provenance"]
    assert provenance["source"] == "https://example.org/toy-recipe" and provenance["license"] == "cc-by-4.0"
    refused = runner.invoke(cli, ["push", str(toy_model_dir), "--dry-run", str(tmp_path / "x"), "--source", "my laptop"])
    assert refused.exit_code == 1 and "--source my laptop: give the address" in refused.output


def test_the_preview_follows_the_method_and_the_option(hub, toy_model_dir, tmp_path, monkeypatch):
    from genzoo.cli import cli
    from genzoo.images import GRID_KEY
    from genzoo.plugins import get_host

    offline(monkeypatch)
    monkeypatch.setattr(get_host().method("toy"), "preview_images", 9, raising=False)

    def staged(*args):
        folder = tmp_path / f"staged-{len(list(tmp_path.iterdir()))}"
        result = CliRunner().invoke(cli, ["push", str(toy_model_dir), "org/toy", "--dry-run", str(folder), *args])
        assert result.exit_code == 0, result.output
        return folder

    def count(folder):
        with Image.open(folder / "samples.png") as grid:
            return json.loads(grid.info[GRID_KEY])["count"]

    declared = staged()
    assert count(declared) == 9 and "9 samples drawn with `genzoo sample hf://org/toy -n 9 --seed 0`" in \
        (declared / "README.md").read_text()
    assert count(staged("--preview-images", "4")) == 4
    none = staged("--preview-images", "0")
    assert not (none / "samples.png").exists() and "## Samples" not in (none / "README.md").read_text()
    monkeypatch.setattr(get_host().method("toy"), "preview_images", -1, raising=False)
    with pytest.raises(genzoo.GenzooError, match=r"Toy.preview_images must be a whole number of images, 0 or more"):
        genzoo.pushing.stage_push(toy_model_dir, tmp_path / "bad")


def test_push_says_how_to_use_the_commit_through_the_verbs_the_method_supports(hub, toy_model_dir, monkeypatch):
    from genzoo.cli import cli
    from genzoo.plugins import get_host

    both = CliRunner().invoke(cli, ["push", str(toy_model_dir), "org/both"])
    assert both.exit_code == 0, both.output
    commit = hub.hub.history("org/both")[0]
    assert f"load it with: genzoo sample hf://org/both@{commit} -n 64" in both.output
    assert f"          or: genzoo refine hf://org/both@{commit} --input images/" in both.output
    monkeypatch.setattr(get_host().method("toy"), "capabilities", frozenset({"fit", "refine"}))
    refiner = CliRunner().invoke(cli, ["push", str(toy_model_dir), "org/refiner"])
    assert refiner.exit_code == 0, refiner.output
    commit = hub.hub.history("org/refiner")[0]
    assert f"load it with: genzoo refine hf://org/refiner@{commit} --input images/ -o refined.png" in refiner.output
    assert "genzoo sample" not in refiner.output
    monkeypatch.setattr(get_host().method("toy"), "capabilities", frozenset({"fit"}))
    neither = CliRunner().invoke(cli, ["push", str(toy_model_dir), "org/features"])
    assert neither.exit_code == 0, neither.output
    assert "load it with: python -c 'import genzoo; print(genzoo.load(\"hf://org/features@" in neither.output
