"""Model directories (config.json + model.safetensors): save, verify, resolve and load strictly.

Nothing here ever unpickles: weights are safetensors only, and a directory that holds only pickle
weights is refused. Loading checks everything (config fields, tensor names, shapes, dtypes,
sha256) before a single tensor is copied into the model, so a failed load leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ._version import __version__
from .configs import build_config, config_to_dict
from .errors import GenzooError, WeightsError

FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt", ".pickle")
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
_SAFETENSORS_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
                       "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
                       "U8": torch.uint8, "BOOL": torch.bool}


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_hashes(directory: str | os.PathLike) -> dict[str, str]:
    """sha256 of the two files that define a model."""
    directory = Path(directory)
    return {name: sha256_file(directory / name) for name in (CONFIG_FILE, WEIGHTS_FILE)}


def verify_hashes(directory: Path, expected: dict[str, str], what: str) -> None:
    """Raise WeightsError naming the first file whose sha256 differs from ``expected``."""
    for name, want in expected.items():
        path = directory / name
        if not path.is_file():
            raise WeightsError(f"{what}: {path} is missing")
        got = sha256_file(path)
        if got != want:
            raise WeightsError(
                f"{what}: sha256 of {path} is {got[:16]}..., the registry expects {want[:16]}...; "
                f"the file is corrupt or was changed: reinstall genzoo or delete it to download it again"
            )


# -- saving ------------------------------------------------------------------------------------


def save_pretrained(
    method: torch.nn.Module,
    directory: str | os.PathLike,
    *,
    storage_dtype: str | None = None,
    provenance: dict[str, Any] | None = None,
) -> Path:
    """Write ``method`` as a model directory (config.json + model.safetensors), atomically.

    ``storage_dtype`` ("float16" or "bfloat16") stores floating-point tensors at lower precision;
    the loader upcasts them to the dtype the method declares.
    """
    directory = Path(directory)
    if storage_dtype is not None and storage_dtype not in _DTYPES:
        raise GenzooError(f"storage_dtype must be one of {sorted(_DTYPES)}, got {storage_dtype!r}")
    state = {}
    for key, tensor in method.state_dict().items():
        tensor = tensor.detach().cpu()
        if storage_dtype is not None and tensor.is_floating_point():
            tensor = tensor.to(_DTYPES[storage_dtype])
        state[key] = tensor.contiguous()
    document: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "method": method.name,
        "plugin": method.plugin_name or None,
        "genzoo_version": __version__,
        "config": config_to_dict(method.config),
    }
    if storage_dtype is not None:
        document["storage_dtype"] = storage_dtype
    if provenance:
        document["provenance"] = provenance
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        save_file(state, str(staging / WEIGHTS_FILE), metadata={"format": "pt", "genzoo_method": method.name})
        with open(staging / CONFIG_FILE, "w", encoding="utf-8") as fh:
            json.dump(document, fh, indent=2, sort_keys=False)
            fh.write("\n")
        directory.mkdir(exist_ok=True)
        mode = 0o666 & ~_umask()
        for name in (WEIGHTS_FILE, CONFIG_FILE):  # weights first: config.json marks a complete model
            os.chmod(staging / name, mode)
            os.replace(staging / name, directory / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


# -- loading -----------------------------------------------------------------------------------


def read_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_FILE
    if not path.is_file():
        pickles = [p.name for p in directory.glob("*") if p.suffix in PICKLE_SUFFIXES]
        hint = f" (it holds {', '.join(pickles)}: pickle files are never loaded)" if pickles else ""
        raise WeightsError(f"{directory} is not a genzoo model: it has no {CONFIG_FILE}{hint}")
    try:
        with open(path, encoding="utf-8") as fh:
            document = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise WeightsError(f"{path} is not valid JSON ({exc}); the model directory is corrupt") from None
    if not isinstance(document, dict) or "method" not in document or "config" not in document:
        raise WeightsError(f"{path} is not a genzoo config: it needs 'method' and 'config' keys")
    version = document.get("format_version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise WeightsError(f"{path} has format_version {version}; this genzoo reads version {FORMAT_VERSION}: upgrade genzoo")
    return document


def _method_class(document: dict[str, Any], path: Path) -> type:
    from .plugins import get_host

    host = get_host()
    name = document["method"]
    canonical = host.method_aliases.get(name, name)
    if canonical not in host.methods:
        plugin = document.get("plugin") or f"genzoo-{name}"
        raise WeightsError(
            f"{path} needs method {name!r}, which no loaded plugin provides; install it "
            f"(pip install {plugin}) or check `genzoo plugins` for load errors"
        )
    return host.methods[canonical].cls


def method_config(directory: Path) -> tuple[type, Any, dict[str, Any]]:
    """The method class, its typed config and the whole config.json document of ``directory``."""
    document = read_config(directory)
    config_path = directory / CONFIG_FILE
    cls = _method_class(document, config_path)
    return cls, build_config(cls.Config, document["config"] or {}, where=str(config_path)), document


def load_model_dir(directory: str | os.PathLike, *, expected_hashes: dict[str, str] | None = None,
                   device: torch.device | str | None = None) -> torch.nn.Module:
    """Rebuild the method from config.json and load model.safetensors strictly."""
    directory = Path(directory)
    if not directory.is_dir():
        raise WeightsError(f"model directory {directory} does not exist")
    if expected_hashes:
        verify_hashes(directory, expected_hashes, f"model {directory.name}")
    cls, config, document = method_config(directory)
    config_path = directory / CONFIG_FILE
    weights_path = directory / WEIGHTS_FILE
    if not weights_path.is_file():
        pickles = [p.name for p in directory.glob("*") if p.suffix in PICKLE_SUFFIXES]
        hint = f"; it holds {', '.join(pickles)}, and pickle weights are refused (convert them to safetensors)" if pickles else ""
        raise WeightsError(f"{directory} has no {WEIGHTS_FILE}{hint}")
    model = cls(config)
    storage = document.get("storage_dtype")
    if storage is not None and storage not in _DTYPES:
        raise WeightsError(f"{config_path}: unknown storage_dtype {storage!r}; expected one of {sorted(_DTYPES)}")
    tensors = _read_checked(weights_path, model.state_dict(), storage)
    model.load_state_dict(tensors, strict=True)
    model.eval()
    if device is not None:
        model.to(device)
    return model


def _read_checked(path: Path, expected: dict[str, torch.Tensor], storage_dtype: str | None) -> dict[str, torch.Tensor]:
    """All tensors of ``path``, after checking names, shapes and dtypes against ``expected``."""
    try:
        handle = safe_open(str(path), framework="pt")
    except Exception as exc:  # safetensors raises its own error types for corrupt headers
        raise WeightsError(f"{path} is not a readable safetensors file ({exc}); the model file is corrupt") from None
    with handle as fh:
        keys = set(fh.keys())
        missing = sorted(set(expected) - keys)
        unexpected = sorted(keys - set(expected))
        if missing or unexpected:
            parts = []
            if missing:
                parts.append(f"missing tensors {_short(missing)}")
            if unexpected:
                parts.append(f"unexpected tensors {_short(unexpected)}")
            raise WeightsError(f"{path} does not fit its config: {'; '.join(parts)}")
        allowed_storage = _DTYPES.get(storage_dtype) if storage_dtype else None
        for key in sorted(keys):
            sl = fh.get_slice(key)
            shape = tuple(sl.get_shape())
            want = expected[key]
            if shape != tuple(want.shape):
                raise WeightsError(f"{path}: tensor {key!r} has shape {shape}, the config needs {tuple(want.shape)}")
            dtype = _SAFETENSORS_DTYPES.get(sl.get_dtype())
            if dtype != want.dtype and not (want.is_floating_point() and dtype == allowed_storage):
                raise WeightsError(f"{path}: tensor {key!r} has dtype {sl.get_dtype()}, the method needs {want.dtype}")
        try:
            tensors = {key: fh.get_tensor(key) for key in keys}
        except Exception as exc:
            raise WeightsError(f"{path} is truncated or corrupt ({exc})") from None
    return {key: t.to(expected[key].dtype) for key, t in tensors.items()}


def _short(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# -- resolution ---------------------------------------------------------------------------------


def resolve(ref: str | os.PathLike) -> tuple[Path, dict[str, str] | None, str]:
    """Where the files of ``ref`` are: (directory, sha256 to check or None, a description).

    ``ref`` is a model directory, ``hf://ORG/NAME[@REV]``, or a registry name, alias or method.
    A registry model uses its bundled copy when the copy's sha256 matches (no network), else
    asks the Hub if it names a repo.
    """
    text = str(ref)
    if text.startswith("hf://"):
        from .hub import download

        repo_id, revision = parse_hub_ref(text)
        return download(repo_id, revision), None, text
    path = Path(text).expanduser()
    if path.is_dir():
        return path, None, str(path)
    if os.sep in text or text.startswith("."):
        raise GenzooError(f"model directory {text} does not exist")
    from .registry import find_model

    entry = find_model(text)
    bundled = entry.bundled_dir()
    bundled_problem = None
    if bundled is not None:
        try:
            verify_hashes(bundled, entry.files, f"bundled model {entry.name}")
            return bundled, None, f"{entry.name} (bundled)"
        except WeightsError as exc:
            bundled_problem = str(exc)
    if entry.hub:
        from .hub import download

        directory = download(entry.hub["repo_id"], entry.hub.get("revision"), model_name=entry.name)
        return directory, entry.files or None, f"{entry.name} (hf://{entry.hub['repo_id']})"
    if bundled_problem:
        raise WeightsError(bundled_problem)
    if entry.bundled:
        raise WeightsError(
            f"model {entry.name!r} should be bundled at {entry.bundled}, but that package or folder is not installed; "
            f"reinstall the plugin that provides {entry.method!r}"
        )
    raise WeightsError(f"model {entry.name!r} has neither bundled weights nor a Hub repo in {entry.source}")


def parse_hub_ref(text: str) -> tuple[str, str | None]:
    body = text[len("hf://"):] if text.startswith("hf://") else text
    repo_id, _, revision = body.partition("@")
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise GenzooError(f"expected a Hub repo as hf://ORG/NAME[@REVISION], got {text!r}")
    return repo_id, revision or None


def load(ref: str | os.PathLike, *, device: torch.device | str | None = None) -> torch.nn.Module:
    """Load a pretrained method by model name, alias, method name, directory or hf://ORG/NAME[@REV]."""
    directory, hashes, _ = resolve(ref)
    return load_model_dir(directory, expected_hashes=hashes, device=device)
