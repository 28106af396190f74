"""Regenerate docs/models.md from registry.yaml: python tools/gen_models_md.py > docs/models.md"""

from __future__ import annotations

import importlib.metadata
import os

import genzoo
from genzoo.plugins import ALLOW_ENV
from genzoo.registry import ModelEntry, reference_sets
from genzoo.reporting import (LABELS, NEGATIVE_NOTE, PLACE_NOTE, UNITS, distance_tables, format_value,
                              models_table, other_measurements)

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


def models_page(entries: list[ModelEntry]) -> str:
    """docs/models.md: every model, one table per reference set with its rows, other measurements, commands."""
    parts = [INTRO, units_section(), "## The models", models_table(entries)]
    for heading, table in distance_tables(entries):
        parts += [f"## {heading}", table]
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
