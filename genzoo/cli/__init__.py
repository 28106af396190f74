"""The ``genzoo`` command line: one module per verb, each a thin shell over the Python API."""

from __future__ import annotations

import click

from .group import LazyGroup, Verb

VERBS = {
    "datasets": Verb("datasets_cmd", "List the datasets --dataset and --ref can name: size, shape, labels, and where the "
                                     "files are expected."),
    "eval": Verb("eval_cmd", "Score a model's samples (or npz:PATH / folder:PATH images) against reference data."),
    "export": Verb("export_cmd", "Copy a model (a training output directory, a name, hf://...) to DEST as a clean "
                                 "model directory."),
    "fit": Verb("fit_cmd", "Train METHOD and write a loadable model directory to --out."),
    "info": Verb("info_cmd", "Show a model: summary, licence, status, metrics beside their reference rows, how to "
                             "sample and reproduce it."),
    "list": Verb("list_cmd", "List the pretrained models in the catalogue, and the installed methods that have none "
                             "yet."),
    "new-plugin": Verb("new_plugin_cmd", "Start a genzoo-NAME plugin project in DIRECTORY (default ./genzoo-NAME)."),
    "plot": Verb("plot_cmd", "Draw the loss curves of a training run (its metrics.jsonl) into a PNG."),
    "plugins": Verb("plugins_cmd", "List loaded plugins with their version, hooks, what they registered and any error."),
    "pull": Verb("pull_cmd", "Download a model from the Hugging Face Hub into the local cache ahead of time."),
    "push": Verb("push_cmd", "Upload a model to the Hugging Face Hub in one commit."),
    "refine": Verb("refine_cmd", "Refine images with a model: IGN projects them onto its learned set, a refiner "
                                 "cleans them."),
    "sample": Verb("sample_cmd", "Sample images from a pretrained model."),
}


COMPUTING_VERBS = {"eval", "export", "fit", "push", "refine", "sample"}  # the verbs a busy-machine notice concerns


@click.group(cls=LazyGroup, verbs=VERBS, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Plugins add verbs of their own: `genzoo plugins` lists them.")
@click.version_option(package_name="genzoo")
@click.option("--threads", type=click.IntRange(min=1), default=None, metavar="N",
              help="CPU threads torch uses (default: $GENZOO_THREADS, else the cores this process may use, fewer "
                   "when the machine's load shows other work holds them).")
@click.pass_context
def cli(ctx: click.Context, threads: int | None) -> None:
    """genzoo: a zoo of generative models behind one interface.

    \b
    genzoo sample ign -n 64 -o samples.png  # images from a pretrained model
    genzoo list                             # the catalogue of pretrained models
    genzoo fit ign --dataset mnist --data-root DIR --steps 20000 --out runs/my-ign
        # train a method on the data under DIR
        # (the test suite runs it with --steps 2)
    """
    import sys

    from ..threads import configure_threads

    asks_help = any(arg in ("-h", "--help") for arg in sys.argv[1:])
    computes = ctx.invoked_subcommand in COMPUTING_VERBS and not asks_help
    configure_threads(threads, say=None if computes else (lambda text: None))


def main() -> None:
    cli(prog_name="genzoo")
