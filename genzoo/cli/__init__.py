"""The ``genzoo`` command line: one module per verb, each a thin shell over the Python API."""

from __future__ import annotations

import sys

import click

from ..errors import GenzooError
from . import eval_cmd, export_cmd, fit_cmd, info_cmd, list_cmd, plugins_cmd, pull_cmd, push_cmd, refine_cmd, sample_cmd


class GenzooGroup(click.Group):
    """Turns GenzooError into click's one-line ``Error: ...`` and exit status 1."""

    argv: list[str] = []  # the arguments of the current invocation, for provenance records

    def main(self, args=None, *rest, **kwargs):
        GenzooGroup.argv = list(sys.argv[1:] if args is None else args)
        return super().main(args, *rest, **kwargs)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except GenzooError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=GenzooGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="genzoo")
def cli() -> None:
    """genzoo: a zoo of generative models behind one interface.

    \b
    genzoo sample ign -n 64 -o samples.png     images from a pretrained model
    genzoo list                                 the catalogue of pretrained models
    genzoo fit ign --dataset mnist --out DIR    train a method on your data
    """


for module in (list_cmd, info_cmd, plugins_cmd, fit_cmd, sample_cmd, refine_cmd, eval_cmd, export_cmd, push_cmd,
               pull_cmd):
    cli.add_command(module.command)


def main() -> None:
    from ..plugins import get_host

    get_host().add_commands(cli)
    cli(prog_name="genzoo")
