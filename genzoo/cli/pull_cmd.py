import click


@click.command("pull")
def command() -> None:
    """(placeholder)"""
