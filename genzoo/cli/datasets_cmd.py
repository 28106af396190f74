import json
from pathlib import Path

import click

from ..datasets import DATA_ROOT_ENV, default_root, known_datasets
from ..datasets.files import FILE_SPECS
from ..datasets.specs import files_found
from ..errors import GenzooError
from ..plugins import get_host
from ..reporting import wrap

FOUND = {True: "found", False: "MISSING", None: "not checked (its files are described, not named)"}


@click.command("datasets")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.option("--data-root", default=None, help="Where to look for the files (default: $GENZOO_DATA_ROOT or ./data).")
@click.option("--metrics", "show_metrics", is_flag=True, help="List the metrics `genzoo eval --metrics` knows instead.")
def command(as_json: bool, data_root: str | None, show_metrics: bool) -> None:
    """List the datasets --dataset and --ref can name: size, shape, labels, and where the files are expected.

    Each dataset's files are marked found or MISSING under the data root; a --data-root that holds
    none of them is an error (exit status 1), as a mistyped folder usually is. Your own images
    follow: folder:PATH and npz:PATH[:SPLIT], read where PATH says.
    """
    if show_metrics:
        metrics = [get_host().metrics[name] for name in sorted(get_host().metrics)]
        if as_json:
            click.echo(json.dumps([{"name": m.name, "summary": m.summary, "needs": sorted(m.needs), "source": m.source}
                                   for m in metrics], indent=2))
            return
        width = max(len(m.name) for m in metrics) + 1
        for m in metrics:
            text = f"{m.name.ljust(width)}{m.summary}" + (f" [{m.source}]" if m.source != "genzoo" else "")
            for line in wrap(text, hanging=" " * width):
                click.echo(line)
        return
    root = Path(data_root).expanduser() if data_root else default_root()
    entries = known_datasets()
    found = {e.name: files_found(e, root) for e in entries}
    if as_json:
        own = [{"name": spec, "summary": summary, "shape": None, "num_classes": None, "class_names": [], "splits": {},
                "files": files, "default_split": None, "license": "", "source": "genzoo", "default_metrics": "",
                "found": None} for spec, (summary, files) in FILE_SPECS.items()]
        click.echo(json.dumps([{**e.as_dict(), "found": found[e.name]} for e in entries] + own, indent=2))
    else:
        click.echo(f"data root: {root}" + ("" if root.is_dir() else " (no such folder)"))
        for e in entries:
            splits = ", ".join(f"{name} ({size:,})" if size else name for name, size in e.splits.items())
            shape = "x".join(map(str, e.shape))
            labels = f"{e.num_classes} classes" if e.num_classes else "no labels"
            lines = wrap(f"{e.name}: {e.summary}")
            lines += wrap(f"images {shape}, {labels}; splits: {splits} (default {e.default_split})", indent="  ")
            lines += wrap(f"files: {e.files} under the data root: {FOUND[found[e.name]]}"
                          + (f"; licence: {e.license}" if e.license else "")
                          + (f"; from {e.source}" if e.source != "genzoo" else ""), indent="  ")
            for line in lines:
                click.echo(line)
        for spec, (summary, files) in FILE_SPECS.items():
            for line in wrap(f"{spec}: {summary}") + wrap(f"files: {files}", indent="  "):
                click.echo(line)
    if data_root and not any(found.values()):
        raise GenzooError(f"--data-root {data_root} holds the files of no dataset above; pass the folder that holds "
                          f"them (e.g. MNIST/raw/ for mnist), or set {DATA_ROOT_ENV} to it")
