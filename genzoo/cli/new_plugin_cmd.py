import click

from ..scaffold import class_name_for, new_plugin


@click.command("new-plugin")
@click.argument("name")
@click.argument("directory", required=False)
@click.option("--class-name", default=None, metavar="CLASS",
              help="The method's class (default: NAME's words capitalised, e.g. Vae; pass VAE for an acronym).")
@click.option("--owns-update", is_flag=True,
              help="Start from a method that makes its own optimisation step, update(step), over two networks with "
                   "an optimiser each (the form of a GAN), instead of returning one loss.")
@click.option("--refine-only", is_flag=True,
              help="Start from a refiner with no sampler (fit and refine; `genzoo sample` refuses it), with a "
                   "ranged refine option (--opt pull=0.2).")
def command(name: str, directory: str | None, class_name: str | None, owns_update: bool, refine_only: bool) -> None:
    """Start a genzoo-NAME plugin project in DIRECTORY (default ./genzoo-NAME).

    It holds a pyproject with the entry point, a package with a working placeholder method, tests
    that run genzoo's contract checks on one thread, and a README; `pip install -e ".[test]" &&
    pytest` passes as written.
    """
    root = new_plugin(name, directory, class_name=class_name, owns_update=owns_update, refine_only=refine_only)
    cls = class_name or class_name_for(name)
    click.echo(f"wrote {root} (method {name!r}, class {cls}): cd {root} && pip install -e \".[test]\" && pytest")
