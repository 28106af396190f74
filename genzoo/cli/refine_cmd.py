import click

from ..datasets import load_images
from ..errors import GenzooError
from ..generate import RefineOptions
from ..images import OUTPUT_RULE, output_target, replacing, save_images
from ..loading import load
from ..memory import check_images_fit
from .options import device_from, device_option, options_from, output_options, parse_labels, parse_options


@click.command("refine")
@click.argument("name")
@click.option("-i", "--input", "source", required=True,
              help="A PNG file (a grid written by genzoo sample is split back), a folder of PNGs, or an .npz (key x, optional y).")
@click.option("-o", "--output", default=None, help=f"Output path (default: refined.png / refined.npz / refined/). {OUTPUT_RULE}")
@output_options
@click.option("--labels", default=None, help="Class labels: a comma list or a file (default: the npz's y, if any).")
@click.option("--opt", "opts", multiple=True, metavar="KEY=VALUE", help="Method-specific refine option (repeatable).")
@options_from(RefineOptions)
@device_option
def command(name, source, output, fmt, as_float, nrow, labels, opts, device, **settings):
    """Refine images with a model: IGN projects them onto its learned set, a refiner cleans them."""
    o = RefineOptions(**settings)
    out, fmt = output_target(output, fmt, "refined")
    dev = device_from(device)
    given = parse_labels(labels)
    model = load(name, device=dev)
    model.require("refine")
    options = parse_options(opts, model, "refine")
    images, file_labels = load_images(source)
    expected = model.image_shape
    if tuple(images.shape[1:]) != tuple(expected):
        single = len(images) == 1
        raise GenzooError(
            f"{source} holds {'one' if single else len(images)} {'x'.join(map(str, images.shape[1:]))} image"
            f"{'' if single else 's'}, but {model.name} refines {'x'.join(map(str, expected))} images (C x H x W); "
            f"pass one image per PNG file, a folder of them, or an .npz (genzoo sample --format npz)"
        )
    check_images_fit([model], len(images), batch_size=o.batch_size, device=dev, precision=o.precision,
                     verb="refining", where=name)
    use_labels = given if given is not None else (file_labels if model.num_classes else None)
    if use_labels is not None:
        use_labels = model.labels_for(images.shape[0], use_labels)
    refined = model.refine(images, labels=use_labels, steps=o.steps, seed=o.seed, batch_size=o.batch_size, device=dev,
                           precision=o.precision, progress=o.progress, **options)
    note = replacing(out, fmt)
    save_images(refined, out, fmt, labels=use_labels, as_float=as_float, nrow=nrow)
    click.echo(f"refined {len(refined)} images into {out}" + (f" ({note})" if note else ""))
