"""The Hugging Face Hub: push a model in one commit, download one into the cache, pull ahead of time.

Everything goes through huggingface_hub, so its cache (``HF_HOME``, ``HF_HUB_CACHE``), its endpoint
(``HF_ENDPOINT``), its offline switch (``HF_HUB_OFFLINE``) and its tokens (``HF_TOKEN``, ``hf auth
login``) behave as its users expect. Only ``config.json`` and ``model.safetensors`` are ever
downloaded: pickle files (.bin, .pt, ...) are never fetched, let alone unpickled.

A push is one commit holding config.json, model.safetensors, a generated model card (README.md)
and a grid of 64 samples (seed 0) when the method can sample.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from ._version import __version__
from .errors import GenzooError, WeightsError
from .weights import CONFIG_FILE, PICKLE_SUFFIXES, WEIGHTS_FILE, sha256_file

CARD_FILE = "README.md"
GRID_FILE = "samples.png"
GRID_COUNT = 64
MAIN = "main"
_COMMIT = re.compile(r"[0-9a-f]{40}")
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


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


def _hf():
    """huggingface_hub, imported on first use (it reads HF_* variables when imported)."""
    try:
        import huggingface_hub
    except ImportError:  # pragma: no cover - it is a dependency
        raise GenzooError("the Hub needs huggingface_hub: pip install huggingface_hub") from None
    return huggingface_hub


def _constants():
    from huggingface_hub import constants

    return constants


def _offline() -> bool:
    return bool(_constants().HF_HUB_OFFLINE)


def _is_connection_error(exc: BaseException) -> bool:
    """True for "the Hub could not be reached" (network down, offline mode, timeouts, proxies)."""
    from huggingface_hub.utils import OfflineModeIsEnabled

    kinds: list[type] = [OfflineModeIsEnabled, ConnectionError, TimeoutError]
    for module, name in (("httpx2", "TransportError"), ("httpx", "TransportError"),
                         ("requests", "ConnectionError"), ("requests", "Timeout")):
        try:
            kinds.append(getattr(__import__(module), name))
        except (ImportError, AttributeError):
            pass
    return isinstance(exc, tuple(kinds))


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


# -- downloading --------------------------------------------------------------------------------------


def download(repo_id: str, revision: str | None = None, model_name: str | None = None) -> Path:
    """Fetch config.json and model.safetensors of a Hub repo into huggingface_hub's cache.

    Returns the cache folder holding both files (a snapshot of one commit). A commit id that is
    already cached is used without any network; a branch is asked of the Hub and falls back to
    the cache when the Hub cannot be reached. ``model_name`` is the registry model this download
    serves: its sha256 are checked here (a mismatching file is removed from the cache) and error
    messages mention its bundled copy.
    """
    repo_id = check_repo_id(repo_id)
    entry = _registry_entry(model_name)
    where = hub_ref(repo_id, revision)
    if revision and _COMMIT.fullmatch(revision):
        cached = cached_dir(repo_id, revision)
        if cached is not None:
            if entry is not None and entry.files:
                _verify_registry_hashes(cached, entry, where)
            return cached
    if not _offline():
        info = _model_info(repo_id, revision, where)
        if info is not None and info.siblings is not None:
            _check_repo_files([s.rfilename for s in info.siblings], where)
    config_path = _fetch(repo_id, CONFIG_FILE, revision, where, entry)
    directory = config_path.parent  # snapshots/<commit id>
    _check_config(config_path, where)
    _fetch(repo_id, WEIGHTS_FILE, directory.name, where, entry)
    if entry is not None and entry.files:
        _verify_registry_hashes(directory, entry, where)
    return directory


def cached_dir(repo_id: str, revision: str | None = None) -> Path | None:
    """The cache folder of ``repo_id`` at ``revision`` if both model files are cached, else None."""
    from huggingface_hub import try_to_load_from_cache

    paths = []
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        found = try_to_load_from_cache(repo_id, name, revision=revision or MAIN)
        if not isinstance(found, str) or not os.path.isfile(found):
            return None
        paths.append(Path(found))
    return paths[0].parent if paths[0].parent == paths[1].parent else None


def pull(ref: str) -> tuple[Path, str]:
    """Download a Hub model into the cache ahead of time and check that it loads.

    ``ref`` is ``ORG/NAME[@REVISION]``, ``hf://ORG/NAME[@REVISION]`` or the name of a registry model
    whose weights live on the Hub. Returns (cache folder, what was pulled).
    """
    from .weights import load_model_dir

    if "/" in ref or ref.startswith("hf://"):
        body = ref[len("hf://"):] if ref.startswith("hf://") else ref
        repo_id, _, revision = body.partition("@")
        directory = download(repo_id, revision or None)
        hashes, label = None, hub_ref(check_repo_id(repo_id), revision or None)
    else:
        from .registry import find_model

        entry = find_model(ref)
        if not entry.hub:
            where = f"bundled with its plugin ({entry.bundled})" if entry.bundled else "not on the Hub"
            raise GenzooError(
                f"model {entry.name!r} has no Hub repo in {entry.source} (it is {where}); nothing to pull"
            )
        directory = download(entry.hub["repo_id"], entry.hub.get("revision"), model_name=entry.name)
        hashes = entry.files or None
        label = f"{entry.name} ({hub_ref(entry.hub['repo_id'], entry.hub.get('revision'))})"
    load_model_dir(directory, expected_hashes=hashes)
    return directory, label


def _registry_entry(model_name: str | None) -> Any:
    if not model_name:
        return None
    from .registry import find_model

    return find_model(model_name)


def _model_info(repo_id: str, revision: str | None, where: str) -> Any:
    """The Hub's model info at ``revision``; None when the Hub cannot be reached (the cache may serve)."""
    hf = _hf()
    from huggingface_hub.utils import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        return hf.HfApi(library_name="genzoo", library_version=__version__).model_info(repo_id, revision=revision)
    except GatedRepoError:
        raise GenzooError(_gated(where)) from None
    except RepositoryNotFoundError:
        raise GenzooError(_not_found(repo_id)) from None
    except RevisionNotFoundError:
        raise GenzooError(_no_revision(repo_id, revision)) from None
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


def _fetch(repo_id: str, filename: str, revision: str | None, where: str, entry: Any) -> Path:
    """One file through hf_hub_download, with its failures turned into one clear sentence."""
    hf = _hf()
    from huggingface_hub.utils import (EntryNotFoundError, GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError,
                                       RepositoryNotFoundError, RevisionNotFoundError)

    try:
        path = hf.hf_hub_download(repo_id, filename, revision=revision, library_name="genzoo",
                                  library_version=__version__)
    except LocalEntryNotFoundError:
        raise GenzooError(_not_cached(repo_id, revision, where, entry)) from None
    except GatedRepoError:
        raise GenzooError(_gated(where)) from None
    except RepositoryNotFoundError:
        raise GenzooError(_not_found(repo_id)) from None
    except RevisionNotFoundError:
        raise GenzooError(_no_revision(repo_id, revision)) from None
    except EntryNotFoundError:
        if filename == CONFIG_FILE:
            raise WeightsError(f"{where} is not a genzoo model: it has no {CONFIG_FILE}; pass a repo published with "
                               f"`genzoo push`") from None
        raise WeightsError(f"{where} has no {filename}; push the model again with `genzoo push`") from None
    except HfHubHTTPError as exc:
        raise GenzooError(f"the Hub at {_constants().ENDPOINT} refused to send {filename} of {where}: "
                          f"{_first_line(exc)}") from None
    except Exception as exc:
        if _is_connection_error(exc):
            raise GenzooError(_not_cached(repo_id, revision, where, entry)) from None
        raise
    return Path(path)


def _check_config(path: Path, where: str) -> None:
    """Refuse a config.json that is not genzoo's, or whose method no installed plugin provides."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WeightsError(
            f"{where}: {CONFIG_FILE} is not valid JSON ({exc}); the repo is not a usable genzoo model"
        ) from None
    if not isinstance(document, dict) or "method" not in document or "config" not in document:
        raise WeightsError(
            f"{where} is not a genzoo model: its {CONFIG_FILE} has no 'method' and 'config' entries "
            f"(it may belong to another library)"
        )
    from .plugins import get_host

    host = get_host()
    name = str(document["method"])
    if host.method_aliases.get(name, name) not in host.methods:
        plugin = document.get("plugin") or f"genzoo-{name}"
        raise WeightsError(
            f"{where} needs method {name!r}, which no installed plugin provides; install it (pip install {plugin}) "
            f"or check `genzoo plugins` for plugins that failed to load"
        )


def _verify_registry_hashes(directory: Path, entry: Any, where: str) -> None:
    """Check the registry's sha256; a mismatching file is removed from the cache, then WeightsError."""
    for name, want in entry.files.items():
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


def _not_found(repo_id: str) -> str:
    return (f"hf://{repo_id} was not found on {_constants().ENDPOINT}: check the repo id; if the repo is private "
            f"or gated, log in with `hf auth login` or set HF_TOKEN")


def _gated(where: str) -> str:
    return f"{where} is gated: accept its conditions on the Hub page, then log in (`hf auth login`)"


def _no_revision(repo_id: str, revision: str | None) -> str:
    return (f"hf://{repo_id} has no revision {revision!r} (no such branch, tag or commit); check it, or drop "
            f"@{revision} to use the main branch")


def _not_cached(repo_id: str, revision: str | None, where: str, entry: Any) -> str:
    cache = _constants().HF_HUB_CACHE
    pull_arg = entry.name if entry is not None else f"{repo_id}" + (f"@{revision}" if revision else "")
    if _offline():
        text = (f"{where} is not in the local Hugging Face cache ({cache}) and HF_HUB_OFFLINE is set: run "
                f"`genzoo pull {pull_arg}` while online, then load it offline")
    else:
        text = (f"could not reach the Hub at {_constants().ENDPOINT}, and {where} is not in the local cache "
                f"({cache}): check your connection or HF_ENDPOINT, or run `genzoo pull {pull_arg}` when online")
    if entry is not None and entry.bundled:
        text += (f"; model {entry.name!r} also has a bundled copy ({entry.bundled}), which is missing or damaged "
                 f"here: reinstall the plugin that provides {entry.method!r}")
    return text


# -- pushing ---------------------------------------------------------------------------------------------


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
    branch = revision or MAIN
    if _COMMIT.fullmatch(branch):
        raise GenzooError(f"--revision {branch} looks like a commit id; pushes go to a branch: name one (e.g. dev)")
    if _offline():
        raise GenzooError("HF_HUB_OFFLINE is set, and pushing needs the network: unset HF_HUB_OFFLINE to push")
    with tempfile.TemporaryDirectory(prefix="genzoo-push-") as tmp:
        folder = _stage(model, Path(tmp), repo_id=repo_id, revision=revision, provenance=provenance)
        return _commit_folder(folder, repo_id, branch=branch, private=private, token=token,
                              message=message or f"Upload genzoo model ({_method_of(folder)})")


def _stage(model: Any, tmp: Path, *, repo_id: str, revision: str | None, provenance: dict[str, Any] | None) -> Path:
    """Write the files of the commit into ``tmp/upload``: weights, config, card and sample grid."""
    import torch

    from .modelcard import gather_facts, render_card
    from .weights import load_model_dir, resolve, save_pretrained

    entry = None
    if isinstance(model, torch.nn.Module):
        source = save_pretrained(model, tmp / "model", provenance=provenance)
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
        from .images import save_grid

        save_grid(loaded.sample(GRID_COUNT, seed=0), folder / GRID_FILE)
        grid = GRID_FILE
    facts = gather_facts(document, type(loaded), entry)
    card = render_card(facts, repo_id=repo_id, revision=revision, grid_file=grid, grid_count=GRID_COUNT)
    (folder / CARD_FILE).write_text(card, encoding="utf-8")
    return folder


def _entry_for(ref: Any) -> Any:
    """The registry entry a push reference names (None for directories and hf:// refs)."""
    text = str(ref)
    if text.startswith("hf://") or Path(text).expanduser().is_dir():
        return None
    from .registry import find_model

    return find_model(text)


def _method_of(folder: Path) -> str:
    return str(json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8")).get("method", "model"))


def _commit_folder(folder: Path, repo_id: str, *, branch: str, private: bool, token: str | None, message: str) -> str:
    """Create the repo (and branch) if needed and commit every file of ``folder`` at once."""
    hf = _hf()
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

    endpoint = _constants().ENDPOINT
    try:
        yield
    except RepositoryNotFoundError:
        raise GenzooError(
            f"cannot push to {repo_id}: {endpoint} says it does not exist or you may not write to it; log in with "
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
            raise GenzooError(f"could not reach the Hub at {endpoint} to push {repo_id}: check your connection or "
                              f"HF_ENDPOINT") from None
        raise
