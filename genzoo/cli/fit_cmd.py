import sys

import click

from ..configs import parse_assignments
from ..train import FitOptions, fit
from .group import command_line
from .options import options_from


@click.command("fit")
@click.argument("method")
@options_from(FitOptions)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a Config field (repeatable).")
def command(method: str, sets: tuple[str, ...], **options) -> None:
    """Train METHOD and write a loadable model directory to --out.

    Runs on whatever Accelerate finds; for several processes use
    `accelerate launch --multi_gpu --num_processes N -m genzoo fit ...`.
    """
    try:
        path = fit(method, config=parse_assignments(sets), command=command_line(), **options)
    except KeyboardInterrupt:
        sys.exit(130)  # Ctrl-C: fit has said what it saved; 128 + SIGINT, as a shell reports it
    click.echo(f"model written to {path}")
