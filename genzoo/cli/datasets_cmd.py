import json
from pathlib import Path

import click

from ..datasets import default_root, known_datasets
from ..plugins import get_host


@click.command("datasets")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.option("--data-root", default=None, help="Where to look for the files (default: $GENZOO_DATA_ROOT or ./data).")
@click.option("--metrics", "show_metrics", is_flag=True, help="List the metrics `genzoo eval --metrics` knows instead.")
def command(as_json: bool, data_root: str | None, show_metrics: bool) -> None:
    """List the datasets --dataset and --ref can name: size, shape, labels, and where the files are expected."""
    if show_metrics:
        metrics = [get_host().metrics[name] for name in sorted(get_host().metrics)]
        if as_json:
            click.echo(json.dumps([{"name": m.name, "summary": m.summary, "needs": sorted(m.needs), "source": m.source}
                                   for m in metrics], indent=2))
            return
        for m in metrics:
            click.echo(f"{m.name:<14} {m.summary}" + (f" [{m.source}]" if m.source != "genzoo" else ""))
        return
    root = Path(data_root).expanduser() if data_root else default_root()
    entries = known_datasets()
    if as_json:
        click.echo(json.dumps([e.as_dict() for e in entries], indent=2))
        return
    click.echo(f"data root: {root}")
    for e in entries:
        splits = ", ".join(f"{name} ({size:,})" if size else name for name, size in e.splits.items())
        shape = "x".join(map(str, e.shape))
        labels = f"{e.num_classes} classes" if e.num_classes else "no labels"
        click.echo(f"{e.name}: {e.summary}")
        click.echo(f"  images {shape}, {labels}; splits: {splits} (default {e.default_split})")
        click.echo(f"  files: {e.files} under the data root" + (f"; licence: {e.license}" if e.license else "")
                   + (f"; from {e.source}" if e.source != "genzoo" else ""))
