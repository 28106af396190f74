"""The Hugging Face Hub as genzoo uses it: fetch a model's two files into the cache, commit a folder.

Everything goes through huggingface_hub, so its cache (``HF_HOME``, ``HF_HUB_CACHE``), its endpoint
(``HF_ENDPOINT``), its offline switch (``HF_HUB_OFFLINE``) and its tokens (``HF_TOKEN``, ``hf auth
login``) behave as its users expect. Only ``config.json`` and ``model.safetensors`` are ever
downloaded: pickle files (.bin, .pt, ...) are never fetched, let alone unpickled. When the endpoint
cannot be reached at all, genzoo says so at once (one quick connection attempt) instead of letting
each request retry.

Which model to fetch, and loading it, are :mod:`genzoo.loading`'s; what a push holds is
:mod:`genzoo.pushing`'s.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import re
import socket
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlparse

from ._version import __version__
from .destinations import os_reason
from .errors import GenzooError, WeightsError
from .registry import ModelEntry
from .weights import CONFIG_FILE, PICKLE_SUFFIXES, WEIGHTS_FILE, check_document, sha256_file

MAIN = "main"
_COMMIT = re.compile(r"[0-9a-f]{40}")
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
PROBE_TIMEOUT = 3.0  # seconds for the one connection attempt that tells whether the Hub is reachable
# what the system says when the cache cannot take a file (not ENOENT: huggingface_hub raises it for other reasons)
_CACHE_REFUSALS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS}
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


# -- names ------------------------------------------------------------------------------------------


def check_repo_id(repo_id: str) -> str:
    """``repo_id`` as ORG/NAME (a leading ``hf://`` is dropped); GenzooError if it is not one."""
    text = repo_id[len("hf://"):] if repo_id.startswith("hf://") else repo_id
    if "@" in text:
        raise GenzooError(f"repo id {repo_id!r} names a revision; give ORG/NAME and the branch with --revision")
    if not _REPO_ID.fullmatch(text) or "--" in text or ".." in text:
        raise GenzooError(f"expected a Hub repo id as ORG/NAME (letters, digits, '-', '_', '.'), got {repo_id!r}")
    return text


def hub_ref(repo_id: str, revision: str | None = None) -> str:
    """``hf://ORG/NAME[@REVISION]``, the way genzoo names a Hub model."""
    return f"hf://{repo_id}" + (f"@{revision}" if revision else "")


def parse_hub_ref(text: str) -> tuple[str, str | None]:
    """``hf://ORG/NAME[@REV]`` (or ``ORG/NAME[@REV]``) -> (repo id, revision or None)."""
    body = text[len("hf://"):] if text.startswith("hf://") else text
    repo_id, _, revision = body.partition("@")
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise GenzooError(f"expected a Hub repo as hf://ORG/NAME[@REVISION], got {text!r}")
    return check_repo_id(repo_id), revision or None


def is_commit(revision: str | None) -> bool:
    return bool(revision) and bool(_COMMIT.fullmatch(revision))


def _constants():
    from huggingface_hub import constants

    return constants


def offline() -> bool:
    return bool(_constants().HF_HUB_OFFLINE)


def endpoint() -> str:
    return str(_constants().ENDPOINT)


def reachable() -> bool:
    """Whether the Hub endpoint accepts a connection (asked once per endpoint and process).

    Behind a proxy the answer is assumed yes: the proxy, not genzoo, decides.
    """
    if offline():
        return False
    if any(os.environ.get(name) for name in _PROXY_VARIABLES):
        return True
    return _connects(endpoint())


@functools.lru_cache(maxsize=None)
def _connects(url: str) -> bool:
    parsed = urlparse(url)
    if not parsed.hostname:
        return True
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=PROBE_TIMEOUT):
            return True
    except OSError:
        return False


def _is_connection_error(exc: BaseException) -> bool:
    """True for "the Hub could not be reached" (network down, offline mode, timeouts, proxies)."""
    from huggingface_hub.utils import OfflineModeIsEnabled

    if isinstance(exc, (OfflineModeIsEnabled, ConnectionError, TimeoutError)):
        return True
    # the HTTP client's transport errors (httpx / httpx2 / requests, depending on the version)
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"TransportError", "ConnectError", "ConnectTimeout", "Timeout", "ProxyError"})


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


# -- downloading --------------------------------------------------------------------------------------


def download(repo_id: str, revision: str | None = None, *, entry: ModelEntry | None = None,
             files: tuple[str, ...] = (CONFIG_FILE, WEIGHTS_FILE), force: bool = False) -> Path:
    """Fetch config.json and model.safetensors of a Hub repo into huggingface_hub's cache.

    Returns the cache folder holding them (a snapshot of one commit). A commit id that is already
    cached is used without any network; a branch is asked of the Hub and falls back to the cache
    when the Hub cannot be reached. Every file read from the cache, offline too, is checked against
    the hash its download recorded (:func:`verify_recorded`). ``entry`` is the registry model this
    download serves: its sha256 are checked here (a mismatching file is removed from the cache) and
    error messages mention its bundled copy. ``files=(CONFIG_FILE,)`` fetches the config alone;
    ``force`` downloads the files again whatever the cache holds (``genzoo pull --force``).
    """
    repo_id = check_repo_id(repo_id)
    where = hub_ref(repo_id, revision)
    pull_arg = entry.name if entry is not None else repo_id + (f"@{revision}" if revision else "")
    if force:
        _check_can_download_again(where)
    elif is_commit(revision):
        cached = cached_dir(repo_id, revision, files)
        if cached is not None:
            verify_recorded(cached, files, where, pull_arg)
            _verify_pinned(cached, entry, where, files)
            return cached
    online = reachable()
    if online:
        info = _model_info(repo_id, revision, where)
        if info is not None and info.siblings is not None:
            _check_repo_files([s.rfilename for s in info.siblings], where)
    elif force:
        raise GenzooError(f"could not reach the Hub at {endpoint()} to download {where} again; check your connection "
                          f"or HF_ENDPOINT, then run the command again")
    config_path = _fetch(repo_id, CONFIG_FILE, revision, where, entry, local_only=not online, force=force)
    directory = config_path.parent  # snapshots/<commit id>
    verify_recorded(directory, (CONFIG_FILE,), where, pull_arg)
    _check_config(config_path, where)
    for name in files:
        if name != CONFIG_FILE:
            _fetch(repo_id, name, directory.name, where, entry, local_only=not online, force=force)
    verify_recorded(directory, files, where, pull_arg)
    _verify_pinned(directory, entry, where, files)
    return directory


def _check_can_download_again(where: str) -> None:
    if offline():
        raise GenzooError(f"downloading {where} again needs the network, and HF_HUB_OFFLINE is set: unset it, then "
                          f"run the command again")


def verify_recorded(directory: Path, files: tuple[str, ...], where: str, pull_arg: str) -> None:
    """Check each cached file against the hash its download recorded, or raise WeightsError naming `pull --force`.

    huggingface_hub stores a file as a blob named by its ETag and links the snapshot's name to it:
    the ETag of an LFS file is the sha256 of its bytes, of any other file git's blob sha1. A cache
    without links (where the system has none) records nothing to check against.
    """
    for name in files:
        path = directory / name
        if not path.is_symlink():
            continue
        recorded = Path(os.readlink(path)).name
        if len(recorded) == 64:
            got = sha256_file(path)
        elif len(recorded) == 40:
            got = git_blob_sha1(path)
        else:
            continue
        if got != recorded.lower():
            raise WeightsError(
                f"the cached {name} of {where} was changed after it was downloaded (it hashes to {got[:16]}..., the "
                f"download recorded {recorded[:16]}...); run `genzoo pull --force {pull_arg}` to download it again")


def git_blob_sha1(path: Path) -> str:
    """git's object id of a file's bytes (what the Hub gives as the ETag of a file not stored with LFS)."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def cached_dir(repo_id: str, revision: str | None = None,
               files: tuple[str, ...] = (CONFIG_FILE, WEIGHTS_FILE)) -> Path | None:
    """The cache folder of ``repo_id`` at ``revision`` if ``files`` are all cached, else None."""
    from huggingface_hub import try_to_load_from_cache

    folders = set()
    for name in files:
        found = try_to_load_from_cache(repo_id, name, revision=revision or MAIN)
        if not isinstance(found, str) or not os.path.isfile(found):
            return None
        folders.add(Path(found).parent)
    return folders.pop() if len(folders) == 1 else None


def _model_info(repo_id: str, revision: str | None, where: str) -> Any:
    """The Hub's model info at ``revision``; None when the Hub cannot be reached (the cache may serve)."""
    import huggingface_hub as hf
    from huggingface_hub.utils import HfHubHTTPError

    try:
        with _repo_errors(repo_id, revision, where):
            return hf.HfApi(library_name="genzoo", library_version=__version__).model_info(repo_id, revision=revision)
    except HfHubHTTPError:
        return None  # Hub trouble (5xx): let the download fall back to the cache, or explain
    except Exception as exc:
        if _is_connection_error(exc):
            return None
        raise


def _check_repo_files(names: list[str], where: str) -> None:
    """Refuse, before downloading anything, a repo that is not a safetensors genzoo model."""
    present = set(names)
    pickles = sorted(n for n in present if n.lower().endswith(PICKLE_SUFFIXES))
    if WEIGHTS_FILE not in present and pickles:
        raise WeightsError(
            f"{where} holds only pickle weights ({', '.join(pickles[:3])}), which genzoo never downloads or unpickles; "
            f"ask its author to publish {WEIGHTS_FILE} (for example with `genzoo push`)"
        )
    if CONFIG_FILE not in present:
        listing = ", ".join(sorted(present)[:6]) or "no files"
        raise WeightsError(
            f"{where} is not a genzoo model: it has no {CONFIG_FILE} (it holds {listing}); "
            f"pass a repo published with `genzoo push`"
        )
    if WEIGHTS_FILE not in present:
        raise WeightsError(f"{where} has {CONFIG_FILE} but no {WEIGHTS_FILE}; push the model again with `genzoo push`")


def _fetch(repo_id: str, filename: str, revision: str | None, where: str, entry: ModelEntry | None, *,
           local_only: bool, force: bool = False) -> Path:
    """One file through hf_hub_download (from the cache alone when offline), failures in one sentence.

    A write the system refuses (a full disk) leaves no partial download behind in the cache.
    """
    import huggingface_hub as hf
    from huggingface_hub.utils import EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError

    before = _partial_downloads(repo_id)
    try:
        with _repo_errors(repo_id, revision, where):
            path = hf.hf_hub_download(repo_id, filename, revision=revision, library_name="genzoo",
                                      library_version=__version__, local_files_only=local_only,
                                      force_download=force)
    except LocalEntryNotFoundError:
        raise GenzooError(_not_cached(repo_id, revision, where, entry)) from None
    except EntryNotFoundError:
        if filename == CONFIG_FILE:
            raise WeightsError(f"{where} is not a genzoo model: it has no {CONFIG_FILE}; pass a repo published with "
                               f"`genzoo push`") from None
        raise WeightsError(f"{where} has no {filename}; push the model again with `genzoo push`") from None
    except HfHubHTTPError as exc:
        raise GenzooError(f"the Hub at {endpoint()} refused to send {filename} of {where}: "
                          f"{_first_line(exc)}") from None
    except Exception as exc:
        if _is_connection_error(exc):
            raise GenzooError(_not_cached(repo_id, revision, where, entry)) from None
        if isinstance(exc, OSError) and exc.errno in _CACHE_REFUSALS:
            for partial in _partial_downloads(repo_id) - before:
                partial.unlink(missing_ok=True)
            raise GenzooError(f"cannot write {filename} of {where} into the Hugging Face cache "
                              f"({_constants().HF_HUB_CACHE}): {os_reason(exc)}; nothing of it was kept: make room "
                              f"or set HF_HOME to another disk, then run the command again") from None
        raise
    return Path(path)


def _partial_downloads(repo_id: str) -> set[Path]:
    """The unfinished downloads (``*.incomplete``) in the cache folder of ``repo_id``."""
    blobs = Path(_constants().HF_HUB_CACHE) / ("models--" + repo_id.replace("/", "--")) / "blobs"
    return set(blobs.glob("*.incomplete")) if blobs.is_dir() else set()


def _check_config(path: Path, where: str) -> None:
    """Refuse a downloaded config.json that is not genzoo's, or whose method no installed plugin provides."""
    import json

    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WeightsError(f"{where}: {CONFIG_FILE} is not valid JSON ({exc}); the repo is not a usable genzoo model") from None
    check_document(document, where)


def _verify_pinned(directory: Path, entry: ModelEntry | None, where: str, files: tuple[str, ...]) -> None:
    """Check the registry's sha256 of ``files``; a mismatching file is removed from the cache, then WeightsError."""
    if entry is None or not entry.files:
        return
    for name, want in entry.files.items():
        if name not in files:
            continue
        path = directory / name
        if not path.is_file():
            raise WeightsError(f"model {entry.name}: {where} has no {name}, which {entry.source} pins; "
                               f"the registry entry and the repo disagree: upgrade genzoo or report it")
        got = sha256_file(path)
        if got != want:
            _discard_cached(path)
            raise WeightsError(
                f"model {entry.name}: sha256 of {name} from {where} is {got[:16]}..., {entry.source} expects "
                f"{want[:16]}...; the file was removed from the cache: the repo does not hold the weights this "
                f"genzoo pins, so upgrade genzoo or report it"
            )


def _discard_cached(path: Path) -> None:
    """Remove a cached file: its snapshot link and the blob it points to."""
    target = path.resolve()
    with contextlib.suppress(OSError):
        path.unlink()
    if target != path and target.parent.name == "blobs":
        with contextlib.suppress(OSError):
            target.unlink()


@contextlib.contextmanager
def _repo_errors(repo_id: str, revision: str | None, where: str) -> Iterator[None]:
    """What the Hub says of a repo it will not serve, as one sentence: gated, not found, no such revision."""
    from huggingface_hub.utils import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        yield
    except GatedRepoError:  # a kind of RepositoryNotFoundError: asked first
        raise GenzooError(_gated(where)) from None
    except RepositoryNotFoundError:
        raise GenzooError(_not_found(repo_id)) from None
    except RevisionNotFoundError:
        raise GenzooError(_no_revision(repo_id, revision)) from None


def _not_found(repo_id: str) -> str:
    return (f"hf://{repo_id} was not found on {endpoint()}: check the repo id; if the repo is private "
            f"or gated, log in with `hf auth login` or set HF_TOKEN")


def _gated(where: str) -> str:
    return f"{where} is gated: accept its conditions on the Hub page, then log in (`hf auth login`)"


def _no_revision(repo_id: str, revision: str | None) -> str:
    return (f"hf://{repo_id} has no revision {revision!r} (no such branch, tag or commit); check it, or drop "
            f"@{revision} to use the main branch")


def _not_cached(repo_id: str, revision: str | None, where: str, entry: ModelEntry | None) -> str:
    cache = _constants().HF_HUB_CACHE
    pull_arg = entry.name if entry is not None else f"{repo_id}" + (f"@{revision}" if revision else "")
    if offline():
        text = (f"{where} is not in the local Hugging Face cache ({cache}) and HF_HUB_OFFLINE is set: unset it "
                f"and run `genzoo pull {pull_arg}` while online, then load it offline")
    else:
        proxies = [name for name in _PROXY_VARIABLES if os.environ.get(name)]
        proxy = f"the proxy that {proxies[0]} names" if proxies else "whether a proxy is needed (HTTPS_PROXY)"
        endpoint_said = ("as HF_ENDPOINT sets it" if os.environ.get("HF_ENDPOINT")
                         else "the default; HF_ENDPOINT names another")
        text = (f"could not reach the Hub at {endpoint()} ({endpoint_said}), and {where} is not in the local cache "
                f"({cache}): check the network, that address and {proxy}, then run the command again")
    if entry is not None and entry.bundled:
        text += (f"; model {entry.name!r} also has a bundled copy ({entry.bundled}), which is missing or damaged "
                 f"here: reinstall the plugin that provides {entry.method!r}")
    return text


# -- committing ---------------------------------------------------------------------------------------


def check_can_push() -> None:
    """Refuse at once when HF_HUB_OFFLINE is set: a push needs the network."""
    if offline():
        raise GenzooError("HF_HUB_OFFLINE is set, and pushing needs the network: unset HF_HUB_OFFLINE to push")


def commit_folder(folder: Path, repo_id: str, *, branch: str, private: bool, token: str | None, message: str) -> str:
    """Create the repo (and branch) if needed and commit every file of ``folder`` at once."""
    import huggingface_hub as hf

    check_can_push()
    api = hf.HfApi(token=token, library_name="genzoo", library_version=__version__)
    operations = [hf.CommitOperationAdd(path_in_repo=p.name, path_or_fileobj=str(p))
                  for p in sorted(folder.iterdir()) if p.is_file()]
    with _push_errors(repo_id):
        api.create_repo(repo_id, private=True if private else None, exist_ok=True)
        if branch != MAIN:
            api.create_branch(repo_id, branch=branch, exist_ok=True)
        info = api.create_commit(repo_id, operations=operations, commit_message=message, revision=branch)
    return str(info.oid)


@contextlib.contextmanager
def _push_errors(repo_id: str) -> Iterator[None]:
    """Turn huggingface_hub's push failures into one clear sentence."""
    from huggingface_hub.utils import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    url = endpoint()
    try:
        yield
    except RepositoryNotFoundError:
        raise GenzooError(
            f"cannot push to {repo_id}: {url} says it does not exist or you may not write to it; log in with "
            f"`hf auth login` (or pass --token) using a token that can write to {repo_id.split('/')[0]}"
        ) from None
    except RevisionNotFoundError as exc:
        raise GenzooError(f"cannot push to {repo_id}: {_first_line(exc)}") from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            raise GenzooError(
                f"the Hub refused the push to {repo_id} ({status}): log in with `hf auth login` or pass --token "
                f"with write access"
            ) from None
        raise GenzooError(f"the Hub refused the push to {repo_id}: {_first_line(exc)}") from None
    except ValueError as exc:
        if "metadata" in str(exc).lower():
            detail = " ".join(line.strip("- ") for line in str(exc).splitlines()[1:]) or _first_line(exc)
            raise GenzooError(
                f"the Hub rejected the model card's metadata ({detail}); please report this genzoo bug"
            ) from None
        raise
    except Exception as exc:
        if _is_connection_error(exc):
            raise GenzooError(f"could not reach the Hub at {url} to push {repo_id}: check your connection or "
                              f"HF_ENDPOINT") from None
        raise
