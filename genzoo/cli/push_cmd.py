import click


@click.command("push")
def command() -> None:
    """(placeholder)"""
