import click

from ..configs import parse_assignments
from ..exporting import STORAGE_DTYPES, export
from ..weights import file_hashes


@click.command("export")
@click.argument("source")
@click.argument("dest")
@click.option("--storage-dtype", type=click.Choice(STORAGE_DTYPES), default="float32",
              show_default=True, help="Precision of the stored floating-point tensors (loaders upcast).")
@click.option("--checkpoint", "step", type=int, default=None, metavar="STEP",
              help="Export the run's kept checkpoint at STEP instead of its final model (SOURCE: a run directory).")
@click.option("--recalibrate", is_flag=True,
              help="Recompute export-time statistics first (batch-norm statistics, a refiner's label offset "
                   "against its base generator as that base is now); a --checkpoint export always does.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Change a Config field that leaves the tensors as they are (an inference default such as a "
                   "refiner's refine_eps); a field that would change the network is refused (repeatable).")
def command(source: str, dest: str, storage_dtype: str, step: int | None, recalibrate: bool, sets: tuple[str, ...]) -> None:
    """Copy a model (a training output directory, a name, hf://...) to DEST as a clean model directory.

    DEST gets only config.json and model.safetensors (no checkpoints or logs), ready to bundle in
    a package or push; the sha256 of both files is printed for a registry entry. The training
    commands and the dataset in its provenance keep no paths of this machine: --data-root becomes
    DIR, --out runs/NAME, --init PATH models/NAME, --dataset npz:PATH npz:DIR/FILE and
    folder:PATH folder:DIR/NAME (with the fingerprint of the run's images), any other absolute path
    DIR/NAME; names of models and built-in datasets stay as they are. From Python:
    genzoo.export(SOURCE, DEST, ...).
    """
    out = export(source, dest, checkpoint=step, set=parse_assignments(sets) or None, storage_dtype=storage_dtype,
                 recalibrate=recalibrate)
    click.echo(f"exported {source} to {out}")
    click.echo("files:")
    for name, digest in file_hashes(out).items():
        click.echo(f"  {name}: {digest}")
