"""A model's provenance: the ``provenance`` block of config.json, which records how the model was made.

Reading it (:func:`read_provenance`, :func:`training_commands`, :func:`details`) serves the model
card and ``genzoo info``; :func:`portable_provenance` takes out the paths that mean something only
on the machine that trained the model, before the model leaves it (``genzoo export`` and ``genzoo
push``): a local dataset keeps its file or folder name and the fingerprint of its images, commands
keep their words with placeholders for paths, and no other text keeps an absolute path.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path, PurePath
from typing import Any, Callable

# Keys the model card states in sections of their own, not in its provenance table.
STATED_APART = ("commands", "command", "metrics", "evaluation", "license", "dataset", "data", "source")
LOCAL_DATASET_KINDS = ("npz", "folder")  # datasets named by a path: described by a name and a fingerprint
RUN_FILE = "fit.json"  # a training run's record (genzoo.training.record.FIT_FILE), beside its model files
# An absolute or home-relative path inside a word or a sentence: "/home/me/x", "~/x", "--out=/x", "folder:/x"
# (a URL's "//" and a fraction's "1/2" are not paths).
ABSOLUTE_PATH = re.compile(r"(?<![\w.~/-])(?:~/|/(?!/))[^\s'\",;)\]}]*")


def read_provenance(document: dict[str, Any]) -> dict[str, Any]:
    """The provenance block of a config.json document ({} when it has none)."""
    return dict(document.get("provenance") or {})


def training_commands(provenance: dict[str, Any]) -> list[str]:
    """The commands that made the model, in order (a single recorded ``command`` too)."""
    commands = provenance.get("commands") or ([provenance["command"]] if provenance.get("command") else [])
    return [str(command) for command in commands]


def details(provenance: dict[str, Any]) -> dict[str, Any]:
    """What the provenance records beyond :data:`STATED_APART`: versions, seed, steps, time, hardware, ..."""
    return {key: value for key, value in provenance.items() if key not in STATED_APART}


# -- portable provenance -----------------------------------------------------------------------------


def portable_dataset(spec: str) -> str:
    """``npz:/home/me/faces.npz`` -> ``npz:DIR/faces.npz``; a built-in dataset's name stays as it is."""
    kind, colon, path = spec.partition(":")
    return f"{kind}:DIR/{PurePath(path).name}" if colon and "/" in path else spec


def is_local_dataset(spec: str) -> bool:
    """Whether ``spec`` names files of this machine (``npz:PATH``, ``folder:PATH``) rather than a dataset by name."""
    return spec.partition(":")[0] in LOCAL_DATASET_KINDS


def portable_text(text: str) -> str:
    """``text`` with every absolute or home-relative path replaced by ``DIR/`` and its last part."""
    return ABSOLUTE_PATH.sub(_placeholder, text)


def _placeholder(match: re.Match) -> str:
    name = PurePath(match.group(0).rstrip("/")).name
    return f"DIR/{name}" if name not in ("", "~") else "DIR"


def run_data_fingerprint(directory: str | Path) -> dict[str, Any] | None:
    """The fingerprint of the training data a run recorded in its fit.json (images, shape, sha256), or None."""
    path = Path(directory) / RUN_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))["settings"]["data"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return data if isinstance(data, dict) and {"images", "shape", "sha256"} <= set(data) else None


def describe_data(data: Any) -> str:
    """A recorded fingerprint in words: ``16 images of 1x28x28, sha256 0123abcd...`` ("" for none)."""
    if not isinstance(data, dict) or not {"images", "shape", "sha256"} <= set(data):
        return ""
    return f"{data['images']} images of {'x'.join(map(str, data['shape']))}, sha256 {data['sha256']}"


# flag -> what its value becomes in a portable command
PATH_PLACEHOLDERS: dict[str, Callable[[str], str]] = {
    "--data-root": lambda path: "DIR",
    "--out": lambda path: f"runs/{PurePath(path).name}",
    "--init": lambda path: f"models/{PurePath(path).name}" if "/" in path else path,
    "--dataset": portable_dataset,
}


def portable_command(command: str) -> str:
    """``command`` with the paths that only mean something on the machine that ran it replaced by placeholders."""
    try:
        words = shlex.split(command)
    except ValueError:  # not a shell line genzoo wrote: leave it as it is
        return command
    out: list[str] = []
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if eq and flag in PATH_PLACEHOLDERS:
            word = f"{flag}={PATH_PLACEHOLDERS[flag](value)}"
        elif i > 0 and words[i - 1] in PATH_PLACEHOLDERS:
            word = PATH_PLACEHOLDERS[words[i - 1]](word)
        out.append(portable_text(word))
    return shlex.join(out)


def portable_provenance(provenance: dict[str, Any] | None, *, data: dict[str, Any] | None = None
                        ) -> dict[str, Any] | None:
    """The provenance as it may leave this machine: :func:`portable_command` applied to its commands, its
    dataset's path cut to the file or folder name, and no absolute path left in any other text.

    ``data`` (the run's :func:`run_data_fingerprint`) is recorded as ``data`` for a local dataset, whose
    name alone does not say which images it held.
    """
    if not provenance:
        return provenance
    result = {key: _portable_value(value) for key, value in provenance.items()}
    if isinstance(provenance.get("commands"), list):
        result["commands"] = [portable_command(str(c)) for c in provenance["commands"]]
    if isinstance(provenance.get("command"), str):
        result["command"] = portable_command(provenance["command"])
    if isinstance(provenance.get("dataset"), str):
        result["dataset"] = portable_dataset(provenance["dataset"])
    return with_data_fingerprint(result, data)


def is_portable(provenance: dict[str, Any] | None) -> bool:
    """Whether the provenance names no path of this machine: no absolute path in any text, and its dataset by
    name or by a path already cut to ``DIR/NAME``."""
    if not provenance:
        return True
    dataset = provenance.get("dataset")
    if isinstance(dataset, str) and portable_dataset(dataset) != dataset:
        return False
    return ABSOLUTE_PATH.search(json.dumps(provenance, default=str)) is None


def with_data_fingerprint(provenance: dict[str, Any], data: dict[str, Any] | None) -> dict[str, Any]:
    """``provenance`` with ``data`` (a run's :func:`run_data_fingerprint`) recorded when its dataset is local files
    and it records none yet."""
    dataset = provenance.get("dataset")
    if data and isinstance(dataset, str) and is_local_dataset(dataset) and "data" not in provenance:
        return {**provenance, "data": dict(data)}
    return provenance


def _portable_value(value: Any) -> Any:
    if isinstance(value, str):
        return portable_text(value)
    if isinstance(value, list):
        return [_portable_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _portable_value(v) for k, v in value.items()}
    return value
