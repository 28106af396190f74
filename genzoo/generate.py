"""Sampling pipelines: sample, re-apply the model's own refine (``--apply K``), refine with another model.

Every default of ``genzoo sample`` and ``genzoo refine`` lives in :class:`SampleOptions` and
:class:`RefineOptions`; the commands build their options from these dataclasses
(``genzoo.cli.options.options_from``), and the Python functions read the same defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

import torch

from .compiling import COMPILE_CHOICES
from .configs import coerce_value, option
from .errors import ArgumentError, GenzooError
from .method import BATCH_SIZE, INFERENCE_PRECISION
from . import progress
from .precision import PRECISIONS

Precision = Literal[PRECISIONS]  # type: ignore[valid-type]
PRECISION_HELP = ("Numeric precision: fp32 (the same images on every machine, up to float rounding), bf16, fp16 "
                  "(GPUs), or auto (bf16 where native and measured faster on this machine). bf16 runs a denoiser "
                  "about twice as fast where the CPU has it natively; its images differ from fp32's by rounding, "
                  "which a stochastic sampler (churn) can amplify in a few pixels.")
COMPILE_HELP = ("torch.compile the network: auto (when images x network calls reach 100,000, e.g. an eval of "
                "10,000 images with a many-step sampler), on, off. Compiling takes about a minute the first time "
                "and runs a many-step sampler about 1.2x as fast; images equal eager's up to float rounding. auto "
                "stays eager where no C++ compiler is installed (torch.compile needs one on a CPU).")
Compile = Literal[COMPILE_CHOICES]  # type: ignore[valid-type]
PROGRESS_HELP = progress.HELP


@dataclass
class SampleOptions:
    """Settings of one sampling run (the options of ``genzoo sample``; :func:`generate` takes the same)."""

    n: int = option(64, flags=("-n", "--num"), min=1, help="Number of images.")
    seed: int = option(0, help="Image i depends only on (seed, i).")
    apply: int = option(1, min=1, help="Apply the model K times: sample, then refine K-1 times.")
    refine: str | None = option(None, metavar="MODEL", help="Refine the samples with another model.")
    refine_steps: int | None = option(None, min=0, help="Steps for --refine (default: the refiner's own).")
    batch_size: int = option(BATCH_SIZE, min=1, help="Images per forward pass (an image does not depend on it).")
    precision: Precision = option(INFERENCE_PRECISION, help=PRECISION_HELP)
    compile: Compile = option("auto", help=COMPILE_HELP)
    progress: bool = option(True, flags=("--progress/--no-progress",), help=PROGRESS_HELP)


@dataclass
class RefineOptions:
    """Settings of one refinement run (the options of ``genzoo refine``; ``Method.refine`` takes the same)."""

    steps: int | None = option(None, min=0, help="Refinement steps or applications (default: the method's own).")
    seed: int = option(0, help="Seed for methods that refine with noise.")
    batch_size: int = option(BATCH_SIZE, min=1, help="Images per forward pass (an image does not depend on it).")
    precision: Precision = option(INFERENCE_PRECISION, help=PRECISION_HELP)
    progress: bool = option(True, flags=("--progress/--no-progress",), help=PROGRESS_HELP)


def generate(
    model,
    n: int,
    *,
    seed: int,
    labels: torch.Tensor | Sequence[int | str] | None = None,
    apply: int = SampleOptions.apply,
    refiner=None,
    refine_steps: int | None = None,
    batch_size: int = BATCH_SIZE,
    device: torch.device | str | None = None,
    precision: str = INFERENCE_PRECISION,
    progress: bool = False,
    options: dict[str, Any] | None = None,
    refine_options: dict[str, Any] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``n`` images from ``model`` (and the labels they were made for, if any).

    ``apply=K`` samples, then runs the model's own refine K-1 more times; ``refiner`` (another
    model with refine) then post-processes, with the generator's labels when it has them.
    """
    from . import inference

    if apply < 1:
        raise ArgumentError("apply", f"{{arg}} must be >= 1, got {apply}")
    sampling = checked(model, "sample", options or {}, "sample_options")
    reapplying = checked(model, "refine", {}, "apply", apply - 1) if apply > 1 else None
    refining = checked(refiner, "refine", refine_options or {}, "refine_options", refine_steps) if refiner else None
    labels = model.labels_for(n, labels)  # once: class names become indices, none given become i mod C
    common = {"seed": seed, "generator": None, "batch_size": batch_size, "device": device, "precision": precision,
              "progress": progress}
    images = inference.sample(model, n, labels=labels, start=0, options=sampling, **common)
    if reapplying is not None:
        images = inference.refine(model, images, labels=labels, steps=apply - 1, options=reapplying, **common)
    if refining is not None:
        images = inference.refine(refiner, images, labels=labels if refiner.num_classes else None, steps=refine_steps,
                                  options=refining, **common)
    return images, labels


def check_refine(refiner, steps: int | None, options: dict[str, Any], argument: str = "refine_options") -> None:
    """Refuse refine settings ``refiner`` does not take, before any image is made (:func:`genzoo.inference.
    checked_options`); a refused option is an :class:`ArgumentError` of ``argument`` (the keyword, or the CLI flag's
    option)."""
    checked(refiner, "refine", options, argument, steps)


def checked(model, verb: str, options: dict[str, Any], argument: str, steps: int | None = None) -> dict[str, Any]:
    """``options`` of ``verb`` typed and checked as the model will run them; a refusal is an :class:`ArgumentError`
    of ``argument`` ("sample_options" from Python; the CLI names the flag the user typed, ``--opt``)."""
    from .inference import CheckedOptions, checked_options

    model.require(verb)
    if isinstance(options, CheckedOptions) and options.steps == steps:
        return options
    typed = typed_options(options, getattr(model, f"{verb}_options"), argument, f"{model.name} {verb}")
    try:
        return checked_options(model, verb, typed, steps)
    except ArgumentError:
        raise
    except GenzooError as exc:
        if not options:
            raise
        raise ArgumentError(argument, "{arg}: " + _literal(str(exc))) from None


def typed_options(values: dict[str, Any], declared: dict[str, Any], argument: str, owner: str) -> dict[str, Any]:
    """``{key: value}`` typed and range-checked by what a method declares (``sample_options``/``refine_options``).

    A key it does not declare, a value of the wrong type or outside its range is an :class:`ArgumentError`
    of ``argument`` ("sample_options" from Python; the CLI names the flag the user typed, ``--opt``).
    """
    typed = {}
    for key, value in values.items():
        if key not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise ArgumentError(argument, f"{{arg}} {_literal(key)}: {_literal(owner)} has no option {_literal(key)!r}; "
                                          f"its options: {known}")
        try:
            typed[key] = coerce_value(value, declared[key], "\0")
        except GenzooError as exc:
            raise ArgumentError(argument, _literal(str(exc)).replace("\0", f"{{arg}} {_literal(key)}")) from None
    return typed


def _literal(text: str) -> str:
    """``text`` with its braces doubled, for the message template of an :class:`ArgumentError`."""
    return text.replace("{", "{{").replace("}", "}}")
