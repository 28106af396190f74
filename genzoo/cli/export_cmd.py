import click


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
def command(source: str, dest: str, storage_dtype: str, step: int | None, recalibrate: bool) -> None:
    """Copy a model (a training output directory, a name, hf://...) to DEST as a clean model directory.

    DEST gets only config.json and model.safetensors (no checkpoints or logs), ready to bundle in
    a package or push; the sha256 of both files is printed for a registry entry.
    """
    from ..checkpoints import model_from_checkpoint
    from ..weights import file_hashes, load_model_dir, read_config, resolve, save_pretrained

    if step is not None:
        model, provenance = model_from_checkpoint(source, step)
    else:
        directory, hashes, _ = resolve(source)
        model = load_model_dir(directory, expected_hashes=hashes)
        provenance = read_config(directory).get("provenance")
        if recalibrate:
            model.prepare_export()
            provenance = {**(provenance or {}), "recalibrated_at_export": True}
    out = save_pretrained(model, dest, storage_dtype=None if storage_dtype == "float32" else storage_dtype,
                          provenance=provenance)
    click.echo(f"exported {source} to {out}")
    click.echo("files:")
    for name, digest in file_hashes(out).items():
        click.echo(f"  {name}: {digest}")
