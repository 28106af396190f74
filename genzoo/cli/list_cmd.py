import json
from typing import Iterable

import click

from ..plugins import get_host
from ..registry import (METRIC_LABELS, RANKED_METRICS, Metric, ModelEntry, ReferenceSet, format_value, group_by_scale,
                        placed, reference_set, reference_sets)

DATASET_WIDTH = 32  # longer dataset descriptions are cut in the listing
PAGE_INTRO = """\
# The model zoo

Generated from registry.yaml by `genzoo list --markdown`; `genzoo info NAME` shows one model (how to
sample and reproduce it; `--full` adds its config and provenance). A model is `stable` when it meets
its method's quality bars and `experimental` otherwise.

Every FID and KID is read against **reference rows**: real images, and real images degraded (resized,
blurred, noised), scored in the same feature network against the same reference split. Distances
compare within one table only: each dataset has a feature network of its own, so an FID in one table
says nothing about an FID in another, nor about the Inception FIDs of papers. KID is the raw unbiased
MMD^2 estimate. [results.md](results.md) has the measurements in full."""


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the catalogue as JSON.")
@click.option("--markdown", is_flag=True, help="Print docs/models.md: one table per dataset with its reference rows.")
def command(as_json: bool, markdown: bool) -> None:
    """List the pretrained models in the catalogue, and the installed methods that have none yet."""
    host = get_host()
    entries = [entry for _, entry in sorted(host.all_models().items())]
    bare = methods_without_models()
    if as_json:
        rows = [{"kind": "model", **e.as_dict()} for e in entries]
        rows += [{"kind": "method", "name": cls.name, "summary": cls.summary, "status": "no pretrained model"}
                 for cls in bare]
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    if markdown:
        click.echo(markdown_page(entries), nl=False)
        return
    if entries:
        _print_models(entries)
    else:
        click.echo("no models in the catalogue")
    if bare:
        click.echo("\nInstalled methods with no pretrained model yet (`genzoo info METHOD` describes one, "
                   "`genzoo fit METHOD` trains one):")
        width = max(len(cls.name) for cls in bare)
        for cls in bare:
            click.echo(f"  {cls.name.ljust(width)}  {cls.summary}")


def methods_without_models() -> list[type]:
    """The installed methods no catalogue model uses, by name."""
    host = get_host()
    used = {host.method_record(e.method).cls.name for e in host.all_models().values() if host.has_method(e.method)}
    return [record.cls for name, record in sorted(host.methods.items()) if name not in used]


def _print_models(entries: list[ModelEntry]) -> None:
    host = get_host()
    rows = [("NAME", "METHOD", "DATASET", "WEIGHTS", "STATUS", "SUMMARY")]
    clipped = False
    for e in entries:
        method = e.method if host.has_method(e.method) else f"{e.method} (not installed)"
        dataset = _clip(e.dataset)
        clipped |= dataset != e.dataset
        rows.append((e.name, method, dataset, e.weights_kind(), e.status, e.summary))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5])
    if clipped:
        click.echo("(long dataset descriptions are cut; `genzoo info NAME` shows the whole entry)")


def _clip(text: str, width: int = DATASET_WIDTH) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


# -- docs/models.md ----------------------------------------------------------------------------------------


def markdown_page(entries: list[ModelEntry]) -> str:
    """docs/models.md: every model, one table per reference set with its rows, other measurements, commands."""
    parts = [PAGE_INTRO, "## The models", _models_table(entries)]
    tables: dict[tuple[str, str], list[tuple[ModelEntry, list[Metric]]]] = {}
    for entry in entries:
        for (features, _, reference), metrics in group_by_scale(entry.metrics):
            if any(m.metric in RANKED_METRICS for m in metrics):
                tables.setdefault((features, reference), []).append((entry, metrics))
    order = [(s.features, s.reference) for s in reference_sets()]
    for key in sorted(tables, key=lambda k: order.index(k) if k in order else len(order)):
        rows = tables[key]
        parts += [f"## {key[1]}, in {key[0]}", _distance_table(reference_set(rows[0][1][0]), rows)]
    parts += ["## Other measurements", _other_measurements(entries)]
    parts += ["## How each model is made",
              "DIR is the folder given by `--data-root` (`genzoo datasets` lists the files each dataset needs)."]
    for entry in entries:
        if entry.command:
            parts.append(f"`{entry.name}`:\n\n```bash\n" + "\n".join(" ".join(c.split()) for c in entry.command) + "\n```")
    return "\n\n".join(parts) + "\n"


def _models_table(entries: Iterable[ModelEntry]) -> str:
    lines = ["| model | method | dataset | status | weights | what it is not good at | licence |",
             "|---|---|---|---|---|---|---|"]
    for e in entries:
        where = f"bundled (`{e.bundled}`)" if e.bundled else (f"`{e.hub_ref()}`" if e.hub else "not published")
        lines.append(f"| `{e.name}` | {e.method} | {e.dataset} | {e.status} | {where} | "
                     f"{' '.join(e.limitations.split()) or '-'} | {e.license or '-'} |")
    return "\n".join(lines)


def _distance_table(references: ReferenceSet | None, rows: list[tuple[ModelEntry, list[Metric]]]) -> str:
    """Models and reference rows in the columns both have (the distances always), the FID placed."""
    in_rows = {name for row in (references.rows if references else ()) for name in row.values}
    names = [name for name in dict.fromkeys(m.metric for _, metrics in rows for m in metrics)
             if name in RANKED_METRICS or name in in_rows]
    first = next(name for name in names if name in RANKED_METRICS)
    header = ["images", "n", *(METRIC_LABELS.get(name, name) for name in names), f"where the {RANKED_METRICS[first]} falls"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for entry, metrics in rows:
        for of in dict.fromkeys(m.of for m in metrics):
            same = {m.metric: m for m in metrics if m.of == of}
            label = f"`{entry.name}` ({entry.status})" + (f", {of}" if of else "")
            cells = [format_value(name, same[name].value) if name in same else "" for name in names]
            where = references.place(first, same[first].value) if references and first in same else ""
            lines.append("| " + " | ".join([label, f"{metrics[0].n:,}", *cells, where]) + " |")
    if references is None:
        return "\n".join(lines) + "\n\nNo reference rows are recorded for this feature network and reference split."
    for row in references.rows:
        cells = [format_value(name, row.values[name]) if name in row.values else "" for name in names]
        lines.append("| " + " | ".join([f"reference *{row.images}*: {row.description}", f"{references.n:,}", *cells, ""])
                     + " |")
    return "\n".join(lines) + (f"\n\nReference rows: `{references.source}`." if references.source else "")


def _other_measurements(entries: Iterable[ModelEntry]) -> str:
    in_tables = {(s.features, s.reference): {n for r in s.rows for n in r.values} for s in reference_sets()}
    lines = []
    for e in entries:
        rest = [placed(m) for m in e.metrics if m.metric not in RANKED_METRICS
                and m.metric not in in_tables.get((m.features, m.reference), ())]
        if rest:
            lines.append(f"- `{e.name}`: " + "; ".join(rest))
    return "\n".join(lines) or "-"
