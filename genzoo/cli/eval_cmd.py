import json
from pathlib import Path

import click

from .common import device_option, parse_labels, parse_refine_options, resolve_device


@click.command("eval")
@click.argument("name")
@click.option("-n", "--num", "n", default=10000, show_default=True, help="Number of generated images to score.")
@click.option("--ref", default="mnist:test", show_default=True, help="Reference images: a dataset spec (drawn with a fixed permutation).")
@click.option("--metrics", default="fid,kid,precision,recall,accuracy", show_default=True,
              help="Comma list of fid, kid, precision, recall, memorization, accuracy.")
@click.option("--features", default=None, help="Feature network (default: the one registered for --ref's dataset; 'inception' online).")
@click.option("--refine", default=None, metavar="MODEL", help="Refine the samples with another model first.")
@click.option("--refine-steps", type=int, default=None, help="Steps for --refine (default: the refiner's own).")
@click.option("--refine-opt", "refine_opts", multiple=True, metavar="KEY=VALUE",
              help="Refine option for --refine, e.g. eps=1.0 for robust-mnist (repeatable).")
@click.option("--apply", default=1, show_default=True, help="Apply the model K times (sample, then refine K-1 times).")
@click.option("--labels", default=None, help="Labels to request from a conditional model (comma list or file).")
@click.option("--seed", default=0, show_default=True)
@click.option("--data-root", default=None, help="Where datasets live (default: $GENZOO_DATA_ROOT or ./data).")
@click.option("--train", default=None, help="Training images for memorization (default: the training split of --ref).")
@click.option("--memorization-n", default=1000, show_default=True, help="Generated images (a fixed random subset) scored for memorization.")
@click.option("--kid-subset-size", default=1000, show_default=True)
@click.option("--json", "json_out", default=None, help="Also write the full result as JSON to this file.")
@click.option("--batch-size", default=256, show_default=True)
@device_option
def command(name, n, ref, metrics, features, refine, refine_steps, refine_opts, apply, labels, seed, data_root, train, memorization_n,
            kid_subset_size, json_out, batch_size, device):
    """Score a model's samples (or npz:PATH / folder:PATH images) against reference data.

    \b
    genzoo eval ign -n 10000 --ref mnist:test --data-root ../shared/data
    genzoo eval npz:samples.npz --ref mnist:test --metrics fid,kid
    """
    from ..metrics import evaluate

    refine_options = parse_refine_options(refine_opts, refine_steps, refine)
    result = evaluate(
        name, n=n, ref=ref, metrics=metrics, features=features, refine=refine, apply=apply, refine_steps=refine_steps,
        refine_options=refine_options, labels=parse_labels(labels),
        seed=seed, data_root=data_root, train=train, memorization_n=memorization_n, kid_subset_size=kid_subset_size,
        batch_size=batch_size, device=resolve_device(device), progress=True,
    )
    if json_out:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(json.dumps(result, indent=2) + "\n")
    m = result["metrics"]
    click.echo(f"{result['source']}: {result['n']} images vs {ref} ({result['reference']['n']}), "
               f"features {result['features']['name']}")
    for key, value in m.items():
        if isinstance(value, dict):
            shown = ", ".join(f"{k}={_fmt(v)}" for k, v in value.items())
            click.echo(f"  {key}: {shown}")
        else:
            click.echo(f"  {key}: {_fmt(value)}")


def _fmt(value):
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + " ".join(f"{v:.3f}" for v in value) + "]"
    return str(value)
