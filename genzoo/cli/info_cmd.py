import json
from pathlib import Path

import click


@click.command("info")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def command(name: str, as_json: bool) -> None:
    """Show a model or method: summary, config, weights, metrics and how it was trained.

    NAME is a model name, an alias, a method name or a model directory.
    """
    from ..plugins import get_host
    from ..registry import find_model
    from ..weights import read_config

    host = get_host()
    info: dict = {}
    if Path(name).is_dir():
        document = read_config(Path(name))
        info = {"name": name, "method": document["method"], "weights": str(Path(name).resolve()),
                "config": document["config"], "provenance": document.get("provenance", {})}
    else:
        entry = find_model(name)
        info = entry.as_dict()
        bundled = entry.bundled_dir()
        info["weights"] = {
            "bundled": str(bundled) if bundled else None,
            "hub": f"hf://{entry.hub['repo_id']}" + (f"@{entry.hub['revision']}" if entry.hub.get("revision") else "")
            if entry.hub else None,
        }
        if bundled and (bundled / "config.json").is_file():
            info["config"] = read_config(bundled)["config"]
    canonical = host.method_aliases.get(info["method"], info["method"])
    if canonical in host.methods:
        cls = host.methods[canonical].cls
        info["method_summary"] = cls.summary
        info["capabilities"] = sorted(cls.capabilities)
        info["paper"] = cls.paper
        info["plugin"] = host.methods[canonical].plugin
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
