import shlex

import click


@click.command("fit")
@click.argument("method")
@click.option("--dataset", default=None, help="mnist|cifar10|celeba[:SPLIT], folder:PATH or npz:PATH[:SPLIT].")
@click.option("--data-root", default=None, help="Where datasets live (default: $GENZOO_DATA_ROOT or ./data).")
@click.option("--steps", type=int, required=True, help="Total optimisation steps (--resume continues to this total).")
@click.option("--batch-size", default=64, show_default=True, help="Global batch, split over processes.")
@click.option("--out", required=True, help="Output directory: the model, logs, sample grids and checkpoints.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a Config field (repeatable).")
@click.option("--seed", default=0, show_default=True)
@click.option("--bf16", is_flag=True, help="bf16 autocast with fp32 master weights.")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its last checkpoint.")
@click.option("--checkpoint-every", default=1000, show_default=True, help="Steps between checkpoints.")
@click.option("--keep-checkpoints", default=1, show_default=True, help="How many recent checkpoints to keep.")
@click.option("--init", "init", default=None, metavar="MODEL_DIR",
              help="Fine-tune: start from this model directory's weights with a fresh optimiser.")
@click.option("--sample-every", default=1000, show_default=True, help="Steps between sample grids (0: never).")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar (for log files).")
def command(method, dataset, data_root, steps, batch_size, out, sets, seed, bf16, resume, checkpoint_every,
            keep_checkpoints, init, sample_every, no_progress):
    """Train METHOD and write a loadable model directory to --out.

    Runs on whatever Accelerate finds; for several processes use
    `accelerate launch --multi_gpu --num_processes N -m genzoo fit ...`.
    """
    from ..configs import parse_assignments
    from ..train import fit
    from . import GenzooGroup

    command_line = "genzoo " + " ".join(shlex.quote(a) for a in GenzooGroup.argv)
    path = fit(
        method, steps=steps, out=out, dataset=dataset, config=parse_assignments(sets), data_root=data_root,
        batch_size=batch_size, seed=seed, bf16=bf16, resume=resume, checkpoint_every=checkpoint_every,
        keep_checkpoints=keep_checkpoints, init=init,
        sample_every=sample_every, progress=not no_progress, command=command_line,
    )
    click.echo(f"model written to {path}")
