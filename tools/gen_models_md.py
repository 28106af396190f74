"""Regenerate docs/models.md from registry.yaml: python tools/gen_models_md.py > docs/models.md"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os

import genzoo
from genzoo.plugins import ALLOW_ENV
from genzoo.registry import RANKED_METRICS, Metric, ModelEntry, ReferenceSet, reference_set, reference_sets
from genzoo.reporting import (LABELS, NEGATIVE_NOTE, PLACE_NOTE, UNITS, distance_tables, format_value,
                              group_by_scale, models_table, other_measurements)

INTRO = """\
# The model zoo

Generated from registry.yaml by `python tools/gen_models_md.py`; `genzoo info NAME` shows one model
(how to sample and reproduce it; `--full` adds its reference rows, config and provenance). A model
is `stable` when it meets its method's quality bars and `experimental` otherwise.

Every FID, KID and SWD is read against **reference rows**: real images, and real images degraded
(resized, blurred, noised), scored in the same feature network (pixels, for SWD) against the same
reference split. Distances compare within one table only: each dataset has a feature network of its
own, so an FID in one table says nothing about an FID in another, nor about the Inception FIDs of
papers. [results.md](results.md) has the measurements in full."""

RECIPES = """\
DIR is the folder given by `--data-root` (`genzoo datasets` lists the files each dataset needs).
Each block is the training behind one model, minutes to hours of it on a CPU; the test suite does
not run them (each block says so), and `genzoo info NAME` shows the same commands."""
NOT_RUN = "# (not run by the test suite: a training run of minutes to hours)"


def units_section() -> str:
    """What each distance is and how it is printed, written once here for every page and command."""
    lines = ["## How to read the figures", "",
             "Every page and command (`genzoo info`, `genzoo eval`, the model cards, these tables) prints a "
             "figure the same way, with the same factor:", ""]
    lines += [f"- **{LABELS[name]}**: {UNITS[name]}" for name in ("fid", "kid", "swd")]
    lines += [f"- **Where a figure falls**: {PLACE_NOTE} \"below every reference row\" and \"above every "
              f"reference row\" name the nearest row.", ""]
    negative = [(s, row) for s in reference_sets() for row in s.rows if row.values.get("kid", 0) < 0]
    if negative:
        named = "; ".join(f"the {row.images} row of {s.reference} in {s.features}, "
                          f"{format_value('kid', row.values['kid'])}, where the {_next(s, row).images} row is "
                          f"{format_value('kid', _next(s, row).values['kid'])}" for s, row in negative)
        lines += [f"A negative KID ({named}): {NEGATIVE_NOTE}.", ""]
    return "\n".join(lines).rstrip()


def _next(references, row):
    """The reference row with the next KID above ``row``'s."""
    return min((r for r in references.rows if r.values.get("kid", float("-inf")) > row.values["kid"]),
               key=lambda r: r.values["kid"])


def at_rows_n(metric: Metric) -> bool:
    """Whether ``metric`` was measured on as many images as its reference rows (or has none to be read against)."""
    references = reference_set(metric)
    return references is None or metric.n in (0, references.n)


def distance_sections(entries: list[ModelEntry]) -> list[str]:
    """One section per reference set: the figures measured on as many images as its rows, placed among them; then
    those measured on another n, in a table of their own and not placed, since FID and SWD depend on n."""
    like_n = [dataclasses.replace(e, metrics=[m for m in e.metrics if at_rows_n(m)]) for e in entries]
    placed = {heading: table for heading, table in distance_tables(like_n)}
    other_n: dict[tuple[str, str], dict[int, list[tuple[ModelEntry, list[Metric]]]]] = {}
    for entry in entries:
        for (features, n, reference), metrics in group_by_scale(m for m in entry.metrics if not at_rows_n(m)):
            if any(m.metric in RANKED_METRICS for m in metrics):
                other_n.setdefault((features, reference), {}).setdefault(n, []).append((entry, metrics))
    sections = []
    for references in reference_sets():
        heading = f"{references.reference}, in {references.features}"
        parts = [f"## {heading}"] + ([placed.pop(heading)] if heading in placed else [])
        for n, rows in (other_n.pop((references.features, references.reference), None) or {}).items():
            parts.append(other_n_table(references, n, rows))
        if len(parts) > 1:
            sections.append("\n\n".join(parts))
    return sections + [f"## {heading}\n\n{table}" for heading, table in placed.items()]


def other_n_table(references: ReferenceSet, n: int, rows: list[tuple[ModelEntry, list[Metric]]]) -> str:
    """Figures measured on ``n`` images beside reference rows of another n, each row with its n, none placed."""
    in_rows = {name for row in references.rows for name in row.values}
    names = [name for name in dict.fromkeys(m.metric for _, metrics in rows for m in metrics)
             if name in RANKED_METRICS or name in in_rows]
    header = ["images", "n", *(LABELS.get(name, name) for name in names)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for entry, metrics in rows:
        for of in dict.fromkeys(m.of for m in metrics):
            same = {m.metric: m for m in metrics if m.of == of}
            name = f"`{entry.name}` ({entry.status})" + (f", {of}" if of else "")
            lines.append("| " + " | ".join([name, f"{n:,}", *(format_value(k, same[k].value) if k in same else ""
                                                             for k in names)]) + " |")
    lines += ["| " + " | ".join([f"reference *{row.images}*: {row.description}", f"{references.n:,}",
                                 *(format_value(k, row.values[k]) if k in row.values else "" for k in names)]) + " |"
              for row in references.rows]
    biased = [LABELS[name] for name in names if name in ("fid", "swd")]  # KID is unbiased at any n
    depends = (f"{' and '.join(biased)} {'depends' if len(biased) == 1 else 'depend'} on the number of images "
               f"(fewer read higher)")
    note = (f"Measured on {n:,} images, where the reference rows are measured on {references.n:,}: no reference rows "
            f"on {n:,} images are recorded, and {depends}, so these figures are not placed among the rows.")
    source = f" Reference rows: `{references.source}`." if references.source else ""
    return "\n".join(lines) + f"\n\n{note}{source}"


def models_page(entries: list[ModelEntry]) -> str:
    """docs/models.md: every model, one table per reference set with its rows, other measurements, commands."""
    parts = [INTRO, units_section(), "## The models", models_table(entries), *distance_sections(entries)]
    parts += ["## Other measurements", other_measurements(entries)]
    parts += ["## How each model is made", RECIPES]
    for entry in entries:
        if entry.command:
            commands = "\n".join(" ".join(c.split()) for c in entry.command)
            parts.append(f"`{entry.name}`:\n\n```bash\n{NOT_RUN}\n{commands}\n```")
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    # The page documents genzoo: only its own plugins are loaded, whatever else is installed here.
    os.environ[ALLOW_ENV] = ",".join(ep.name for ep in importlib.metadata.distribution("genzoo").entry_points
                                     if ep.group == "genzoo")
    print(models_page(genzoo.list_models()), end="")
