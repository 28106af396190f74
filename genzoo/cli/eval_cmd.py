import json
from pathlib import Path

import click

from ..configs import parse_assignments
from ..destinations import check_destination, write_text
from ..errors import GenzooError
from ..metrics.evaluation import EvalOptions, evaluate
from ..reporting import eval_lines
from .options import device_from, device_option, options_from, parse_labels


@click.command("eval")
@click.argument("name")
@options_from(EvalOptions)
@click.option("--opt", "sample_options", multiple=True, metavar="KEY=VALUE",
              help="Sample option of the model, e.g. steps=2 for a consistency model (repeatable).")
@click.option("--refine-opt", "refine_options", multiple=True, metavar="KEY=VALUE",
              help="Refine option for --refine, e.g. eps=1.0 for robust-mnist (repeatable).")
@click.option("--labels", default=None, help="Labels to request from a conditional model (comma list or file).")
@click.option("--json", "json_out", default=None, help="Also write the full result as JSON to this file.")
@device_option
def command(name, sample_options, refine_options, labels, json_out, device, **options):
    """Score a model's samples (or npz:PATH / folder:PATH images) against reference data.

    \b
    genzoo eval ign -n 10000 --ref mnist:test --data-root DIR   # (the test suite runs it with -n 500)
    genzoo eval ign --apply 1,2,3 -n 500 --ref mnist:test --data-root DIR   # f(z), f(f(z)), f(f(f(z)))
    genzoo sample ign -n 1000 -o samples.npz                    # images to score from a file
    genzoo eval npz:samples.npz -n 1000 --ref mnist:test --metrics fid,kid --data-root DIR
    genzoo eval consistency-mnist --opt steps=2 -n 500 --ref mnist:test --data-root DIR  # two steps

    DIR is the folder that holds the datasets (`genzoo datasets --data-root DIR` checks it). The
    report names what was scored (the refiner and its options too), prints each figure as `genzoo
    info` and docs/models.md do (the units are defined there), and says when the catalogue's figure
    for the same samples was measured on another n or reference: the two are then not comparable.

    \b
    KID averages --kid-subsets random subsets of --kid-subset-size images a set;
    a subset holding every image of both sets is scored once, with no std.

    Progress goes to stderr: a bar on a terminal, else a line at most every 30 s and 10% of a stage.
    """
    if json_out and Path(json_out).is_dir():
        raise GenzooError(f"--json {json_out} is a folder; name a file, e.g. {Path(json_out) / 'eval.json'}")
    if json_out:
        check_destination(json_out)  # before minutes of scoring
    result = evaluate(name, refine_options=parse_assignments(refine_options, "--refine-opt"),
                      sample_options=parse_assignments(sample_options, "--opt"),
                      labels=parse_labels(labels), device=device_from(device), **options)
    if json_out:
        write_text(json_out, json.dumps(result, indent=2) + "\n")
    for report in result if isinstance(result, list) else [result]:
        for line in eval_lines(report, several=isinstance(result, list)):
            click.echo(line)
    for note in (result[0] if isinstance(result, list) else result)["notes"]:
        click.echo(f"note: {note}")
