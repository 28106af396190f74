import dataclasses

import click
import torch

from ..compiling import compile_for_sampling
from ..destinations import writing
from ..errors import GenzooError
from ..generate import SampleOptions, generate
from ..images import OUTPUT_RULE, class_rows, output_target, replacing, save_images, save_png
from ..inputs import per_class_labels
from ..loading import load
from ..memory import check_images_fit
from .options import (device_from, device_option, options_from, output_options, parse_labels, parse_options,
                      parse_refine_options)


@click.command("sample")
@click.argument("name")
@click.option("-o", "--output", default=None, help=f"Output path (default: samples.png / samples.npz / samples/). {OUTPUT_RULE}")
@output_options
@click.option("--labels", default=None, help="Class labels, as integers or class names: a comma list (repeated in turn to -n) or "
              "a file (conditional models; default i mod C).")
@click.option("--per-class", type=click.IntRange(min=1), default=None, metavar="K",
              help="K images of every class of a conditional model, in one labelled row per class (sets -n to K x "
              "classes; a grid output draws the rows).")
@click.option("--opt", "opts", multiple=True, metavar="KEY=VALUE", help="Method-specific sample option (repeatable).")
@click.option("--refine-opt", "refine_opts", multiple=True, metavar="KEY=VALUE",
              help="Refine option for --refine, e.g. eps=1.0 for robust-mnist (repeatable).")
@options_from(SampleOptions)
@device_option
def command(name, output, fmt, as_float, nrow, labels, per_class, opts, refine_opts, device, **settings):
    """Sample images from a pretrained model.

    NAME is a model name (genzoo list), an alias, a method (its default model), a model
    directory, or hf://ORG/NAME[@REVISION].
    """
    o = SampleOptions(**settings)
    out, fmt = output_target(output, fmt, "samples")
    dev = device_from(device)
    label_tensor = parse_labels(labels)
    model = load(name, device=dev)
    options = parse_options(opts, model, "sample")
    if per_class is not None:
        label_tensor = checked_per_class(model, per_class, label_tensor, name)
        o = dataclasses.replace(o, n=len(label_tensor))
    refiner = load(o.refine, device=dev) if o.refine else None
    refine_options = parse_refine_options(refine_opts, o.refine_steps, o.refine, refiner)
    check_images_fit([model, refiner], o.n, batch_size=o.batch_size, device=dev, precision=o.precision, where=name)
    said = compile_for_sampling(model, o.n, options, o.compile)
    if said:
        click.echo(said, err=True)
    images, used_labels = generate(
        model, o.n, seed=o.seed, labels=label_tensor, apply=o.apply, refiner=refiner, refine_steps=o.refine_steps,
        batch_size=o.batch_size, device=dev, precision=o.precision, progress=o.progress, options=options,
        refine_options=refine_options,
    )
    note = replacing(out, fmt)
    if per_class is not None and fmt == "grid":
        with writing(out):
            save_png(class_rows(images, used_labels, model.class_names), out)
    else:
        save_images(images, out, fmt, labels=used_labels, as_float=as_float, nrow=nrow)
    click.echo(f"wrote {len(images)} images to {out}" + (f" ({note})" if note else ""))


def checked_per_class(model, k: int, labels, name: str) -> torch.Tensor:
    """``--per-class K``'s labels (:func:`genzoo.inputs.per_class_labels`), refused beside --labels or for an
    unconditional model."""
    if labels is not None:
        raise GenzooError("--per-class draws every class: give it or --labels, not both")
    if not model.num_classes:
        raise GenzooError(f"--per-class: {name} is not class-conditional (it has no classes); use -n for a grid")
    return per_class_labels(model, k)
