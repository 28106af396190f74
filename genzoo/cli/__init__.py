"""The ``genzoo`` command line: one module per verb, each a thin shell over the Python API."""

from __future__ import annotations

import click

from . import (datasets_cmd, eval_cmd, export_cmd, fit_cmd, info_cmd, list_cmd, new_plugin_cmd, plot_cmd, plugins_cmd,
               pull_cmd, push_cmd, refine_cmd, sample_cmd)
from .group import GenzooGroup


@click.group(cls=GenzooGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="genzoo")
def cli() -> None:
    """genzoo: a zoo of generative models behind one interface.

    \b
    genzoo sample ign -n 64 -o samples.png     images from a pretrained model
    genzoo list                                 the catalogue of pretrained models
    genzoo fit ign --dataset mnist --out DIR    train a method on your data
    """


for module in (list_cmd, info_cmd, plugins_cmd, datasets_cmd, fit_cmd, sample_cmd, refine_cmd, eval_cmd, export_cmd,
               push_cmd, pull_cmd, plot_cmd, new_plugin_cmd):
    cli.add_command(module.command)


def main() -> None:
    from ..plugins import get_host

    get_host().add_commands(cli)
    cli(prog_name="genzoo")
