"""Where output goes: proved writable before any work, and a refusal of the file system in one sentence.

``genzoo sample -o``, ``genzoo export DEST``, ``genzoo push --dry-run DIR`` and ``genzoo eval --json``
call :func:`check_destination` before they load or make anything, and write inside :func:`writing`,
which turns the operating system's refusal (permissions, a read-only or full disk) into one sentence
naming the path. Their writers go through temporary names, so a refused write leaves nothing
half-written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from .errors import GenzooError

REFUSALS = {errno.EACCES: "permission denied", errno.EPERM: "permission denied", errno.EROFS: "read-only file system",
            errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
            errno.ENOENT: "a folder on the way does not exist", errno.ENOTDIR: "a file stands where a folder should"}


def os_reason(exc: OSError, folder: Path | None = None) -> str:
    """What the operating system refused, in words; ``folder`` is where a file was to be created, if known."""
    if exc.errno == errno.ENOENT and folder is not None and folder.is_dir():
        return "its file system does not let files be created there"  # /proc, /sys: the folder exists, yet ENOENT
    return REFUSALS.get(exc.errno, exc.strerror or type(exc).__name__)


def prove_writable(folder: Path) -> None:
    """Create and remove a file in ``folder``, or raise the operating system's refusal.

    This works for every user (root ignores permission bits, not a read-only mount), and the file's
    name is unique, so two writers may probe one folder at the same moment.
    """
    handle, probe = tempfile.mkstemp(prefix=".genzoo-write-test-", dir=folder)
    os.close(handle)
    os.unlink(probe)


def check_destination(path: str | os.PathLike, *, folder: bool = False) -> Path:
    """Refuse ``path`` (a file, or a ``folder``) unless it can be written, before any work; return it.

    Missing folders on the way are fine (the writer creates them) when the nearest existing one is
    writable (:func:`prove_writable`).
    """
    path = Path(path).expanduser()
    base = path if folder and path.is_dir() else path.parent
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise GenzooError(f"cannot write {path}: {base} is a file, not a folder; choose another path")
    try:
        prove_writable(base)
    except OSError as exc:
        raise GenzooError(f"cannot write {path}: {base} is not writable ({os_reason(exc, base)}); choose a folder you can "
                          f"write to, or fix its permissions") from None
    return path


def first_missing(path: Path) -> Path | None:
    """The highest folder on the way to ``path`` (or ``path`` itself) that does not exist yet; None if it exists.

    What a writer created, to remove when its write is refused.
    """
    missing = None
    while not path.exists() and path != path.parent:
        missing, path = path, path.parent
    return missing


@contextlib.contextmanager
def writing(path: str | os.PathLike) -> Iterator[None]:
    """Turn the operating system's refusal while writing ``path`` into one sentence naming it."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in REFUSALS:
            raise
        raise GenzooError(f"cannot write {path} ({os_reason(exc)}); nothing was written there: make room or fix the "
                          f"permissions, then run the command again") from None


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all (a temporary name, then a rename), refusals in one sentence."""
    path = Path(path)
    created = first_missing(path.parent)
    with writing(path):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as fh:
                    fh.write(text)
                mask = os.umask(0)
                os.umask(mask)
                os.chmod(temporary, 0o666 & ~mask)
                os.replace(temporary, path)
            finally:
                if os.path.exists(temporary):
                    os.unlink(temporary)
        except OSError:
            if created is not None:
                shutil.rmtree(created, ignore_errors=True)
            raise
    return path
