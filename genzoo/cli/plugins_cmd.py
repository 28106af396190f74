import json

import click

from ..plugins import ALLOW_ENV, allowed_plugins, get_host


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def command(as_json: bool) -> None:
    """List loaded plugins with their version, hooks, what they registered and any error."""
    host = get_host()
    infos = [host.plugins[name] for name in sorted(host.plugins)]
    if as_json:
        click.echo(json.dumps([i.as_dict() for i in infos], indent=2))
        return
    allow = allowed_plugins()
    if allow is not None:
        click.echo(f"{ALLOW_ENV}={','.join(sorted(allow))} (only these are loaded)")
    if not infos:
        click.echo("no plugins loaded")
    for i in infos:
        status = "ERROR" if i.error else "ok"
        click.echo(f"{i.name} [{status}] {i.distribution or '-'} {i.version or ''}".rstrip())
        click.echo(f"  module: {i.module}")
        click.echo(f"  hooks: {', '.join(i.hooks) or '-'}")
        for label, items in (("methods", i.methods), ("models", i.models), ("feature extractors", i.feature_extractors),
                             ("datasets", i.datasets), ("metrics", i.metrics), ("commands", i.commands)):
            if items:
                click.echo(f"  {label}: {', '.join(items)}")
        if i.error:
            click.echo(f"  error: {i.error}")
