import click

from ..hub import check_repo_id, hub_ref
from ..pushing import push, stage

STAGED = "staged"  # where --dry-run without a folder writes the files


@click.command("push")
@click.argument("model")
@click.argument("repo", required=False, metavar="[ORG/NAME]")
@click.option("--repo-id", default=None, metavar="ORG/NAME",
              help="The Hub repo, as the REPO argument names it (give one of the two).")
@click.option("--revision", default=None, metavar="BRANCH", help="Push to this branch, created from main if missing.")
@click.option("--private", is_flag=True, help="Create the repo as private (an existing repo keeps its visibility).")
@click.option("-m", "--message", default=None, help="Commit message (default: 'Upload genzoo model (METHOD)').")
@click.option("--token", default=None, metavar="TOKEN",
              help="A Hub token with write access (default: HF_TOKEN or the one saved by `hf auth login`).")
@click.option("--source", default=None, metavar="URL",
              help="Where the model's code or project lives (e.g. https://github.com/ORG/PROJECT): recorded in "
                   "config.json and named on the card.")
@click.option("--license", "license_", default=None, metavar="LICENCE",
              help="The weights' licence, a Hub licence id first (e.g. cc-by-4.0, or 'CC BY-SA 3.0 (trained on "
                   "MNIST)'): recorded in config.json and stated on the card (default: the one the model records, "
                   "else its training data's).")
@click.option("--preview-images", "preview", type=click.IntRange(min=0), default=None, metavar="N",
              help="Samples in samples.png, drawn with seed 0 (default: the method's preview_images, 64 unless it "
                   "declares fewer; 0: no grid).")
@click.option("--dry-run", "dry_run", is_flag=False, flag_value=STAGED, default=None, metavar="[DIR]",
              type=click.Path(file_okay=False),
              help=f"Write the commit's files into DIR (a new or empty folder; default ./{STAGED}) and stop before "
                   f"the network: read the card offline.")
def command(model: str, repo: str | None, repo_id: str | None, revision: str | None, private: bool,
            message: str | None, token: str | None, source: str | None, license_: str | None, preview: int | None,
            dry_run: str | None) -> None:
    """Upload a model to the Hugging Face Hub in one commit.

    MODEL is a model directory (e.g. the --out of `genzoo fit`) or a model name (genzoo list);
    ORG/NAME is the Hub repo, created if missing (from Python: genzoo.push_to_hub(MODEL, "ORG/NAME")).
    The commit holds config.json, model.safetensors, a generated model card (README.md) and
    samples.png, a grid of samples with seed 0 (64 unless the method or --preview-images says
    otherwise). No path of this machine is published: the recorded commands and dataset are made
    portable as `genzoo export` makes them. Prints the commit id and how to use that commit. With
    --dry-run the same files are written to a folder and nothing is uploaded:

    \b
    genzoo push ign-mnist my-org/ign-mnist --dry-run      # writes ./staged, uploads nothing
    """
    if repo and repo_id and repo != repo_id:
        raise click.UsageError(f"the repo is named twice, {repo} and --repo-id {repo_id}; give one of them")
    repo = repo or repo_id
    stated = {"source": source, "license": license_, "preview": preview}
    if dry_run is not None:
        staged = stage(model, dry_run, repo_id=repo or "ORG/NAME", revision=revision, **stated)
        names = ", ".join(sorted(p.name for p in staged.folder.iterdir()))
        target = hub_ref(check_repo_id(repo), revision) if repo else "hf://ORG/NAME (name the repo after MODEL)"
        click.echo(f"staged {model} for {target} in {staged.folder}: {names}; nothing was uploaded")
        _ask_for_a_licence(staged.license)
        return
    if repo is None:
        raise click.UsageError("Missing argument 'ORG/NAME': name the Hub repo after MODEL (or pass --dry-run to "
                               "stage the files without uploading).")
    repo = check_repo_id(repo)
    pushed = push(model, repo, revision=revision, private=private, message=message, token=token, **stated)
    click.echo(f"pushed {model} to {hub_ref(repo, revision)} in commit {pushed.commit}")
    first, *others = pushed.load_commands()
    click.echo(f"load it with: {first}")
    for line in others:
        click.echo(f"          or: {line}")
    _ask_for_a_licence(pushed.license)


def _ask_for_a_licence(license: str) -> None:
    if not license:
        click.echo("the card states no licence for the weights: name one with --license (e.g. cc-by-4.0) and push "
                   "again", err=True)
