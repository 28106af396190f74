import click

from ..scaffold import new_plugin


@click.command("new-plugin")
@click.argument("name")
@click.argument("directory", required=False)
def command(name: str, directory: str | None) -> None:
    """Start a genzoo-NAME plugin project in DIRECTORY (default ./genzoo-NAME).

    It holds a pyproject with the entry point, a package with a working method, tests that run
    genzoo's contract checks, and a README; `pip install -e ".[test]" && pytest` passes as written.
    """
    root = new_plugin(name, directory)
    click.echo(f"wrote {root}: cd {root} && pip install -e \".[test]\" && pytest")
