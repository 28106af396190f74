import json

import click


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the catalogue as JSON.")
def command(as_json: bool) -> None:
    """List the pretrained models in the catalogue."""
    from .. import list_models
    from ..plugins import get_host

    host = get_host()
    entries = list_models()
    if as_json:
        click.echo(json.dumps([e.as_dict() for e in entries], indent=2, default=str))
        return
    if not entries:
        click.echo("no models in the catalogue")
        return
    rows = [("NAME", "METHOD", "DATASET", "WEIGHTS", "SUMMARY")]
    for e in entries:
        where = "bundled" if e.bundled_dir() else ("hub" if e.hub else "missing")
        method = e.method if host.method_aliases.get(e.method, e.method) in host.methods else f"{e.method} (not installed)"
        rows.append((e.name, method, e.dataset, where, e.summary))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
