"""Regenerate docs/cli.md from the commands' own --help: python docs/gen_cli_md.py > docs/cli.md"""

import click

from genzoo.cli import cli

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
    for name in sorted(cli.commands):
        command = cli.commands[name]
        sub = click.Context(command, info_name=f"genzoo {name}", parent=None)
        print(f"## genzoo {name}\n")
        print("```text")
        print(command.get_help(sub))
        print("```\n")


if __name__ == "__main__":
    main()
