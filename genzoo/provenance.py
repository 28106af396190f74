"""A model's provenance: the ``provenance`` block of config.json, which records how the model was made.

Reading it (:func:`read_provenance`, :func:`training_commands`, :func:`details`) serves the model
card and ``genzoo info``; :func:`portable_provenance` takes out the paths that mean something only
on the machine that trained the model, before the model leaves it (``genzoo export``).
"""

from __future__ import annotations

import shlex
from pathlib import PurePath
from typing import Any, Callable

# Keys the model card states in sections of their own, not in its provenance table.
STATED_APART = ("commands", "command", "metrics", "evaluation", "license", "dataset")


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
        out.append(word)
    return shlex.join(out)


def portable_provenance(provenance: dict[str, Any] | None) -> dict[str, Any] | None:
    """The provenance with :func:`portable_command` applied to its commands and its dataset's path shortened."""
    if not provenance:
        return provenance
    result = dict(provenance)
    if isinstance(result.get("commands"), list):
        result["commands"] = [portable_command(str(c)) for c in result["commands"]]
    if isinstance(result.get("dataset"), str):
        result["dataset"] = portable_dataset(result["dataset"])
    return result
