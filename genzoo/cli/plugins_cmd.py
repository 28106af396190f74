import json

import click

from ..plugins import ALLOW_ENV, allowed_plugins, get_host
from ..reporting import wrap
from . import VERBS


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def command(as_json: bool) -> None:
    """List loaded plugins with their version, hooks, what they registered and any error."""
    host = get_host()
    host.commands(reserved=VERBS)  # a plugin whose verb would take one of genzoo's own is shown with that error
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
        lines = wrap(f"hooks: {', '.join(i.hooks) or '-'}", indent="  ")
        for label, items in (("methods", i.methods), ("models", i.models), ("feature extractors", i.feature_extractors),
                             ("datasets", i.datasets), ("metrics", i.metrics), ("commands", i.commands)):
            if items:
                lines += wrap(f"{label}: {', '.join(items)}", indent="  ")
        if i.error:
            lines += wrap(f"error: {i.error}", indent="  ")
        for line in lines:
            click.echo(line)
