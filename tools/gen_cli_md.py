"""Regenerate docs/cli.md from the commands' own --help: python tools/gen_cli_md.py > docs/cli.md"""

from __future__ import annotations

import importlib.metadata
import os

import click

from genzoo.cli import cli
from genzoo.plugins import ALLOW_ENV

WIDTH = 78  # of the help text: what an 80-column terminal shows, whatever the terminal running this

HEADER = """# genzoo command line

Every verb is a thin shell over the Python API (`genzoo.load`, `Method.sample`/`refine`,
`genzoo.fit`, `genzoo.evaluate`, `genzoo.export`, `genzoo.push_to_hub`). Errors are one line
starting with `Error:` and exit with status 1. Plugins may add verbs (`genzoo plugins` lists
them); `genzoo new-plugin NAME` starts one ([plugins.md](plugins.md)).

Model names: a registry name or alias (`genzoo list`), a method name (its default model), a
model directory (a `genzoo fit --out` folder is one), or `hf://ORG/NAME[@REVISION]`. Names are
found in any case, and a misspelt one gets the closest known name.
"""


def cli_reference() -> str:
    """docs/cli.md: the group's help, every verb's, then the built-in plugins' verbs."""
    context = click.Context(cli, info_name="genzoo", terminal_width=WIDTH, **cli.context_settings)
    parts = [HEADER, f"## genzoo\n\n```text\n{cli.get_help(context)}\n```\n"]
    for name in cli.list_commands(context):
        parts.append(section(cli.get_command(context, name), f"genzoo {name}", parent=context))
    parts.append("# Verbs of the built-in plugins\n")
    for name, command in sorted(cli.plugin_commands(context).items()):
        parts.append(section(command, f"genzoo {name}", parent=context))
    return "\n".join(parts)


def section(command: click.Command, path: str, parent: click.Context | None) -> str:
    """The help of ``command`` (and of its subcommands, for a group) under a heading naming it."""
    context = click.Context(command, info_name=path.rpartition(" ")[2], parent=parent)
    text = f"## {path}\n\n```text\n{command.get_help(context)}\n```\n"
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            text += "\n" + section(command.commands[name], f"{path} {name}", parent=context)
    return text


if __name__ == "__main__":
    # The page documents genzoo: only its own plugins are loaded, whatever else is installed here.
    os.environ[ALLOW_ENV] = ",".join(ep.name for ep in importlib.metadata.distribution("genzoo").entry_points
                                     if ep.group == "genzoo")
    print(cli_reference())
