import click

from ..loading import pull


@click.command("pull")
@click.argument("ref", metavar="ORG/NAME[@REVISION]")
def command(ref: str) -> None:
    """Download a model from the Hugging Face Hub into the local cache ahead of time.

    The argument is ORG/NAME[@REVISION], hf://ORG/NAME[@REVISION], or the name of a zoo model
    whose weights live on the Hub. Afterwards the model loads without network, for example with
    HF_HUB_OFFLINE=1. The cache is huggingface_hub's (HF_HOME, HF_HUB_CACHE).
    """
    directory, label = pull(ref)
    click.echo(f"pulled {label} (commit {directory.name}) into {directory}")
