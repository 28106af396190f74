"""Regenerate docs/cli.md from the commands' own --help: python tools/gen_cli_md.py > docs/cli.md"""

from __future__ import annotations

import importlib.metadata
import os

import click

from genzoo.cli import cli
from genzoo.plugins import ALLOW_ENV

WIDTH = 78  # of the help text: what an 80-column terminal shows, whatever the terminal running this

HEADER = """# genzoo command line

Every verb is a thin shell over the Python API (`genzoo.load`, `Method.sample`/`refine`,
`genzoo.fit`, `genzoo.evaluate`, `genzoo.export`, `genzoo.push_to_hub`). Errors are one line
starting with `Error:` and exit with status 1. Plugins may add verbs (`genzoo plugins` lists
them); `genzoo new-plugin NAME` starts one ([plugins.md](plugins.md)).

Model names: a registry name or alias (`genzoo list`), a method name (its default model), a
model directory (a `genzoo fit --out` folder is one), or `hf://ORG/NAME[@REVISION]`. Names are
found in any case, and a misspelt one gets the closest known name.

Long work reports progress on stderr, so stdout stays the result: a bar on a terminal, and in a pipe
or a log a line at most every 30 s and every 10% of a stage (`--no-progress` silences both). Scoring
10,000 MNIST samples (`genzoo eval ign -n 10000`) took 169 s on 2 AMD EPYC cores (AVX2) while a
training shared them; with `--refine robust-mnist` about 6 minutes (scaled from robust-mnist's 48
refined images/s on 2 CPU cores). Tables and `genzoo info` fit the terminal's width (`COLUMNS`; 80
when it is unknown). A mistake in the options is one `Error:` line too, naming the `--help` to read;
Ctrl-C says what stopped and what was kept (exit status 130).

## When a run breaks

`genzoo fit` keeps a run's files either whole and verified or refuses them by name. Each refusal is
one `Error:` line (or, when the run goes on, one line on stderr):

| what it says | what happened | what to do |
|---|---|---|
| `--resume: checkpoint step-N: FILE has B bytes, ...`, `... FILE is missing`, `... FILE is altered`, `... state.json is damaged; it is skipped` | a file of the newest checkpoint was cut short, deleted or overwritten (every checkpoint lists the size and sha256 of its files in its state.json, written last) | nothing: the run resumes from the newest checkpoint that verifies (two are kept by default, `--keep-checkpoints`) and ends as an uninterrupted run would |
| `--resume: no checkpoint of DIR is whole (...)` | every kept checkpoint is damaged | start a new run in another `--out`; `genzoo export DIR DEST --checkpoint N` refuses a damaged checkpoint the same way |
| `DIR is in use by another genzoo fit (process P on HOST, started T)` | a second `genzoo fit` on a folder that a running one holds (a lock the system drops when that process ends, however it ends) | wait for it, stop it, or choose another `--out` |
| `DIR holds a run that stopped before its first checkpoint; nothing of it is kept, so it starts again` | the earlier attempt was killed before it saved anything | nothing: the same command starts the run again; with `--resume` it says so and starts from step 0 |
| `DIR already holds a run; pass --resume ...` | a finished or checkpointed run is in `--out` | `--resume` to continue it (to a larger `--steps`), or a new `--out` |
| `step N: loss is nan (not finite), so training stopped without saving that step; the checkpoint of step M is kept` | the training diverged | continue from step M with a changed setting: `genzoo fit ... --resume --allow-changes --set lr=...`; the change is recorded in fit.json's segment |
| `--resume: Config field 'F' differs from the run in DIR (was A, now B)` | a `--set` that differs from the run's | drop it, or pass `--allow-changes` (Config fields, the precision and the data only; the network must still fit) |
| `--resume: checkpoint step-N holds K optimiser(s), the method now configures J` | the method's code changed since the checkpoint | resume with the code that wrote it, or start a new run from its weights with `--init` |
| `--out DIR: FOLDER is not writable (permission denied)` | `--out`, its parent or its `checkpoints/` cannot be written; checked before any work | choose a writable folder or fix the permissions |
| `cannot write PATH (no space left on the device); the last complete checkpoint is kept` | the disk filled up during a run (the checkpoint being written is removed whole: no `.staging-step-*` folder stays) | make room, then `--resume` |
| `stopped by SIGTERM: checkpoint saved at step N; continue with --resume, ...` (exit 143; SIGUSR1: 138; Ctrl-C: `interrupted: ...`, 130) | the scheduler asked the job to stop (SLURM before its time limit, Kubernetes before evicting a pod), or Ctrl-C: the step in progress finished and was saved, every process of `accelerate launch` at the same step | `--resume`: the run ends with the weights of an uninterrupted one. A second Ctrl-C stops at once, without that step |
| `process R of N (process ID P on HOST) stopped answering T ago, in step S; ...` (exit 124) | one process of `accelerate launch` stopped (a hung node or GPU, a stopped process); the others waited `--collective-timeout` minutes (10 by default) | end that process or restart its node, then `--resume` from the last checkpoint |
| `--resume: the training data differs from the run in DIR (was 60000 images of 1x28x28, sha256 ..., now ...)` | other images behind the `--dataset` name (fit.json keeps the data's count, shape and a hash of up to 4,096 of its images, so the same file named another way is the same data) | resume on the data the run started with, or `--allow-changes` to continue on these (recorded in fit.json's segment) |
| `--resume: the run in DIR trains in fp16, which runs on GPUs only; ...` | a run started in fp16 on a GPU, resumed on a CPU | resume it on a GPU, or `--precision fp32 --allow-changes` |
| `DIR is already at step N >= --steps M; nothing to do` | `--resume` with no step left to train | nothing: no file of the run changes |
| `at step N process R holds other weights than process 0` | the processes made different updates | draw randomness that must agree across processes from the step's seed, not a process's own RNG |

On a SLURM cluster, ask for the signal a little before the time limit, long enough for one step and a
checkpoint (here 120 s), and let it reach genzoo: with `B:` SLURM signals the batch script's shell
only, so the script hands its process to genzoo with `exec` (without `B:` it signals every job step
started with `srun`):

```bash
#SBATCH --signal=B:TERM@120
exec genzoo fit ign --dataset mnist --steps 10000 --out runs/ign --resume
```

(The first submission runs without `--resume`; each requeued one continues from the checkpoint.)

The other verbs read model files, Hub repos and images as untrusted input, and write their outputs whole or not at
all:

| what it says | what happened | what to do |
|---|---|---|
| `DIR/config.json field 'F' must be an integer, got '64' (a string)`, `... gives format_version as '1' (a string)`, `... gives method as [...] (a list)` | a model's config.json holds a value of the wrong type or range (every field is typed as read, before anything is built) | export or download the model again |
| `DIR/config.json asks for C x S x S images: one alone takes N GiB ...`, `... describes a model of N GiB of weights ...` | the config asks for more memory than this machine has; refused before anything is built | load a model whose config fits; the file is damaged or not meant for genzoo |
| `... needs method 'M', which no installed plugin provides; the file names its plugin as '...', which is not a genzoo plugin name` | a model (a Hub repo's) names a plugin outside genzoo's naming rule (`genzoo-[a-z0-9-]+`): genzoo quotes it and offers no install command | find the plugin that provides the method from a source you trust |
| `robust's base generator leads back to itself ('A' -> 'A')` | a refiner's base model is the refiner, or a chain of bases returns to it | `genzoo export REFINER DEST --set base=MODEL` naming a generator |
| `the cached FILE of hf://ORG/NAME@COMMIT was changed after it was downloaded` | a file in the Hugging Face cache no longer matches the hash its download recorded (checked offline too) | `genzoo pull --force ORG/NAME` downloads it again |
| `cannot write PATH (no space left on the device); nothing was written there` | the disk filled while `sample`, `refine` or `export` wrote; an earlier file or png-dir is kept as it was, and no staging file is left | make room, then run the command again |
| `cannot write FILE of hf://ORG/NAME into the Hugging Face cache (...): no space left on the device` | the cache's disk filled during a download; the partial file is removed | make room, or set HF_HOME to another disk |
| `FILE claims more than N pixels, the most Pillow decodes safely` | an input image larger than Pillow's decompression-bomb guard allows | give images of the model's size |
| `FILE holds NaN or infinite pixel values`, `array 'x' holds no images`, `... does not read as images of 1 or 3 channels`, `--ref R holds images of shape ..., but feature network F takes ...` | images that cannot be scored or refined as they are; checked before any network runs (16-bit and other PNG modes are scaled to 0..255, never clipped) | fix the input, or give a reference of the right shape |
| `-o DIR holds files genzoo did not write` | `--format png-dir` into a folder holding other files | choose another folder; a folder of genzoo's own numbered PNGs is replaced whole, and the output line says so |
"""


def cli_reference() -> str:
    """docs/cli.md: the group's help, every verb's, then the built-in plugins' verbs."""
    context = click.Context(cli, info_name="genzoo", terminal_width=WIDTH, **cli.context_settings)
    parts = [HEADER, f"## genzoo\n\n```text\n{cli.get_help(context)}\n```\n"]
    for name in cli.list_commands(context):
        parts.append(section(cli.get_command(context, name), f"genzoo {name}", parent=context))
    parts.append("# Verbs of the built-in plugins\n")
    for name, command in sorted(cli.plugin_commands(context).items()):
        parts.append(section(command, f"genzoo {name}", parent=context))
    return "\n".join(parts)


def section(command: click.Command, path: str, parent: click.Context | None) -> str:
    """The help of ``command`` (and of its subcommands, for a group) under a heading naming it."""
    context = click.Context(command, info_name=path.rpartition(" ")[2], parent=parent)
    text = f"## {path}\n\n```text\n{command.get_help(context)}\n```\n"
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            text += "\n" + section(command.commands[name], f"{path} {name}", parent=context)
    return text


if __name__ == "__main__":
    # The page documents genzoo: only its own plugins are loaded, whatever else is installed here.
    os.environ[ALLOW_ENV] = ",".join(ep.name for ep in importlib.metadata.distribution("genzoo").entry_points
                                     if ep.group == "genzoo")
    print(cli_reference())
