from pathlib import Path

import click

from ..checkpoints import model_from_checkpoint
from ..configs import parse_assignments, replace_config
from ..errors import GenzooError
from ..loading import resolve
from ..weights import file_hashes, load_model_dir, read_config, save_pretrained


@click.command("export")
@click.argument("source")
@click.argument("dest")
@click.option("--storage-dtype", type=click.Choice(["float32", "float16", "bfloat16"]), default="float32",
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
    a package or push; the sha256 of both files is printed for a registry entry.
    """
    if Path(dest).exists() and not Path(dest).is_dir():
        raise GenzooError(f"DEST {dest} is a file; a model is exported to a directory: choose another path")
    if step is not None:
        model, provenance = model_from_checkpoint(source, step)
    else:
        directory, hashes, _ = resolve(source)
        model = load_model_dir(directory, expected_hashes=hashes)
        provenance = read_config(directory).get("provenance")
        if recalibrate:
            model.prepare_export()
            provenance = {**(provenance or {}), "recalibrated_at_export": True}
    if sets:
        overrides = parse_assignments(sets)
        model = with_config(model, overrides)
        provenance = {**(provenance or {}), "export_set": {key: getattr(model.config, key) for key in overrides}}
    out = save_pretrained(model, dest, storage_dtype=None if storage_dtype == "float32" else storage_dtype,
                          provenance=provenance)
    click.echo(f"exported {source} to {out}")
    click.echo("files:")
    for name, digest in file_hashes(out).items():
        click.echo(f"  {name}: {digest}")


def with_config(model, overrides: dict[str, str]):
    """The same tensors under a config with ``overrides``; refused if the overrides change any tensor."""
    config = replace_config(model.config, overrides, where=f"{model.name} config")
    rebuilt = type(model)(config)
    old, new = model.state_dict(), rebuilt.state_dict()
    changed = sorted(k for k in old.keys() | new.keys()
                     if k not in old or k not in new or old[k].shape != new[k].shape or old[k].dtype != new[k].dtype)
    if changed:
        keys = ", ".join(sorted(overrides))
        raise GenzooError(f"export --set {keys} changes the network's tensors ({', '.join(changed[:3])}); "
                          f"retrain with genzoo fit --set {keys}=... instead")
    rebuilt.load_state_dict(old, strict=True)
    return rebuilt.eval()
