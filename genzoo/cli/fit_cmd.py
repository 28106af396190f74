import os
import signal
import sys

import click

from ..configs import parse_assignments
from ..training.loop import fit
from ..training.options import FitOptions
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
    except KeyboardInterrupt as exc:
        # fit has said what it saved; 128 + the signal, as a shell reports it (Ctrl-C 130, SIGTERM 143)
        sys.exit(128 + getattr(exc, "signum", signal.SIGINT))
    if int(os.environ.get("RANK", "0")) == 0:  # once per run, not once per process
        click.echo(f"model written to {path}")
