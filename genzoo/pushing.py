"""Publishing a model on the Hub: one commit of config.json, model.safetensors, a model card and a sample grid.

``stage_push`` writes those files to a folder and stops before the network (``genzoo push --dry-run``).
What is published keeps no path of this machine: the provenance in config.json and on the card is
made portable (:func:`genzoo.provenance.portable_provenance`), and a Config field holding an absolute
path is refused.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from .destinations import check_destination, first_missing, writing
from .errors import GenzooError
from .hub import MAIN, check_can_push, check_repo_id, commit_folder, hub_ref, is_commit
from .images import class_rows, save_grid, save_png
from .inputs import per_class_labels
from .loading import resolve
from .modelcard import gather_facts, project_url, render_card, use_commands
from .plugins import find_model, get_host
from .provenance import (ABSOLUTE_PATH, is_portable, portable_provenance, run_data_fingerprint,
                         with_data_fingerprint)
from .weights import CONFIG_FILE, WEIGHTS_FILE, check_finite, load_model_dir, save_pretrained

CARD_FILE = "README.md"
GRID_FILE = "samples.png"
DEFAULT_PREVIEW_IMAGES = 64  # a method's preview grid when its class declares no ``preview_images``


@dataclasses.dataclass(frozen=True)
class Staged:
    """The files of one push, staged in ``folder``: the verbs the method supports and the licence the card states."""

    folder: Path
    capabilities: tuple[str, ...]
    license: str


@dataclasses.dataclass(frozen=True)
class Pushed:
    """One push: the commit it made, the repo, the verbs the pushed method supports and the card's licence."""

    commit: str
    repo_id: str
    capabilities: tuple[str, ...]
    license: str

    def load_commands(self) -> list[str]:
        """How to use exactly this commit, following the verbs the method supports."""
        return use_commands(self.capabilities, hub_ref(self.repo_id, self.commit))


def preview_images(method_cls: type, requested: int | None = None) -> int:
    """How many images a preview of ``method_cls`` takes: ``requested``, else the class's ``preview_images``
    (default 64). 0 means no preview."""
    count = getattr(method_cls, "preview_images", DEFAULT_PREVIEW_IMAGES) if requested is None else requested
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        where = "--preview-images" if requested is not None else f"{method_cls.__name__}.preview_images"
        raise GenzooError(f"{where} must be a whole number of images, 0 or more, got {count!r}")
    return count


def push_to_hub(
    model: Any,
    repo_id: str,
    *,
    revision: str | None = None,
    private: bool = False,
    message: str | None = None,
    token: str | None = None,
    provenance: dict[str, Any] | None = None,
    source: str | None = None,
    license: str | None = None,
    preview: int | None = None,
) -> str:
    """Upload a model to the Hub in one commit and return the commit id.

    ``model`` is a Method instance, a model directory or a registry model name. The commit holds
    config.json, model.safetensors (a directory's own bytes), a generated model card and,
    when the method can sample, ``samples.png`` (``preview`` samples with seed 0; default the
    method's ``preview_images``, 64 unless it declares fewer; 0 for none). ``revision`` names a
    branch, created from main if missing. ``private`` applies when the repo is created. ``token``
    defaults to huggingface_hub's (HF_TOKEN or `hf auth login`). ``provenance`` is recorded in the
    config.json of a Method instance (directories keep theirs). ``source`` (the address of the
    model's code or project) and ``license`` (the weights' licence) are recorded in config.json's
    provenance and stated on the card. config.json keeps no path of this machine: a directory's
    provenance is made portable, which changes its bytes only where it held a path.
    """
    return push(model, repo_id, revision=revision, private=private, message=message, token=token,
                provenance=provenance, source=source, license=license, preview=preview).commit


def push(model: Any, repo_id: str, *, revision: str | None = None, private: bool = False,
         message: str | None = None, token: str | None = None, provenance: dict[str, Any] | None = None,
         source: str | None = None, license: str | None = None, preview: int | None = None) -> Pushed:
    """:func:`push_to_hub`, returning what was pushed (the commit and the method's verbs)."""
    repo_id = check_repo_id(repo_id)
    branch = _check_branch(revision)
    stated = _stated(source, license)
    check_can_push()  # before the sample grid is drawn
    with tempfile.TemporaryDirectory(prefix="genzoo-push-") as tmp:
        with writing(tmp):  # the staged files go to the system's temporary folder: a full disk there is one sentence
            staged = _stage(model, Path(tmp), repo_id=repo_id, revision=revision, provenance=provenance,
                            stated=stated, preview=preview)
        commit = commit_folder(staged.folder, repo_id, branch=branch, private=private, token=token,
                               message=message or f"Upload genzoo model ({_method_of(staged.folder)})")
    return Pushed(commit, repo_id, staged.capabilities, staged.license)


def stage_push(
    model: Any,
    folder: str | os.PathLike,
    *,
    repo_id: str = "ORG/NAME",
    revision: str | None = None,
    provenance: dict[str, Any] | None = None,
    source: str | None = None,
    license: str | None = None,
    preview: int | None = None,
) -> Path:
    """Write the files :func:`push_to_hub` would commit into ``folder`` and upload nothing.

    ``folder`` (new, or an empty folder) receives config.json, model.safetensors, the model card
    README.md written for ``repo_id`` and ``revision``, and samples.png when the method can sample:
    read the card before publishing, offline. Returns ``folder``.
    """
    return stage(model, folder, repo_id=repo_id, revision=revision, provenance=provenance, source=source,
                 license=license, preview=preview).folder


def stage(model: Any, folder: str | os.PathLike, *, repo_id: str = "ORG/NAME", revision: str | None = None,
          provenance: dict[str, Any] | None = None, source: str | None = None, license: str | None = None,
          preview: int | None = None) -> Staged:
    """:func:`stage_push`, returning what was staged (the folder, the method's verbs and the card's licence)."""
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise GenzooError(f"--dry-run {folder}: that exists and is not an empty folder; name a new folder for the "
                          f"files of the push")
    repo_id = check_repo_id(repo_id)
    _check_branch(revision)
    stated = _stated(source, license)
    check_destination(folder, folder=True)  # before the model is loaded and its grid drawn
    created = first_missing(folder.parent)
    try:
        with writing(folder):  # staged beside it on the same disk, then renamed: whole, or not at all
            folder.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
            try:
                staged = _stage(model, staging, repo_id=repo_id, revision=revision, provenance=provenance,
                                stated=stated, preview=preview)
                if folder.exists():
                    folder.rmdir()  # empty, as checked above
                os.replace(staged.folder, folder)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except GenzooError:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise
    return dataclasses.replace(staged, folder=folder)


def _check_branch(revision: str | None) -> str:
    branch = revision or MAIN
    if is_commit(branch):
        raise GenzooError(f"--revision {branch} looks like a commit id; pushes go to a branch: name one (e.g. dev)")
    return branch


def _stated(source: str | None, license: str | None) -> dict[str, str]:
    """What the publisher states at push time, for config.json's provenance and the card."""
    stated = {"source": (source or "").strip(), "license": (license or "").strip()}
    if stated["source"] and "://" not in stated["source"]:
        raise GenzooError(f"--source {source}: give the address of the model's code or project, e.g. "
                          f"https://github.com/ORG/PROJECT")
    return {key: value for key, value in stated.items() if value}


def _stage(model: Any, tmp: Path, *, repo_id: str, revision: str | None, provenance: dict[str, Any] | None,
           stated: dict[str, str], preview: int | None) -> Staged:
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
    method_cls = type(loaded)
    count = preview_images(method_cls, preview) if "sample" in method_cls.capabilities else 0
    folder = tmp / "upload"
    folder.mkdir()
    document = _published_config(source, folder, stated)
    shutil.copyfile(source / WEIGHTS_FILE, folder / WEIGHTS_FILE)
    grid = None
    if count:
        _save_preview(loaded, count, folder / GRID_FILE)
        grid = GRID_FILE
    # the card names the plugin that provides the method here, not whatever text the source's config.json holds
    plugin = method_cls.plugin_name or document.get("plugin")
    card_document = {**document, "plugin": plugin}
    facts = gather_facts(card_document, method_cls, entry, dataset_license=_dataset_license(document, entry),
                         plugin_url=project_url(plugin) if plugin else None, genzoo_url=project_url("genzoo"))
    card = render_card(facts, repo_id=repo_id, revision=revision, grid_file=grid, grid_count=count,
                       per_class=per_class_preview(loaded, count) if grid else None)
    (folder / CARD_FILE).write_text(card, encoding="utf-8")
    return Staged(folder, tuple(sorted(method_cls.capabilities)), facts.license)


def per_class_preview(model: Any, count: int) -> int | None:
    """Images of each class in a class-conditional model's preview of about ``count`` images (None: a plain grid)."""
    return max(1, count // model.num_classes) if model.num_classes else None


def _save_preview(model: Any, count: int, path: Path) -> None:
    """``count`` samples with seed 0 in a grid, or for a class-conditional model :func:`per_class_preview` of each
    class in labelled rows, as ``genzoo sample --per-class K`` draws them."""
    per_class = per_class_preview(model, count)
    if per_class is None:
        save_grid(model.sample(count, seed=0), path)
        return
    labels = per_class_labels(model, per_class)
    save_png(class_rows(model.sample(len(labels), seed=0, labels=labels), labels, model.class_names), path)


def _published_config(source: Path, folder: Path, stated: dict[str, str]) -> dict[str, Any]:
    """Write ``source``'s config.json into ``folder`` and return its document: the same bytes, unless its
    provenance names a path of this machine (then it is made portable, as ``genzoo export`` makes it), trained on
    local files whose fingerprint it lacks (then the run's is added) or the push states a source or licence."""
    raw = (source / CONFIG_FILE).read_bytes()
    document = json.loads(raw.decode("utf-8"))
    _refuse_paths_in_config(document)
    provenance = document.get("provenance") or {}
    portable = provenance if is_portable(provenance) else portable_provenance(provenance) or {}
    published = {**with_data_fingerprint(portable, run_data_fingerprint(source)), **stated}
    if published != provenance:
        document = {**document, "provenance": published}
        raw = (json.dumps(document, indent=2) + "\n").encode("utf-8")
    (folder / CONFIG_FILE).write_bytes(raw)
    return document


def _refuse_paths_in_config(document: dict[str, Any]) -> None:
    """A Config field holding an absolute path would publish this machine's folders, and mean nothing elsewhere."""
    for key, value in (document.get("config") or {}).items():
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        if ABSOLUTE_PATH.search(text):
            raise GenzooError(f"Config field {key}={text} names a path of this machine, which would be published: "
                              f"write the model with `genzoo export MODEL DEST --set {key}=NAME` (a model name, or a "
                              f"path relative to where it is used) and push DEST")


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
