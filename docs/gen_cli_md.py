"""Regenerate docs/cli.md from the commands' own --help: python docs/gen_cli_md.py > docs/cli.md"""

import click

from genzoo.cli import cli
from genzoo.plugins import get_host

HEADER = """# genzoo command line

Every verb is a thin shell over the Python API (`genzoo.load`, `Method.sample`/`refine`,
`genzoo.fit`, `genzoo.evaluate`, `genzoo.push_to_hub`). Errors are one line starting with
`Error:` and exit with status 1. Plugins may add verbs (`genzoo plugins` lists them);
`genzoo new-plugin NAME` starts one ([plugins.md](plugins.md)).

Model names: a registry name or alias (`genzoo list`), a method name (its default model), a
model directory (a `genzoo fit --out` folder is one), or `hf://ORG/NAME[@REVISION]`.
"""


def main() -> None:
    print(HEADER)
    core = set(cli.commands)
    get_host().add_commands(cli)
    for name in sorted(core):
        print_help(cli.commands[name], f"genzoo {name}")
    print("# Verbs of the built-in plugins\n")
    for name in sorted(set(cli.commands) - core):
        print_help(cli.commands[name], f"genzoo {name}")


def print_help(command: click.Command, path: str) -> None:
    print(f"## {path}\n")
    print("```text")
    print(command.get_help(click.Context(command, info_name=path, parent=None)))
    print("```\n")
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            print_help(command.commands[name], f"{path} {name}")


if __name__ == "__main__":
    main()
