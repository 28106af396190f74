import click

from ..hub import check_repo_id, hub_ref
from ..pushing import push_to_hub, stage_push


@click.command("push")
@click.argument("model")
@click.option("--repo-id", default=None, metavar="ORG/NAME",
              help="The Hub repo to push to (created if missing). Required unless --dry-run.")
@click.option("--revision", default=None, metavar="BRANCH", help="Push to this branch, created from main if missing.")
@click.option("--private", is_flag=True, help="Create the repo as private (an existing repo keeps its visibility).")
@click.option("-m", "--message", default=None, help="Commit message (default: 'Upload genzoo model (METHOD)').")
@click.option("--token", default=None, metavar="TOKEN",
              help="A Hub token with write access (default: HF_TOKEN or the one saved by `hf auth login`).")
@click.option("--dry-run", "dry_run", default=None, metavar="DIR", type=click.Path(file_okay=False),
              help="Write the commit's files into DIR (a new folder) and stop before the network: read the card "
                   "offline.")
def command(model: str, repo_id: str | None, revision: str | None, private: bool, message: str | None,
            token: str | None, dry_run: str | None) -> None:
    """Upload a model to the Hugging Face Hub in one commit.

    MODEL is a model directory (e.g. the --out of `genzoo fit`) or a model name (genzoo list).
    The commit holds config.json, model.safetensors, a generated model card (README.md) and
    samples.png, a grid of 64 samples with seed 0. Prints the commit id. With --dry-run DIR the
    same files are written to DIR and nothing is uploaded.
    """
    if dry_run is not None:
        folder = stage_push(model, dry_run, repo_id=repo_id or "ORG/NAME", revision=revision)
        names = ", ".join(sorted(p.name for p in folder.iterdir()))
        target = hub_ref(check_repo_id(repo_id), revision) if repo_id else "hf://ORG/NAME (pass --repo-id to name it)"
        click.echo(f"staged {model} for {target} in {folder}: {names}; nothing was uploaded")
        return
    if repo_id is None:
        raise click.UsageError("Missing option '--repo-id' (or pass --dry-run DIR to stage the files without uploading).")
    repo_id = check_repo_id(repo_id)
    commit = push_to_hub(model, repo_id, revision=revision, private=private, message=message, token=token)
    click.echo(f"pushed {model} to {hub_ref(repo_id, revision)} in commit {commit}")
    click.echo(f"load it with: genzoo sample {hub_ref(repo_id, commit)}")
