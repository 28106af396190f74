import click

from ..loading import pull


@click.command("pull")
@click.argument("ref", metavar="ORG/NAME[@REVISION]")
@click.option("--force", is_flag=True, help="Download the files again even when the cache holds them (the fix for a "
                                            "cached file that changed after its download).")
def command(ref: str, force: bool) -> None:
    """Download a model from the Hugging Face Hub into the local cache ahead of time.

    The argument is ORG/NAME[@REVISION], hf://ORG/NAME[@REVISION], or the name of a zoo model
    whose weights live on the Hub. Afterwards the model loads without network, for example with
    HF_HUB_OFFLINE=1. The cache is huggingface_hub's (HF_HOME, HF_HUB_CACHE). Every load checks a
    cached file against the hash its download recorded, offline too, and refuses one that changed.
    """
    directory, label = pull(ref, force=force)
    click.echo(f"pulled {label} (commit {directory.name}) into {directory}")
