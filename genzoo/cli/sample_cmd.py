import click

from ..generate import generate
from ..images import output_target, save_images
from ..loading import load
from .options import (device_from, device_option, output_options, parse_labels, parse_options, parse_refine_options,
                      precision_option)


@click.command("sample")
@click.argument("name")
@click.option("-n", "--num", "n", default=64, show_default=True, type=click.IntRange(min=1), help="Number of images.")
@click.option("--seed", default=0, show_default=True, help="Image i depends only on (seed, i).")
@click.option("-o", "--output", default=None, help="Output path (default: samples.png / samples.npz / samples/).")
@output_options
@click.option("--labels", default=None, help="Class labels: a comma list or a file (conditional models; default i mod C).")
@click.option("--opt", "opts", multiple=True, metavar="KEY=VALUE", help="Method-specific sample option (repeatable).")
@click.option("--apply", default=1, show_default=True, type=click.IntRange(min=1),
              help="Apply the model K times: sample, then refine K-1 times.")
@click.option("--refine", "refiner_name", default=None, metavar="MODEL", help="Refine the samples with another model.")
@click.option("--refine-steps", type=click.IntRange(min=0), default=None, help="Steps for --refine (default: the refiner's own).")
@click.option("--refine-opt", "refine_opts", multiple=True, metavar="KEY=VALUE",
              help="Refine option for --refine, e.g. eps=1.0 for robust-mnist (repeatable).")
@click.option("--batch-size", default=256, show_default=True, type=click.IntRange(min=1))
@device_option
@precision_option()
def command(name, n, seed, output, fmt, as_float, nrow, labels, opts, apply, refiner_name, refine_steps, refine_opts,
            batch_size, device, precision):
    """Sample images from a pretrained model.

    NAME is a model name (genzoo list), an alias, a method (its default model), a model
    directory, or hf://ORG/NAME[@REVISION].
    """
    out, fmt = output_target(output, fmt, "samples")
    dev = device_from(device)
    label_tensor = parse_labels(labels)
    model = load(name, device=dev)
    options = parse_options(opts, model.sample_options, f"{model.name} sample")
    refiner = load(refiner_name, device=dev) if refiner_name else None
    refine_options = parse_refine_options(refine_opts, refine_steps, refiner_name, refiner)
    images, used_labels = generate(
        model, n, seed=seed, labels=label_tensor, apply=apply, refiner=refiner, refine_steps=refine_steps,
        batch_size=batch_size, device=dev, precision=precision, progress=True, options=options,
        refine_options=refine_options,
    )
    save_images(images, out, fmt, labels=used_labels, as_float=as_float, nrow=nrow)
    click.echo(f"wrote {len(images)} images to {out}")
