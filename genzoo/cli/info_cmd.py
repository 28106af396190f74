import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import click

from ..provenance import training_commands
from ..catalogue import Catalogue, catalogue
from ..registry import ModelEntry
from ..reporting import info_metric_lines, terminal_width, wrap

MAX_LINES = 40  # of the text without --full: one screen


@click.command("info")
@click.argument("name")
@click.option("--full", is_flag=True,
              help="Also the reference rows, every command, the config, provenance, evaluation details and BibTeX.")
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
def command(name: str, full: bool, as_json: bool) -> None:
    """Show a model: summary, licence, status, metrics beside their reference rows, how to sample and reproduce it.

    NAME is a model name, an alias, a method name (its default model; a method with no pretrained
    model yet is described itself), a model directory or hf://ORG/NAME[@REVISION] (which fetches
    config.json alone). The text fits in 40 lines; --full shows everything.
    """
    known = catalogue()
    if name.startswith("hf://") or Path(name).is_dir():
        from ..loading import model_document

        document, where = model_document(name)
        info = {"name": name, "method": document["method"], "weights": where, "config": document["config"],
                "provenance": document.get("provenance", {})}
        lines = _directory_lines(info, full)
    elif _method_without_model(known, name):
        from ..plugins import get_host

        info = _method_info(get_host().method(name))  # its Config's defaults: the method's own code
        lines = _method_lines(info, full)
    else:
        entry = known.find_model(name) or _find_model(name)
        info = _entry_info(known, entry)
        lines = _model_lines(entry, info, full)
    if as_json:
        click.echo(json.dumps(info, indent=2, default=str))
        return
    for line in lines:
        click.echo(line)


def _method_without_model(known: Catalogue, name: str) -> bool:
    method = known.method(name)
    models = known.models
    if method is None or name in models or any(name in e.aliases for e in models.values()):
        return False
    return method.default_model not in models


def _find_model(name: str) -> ModelEntry:
    """The model the plugin host finds, or its error for a name the catalogue lacks (with a suggestion)."""
    from ..plugins import find_model

    return find_model(name)


def _fit_inputs(info: dict[str, Any]) -> str:
    """What a fit of the method needs: a dataset (unless it trains without data) and the Config fields left empty."""
    data = "--dataset NAME --data-root DIR " if info["needs_data"] else ""
    return data + "".join(f"--set {field}=VALUE " for field in info["required_fields"])


def _fit_placeholders(info: dict[str, Any]) -> str:
    said = ["NAME: a dataset (`genzoo datasets`), DIR: the folder that holds it"] if info["needs_data"] else []
    said += [f"{field}: no default, the fit needs one" for field in info["required_fields"]]
    return "; " + "; ".join(said) if said else ""


def _method_info(cls: type) -> dict[str, Any]:
    from ..plugins import get_host

    record = get_host().method_record(cls.name)
    defaults = {f.name: (f.default if f.default is not dataclasses.MISSING else f.default_factory())
                for f in dataclasses.fields(cls.Config)
                if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}
    return {"name": cls.name, "kind": "method", "summary": cls.summary, "plugin": record.plugin,
            "capabilities": sorted(cls.capabilities), "config_defaults": defaults, "paper": cls.paper,
            "needs_data": cls.needs_data, "required_fields": [k for k, v in defaults.items() if v in ("", ())],
            "pretrained_models": []}


def _entry_info(known: Catalogue, entry: ModelEntry) -> dict[str, Any]:
    info = {"kind": "model", **entry.as_dict()}
    bundled = entry.bundled_dir()
    info["weights"] = {"bundled": str(bundled) if bundled else None, "hub": entry.hub_ref()}
    if bundled and (bundled / "config.json").is_file():
        info["config"] = json.loads((bundled / "config.json").read_text(encoding="utf-8"))["config"]
    method = known.method(entry.method)
    if method is not None:
        info.update(method_summary=method.summary, capabilities=list(method.capabilities), paper=method.paper,
                    plugin=method.plugin)
    else:
        info["method_summary"] = f"method {entry.method!r} is not installed"
    return info


# -- text ------------------------------------------------------------------------------------------------


def _model_lines(entry: ModelEntry, info: dict[str, Any], full: bool) -> list[str]:
    """The sections of a model's text; without ``full``, the longest give way to a pointer until it fits."""
    head = wrap(f"{entry.name}: {entry.summary}" if entry.summary else entry.name)
    head += wrap(f"status: {entry.status}." + (f" {entry.limitations}" if entry.limitations else ""))
    head += wrap(f"licence: {entry.license or 'not stated'}")
    verbs = ", ".join(info.get("capabilities", []))
    method = f"method: {entry.method}" + (f" (plugin {info['plugin']}; verbs {verbs})" if verbs else f" ({info['method_summary']})")
    head += wrap(method + (f"; dataset: {entry.dataset}" if entry.dataset else ""))
    head += wrap(f"weights: {_where(entry, info)}")
    if entry.images_seen is not None:
        head += wrap(f"images seen in training: {entry.images_seen:,} (training steps x batch size, the runs its weights started from included)")
    if full and entry.aliases:
        head.append(f"aliases: {', '.join(entry.aliases)}")
    sections = {
        "head": head,
        "quality": info_metric_lines(entry.metrics, reference_rows=full),
        "use": _use_lines(entry.name, info.get("capabilities", [])) if entry.weights_kind() != "unpublished" else [],
        "reproduce": _reproduce_lines(entry.command),
    }
    if full:
        return [line for lines in sections.values() for line in lines] + _full_lines(entry, info)
    paper = _paper_title(info.get("paper", ""))
    sections["tail"] = (wrap(f"paper: {paper}") if paper else []) + wrap(
        f"`genzoo info {entry.name} --full` adds reference rows, config, provenance and BibTeX.")
    more = f"`genzoo info {entry.name} --full` lists them"
    stand_ins = {"reproduce": wrap(f"reproduce: {len(entry.command)} commands; {more}"),
                 "quality": wrap(f"quality: {len(entry.metrics)} measurements; {more}")}
    for part, stand_in in stand_ins.items():
        if sum(map(len, sections.values())) <= MAX_LINES:
            break
        sections[part] = stand_in
    return [line for lines in sections.values() for line in lines]


def _reproduce_lines(commands: list[str]) -> list[str]:
    if not commands:
        return []
    lines = wrap("reproduce (DIR: the folder given by --data-root; `genzoo datasets` lists what it needs):")
    for command in commands:
        lines += _command(command)
    return lines


def _where(entry: ModelEntry, info: dict[str, Any]) -> str:
    kind = entry.weights_kind()
    if kind == "bundled":
        return f"bundled, {info['weights']['bundled']} (sha256 checked on load)"
    if kind == "hub":
        return f"{entry.hub_ref()} (downloaded on first use, sha256 checked)"
    if kind == "missing":
        return f"should be bundled in {entry.bundled}, but that package is not installed"
    return "not published; the commands below make them"


def _use_lines(name: str, capabilities: list[str]) -> list[str]:
    lines = []
    if "sample" in capabilities:
        lines.append(f"  genzoo sample {name} -n 64 --seed 0 -o samples.png")
    if "refine" in capabilities:
        lines.append(f"  genzoo refine {name} --input images.npz -o refined.png")
    if not lines:
        lines.append(f"  python -c 'import genzoo; model = genzoo.load(\"{name}\")'")
    return ["use:", *lines]


def _full_lines(entry: ModelEntry, info: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if entry.files:
        lines.append("files (sha256):")
        lines += [line for file, digest in entry.files.items() for line in wrap(f"{file}: {digest}", indent="  ")]
    if entry.evaluation:
        lines += wrap(f"evaluation: {entry.evaluation}")
    for key in ("config", "provenance"):
        if info.get(key):
            lines.append(f"{key}:")
            for k, v in info[key].items():
                lines += wrap(f"{k}: {v}", indent="  ")
    if info.get("paper"):
        lines += ["paper:", *_bibtex(info["paper"])]
    return lines


def _method_lines(info: dict[str, Any], full: bool) -> list[str]:
    name = info["name"]
    lines = wrap(f"{name}: a method with no pretrained model yet. {info['summary']}")
    lines += wrap(f"plugin: {info['plugin']}; verbs: {', '.join(info['capabilities'])}")
    if "fit" in info["capabilities"]:
        lines += wrap(f"train one (`genzoo fit --help` lists the options{_fit_placeholders(info)}):")
        lines += _command(f"genzoo fit {name} {_fit_inputs(info)}--steps 1000 --out runs/{name}")
        lines.append(f"  genzoo sample runs/{name} -o samples.png" if "sample" in info["capabilities"]
                     else f"  genzoo info runs/{name}")
    defaults = ", ".join(f"{k}={v}" for k, v in info["config_defaults"].items())
    lines += wrap(f"config defaults (--set KEY=VALUE): {defaults}")
    if full and info["paper"]:
        lines += ["paper:", *_bibtex(info["paper"])]
    elif _paper_title(info["paper"]):
        lines += wrap(f"paper: {_paper_title(info['paper'])}")
    return lines


def _directory_lines(info: dict[str, Any], full: bool) -> list[str]:
    lines = [f"name: {info['name']}", f"method: {info['method']}", f"weights: {info['weights']}"]
    if not full:
        config = ", ".join(f"{k}={v}" for k, v in info["config"].items())
        commands = training_commands(info["provenance"])
        lines += wrap(f"config: {config}") + (["trained with:", *(line for c in commands for line in _command(c))]
                                              if commands else [])
        return lines + ["`--full` adds the provenance and lists the config one field a line."]
    for key in ("config", "provenance"):
        if info.get(key):
            lines.append(f"{key}:")
            for k, v in info[key].items():
                lines += wrap(f"{k}: {v}", indent="  ")
    return lines


def _bibtex(bibtex: str) -> list[str]:
    """A BibTeX entry as written, a line too long for the terminal broken between words (BibTeX reads it the same)."""
    lines = []
    for line in bibtex.strip().splitlines():
        indent = line[:len(line) - len(line.lstrip())]
        lines += [line] if len(line) <= terminal_width() else wrap(line.strip(), indent=indent)
    return lines


def _paper_title(bibtex: str) -> str:
    title = re.search(r"title\s*=\s*[{\"]+(.+?)[}\"]+\s*,", bibtex or "", re.S)
    year = re.search(r"year\s*=\s*[{\"]?(\d{4})", bibtex or "")
    if not title:
        return ""
    return " ".join(title.group(1).split()) + (f" ({year.group(1)})" if year else "")


def _command(command: str) -> list[str]:
    """A shell command wrapped with backslashes, an option never parted from its value."""
    words: list[str] = []
    for word in command.split():
        if words and words[-1].startswith("-") and " " not in words[-1] and not word.startswith("-"):
            words[-1] += " " + word
        else:
            words.append(word)
    lines, width = [""], terminal_width()
    for word in words:
        if lines[-1] and len(lines[-1]) + len(word) + 1 > width - 8:
            lines.append("")
        lines[-1] += (" " if lines[-1] else "") + word
    return [("  " if i == 0 else "      ") + line + (" \\" if i < len(lines) - 1 else "") for i, line in enumerate(lines)]
