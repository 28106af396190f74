import click

from ..plots import PLOT_FILE, plot_losses


@click.command("plot")
@click.argument("run")
@click.option("-o", "--output", default=None, help=f"Where to write the PNG (default: RUN/{PLOT_FILE}).")
def command(run: str, output: str | None) -> None:
    """Draw the loss curves of a training run (its metrics.jsonl) into a PNG.

    Training draws them at every checkpoint and at the end; this draws them now, e.g. while a
    run is still training.
    """
    click.echo(f"wrote {plot_losses(run, output)}")
