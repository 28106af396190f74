import shlex
from pathlib import Path, PurePath

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
    a package or push; the sha256 of both files is printed for a registry entry. The training
    commands and the dataset in its provenance keep no paths of this machine: --data-root becomes
    DIR, --out runs/NAME, --init PATH models/NAME and --dataset npz:PATH npz:DIR/FILE (names of
    models and built-in datasets stay as they are).
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
    provenance = portable_provenance(provenance)
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


def _dataset_spec(spec: str) -> str:
    """``npz:/home/me/faces.npz`` -> ``npz:DIR/faces.npz``; a built-in dataset's name stays as it is."""
    kind, colon, path = spec.partition(":")
    return f"{kind}:DIR/{PurePath(path).name}" if colon and "/" in path else spec


PATH_PLACEHOLDERS = {"--data-root": lambda path: "DIR", "--out": lambda path: f"runs/{PurePath(path).name}",
                     "--init": lambda path: f"models/{PurePath(path).name}" if "/" in path else path,
                     "--dataset": _dataset_spec}


def portable_command(command: str) -> str:
    """``command`` with the paths that only mean something on the machine that ran it replaced by placeholders."""
    try:
        words = shlex.split(command)
    except ValueError:  # not a shell line we wrote: leave it as it is
        return command
    out: list[str] = []
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if eq and flag in PATH_PLACEHOLDERS:
            word = f"{flag}={PATH_PLACEHOLDERS[flag](value)}"
        elif i > 0 and words[i - 1] in PATH_PLACEHOLDERS:
            word = PATH_PLACEHOLDERS[words[i - 1]](word)
        out.append(word)
    return shlex.join(out)


def portable_provenance(provenance: dict | None) -> dict | None:
    """The provenance with :func:`portable_command` applied to its commands, and its dataset's path shortened."""
    if not provenance:
        return provenance
    result = dict(provenance)
    if isinstance(result.get("commands"), list):
        result["commands"] = [portable_command(str(c)) for c in result["commands"]]
    if isinstance(result.get("dataset"), str):
        result["dataset"] = _dataset_spec(result["dataset"])
    return result


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
