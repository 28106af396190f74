import json
from pathlib import Path

import click

from ..loading import model_document
from ..plugins import find_model, get_host


@click.command("info")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def command(name: str, as_json: bool) -> None:
    """Show a model or method: summary, config, weights, metrics and how it was trained.

    NAME is a model name, an alias, a method name, a model directory or hf://ORG/NAME[@REVISION]
    (which fetches config.json alone).
    """
    host = get_host()
    if name.startswith("hf://") or Path(name).is_dir():
        document, where = model_document(name)
        info = {"name": name, "method": document["method"], "weights": where, "config": document["config"],
                "provenance": document.get("provenance", {})}
    else:
        entry = find_model(name)
        info = entry.as_dict()
        bundled = entry.bundled_dir()
        info["weights"] = {"bundled": str(bundled) if bundled else None, "hub": entry.hub_ref()}
        if bundled and (bundled / "config.json").is_file():
            info["config"] = json.loads((bundled / "config.json").read_text(encoding="utf-8"))["config"]
    if host.has_method(info["method"]):
        record = host.method_record(info["method"])
        info["method_summary"] = record.cls.summary
        info["capabilities"] = sorted(record.cls.capabilities)
        info["paper"] = record.cls.paper
        info["plugin"] = record.plugin
    else:
        info["method_summary"] = f"method {info['method']!r} is not installed"
    if as_json:
        click.echo(json.dumps(info, indent=2, default=str))
        return
    for key in ("name", "method", "method_summary", "summary", "dataset", "capabilities", "plugin", "license"):
        if info.get(key):
            value = ", ".join(info[key]) if isinstance(info[key], list) else info[key]
            click.echo(f"{key}: {value}")
    click.echo(f"weights: {json.dumps(info.get('weights'))}")
    for key in ("config", "metrics", "provenance"):
        if info.get(key):
            click.echo(f"{key}:")
            for k, v in info[key].items():
                click.echo(f"  {k}: {v}")
    for key in ("evaluation", "command"):
        if info.get(key):
            click.echo(f"{key}: {info[key]}")
    if info.get("paper"):
        click.echo("paper:")
        click.echo(info["paper"].strip())
