"""Model cards: the README.md that `genzoo push` writes next to the weights on the Hub.

The card is YAML metadata (library, tags, dataset, licence, metrics and how they were measured)
followed by Markdown: status and limitations, usage, the sample grid, its metrics beside the
reference rows of their feature network, how the model was trained, licence and the method's
paper. Facts come from the registry entry when a zoo model is pushed, else from the
``provenance`` block of config.json (:mod:`genzoo.provenance`). The metrics are written by
:mod:`genzoo.reporting`.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .provenance import LOCAL_DATASET_KINDS, describe_data, details, read_provenance, training_commands
from .registry import Metric, parse_metrics
from .reporting import card_evaluation

# Licence ids the Hub knows (a subset: what genzoo models are likely to carry).
HUB_LICENSES = {
    "apache-2.0", "mit", "bsd-2-clause", "bsd-3-clause", "cc0-1.0", "cc-by-2.0", "cc-by-3.0", "cc-by-4.0",
    "cc-by-sa-3.0", "cc-by-sa-4.0", "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nc-sa-3.0",
    "cc-by-nc-sa-4.0", "cc-by-nc-nd-4.0", "gpl-3.0", "lgpl-3.0", "mpl-2.0", "openrail", "unlicense",
}
# Project-URL labels that name where a distribution's code lives, most telling first (any other label comes after).
URL_LABELS = ("source", "source code", "repository", "code", "homepage", "home")


@dataclass
class CardFacts:
    """Everything the card states about a model, gathered from config.json and the registry."""

    method: str
    plugin: str
    summary: str = ""
    model_name: str | None = None  # the zoo name, when a registry model is pushed
    dataset: str = ""
    license: str = ""
    status: str = ""  # a zoo model's: stable or experimental
    limitations: str = ""
    metrics: list[Metric] = field(default_factory=list)
    evaluation: str = ""
    commands: list[str] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    paper: str = ""
    capabilities: tuple[str, ...] = ()
    num_classes: int = 0
    license_from_data: bool = False
    data: str = ""  # the fingerprint of a local dataset's images, in words
    source: str = ""  # the address of the model's code or project, as the publisher gave it
    plugin_url: str = ""  # the project address of the distribution that provides the method
    genzoo_url: str = ""  # genzoo's own project address, when its installed metadata names one


def gather_facts(document: dict[str, Any], method_cls: type | None = None, entry: Any = None, *,
                 dataset_license: str = "", plugin_url: str | None = None, genzoo_url: str | None = None) -> CardFacts:
    """Facts for the card from a config.json ``document``, the Method class and a registry entry (or None).

    ``dataset_license`` (the training data's) is the weights' licence when nothing else states one;
    ``plugin_url`` and ``genzoo_url`` are the project addresses of the method's distribution and of
    genzoo (:func:`project_url`).
    """
    provenance = read_provenance(document)
    if entry is not None:
        provenance.update(entry.provenance or {})
    commands = list(entry.command) if entry is not None and entry.command else training_commands(provenance)
    config = dict(document.get("config") or {})
    dataset = (entry.dataset if entry is not None else "") or str(provenance.get("dataset") or "")
    license_text = (entry.license if entry is not None else "") or str(provenance.get("license") or "")
    from_data = not license_text and bool(dataset_license)
    license_text = license_text or dataset_license
    return CardFacts(
        method=document["method"],
        plugin=document.get("plugin") or "",
        summary=(entry.summary if entry is not None else "") or getattr(method_cls, "summary", ""),
        model_name=entry.name if entry is not None else None,
        dataset=dataset,
        license=license_text,
        status=entry.status if entry is not None else "",
        limitations=entry.limitations if entry is not None else "",
        metrics=(entry.metrics if entry is not None else None) or parse_metrics(provenance.get("metrics"), "provenance"),
        evaluation=(entry.evaluation if entry is not None else "") or str(provenance.get("evaluation") or ""),
        commands=[str(c) for c in commands],
        provenance=provenance,
        config=config,
        paper=(getattr(method_cls, "paper", "") or "").strip(),
        capabilities=tuple(sorted(getattr(method_cls, "capabilities", ()) or ())),
        num_classes=int(config.get("num_classes") or 0),
        license_from_data=from_data,
        data=describe_data(provenance.get("data")),
        source=str(provenance.get("source") or ""),
        plugin_url=plugin_url or "",
        genzoo_url=genzoo_url or "",
    )


def project_url(distribution: str) -> str | None:
    """The address of an installed distribution's code or project, from its metadata (``[project.urls]`` in its
    pyproject.toml, or the older Home-page field); None when it names none or is not installed."""
    try:
        metadata = importlib.metadata.metadata(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    labelled = {}
    for value in metadata.get_all("Project-URL") or []:
        label, _, url = value.partition(",")
        if url.strip():
            labelled.setdefault(label.strip().lower(), url.strip())
    for label in URL_LABELS:
        if label in labelled:
            return labelled[label]
    home = (metadata.get("Home-page") or "").strip()
    return next(iter(labelled.values()), None) or (home if home and home.upper() != "UNKNOWN" else None)


def use_commands(capabilities: tuple[str, ...] | list[str], ref: str) -> list[str]:
    """The commands that use the model ``ref`` through the verbs it supports (one line each)."""
    lines = []
    if "sample" in capabilities:
        lines.append(f"genzoo sample {ref} -n 64 --seed 0 -o samples.png")
    if "refine" in capabilities:
        lines.append(f"genzoo refine {ref} --input images/ -o refined.png")
    if not lines:  # a model used from Python (a feature network, a classifier)
        lines.append(f"python -c 'import genzoo; print(genzoo.load(\"{ref}\"))'")
    return lines


def license_metadata(text: str) -> dict[str, str]:
    """The Hub's licence keys for a licence given as an id ("cc-by-sa-3.0") or in words.

    genzoo's registry writes a licence as its name followed by what it covers, e.g. "CC BY-SA 3.0
    (weights trained on MNIST, LeCun and Cortes)": the longest Hub identifier the text starts with
    wins. Anything else (CelebA's non-commercial terms, CIFAR-10's) is ``other`` with a
    ``license_name``.
    """
    if not text:
        return {}
    slug = re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")
    matches = [known for known in HUB_LICENSES if slug == known or slug.startswith(known + "-")]
    if matches:
        return {"license": max(matches, key=len)}
    return {"license": "other", "license_name": slug[:64].rstrip("-") or "other"}


def hub_dataset_id(dataset: str) -> str | None:
    """A dataset name the Hub can link ("mnist" from "mnist:train"); None for local files and folders."""
    kind = dataset.partition(":")[0]
    if not kind or kind in LOCAL_DATASET_KINDS or not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", kind):
        return None
    return kind


def card_metadata(facts: CardFacts) -> dict[str, Any]:
    """The YAML metadata block of the card."""
    meta: dict[str, Any] = {"library_name": "genzoo"}
    tags = ["genzoo", facts.method]
    if facts.plugin and facts.plugin not in ("genzoo", f"genzoo-{facts.method}") and facts.plugin not in tags:
        tags.append(facts.plugin)
    meta["tags"] = tags
    if "sample" in facts.capabilities and not facts.num_classes:
        meta["pipeline_tag"] = "unconditional-image-generation"
    meta.update(license_metadata(facts.license))
    dataset_id = hub_dataset_id(facts.dataset)
    if dataset_id:
        meta["datasets"] = [dataset_id]
    if facts.metrics:
        meta["metrics"] = sorted({m.metric for m in facts.metrics})
    details: dict[str, Any] = {"method": facts.method}
    if facts.plugin:
        details["plugin"] = facts.plugin
    if facts.model_name:
        details["model"] = facts.model_name
    if facts.dataset:
        details["dataset"] = facts.dataset
    if facts.data:
        details["data"] = facts.data
    if facts.source:
        details["source"] = facts.source
    if facts.status:
        details["status"] = facts.status
    if facts.metrics:
        details["metrics"] = {m.key: _metric_metadata(m) for m in facts.metrics}
        details["evaluation"] = facts.evaluation or "not stated"
    meta["genzoo"] = details
    return meta


def render_card(facts: CardFacts, *, repo_id: str, revision: str | None = None, grid_file: str | None = None,
                grid_count: int = 64, per_class: int | None = None) -> str:
    """The whole README.md: YAML front matter, then the Markdown body. ``per_class``: the grid holds that many
    images of each class in labelled rows (a class-conditional model's preview)."""
    ref = f"hf://{repo_id}" + (f"@{revision}" if revision and revision != "main" else "")
    meta = yaml.safe_dump(card_metadata(facts), sort_keys=False, allow_unicode=True, width=1000)
    parts = [f"---\n{meta}---\n", f"# {repo_id}\n"]
    intro = facts.summary.rstrip(".") + ". " if facts.summary else ""
    parts.append(f"{intro}Weights of the `{facts.method}` method for genzoo, "
                 f"a zoo of generative methods behind one interface." + (
                     f" It is the zoo model `{facts.model_name}`." if facts.model_name else "") + "\n")
    if facts.status:
        parts.append(f"**Status: {facts.status}.** {' '.join(facts.limitations.split())}\n")
    parts.append(_usage(facts, ref))
    if grid_file:
        if per_class:
            parts.append(f"## Samples\n\n![{per_class} samples of each class, seed 0]({grid_file})\n\n"
                         f"{per_class} samples of each class, one row per class, drawn with "
                         f"`genzoo sample {ref} --per-class {per_class} --seed 0`.\n")
        else:
            parts.append(f"## Samples\n\n![{grid_count} samples, seed 0]({grid_file})\n\n"
                         f"{grid_count} samples drawn with `genzoo sample {ref} -n {grid_count} --seed 0`.\n")
    if facts.metrics:
        parts.append(card_evaluation(facts.metrics, facts.evaluation))
    parts.append(_training(facts))
    parts.append(_license(facts))
    if facts.config:
        parts.append("## Configuration\n\nThe method's hyperparameters (`config` in config.json):\n\n"
                     f"```json\n{json.dumps(facts.config, indent=2)}\n```\n")
    if facts.paper:
        parts.append(f"## Citation\n\n```bibtex\n{facts.paper}\n```\n")
    return "\n".join(parts)


def parse_card(text: str) -> tuple[dict[str, Any], str]:
    """Split a card into its YAML metadata and its Markdown body."""
    match = re.match(r"---\s*\n(.*?)\n---\s*\n?", text, re.S)
    if not match:
        return {}, text
    return yaml.safe_load(match.group(1)) or {}, text[match.end():]


# -- sections -----------------------------------------------------------------------------------------


INSTALL_STEPS = "`pip install torch torchvision` first and then `pip install -e .` inside the clone"


def _install_text(facts: CardFacts) -> str:
    where = f"clone its repository, <{facts.genzoo_url}>," if facts.genzoo_url else "clone its repository"
    return f"genzoo is not on a package index: {where} and install it from the clone, {INSTALL_STEPS}."


def _plugin_text(facts: CardFacts) -> str:
    where = (f"from <{facts.plugin_url}>" if facts.plugin_url else
             "as its author describes (its package metadata names no project address)")
    return (f"The `{facts.method}` method comes from the plugin `{facts.plugin}`: install it into the same "
            f"environment {where}; `genzoo plugins` lists what is loaded.")


def _usage(facts: CardFacts, ref: str) -> str:
    lines = ["## Usage", "", _install_text(facts), ""]
    if facts.plugin and facts.plugin != "genzoo":
        lines += [_plugin_text(facts), ""]
    if facts.source:
        lines += [f"The model's source: <{facts.source}>.", ""]
    lines += ["```bash", *use_commands(facts.capabilities, ref)]
    lines += ["```", "", "```python", "import genzoo", "", f'model = genzoo.load("{ref}")']
    if "sample" in facts.capabilities:
        lines.append("images = model.sample(64, seed=0)  # float NCHW in [0, 1]")
    lines += ["```", "",
              f"Pin a revision for reproducible results: `{ref.split('@')[0]}@<commit id>`. "
              f"`genzoo pull {ref[len('hf://'):]}` fetches the files ahead of time, for offline use.", ""]
    return "\n".join(lines)


def _training(facts: CardFacts) -> str:
    lines = ["## Training", ""]
    if facts.commands:
        lines += ["Trained with:", "", "```bash", *facts.commands, "```", ""]
    else:
        lines += ["The training command was not recorded.", ""]
    if facts.dataset:
        fingerprint = f" ({facts.data})" if facts.data else ""
        lines += [f"Data: `{facts.dataset}`{fingerprint}.", ""]
    recorded = details(facts.provenance)
    if recorded:
        lines += ["| provenance | value |", "| --- | --- |"]
        lines += [f"| {key} | {_cell(value)} |" for key, value in recorded.items()]
        lines.append("")
    return "\n".join(lines)


def _license(facts: CardFacts) -> str:
    if facts.license:
        text = f"The weights are released under: {facts.license}."
        if facts.dataset and facts.license_from_data:
            text += f" This follows the licence of the training data ({facts.dataset.partition(':')[0]})."
    else:
        text = ("No licence is stated for these weights: ask the author before reusing them (the author states one "
                "by pushing again with `genzoo push MODEL ORG/NAME --license LICENCE`).")
    return f"## Licence\n\n{text}\n"


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return str(text).replace("|", "\\|").replace("\n", " ")


def _metric_metadata(metric: Metric) -> Any:
    """A plain metric as its number; a typed one as its fields."""
    typed = {k: v for k, v in dataclasses.asdict(metric).items() if v and k != "metric"}
    return metric.value if set(typed) == {"value"} else _plain(typed)


def _plain(value: Any) -> Any:
    """``value`` made of YAML-safe builtins (numbers, strings, lists, dicts)."""
    return json.loads(json.dumps(value, default=str))
