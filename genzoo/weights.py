"""Model directories (config.json + model.safetensors): save, verify, resolve and load strictly.

Nothing here ever unpickles: weights are safetensors only, and a directory that holds only pickle
weights is refused. Loading checks everything (config fields, tensor names, shapes, dtypes,
sha256) before a single tensor is copied into the model, so a failed load leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from ._version import __version__
from .configs import build_config, config_to_dict, quoted
from .errors import GenzooError, WeightsError
from .plugins import get_host
from .tensorfile import read_header, write_tensors

FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt", ".pickle")
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


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


def verify_hashes(directory: Path, expected: dict[str, str], what: str,
                  remedy: str = "reinstall genzoo or delete it to download it again") -> None:
    """Raise WeightsError naming the first file whose sha256 differs from ``expected`` (``remedy``: what to do then),
    or whose expected value is no sha256 at all (a placeholder not yet replaced by the printed one)."""
    for name, want in expected.items():
        path = directory / name
        if not re.fullmatch(r"[0-9a-f]{64}", str(want).lower()):
            raise WeightsError(f"{what}: its entry gives {want!r} as the sha256 of {name}, which is no sha256: paste "
                               f"the one `genzoo export` printed for {name} into the entry, then reinstall its package")
        if not path.is_file():
            raise WeightsError(f"{what}: {path} is missing")
        got = sha256_file(path)
        if got != want.lower():
            raise WeightsError(
                f"{what}: sha256 of {path} is {got[:16]}..., the registry expects {want[:16]}...; "
                f"the file is corrupt or was changed: {remedy}"
            )


# -- saving ------------------------------------------------------------------------------------


def save_pretrained(
    method: torch.nn.Module,
    directory: str | os.PathLike,
    *,
    storage_dtype: str | None = None,
    provenance: dict[str, Any] | None = None,
    training_networks: bool = True,
) -> Path:
    """Write ``method`` as a model directory (config.json + model.safetensors), atomically.

    ``training_networks=False`` leaves out the submodules sampling does not need (those outside the
    method's ``sampling_modules``, e.g. a GAN's discriminator), as export and push do.

    ``storage_dtype`` ("float16" or "bfloat16") stores floating-point tensors at lower precision;
    the loader upcasts them to the dtype the method declares. The same model gives the same bytes
    (and sha256) every time.
    """
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise GenzooError(f"{directory} is a file; a model is written to a directory: choose another path")
    if storage_dtype is not None and storage_dtype not in _DTYPES:
        raise GenzooError(f"storage_dtype must be one of {sorted(_DTYPES)}, got {storage_dtype!r}")
    state = {}
    tensors = method.state_dict()
    left_out = set() if training_networks else type(method).training_only(tensors)
    for key, tensor in tensors.items():
        if key in left_out:
            continue
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
        write_tensors(state, staging / WEIGHTS_FILE, metadata={"format": "pt"})
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
    """config.json of a model directory, checked to be genzoo's (see :func:`check_document`)."""
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        pickles = [p.name for p in Path(directory).glob("*") if p.suffix in PICKLE_SUFFIXES]
        hint = f" (it holds {', '.join(pickles)}: pickle files are never loaded)" if pickles else ""
        raise WeightsError(f"{directory} is not a genzoo model: it has no {CONFIG_FILE}{hint}")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise WeightsError(f"{path} is not valid JSON ({exc}); the model directory is corrupt") from None
    return check_document(document, str(directory))


def check_document(document: Any, where: str) -> dict[str, Any]:
    """Refuse a config.json that is not genzoo's, of another format version, or whose method is not installed.

    A config.json is untrusted input (a Hub repo's, a downloaded folder's): each message is true to
    what the file holds, and the file's own text is quoted, never offered as a command.
    """
    if not isinstance(document, dict) or "method" not in document or not isinstance(document.get("config"), dict):
        raise WeightsError(f"{where} is not a genzoo model: its {CONFIG_FILE} has no 'method' and 'config' entries "
                           f"(it may belong to another library)")
    version = document.get("format_version", FORMAT_VERSION)
    if not isinstance(version, int) or isinstance(version, bool):
        raise WeightsError(f"{where}: its {CONFIG_FILE} gives format_version as {quoted(version)}, not a whole number "
                           f"such as {FORMAT_VERSION}; the file is damaged or was not written by genzoo: export or "
                           f"download the model again")
    if version > FORMAT_VERSION:
        raise WeightsError(f"{where} has format_version {version}, newer than the version {FORMAT_VERSION} this genzoo "
                           f"reads: upgrade genzoo")
    if version < FORMAT_VERSION:
        raise WeightsError(f"{where} has format_version {version}, which no genzoo writes (the first is "
                           f"{FORMAT_VERSION}); the file is damaged: export or download the model again")
    method = document["method"]
    if not isinstance(method, str) or not method:
        raise WeightsError(f"{where}: its {CONFIG_FILE} gives method as {quoted(method)}, not a method's name such as "
                           f"'ign'; the file is damaged or was not written by genzoo: export or download the model again")
    for key in ("plugin", "storage_dtype"):
        if document.get(key) is not None and not isinstance(document[key], str):
            raise WeightsError(f"{where}: its {CONFIG_FILE} gives {key} as {quoted(document[key])}, not a string; the "
                               f"file is damaged or was not written by genzoo: export or download the model again")
    method_class(document, where)
    return document


PLUGIN_NAME = re.compile(r"genzoo-[a-z0-9-]+")  # the only plugin names genzoo ever suggests installing


def install_advice(method: str, plugin: Any) -> str:
    """What to do about a method no installed plugin provides, quoting the file's text and never offering it as a
    command unless it is a plugin name by genzoo's naming rule (``genzoo-[a-z0-9-]+``)."""
    candidate = plugin if plugin is not None else f"genzoo-{method}"
    if isinstance(candidate, str) and PLUGIN_NAME.fullmatch(candidate):
        return f"install it (pip install {candidate}) or check `genzoo plugins` for plugins that failed to load"
    named = (f"the file names its plugin as {quoted(plugin, kind=False)}, which is not a" if plugin is not None
             else "the method's name makes no")
    return (f"{named} genzoo plugin name (genzoo-NAME), so genzoo offers no install command: find the plugin "
            f"that provides {quoted(method, kind=False)} from a source you trust, or check `genzoo plugins`")


def method_class(document: dict[str, Any], where: str) -> type:
    """The installed Method class a config.json names, or WeightsError naming the plugin to install."""
    host = get_host()
    name = document["method"]
    if not isinstance(name, str) or not host.has_method(name):
        raise WeightsError(f"{where} needs method {quoted(name, kind=False)}, which no installed plugin provides; "
                           f"{install_advice(str(name), document.get('plugin'))}")
    return host.method(name)


def method_config(directory: Path) -> tuple[type, Any, dict[str, Any]]:
    """The method class, its typed config and the whole config.json document of ``directory``.

    Every field is typed as read (a string where an integer belongs is refused, naming the field)
    and its range checked, and the model is refused if it cannot fit in this machine's memory,
    all before anything is built.
    """
    document = read_config(directory)
    config_path = Path(directory) / CONFIG_FILE
    cls = method_class(document, str(config_path))
    config = build_config(cls.Config, document["config"], where=f"{config_path}", strict=True)
    check_image_fits(config, str(config_path))
    return cls, config, document


def machine_memory() -> int | None:
    """Bytes of physical memory on this machine, or None where the system does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def _gib(size: int) -> str:
    return f"{size / 2**30:,.1f} GiB"


def check_image_fits(config: Any, where: str) -> None:
    """Refuse a config whose one image (float32, ``channels`` x ``image_size``^2) exceeds this machine's memory."""
    memory = machine_memory()
    channels, size = getattr(config, "channels", None), getattr(config, "image_size", None)
    if memory is None or not isinstance(channels, int) or not isinstance(size, int):
        return
    image = channels * size * size * 4
    if image > memory:
        raise WeightsError(f"{where} asks for {channels} x {size} x {size} images: one alone takes {_gib(image)} "
                           f"as float32, more than this machine's {_gib(memory)} of memory; the config is damaged "
                           f"or not meant for genzoo")


def check_model_fits(expected: dict[str, torch.Tensor], config: Any, where: str) -> None:
    """Refuse a model whose weights (from the meta build) and one image exceed this machine's memory."""
    memory = machine_memory()
    if memory is None:
        return
    weights = sum(t.numel() * t.element_size() for t in expected.values())
    channels, size = getattr(config, "channels", 0), getattr(config, "image_size", 0)
    image = channels * size * size * 4 if isinstance(channels, int) and isinstance(size, int) else 0
    if weights + image > memory:
        raise WeightsError(f"{where} describes a model of {_gib(weights)} of weights, more than this machine's "
                           f"{_gib(memory)} of memory can hold with even one image; the config is damaged or the "
                           f"model needs a larger machine")


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
    storage = document.get("storage_dtype")
    if storage is not None and storage not in _DTYPES:
        raise WeightsError(f"{config_path}: unknown storage_dtype {storage!r}; expected one of {sorted(_DTYPES)}")
    expected = expected_state(cls, config)
    check_model_fits(expected, config, str(config_path))
    absent = absent_training_networks(cls, weights_path, expected)
    check_tensors(weights_path, {k: v for k, v in expected.items() if k not in absent}, storage)  # before allocating
    with torch.random.fork_rng(devices=[]):  # the random init is overwritten: loading leaves the global RNG alone
        model = cls(config)
    tensors = read_checked(weights_path, {k: v for k, v in model.state_dict().items() if k not in absent}, storage,
                           parameters={name for name, _ in model.named_parameters()} - absent)
    missing = model.load_state_dict(tensors, strict=not absent).missing_keys
    if set(missing) != absent:
        raise WeightsError(f"{weights_path} lacks {sorted(set(missing) - absent)[:3]}; export it again")
    model.eval()
    if device is not None:
        model.to(device)
    return model


def absent_training_networks(cls: type, path: Path, expected: dict[str, torch.Tensor]) -> set[str]:
    """The keys of the networks sampling does not need, when the file leaves all of them out (an exported
    GAN without its discriminator); empty otherwise, so a file missing part of a network is refused."""
    only = cls.training_only(expected) if hasattr(cls, "training_only") else set()
    return only if only and not only & set(read_header(path)) else set()


def expected_state(cls: type, config: Any) -> dict[str, torch.Tensor]:
    """The state_dict of ``cls(config)`` built on the meta device: names, shapes and dtypes, no memory."""
    with torch.random.fork_rng(devices=[]):
        try:
            with torch.device("meta"):
                return cls(config).state_dict()
        except GenzooError:
            raise
        except Exception:  # a method whose construction cannot run on meta tensors: build it for real
            return cls(config).state_dict()


def check_tensors(path: Path, expected: dict[str, torch.Tensor], storage_dtype: str | None) -> None:
    """Compare the safetensors header of ``path`` with ``expected``; WeightsError naming what differs."""
    header = read_header(path)
    keys = set(header)
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
        dtype, shape = header[key]
        want = expected[key]
        if shape != tuple(want.shape):
            raise WeightsError(f"{path}: tensor {key!r} has shape {shape}, the config needs {tuple(want.shape)}")
        if dtype != want.dtype and not (want.is_floating_point() and dtype == allowed_storage):
            raise WeightsError(f"{path}: tensor {key!r} has dtype {dtype}, the method needs {want.dtype}")


def read_checked(path: Path, expected: dict[str, torch.Tensor], storage_dtype: str | None, *,
                 parameters: set[str] | None = None) -> dict[str, torch.Tensor]:
    """All tensors of ``path``, after checking names, shapes and dtypes against ``expected``, and their values
    finite (see :func:`check_finite`; ``parameters`` names the trained tensors, None: not known)."""
    check_tensors(path, expected, storage_dtype)
    try:
        with safe_open(str(path), framework="pt") as fh:
            tensors = {key: fh.get_tensor(key) for key in fh.keys()}
    except Exception as exc:  # safetensors raises its own error types for corrupt files
        raise WeightsError(f"{path} is truncated or corrupt ({exc}); the model file is corrupt") from None
    check_finite(tensors, str(path), parameters=parameters)
    return {key: t.to(expected[key].dtype) for key, t in tensors.items()}


def check_finite(tensors: dict[str, torch.Tensor], where: str, *, parameters: set[str] | None = None) -> None:
    """Refuse weights holding NaN or inf, naming the first such tensor: they would make silent garbage (black images).

    A parameter (a name in ``parameters``) must be finite everywhere. Another tensor, a buffer, may be NaN as a
    whole: that is how a method marks a statistic not computed yet (it is computed before use); NaN in part of
    it, or inf anywhere, is damage. With ``parameters`` None, every tensor is read as a buffer.
    """
    for key in sorted(tensors):
        tensor = tensors[key]
        if not tensor.is_floating_point() or bool(torch.isfinite(tensor).all()):
            continue
        unset = tensor.numel() > 0 and bool(torch.isnan(tensor).all())
        if not unset or (parameters is not None and key in parameters):
            bad = int((~torch.isfinite(tensor)).sum())
            kinds = " and ".join(kind for kind, present in (("NaN", bool(torch.isnan(tensor).any())),
                                                            ("inf", bool(torch.isinf(tensor).any()))) if present)
            raise WeightsError(f"{where}: tensor {key!r} holds {kinds} ({bad:,} of {tensor.numel():,} values); the "
                               f"weights are damaged: export them again from a good checkpoint, or download them again")


def _short(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
