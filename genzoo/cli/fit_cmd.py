import sys

import click

from ..configs import parse_assignments
from ..train import FitOptions, fit
from .group import command_line
from .options import options_from


@click.command("fit")
@click.argument("method")
@options_from(FitOptions)
@click.option("--bf16", is_flag=True, help="Alias for --precision bf16.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a Config field (repeatable).")
def command(method: str, bf16: bool, sets: tuple[str, ...], **options) -> None:
    """Train METHOD and write a loadable model directory to --out.

    Runs on whatever Accelerate finds; for several processes use
    `accelerate launch --multi_gpu --num_processes N -m genzoo fit ...`.
    """
    if bf16:
        if options["precision"] not in ("auto", "bf16"):
            raise click.UsageError(f"--bf16 and --precision {options['precision']} disagree; pass one of them")
        options["precision"] = "bf16"
    try:
        path = fit(method, config=parse_assignments(sets), command=command_line(), **options)
    except KeyboardInterrupt:
        sys.exit(130)  # Ctrl-C: fit has said what it saved; 128 + SIGINT, as a shell reports it
    click.echo(f"model written to {path}")
