"""Where a model comes from, and loading it: a directory, ``hf://ORG/NAME[@REV]``, or a zoo name.

A registry model with a bundled copy whose sha256 matches loads it with no network; the Hub is
asked for models that are not bundled (its cache first), or when the user names a repo.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from .errors import GenzooError, WeightsError
from .hub import CONFIG_FILE, download, hub_ref, parse_hub_ref
from .plugins import find_model
from .registry import ModelEntry
from .weights import load_model_dir, read_config, verify_hashes


def resolve(ref: str | os.PathLike) -> tuple[Path, dict[str, str] | None, str]:
    """Where the files of ``ref`` are: (directory, sha256 to check or None, a description).

    ``ref`` is a model directory, ``hf://ORG/NAME[@REV]``, or a registry name, alias or method.
    """
    text = str(ref)
    if text.startswith("hf://"):
        repo_id, revision = parse_hub_ref(text)
        return download(repo_id, revision), None, text
    path = Path(text).expanduser()
    if path.is_dir():
        return path, None, str(path)
    if os.sep in text or text.startswith("."):
        raise GenzooError(f"model directory {text} does not exist; pass a model name (genzoo list), a model "
                          f"directory or hf://ORG/NAME")
    entry = find_model(text)
    return resolve_entry(entry)


def resolve_entry(entry: ModelEntry) -> tuple[Path, dict[str, str] | None, str]:
    """The bundled copy of a registry model if its sha256 matches, else its Hub copy."""
    bundled = entry.bundled_dir()
    bundled_problem = None
    if bundled is not None:
        try:
            verify_hashes(bundled, entry.files, f"bundled model {entry.name}",
                          remedy="reinstall genzoo" if entry.source == "registry.yaml" else
                          f"reinstall the plugin that provides {entry.method!r} ({entry.source})")
            return bundled, None, f"{entry.name} (bundled)"
        except WeightsError as exc:
            bundled_problem = str(exc)
    if entry.hub:
        directory = download(entry.hub["repo_id"], entry.hub.get("revision"), entry=entry)
        return directory, entry.files or None, f"{entry.name} ({entry.hub_ref()})"
    if bundled_problem:
        raise WeightsError(bundled_problem)
    if entry.bundled:
        raise WeightsError(
            f"model {entry.name!r} should be bundled at {entry.bundled}, but that package or folder is not installed; "
            f"reinstall the plugin that provides {entry.method!r}"
        )
    raise WeightsError(f"model {entry.name!r} has neither bundled weights nor a Hub repo in {entry.source}")


def load(ref: str | os.PathLike, *, device: torch.device | str | None = None) -> torch.nn.Module:
    """Load a pretrained method by model name, alias, method name, directory or hf://ORG/NAME[@REV]."""
    directory, hashes, _ = resolve(ref)
    return load_model_dir(directory, expected_hashes=hashes, device=device)


def model_document(ref: str | os.PathLike) -> tuple[dict[str, Any], str]:
    """The config.json of ``ref`` without loading its weights (a Hub repo sends config.json alone)."""
    text = str(ref)
    if text.startswith("hf://"):
        repo_id, revision = parse_hub_ref(text)
        directory = download(repo_id, revision, files=(CONFIG_FILE,))
        return read_config(directory), str(directory)
    directory, _, _ = resolve(ref)
    return read_config(directory), str(directory.resolve())


def pull(ref: str, *, force: bool = False) -> tuple[Path, str]:
    """Download a Hub model into the cache ahead of time and check that it loads.

    ``ref`` is ``ORG/NAME[@REVISION]``, ``hf://ORG/NAME[@REVISION]`` or the name of a registry model
    whose weights live on the Hub; ``force`` downloads its files again whatever the cache holds (a
    cached file changed after its download is refused until then). Returns (cache folder, what was pulled).
    """
    if "/" in ref or ref.startswith("hf://"):
        repo_id, revision = parse_hub_ref(ref)
        directory = download(repo_id, revision, force=force)
        hashes, label = None, hub_ref(repo_id, revision)
    else:
        entry = find_model(ref)
        if not entry.hub:
            where = f"bundled with its plugin ({entry.bundled})" if entry.bundled else "not on the Hub"
            raise GenzooError(f"model {entry.name!r} has no Hub repo in {entry.source} (it is {where}); nothing to pull")
        directory = download(entry.hub["repo_id"], entry.hub.get("revision"), entry=entry, force=force)
        hashes = entry.files or None
        label = f"{entry.name} ({entry.hub_ref()})"
    load_model_dir(directory, expected_hashes=hashes)
    return directory, label
