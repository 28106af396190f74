import click

from ..hub import check_repo_id, hub_ref
from ..pushing import push_to_hub, stage_push

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
@click.option("--dry-run", "dry_run", is_flag=False, flag_value=STAGED, default=None, metavar="[DIR]",
              type=click.Path(file_okay=False),
              help=f"Write the commit's files into DIR (a new or empty folder; default ./{STAGED}) and stop before "
                   f"the network: read the card offline.")
def command(model: str, repo: str | None, repo_id: str | None, revision: str | None, private: bool,
            message: str | None, token: str | None, dry_run: str | None) -> None:
    """Upload a model to the Hugging Face Hub in one commit.

    MODEL is a model directory (e.g. the --out of `genzoo fit`) or a model name (genzoo list);
    ORG/NAME is the Hub repo, created if missing (from Python: genzoo.push_to_hub(MODEL, "ORG/NAME")).
    The commit holds config.json, model.safetensors, a generated model card (README.md) and
    samples.png, a grid of 64 samples with seed 0. Prints the commit id. With --dry-run the same
    files are written to a folder and nothing is uploaded:

    \b
    genzoo push ign-mnist my-org/ign-mnist --dry-run      # writes ./staged, uploads nothing
    """
    if repo and repo_id and repo != repo_id:
        raise click.UsageError(f"the repo is named twice, {repo} and --repo-id {repo_id}; give one of them")
    repo = repo or repo_id
    if dry_run is not None:
        folder = stage_push(model, dry_run, repo_id=repo or "ORG/NAME", revision=revision)
        names = ", ".join(sorted(p.name for p in folder.iterdir()))
        target = hub_ref(check_repo_id(repo), revision) if repo else "hf://ORG/NAME (name the repo after MODEL)"
        click.echo(f"staged {model} for {target} in {folder}: {names}; nothing was uploaded")
        return
    if repo is None:
        raise click.UsageError("Missing argument 'ORG/NAME': name the Hub repo after MODEL (or pass --dry-run to "
                               "stage the files without uploading).")
    repo = check_repo_id(repo)
    commit = push_to_hub(model, repo, revision=revision, private=private, message=message, token=token)
    click.echo(f"pushed {model} to {hub_ref(repo, revision)} in commit {commit}")
    click.echo(f"load it with: genzoo sample {hub_ref(repo, commit)}")
