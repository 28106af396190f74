import json

import click

from ..catalogue import Catalogue, MethodSummary, catalogue
from ..registry import ModelEntry
from ..reporting import terminal_width

DATASET_WIDTH = 20  # longer dataset descriptions are cut in the listing, and pad no other row under --wide
MIN_SUMMARY = 24  # the summary gets at least this much room, or it is left out (`genzoo info NAME` has it)
# The columns before the summary, and which to leave out (in this order) on a terminal too narrow for all.
COLUMNS = ("NAME", "METHOD", "DATASET", "WEIGHTS", "STATUS")
DROPPED_FIRST = ("DATASET", "METHOD")

@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the catalogue as JSON.")
@click.option("--wide", is_flag=True, help="Show every column in full, whatever the terminal's width.")
def command(as_json: bool, wide: bool) -> None:
    """List the pretrained models in the catalogue, and the installed methods that have none yet.

    The table fits the terminal's width: summaries are cut (and, on a narrow terminal, the dataset
    and method columns left out); --wide shows everything, `genzoo info NAME` one model in full.
    """
    known = catalogue()
    entries = [entry for _, entry in sorted(known.models.items())]
    bare = known.methods_without_models()
    if as_json:
        rows = [{"kind": "model", **e.as_dict()} for e in entries]
        rows += [{"kind": "method", "name": cls.name, "summary": cls.summary, "status": "no pretrained model"}
                 for cls in bare]
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    width = None if wide else terminal_width()
    if entries:
        for line in model_table(entries, width, known):
            click.echo(line)
    else:
        click.echo("no models in the catalogue")
    if bare:
        click.echo("")
        click.echo(_cut("Installed methods with no pretrained model yet (`genzoo info METHOD` describes one, "
                        "`genzoo fit METHOD` trains one):", width))
        name_width = max(len(cls.name) for cls in bare)
        for cls in bare:
            click.echo(_cut(f"  {cls.name.ljust(name_width)}  {cls.summary}", width))


def methods_without_models() -> list[MethodSummary]:
    """The installed methods no catalogue model uses, by name."""
    return catalogue().methods_without_models()


def model_table(entries: list[ModelEntry], width: int | None, known: Catalogue | None = None) -> list[str]:
    """The rows of `genzoo list`, each at most ``width`` characters (None: no limit, nothing cut).

    The columns keep their order; on a narrow terminal the summary gives way first (it needs
    MIN_SUMMARY characters), then the dataset, then the method. A dataset description longer than
    DATASET_WIDTH is cut, or under no limit runs into its own row's next column instead of widening every row.
    ``known``: the catalogue that says which methods are installed (default: :func:`genzoo.catalogue.catalogue`).
    """
    known = known or catalogue()
    rows = [{c: c for c in (*COLUMNS, "SUMMARY")}]
    for e in entries:
        method = e.method if known.has_method(e.method) else f"{e.method} (not installed)"
        rows.append({"NAME": e.name, "METHOD": method, "DATASET": e.dataset, "WEIGHTS": e.weights_kind(),
                     "STATUS": e.status, "SUMMARY": e.summary})
    widths = {c: max(len(r[c]) for r in rows) for c in COLUMNS}
    widths["DATASET"] = min(widths["DATASET"], DATASET_WIDTH)
    if width is None:
        return ["  ".join([*(r[c].ljust(widths[c]) for c in COLUMNS), r["SUMMARY"]]) for r in rows]
    cut = [r for r in rows if len(r["DATASET"]) > DATASET_WIDTH]
    for r in cut:
        r["DATASET"] = _cut(r["DATASET"], DATASET_WIDTH)
    columns = list(COLUMNS)
    for dropped in (None, *DROPPED_FIRST):
        if dropped:
            columns.remove(dropped)
        if sum(widths[c] + 2 for c in columns) - 2 <= width:
            break
    summary_width = width - sum(widths[c] + 2 for c in columns)
    shown = summary_width >= MIN_SUMMARY
    lines = []
    for r in rows:
        line = "  ".join(r[c].ljust(widths[c]) for c in columns)
        if shown:
            line += "  " + _cut(r["SUMMARY"], summary_width)
        lines.append(line.rstrip()[:width])
    if cut or columns != list(COLUMNS) or not shown or any(len(r["SUMMARY"]) > summary_width for r in rows):
        lines.append(_cut("(cut to fit the terminal: `genzoo list --wide` shows all, `genzoo info NAME` one model)",
                          width))
    return lines


def _cut(text: str, width: int | None) -> str:
    """``text`` cut to ``width`` characters, ending in "..." when cut."""
    if width is None or len(text) <= width:
        return text
    return text[:max(width - 3, 0)].rstrip() + "..."
