import click


@click.command("eval")
def command() -> None:
    """(placeholder)"""
