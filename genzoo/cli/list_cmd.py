import json

import click

from ..plugins import get_host

DATASET_WIDTH = 32  # longer dataset descriptions are cut in the listing


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the catalogue as JSON.")
@click.option("--markdown", is_flag=True, help="Print the model table of docs/models.md.")
def command(as_json: bool, markdown: bool) -> None:
    """List the pretrained models in the catalogue."""
    host = get_host()
    entries = [entry for _, entry in sorted(host.all_models().items())]
    if as_json:
        click.echo(json.dumps([e.as_dict() for e in entries], indent=2, default=str))
        return
    if markdown:
        click.echo(markdown_table(entries))
        return
    if not entries:
        click.echo("no models in the catalogue")
        return
    rows = [("NAME", "METHOD", "DATASET", "WEIGHTS", "SUMMARY")]
    clipped = False
    for e in entries:
        where = "bundled" if e.bundled_dir() else ("hub" if e.hub else "missing")
        method = e.method if host.has_method(e.method) else f"{e.method} (not installed)"
        dataset = _clip(e.dataset)
        clipped |= dataset != e.dataset
        rows.append((e.name, method, dataset, where, e.summary))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
    if clipped:
        click.echo("(long dataset descriptions are cut; `genzoo info NAME` shows the whole entry)")


def _clip(text: str, width: int = DATASET_WIDTH) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def markdown_table(entries) -> str:
    """The model zoo table: one row per model, with its metrics and how it was trained."""
    lines = ["| model | method | dataset | weights | metrics | licence | trained with |", "|---|---|---|---|---|---|---|"]
    for e in entries:
        where = f"bundled (`{e.bundled}`)" if e.bundled else (f"hf://{e.hub['repo_id']}" if e.hub else "-")
        metrics = ", ".join(f"{k} {_short(v)}" for k, v in e.metrics.items()) or "-"
        command = " ".join(e.command.split()) if e.command else "-"
        lines.append(f"| `{e.name}` | {e.method} | {e.dataset} | {where} | {metrics} | {e.license or '-'} | `{command}` |")
    return "\n".join(lines)


def _short(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
