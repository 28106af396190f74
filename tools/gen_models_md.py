"""Regenerate docs/models.md from registry.yaml: python tools/gen_models_md.py > docs/models.md"""

from __future__ import annotations

import genzoo
from genzoo.registry import ModelEntry
from genzoo.reporting import distance_tables, models_table, other_measurements

INTRO = """\
# The model zoo

Generated from registry.yaml by `python tools/gen_models_md.py`; `genzoo info NAME` shows one model
(how to sample and reproduce it; `--full` adds its reference rows, config and provenance). A model
is `stable` when it meets its method's quality bars and `experimental` otherwise.

Every FID and KID is read against **reference rows**: real images, and real images degraded (resized,
blurred, noised), scored in the same feature network against the same reference split. Distances
compare within one table only: each dataset has a feature network of its own, so an FID in one table
says nothing about an FID in another, nor about the Inception FIDs of papers. KID is the raw unbiased
MMD^2 estimate. [results.md](results.md) has the measurements in full."""


def models_page(entries: list[ModelEntry]) -> str:
    """docs/models.md: every model, one table per reference set with its rows, other measurements, commands."""
    parts = [INTRO, "## The models", models_table(entries)]
    for heading, table in distance_tables(entries):
        parts += [f"## {heading}", table]
    parts += ["## Other measurements", other_measurements(entries)]
    parts += ["## How each model is made",
              "DIR is the folder given by `--data-root` (`genzoo datasets` lists the files each dataset needs)."]
    for entry in entries:
        if entry.command:
            commands = "\n".join(" ".join(c.split()) for c in entry.command)
            parts.append(f"`{entry.name}`:\n\n```bash\n{commands}\n```")
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    print(models_page(genzoo.list_models()), end="")
