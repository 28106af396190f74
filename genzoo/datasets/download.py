"""torchvision datasets read from local files, downloaded only when the files are absent and genzoo is online.

A failed download removes every folder it created, so a wrong ``--data-root`` leaves nothing behind,
and the error names the folder searched (in full) and why nothing was downloaded.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable, TypeVar

from ..errors import ArgumentError, GenzooError
from .imagedata import DATA_ROOT_ENV

OFFLINE_ENVS = ("GENZOO_OFFLINE", "HF_HUB_OFFLINE")

T = TypeVar("T")


def local_or_download(make: Callable[[bool], T], name: str, root: Path, files: str) -> T:
    """``make(download=False)``; if the files are missing, ``make(download=True)`` unless offline."""
    try:
        return make(False)
    except (RuntimeError, FileNotFoundError):
        pass
    offline = next((env for env in OFFLINE_ENVS if os.environ.get(env) == "1"), None)
    if offline is not None:
        raise missing(name, root, files, f"offline: {offline}=1")
    created = _first_missing(root.resolve())
    before = _entries(root)
    try:
        return make(True)
    except BaseException as exc:
        _remove_new(created, root, before)
        if isinstance(exc, Exception):
            raise missing(name, root, files, f"downloading failed: {download_failure(exc)}") from None
        raise


def missing(name: str, root: Path, files: str, reason: str) -> GenzooError:
    """The refusal naming the data root (``--data-root`` from the command line, ``data_root`` from Python)."""
    said = f"{name} is not under {root.resolve()} (looked for {files}) and was not downloaded ({reason})"
    return ArgumentError("data_root", said.replace("{", "{{").replace("}", "}}")
                         + f"; pass {{arg}} (a folder that holds it) or set {DATA_ROOT_ENV}")


def download_failure(exc: Exception) -> str:
    """One line saying why a download failed.

    torchvision's message opens with a header ending in a colon ("Error downloading x.gz:") and
    puts the cause on the lines after it; the header alone says nothing.
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    text = lines[0]
    if text.endswith(":") and len(lines) > 1:  # the header names the first file it tried, not the one needed
        text = lines[-1]
    return text if len(text) <= 200 else text[:197] + "..."


def _first_missing(path: Path) -> Path | None:
    """The highest ancestor of ``path`` (or itself) that does not exist yet; None if it exists."""
    missing_path = None
    while not path.exists():
        missing_path = path
        if path.parent == path:
            break
        path = path.parent
    return missing_path


def _entries(root: Path, depth: int = 2) -> set[Path]:
    """Files and folders up to ``depth`` levels below ``root`` (where torchvision downloads to)."""
    found: set[Path] = set()
    level = [root] if root.is_dir() else []
    for _ in range(depth):
        level = [child for folder in level if folder.is_dir() for child in folder.iterdir()]
        found.update(level)
    return found


def _remove_new(created: Path | None, root: Path, before: set[Path]) -> None:
    """Remove what a failed download made: the folders it created, or the new entries under ``root``."""
    if created is not None:
        shutil.rmtree(created, ignore_errors=True)
        return
    for path in sorted(_entries(root) - before, key=lambda p: len(p.parts)):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()
