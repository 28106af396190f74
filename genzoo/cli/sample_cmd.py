from pathlib import Path

import click

from .common import device_option, output_options, parse_labels, parse_options, parse_refine_options, resolve_device

DEFAULT_OUT = {"grid": "samples.png", "npz": "samples.npz", "png-dir": "samples"}


@click.command("sample")
@click.argument("name")
@click.option("-n", "--num", "n", default=64, show_default=True, help="Number of images.")
@click.option("--seed", default=0, show_default=True, help="Image i depends only on (seed, i).")
@click.option("-o", "--output", default=None, help="Output path (default: samples.png / samples.npz / samples/).")
@output_options
@click.option("--labels", default=None, help="Class labels: a comma list or a file (conditional models; default i mod C).")
@click.option("--opt", "opts", multiple=True, metavar="KEY=VALUE", help="Method-specific sample option (repeatable).")
@click.option("--apply", default=1, show_default=True, help="Apply the model K times: sample, then refine K-1 times.")
@click.option("--refine", "refiner_name", default=None, metavar="MODEL", help="Refine the samples with another model.")
@click.option("--refine-steps", type=int, default=None, help="Steps for --refine (default: the refiner's own).")
@click.option("--refine-opt", "refine_opts", multiple=True, metavar="KEY=VALUE",
              help="Refine option for --refine, e.g. eps=1.0 for robust-mnist (repeatable).")
@click.option("--batch-size", default=256, show_default=True)
@device_option
def command(name, n, seed, output, fmt, as_float, nrow, labels, opts, apply, refiner_name, refine_steps, refine_opts,
            batch_size, device):
    """Sample images from a pretrained model.

    NAME is a model name (genzoo list), an alias, a method (its default model), a model
    directory, or hf://ORG/NAME[@REVISION].
    """
    from ..generate import generate
    from ..images import save_images
    from ..weights import load

    dev = resolve_device(device)
    model = load(name, device=dev)
    options = parse_options(opts, model.sample_options, f"{model.name} sample")
    refiner = load(refiner_name, device=dev) if refiner_name else None
    refine_options = parse_refine_options(refine_opts, refine_steps, refiner_name, refiner)
    images, used_labels = generate(
        model, n, seed=seed, labels=parse_labels(labels), apply=apply, refiner=refiner, refine_steps=refine_steps,
        batch_size=batch_size, device=dev, progress=True, options=options, refine_options=refine_options,
    )
    out = Path(output or DEFAULT_OUT[fmt])
    save_images(images, out, fmt, labels=used_labels, as_float=as_float, nrow=nrow)
    click.echo(f"wrote {len(images)} images to {out}")
