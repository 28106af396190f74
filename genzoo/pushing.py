"""Publishing a model on the Hub: one commit of config.json, model.safetensors, a model card and a sample grid.

``stage_push`` writes those files to a folder and stops before the network (``genzoo push --dry-run``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from .destinations import check_destination, first_missing, writing
from .errors import GenzooError
from .hub import MAIN, check_can_push, check_repo_id, commit_folder, is_commit
from .images import save_grid
from .loading import resolve
from .modelcard import gather_facts, render_card
from .plugins import find_model, get_host
from .weights import CONFIG_FILE, WEIGHTS_FILE, check_finite, load_model_dir, save_pretrained

CARD_FILE = "README.md"
GRID_FILE = "samples.png"
GRID_COUNT = 64


def push_to_hub(
    model: Any,
    repo_id: str,
    *,
    revision: str | None = None,
    private: bool = False,
    message: str | None = None,
    token: str | None = None,
    provenance: dict[str, Any] | None = None,
) -> str:
    """Upload a model to the Hub in one commit and return the commit id.

    ``model`` is a Method instance, a model directory or a registry model name. The commit holds
    config.json, model.safetensors (the exact bytes of a directory), a generated model card and,
    when the method can sample, ``samples.png`` (64 samples, seed 0). ``revision`` names a branch,
    created from main if missing. ``private`` applies when the repo is created. ``token``
    defaults to huggingface_hub's (HF_TOKEN or `hf auth login`). ``provenance`` is recorded in the
    config.json of a Method instance (directories keep theirs).
    """
    repo_id = check_repo_id(repo_id)
    branch = _check_branch(revision)
    check_can_push()  # before the sample grid is drawn
    with tempfile.TemporaryDirectory(prefix="genzoo-push-") as tmp:
        with writing(tmp):  # the staged files go to the system's temporary folder: a full disk there is one sentence
            folder = _stage(model, Path(tmp), repo_id=repo_id, revision=revision, provenance=provenance)
        return commit_folder(folder, repo_id, branch=branch, private=private, token=token,
                             message=message or f"Upload genzoo model ({_method_of(folder)})")


def stage_push(
    model: Any,
    folder: str | os.PathLike,
    *,
    repo_id: str = "ORG/NAME",
    revision: str | None = None,
    provenance: dict[str, Any] | None = None,
) -> Path:
    """Write the files :func:`push_to_hub` would commit into ``folder`` and upload nothing.

    ``folder`` (new, or an empty folder) receives config.json, model.safetensors, the model card
    README.md written for ``repo_id`` and ``revision``, and samples.png when the method can sample:
    read the card before publishing, offline. Returns ``folder``.
    """
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise GenzooError(f"--dry-run {folder}: that exists and is not an empty folder; name a new folder for the "
                          f"files of the push")
    repo_id = check_repo_id(repo_id)
    _check_branch(revision)
    check_destination(folder, folder=True)  # before the model is loaded and its grid drawn
    created = first_missing(folder.parent)
    try:
        with writing(folder):  # staged beside it on the same disk, then renamed: whole, or not at all
            folder.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
            try:
                staged = _stage(model, staging, repo_id=repo_id, revision=revision, provenance=provenance)
                if folder.exists():
                    folder.rmdir()  # empty, as checked above
                os.replace(staged, folder)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except GenzooError:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise
    return folder


def _check_branch(revision: str | None) -> str:
    branch = revision or MAIN
    if is_commit(branch):
        raise GenzooError(f"--revision {branch} looks like a commit id; pushes go to a branch: name one (e.g. dev)")
    return branch


def _stage(model: Any, tmp: Path, *, repo_id: str, revision: str | None, provenance: dict[str, Any] | None) -> Path:
    """Write the files of the commit into ``tmp/upload``: weights, config, card and sample grid."""
    entry = None
    if isinstance(model, torch.nn.Module):
        check_finite(model.state_dict(), f"model {getattr(model, 'name', type(model).__name__)}",
                     parameters={name for name, _ in model.named_parameters()})
        source = save_pretrained(model, tmp / "model", provenance=provenance, training_networks=False)
        loaded = model
    else:
        source, hashes, _ = resolve(model)
        entry = _entry_for(model)
        loaded = load_model_dir(source, expected_hashes=hashes)
    folder = tmp / "upload"
    folder.mkdir()
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        shutil.copyfile(source / name, folder / name)
    document = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    grid = None
    if "sample" in type(loaded).capabilities:
        save_grid(loaded.sample(GRID_COUNT, seed=0), folder / GRID_FILE)
        grid = GRID_FILE
    # the card names the plugin that provides the method here, not whatever text the source's config.json holds
    card_document = {**document, "plugin": type(loaded).plugin_name or document.get("plugin")}
    facts = gather_facts(card_document, type(loaded), entry, dataset_license=_dataset_license(document, entry))
    card = render_card(facts, repo_id=repo_id, revision=revision, grid_file=grid, grid_count=GRID_COUNT)
    (folder / CARD_FILE).write_text(card, encoding="utf-8")
    return folder


def _dataset_license(document: dict[str, Any], entry: Any) -> str:
    """The licence of the training data, from the dataset table (the weights inherit it)."""
    dataset = (entry.dataset if entry is not None else "") or str((document.get("provenance") or {}).get("dataset") or "")
    known = get_host().datasets.get(dataset.partition(":")[0].lower())
    return known.license if known is not None else ""


def _entry_for(ref: Any) -> Any:
    """The registry entry a push reference names (None for directories and hf:// refs)."""
    text = str(ref)
    if text.startswith("hf://") or Path(text).expanduser().is_dir():
        return None
    return find_model(text)


def _method_of(folder: Path) -> str:
    return str(json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8")).get("method", "model"))
