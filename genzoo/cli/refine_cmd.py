from pathlib import Path

import click

from .common import device_option, output_options, parse_labels, parse_options, resolve_device

DEFAULT_OUT = {"grid": "refined.png", "npz": "refined.npz", "png-dir": "refined"}


@click.command("refine")
@click.argument("name")
@click.option("-i", "--input", "source", required=True, help="A PNG file, a folder of PNGs, or an .npz (key x, optional y).")
@click.option("-o", "--output", default=None, help="Output path (default: refined.png / refined.npz / refined/).")
@output_options
@click.option("--steps", type=int, default=None, help="Refinement steps or applications (default: the method's own).")
@click.option("--labels", default=None, help="Class labels: a comma list or a file (default: the npz's y, if any).")
@click.option("--opt", "opts", multiple=True, metavar="KEY=VALUE", help="Method-specific refine option (repeatable).")
@click.option("--seed", default=0, show_default=True, help="Seed for methods that refine with noise.")
@click.option("--batch-size", default=256, show_default=True)
@device_option
def command(name, source, output, fmt, as_float, nrow, steps, labels, opts, seed, batch_size, device):
    """Refine images with a model: IGN projects them onto its learned set, a refiner cleans them."""
    from ..images import load_images, save_images
    from ..weights import load

    dev = resolve_device(device)
    model = load(name, device=dev)
    model.require("refine")
    options = parse_options(opts, model.refine_options, f"{model.name} refine")
    images, file_labels = load_images(source)
    given = parse_labels(labels)
    use_labels = given if given is not None else (file_labels if model.num_classes else None)
    refined = model.refine(images, labels=use_labels, steps=steps, seed=seed, batch_size=batch_size, device=dev,
                           progress=True, **options)
    out = Path(output or DEFAULT_OUT[fmt])
    save_images(refined, out, fmt, labels=use_labels, as_float=as_float, nrow=nrow)
    click.echo(f"refined {len(refined)} images into {out}")
