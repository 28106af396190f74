"""How measurements are written for people: `genzoo info`, `genzoo eval`, docs/models.md and model cards.

A distance (FID, KID, SWD) means something only beside the reference rows of its feature network
and reference split (real images, and real images degraded), so each one is written with where it
falls among them: "FID 48.7: between noise 0.1 (28.4) and resize (195.7)". Every number is written
by :func:`format_value`, so one metric reads the same on every page.
"""

from __future__ import annotations

import math
import shutil
import textwrap
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Iterable

from .registry import RANKED_METRICS, Metric, ModelEntry, ReferenceSet, reference_set, reference_sets

LABELS = {"fid": "FID", "kid": "KID", "swd": "SWD", "class_entropy": "class entropy",
          "images_per_second": "images/s"}
FALLBACK_WIDTH = 80  # of text for people when the terminal's width is unknown (a pipe, a log file)
# What each distance is, and its factor: written once, in docs/models.md (tools/gen_models_md.py); every page
# prints the figures as format_value writes them, so a figure reads the same everywhere.
UNITS = {
    "fid": "the Frechet distance between the feature distributions of the images and of the reference split, in "
           "the feature network named beside it, as computed (no factor).",
    "kid": "the kernel distance: the raw unbiased estimate of the squared maximum mean discrepancy (cubic polynomial "
           "kernel) in the same features, as computed, with no factor (papers often print KID x1e3; genzoo does "
           "not). Being unbiased, it can fall below 0 when two sets are very close.",
    "swd": "the sliced Wasserstein distance between 7x7 pixel patches of each Laplacian-pyramid level, averaged "
           "over the levels and printed x1e3, as Karras et al. print it; no feature network is involved.",
}
PLACE_NOTE = ('"between A (a) and B (b)": the figure lies between those of reference rows A and B (real images, or '
              'real images degraded, scored the same way); lower is closer to the reference images.')
NEGATIVE_NOTE = "a KID below 0 is no error: the estimate is unbiased, so it can fall below 0 when two sets are this close"


def format_value(metric: str, value: float) -> str:
    """FID with one decimal, KID and SWD with three significant figures, precision and recall with three decimals,
    counts as integers, the rest as given; every rounding as :func:`fixed` rounds."""
    if metric == "fid":
        return fixed(value, 1)
    if metric in RANKED_METRICS:
        return _significant(value, 3)
    if metric in ("precision", "recall"):
        return fixed(value, 3)
    if value == int(value) and abs(value) >= 10:
        return f"{int(value):,}"
    return f"{value:.4g}"


def fixed(value: float, places: int) -> str:
    """``value`` to ``places`` decimals (tens, hundreds for 0, -1, ...), thousands separated, halves rounded away
    from zero as the value reads in decimal: 0.9085 (a recall of 9,085 in 10,000) is 0.909 on every page, whatever
    its binary form, which ``f"{0.9085:.3f}"`` rounds down."""
    exact = Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return f"{exact:,.{max(places, 0)}f}"


def _significant(value: float, digits: int) -> str:
    if value == 0:
        return "0"
    return fixed(value, digits - 1 - math.floor(math.log10(abs(value))))


def label(metric: Metric) -> str:
    """"FID", "FID of f(f(z))", "label accuracy"."""
    return LABELS.get(metric.metric, metric.metric.replace("_", " ")) + (f" of {metric.of}" if metric.of else "")


def metric_text(metric: Metric) -> str:
    return f"{label(metric)} {format_value(metric.metric, metric.value)}"


# -- reference rows ------------------------------------------------------------------------------------------


def place(references: ReferenceSet, metric: str, value: float) -> str:
    """Where ``value`` falls among the rows: "between resize (365.0) and blur (809.7)"; "" without rows."""
    rows = references.rows_with(metric)
    if not rows:
        return ""

    def named(row: Any) -> str:
        return f"{row.images} ({format_value(metric, row.values[metric])})"

    below = [r for r in rows if r.values[metric] <= value]
    above = [r for r in rows if r.values[metric] > value]
    if not below:
        return f"below every reference row (lowest: {named(above[0])})"
    if not above:
        return f"above every reference row (highest: {named(below[-1])})"
    return f"between {named(below[-1])} and {named(above[0])}"


def reference_row_text(references: ReferenceSet, metric: str) -> str:
    """"real 1.7, resize 365.0, ...": the rows that have ``metric``, lowest first."""
    return ", ".join(f"{r.images} {format_value(metric, r.values[metric])}" for r in references.rows_with(metric))


def group_by_scale(metrics: Iterable[Metric]) -> list[tuple[tuple[str, int, str], list[Metric]]]:
    """Metrics grouped by (feature network, images, reference split), in the order they first appear."""
    groups: dict[tuple[str, int, str], list[Metric]] = {}
    for metric in metrics:
        groups.setdefault(metric.scale, []).append(metric)
    return list(groups.items())


def describe_scale(scale: tuple[str, int, str]) -> str:
    """"10,000 images against cifar10:test in features-cifar10" (the parts that are known)."""
    features, n, reference = scale
    parts = [f"{n:,} images" if n else "", f"against {reference}" if reference else "",
             f"in {features}" if features else ""]
    return " ".join(p for p in parts if p)


def placed(metric: Metric) -> str:
    """A metric with where it falls among its reference rows, or a plain statement of it."""
    text = metric_text(metric) + (f" ({metric.note})" if metric.note else "")
    if metric.metric not in RANKED_METRICS:
        return text
    references = reference_set(metric)
    where = place(references, metric.metric, metric.value) if references else ""
    if where:
        return f"{text}: {where}"
    scale = describe_scale(metric.scale)
    return f"{text} (no reference rows recorded " + (f"for {scale})" if scale else "for its feature network and reference)")


def _ranked_names(metrics: Iterable[Metric]) -> list[str]:
    return list(dict.fromkeys(m.metric for m in metrics if m.metric in RANKED_METRICS))


# -- genzoo info ---------------------------------------------------------------------------------------------


def terminal_width() -> int:
    """The width to write text for people in: $COLUMNS, else the terminal's, else 80 (a pipe, a log file)."""
    return max(shutil.get_terminal_size((FALLBACK_WIDTH, 24)).columns, 20)


def wrap(text: str, indent: str = "", width: int | None = None, hanging: str | None = None) -> list[str]:
    """``text`` in lines of at most ``width`` characters (default: the terminal's), later lines indented by
    ``hanging`` (default: two spaces more than ``indent``); a word longer than a line (a hash, a URL) is not broken."""
    return textwrap.wrap(text, width or terminal_width(), initial_indent=indent,
                         subsequent_indent=indent + "  " if hanging is None else hanging,
                         break_on_hyphens=False, break_long_words=False) or [indent]


def info_metric_lines(metrics: list[Metric], *, reference_rows: bool) -> list[str]:
    """The metrics of `genzoo info`: one group per scale, each distance placed, the rest on one line."""
    lines: list[str] = []
    for scale, group in group_by_scale(metrics):
        described = describe_scale(scale)
        lines.append(f"quality, {described}:" if described else "other measurements:")
        ranked = [m for m in group if m.metric in RANKED_METRICS]
        for metric in ranked:
            lines += wrap(placed(metric), indent="  ")
        rest = [placed(m) for m in group if m.metric not in RANKED_METRICS]
        if rest:
            lines += wrap(("also: " if ranked else "") + "; ".join(rest), indent="  ")
        references = reference_set(ranked[0]) if ranked else None
        if references and reference_rows:
            lines.append(f"  reference rows ({references.n:,} images each, the same features and reference):")
            for name in _ranked_names(ranked):
                lines += wrap(f"{LABELS[name]}: {reference_row_text(references, name)}", indent="    ")
            if has_negative_kid(references):
                lines += wrap(f"({NEGATIVE_NOTE})", indent="    ")
    if any(m.metric in RANKED_METRICS for m in metrics):
        lines += wrap(PLACE_NOTE, indent="  ")
    return lines


def has_negative_kid(references: ReferenceSet) -> bool:
    return any(row.values.get("kid", 0) < 0 for row in references.rows)


# -- genzoo eval ---------------------------------------------------------------------------------------------


def eval_lines(report: dict[str, Any], *, several: bool) -> list[str]:
    """One evaluation report as `genzoo eval` prints it: every figure as :func:`format_value` writes it everywhere
    (KID the raw estimate, SWD x1e3), the refiner and its options in the header, and a note when the catalogue's
    figure for the same model was measured on another n or reference."""
    lines = [eval_header(report, several=several)]
    for key, value in report["metrics"].items():
        lines.append(f"  {key}: {_eval_value(key, value)}")
    return lines + [f"  note: {note}" for note in catalogue_notes(report)]


def eval_header(report: dict[str, Any], *, several: bool) -> str:
    """"ign (apply 2) refined by robust-mnist (eps=2.0): 500 images vs mnist:test (500), features features-mnist"."""
    what = report["source"] + (f" (apply {report['apply']})" if several else "")
    if report.get("sample_options"):
        what += " with " + _options_text(report["sample_options"])
    if report.get("refine"):
        settings = dict(report.get("refine_options") or {})
        if report.get("refine_steps") is not None:
            settings["steps"] = report["refine_steps"]
        what += f" refined by {report['refine']}" + (f" ({_options_text(settings)})" if settings else "")
    return (f"{what}: {report['n']:,} images vs {report['reference']['spec']} ({report['reference']['n']:,}), "
            f"features {report['features']['name']}")


def _options_text(options: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in options.items())


def _eval_value(key: str, value: Any) -> str:
    if key == "kid" and isinstance(value, dict):
        return kid_text(value)
    if key in RANKED_METRICS and isinstance(value, (int, float)):
        return format_value(key, value)
    if key == "swd_per_level" and isinstance(value, dict):
        return ", ".join(f"{level}={format_value('swd', v)}" for level, v in value.items())
    if isinstance(value, dict):
        return ", ".join(f"{k}={_result(v)}" for k, v in value.items())
    return _result(value)


def kid_text(kid: dict[str, Any]) -> str:
    """"100.7 (std 5.21; 100 subsets of 1,000 images from each set)", or, when every subset held every image of both
    sets, the one value it is, with no standard deviation."""
    mean, size = format_value("kid", kid["mean"]), f"{kid['subset_size']:,}"
    if kid.get("std") is None:
        return f"{mean} (one subset: all {size} images of each set, so no standard deviation)"
    text = f"{mean} (std {format_value('kid', kid['std'])}; {kid['subsets']} subsets of {size} images from each set"
    if kid.get("default_subset_size"):
        text += f": all of the smaller set, fewer than the default {kid['default_subset_size']:,}"
    return text + ")"


# Why a catalogue figure on another n is not this one's (FID and SWD read higher from fewer images; KID does not on
# average, but a figure from fewer images scatters more).
N_EFFECT = {"fid": "FID reads higher from fewer images", "swd": "SWD reads higher from fewer images",
            "kid": "KID is unbiased at any n, but a figure from fewer images scatters more"}


def catalogue_notes(report: dict[str, Any]) -> list[str]:
    """For each catalogue figure of the same model: the same n and reference (comparable), or which differ."""
    notes = []
    measured = report["metrics"]
    for figure in report.get("catalogue") or []:
        name = figure["metric"]
        if name not in measured:
            continue
        label = LABELS.get(name, name)
        of = f" ({figure['of']})" if figure.get("of") else ""
        theirs = f"the catalogue's {label} of {figure['model']}{of}, {format_value(name, figure['value'])}"
        other_n = figure["n"] != report["n"]
        other_reference = bool(figure["reference"]) and figure["reference"] != report["reference"]["spec"]
        differs = [part for part, differ in (
            (f"{figure['n']:,} images, not {report['n']:,}", other_n),
            (f"against {figure['reference']}, not {report['reference']['spec']}", other_reference)) if differ]
        if differs:
            why = [N_EFFECT.get(name, "n differs")] if other_n else []
            why += ["another reference"] if other_reference else []
            notes.append(f"{theirs}, was measured on {' and '.join(differs)}: not comparable with this one "
                         f"({'; '.join(why)})")
        else:
            notes.append(f"{theirs}, was measured on the same n and reference")
    return notes


def _result(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + " ".join("-" if v is None else f"{v:.3f}" for v in value) + "]"
    return str(value)


# -- Markdown: model cards and docs/models.md ----------------------------------------------------------------


def card_evaluation(metrics: list[Metric], evaluation: str) -> str:
    """The card's Evaluation section: each group of metrics measured alike, every distance beside its rows."""
    lines = ["## Evaluation", ""]
    for scale, group in group_by_scale(metrics):
        described = describe_scale(scale)
        if described:
            lines += [f"{described[0].upper()}{described[1:]}:", ""]
        lines += [f"- {placed(metric)}" for metric in sorted(group, key=lambda m: m.metric not in RANKED_METRICS)]
        lines.append("")
        ranked = [m for m in group if m.metric in RANKED_METRICS]
        references = reference_set(ranked[0]) if ranked else None
        if references:
            names = _ranked_names(ranked)
            lines += [f"Reference rows ({references.n:,} images each, the same features and reference):", "",
                      "| images | " + " | ".join(LABELS[n] for n in names) + " |", "|---|" + "---|" * len(names)]
            lines += [f"| {row.images}: {row.description} | "
                      + " | ".join(format_value(n, row.values[n]) if n in row.values else "" for n in names) + " |"
                      for row in references.rows]
            lines.append("")
            if "kid" in names and has_negative_kid(references):
                lines += [f"{NEGATIVE_NOTE[0].upper()}{NEGATIVE_NOTE[1:]}.", ""]
    if any(m.metric in RANKED_METRICS for m in metrics):
        lines += [f"Where a figure falls, {PLACE_NOTE} Units: " + " ".join(
            f"{LABELS[name]} is {UNITS[name]}" for name in _ranked_names(metrics)), ""]
    lines += [f"How they were measured: {' '.join(evaluation.split()) or 'not stated'}.".replace("..", "."), ""]
    return "\n".join(lines)


def models_table(entries: Iterable[ModelEntry]) -> str:
    """Every model: method, dataset, status, images seen in training, weights, what it is not good at, licence."""
    lines = ["| model | method | dataset | status | images seen | weights | what it is not good at | licence |",
             "|---|---|---|---|---|---|---|---|"]
    for e in entries:
        where = f"bundled (`{e.bundled}`)" if e.bundled else (f"`{e.hub_ref()}`" if e.hub else "not published")
        seen = f"{e.images_seen:,}" if e.images_seen is not None else "-"
        lines.append(f"| `{e.name}` | {e.method} | {e.dataset} | {e.status} | {seen} | {where} | "
                     f"{' '.join(e.limitations.split()) or '-'} | {e.license or '-'} |")
    return "\n".join(lines)


def distance_tables(entries: Iterable[ModelEntry]) -> list[tuple[str, str]]:
    """(heading, table) per (feature network, reference split), in registry.yaml's order of reference sets."""
    tables: dict[tuple[str, str], list[tuple[ModelEntry, list[Metric]]]] = {}
    for entry in entries:
        for (features, _, reference), metrics in group_by_scale(entry.metrics):
            if any(m.metric in RANKED_METRICS for m in metrics):
                tables.setdefault((features, reference), []).append((entry, metrics))
    order = [(s.features, s.reference) for s in reference_sets()]
    keys = sorted(tables, key=lambda k: order.index(k) if k in order else len(order))
    return [(f"{key[1]}, in {key[0]}", _distance_table(reference_set(tables[key][0][1][0]), tables[key]))
            for key in keys]


def _distance_table(references: ReferenceSet | None, rows: list[tuple[ModelEntry, list[Metric]]]) -> str:
    """Models and reference rows in the columns both have (the distances always), the first distance placed."""
    in_rows = {name for row in (references.rows if references else ()) for name in row.values}
    names = [name for name in dict.fromkeys(m.metric for _, metrics in rows for m in metrics)
             if name in RANKED_METRICS or name in in_rows]
    first = next(name for name in names if name in RANKED_METRICS)
    header = ["images", "n", *(LABELS.get(name, name) for name in names), f"where the {LABELS[first]} falls"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for entry, metrics in rows:
        for of in dict.fromkeys(m.of for m in metrics):
            same = {m.metric: m for m in metrics if m.of == of}
            name = f"`{entry.name}` ({entry.status})" + (f", {of}" if of else "")
            cells = [format_value(n, same[n].value) if n in same else "" for n in names]
            where = place(references, first, same[first].value) if references and first in same else ""
            lines.append("| " + " | ".join([name, f"{metrics[0].n:,}", *cells, where]) + " |")
    if references is None:
        return "\n".join(lines) + "\n\nNo reference rows are recorded for this feature network and reference split."
    for row in references.rows:
        cells = [format_value(n, row.values[n]) if n in row.values else "" for n in names]
        lines.append("| " + " | ".join([f"reference *{row.images}*: {row.description}", f"{references.n:,}", *cells, ""])
                     + " |")
    return "\n".join(lines) + (f"\n\nReference rows: `{references.source}`." if references.source else "")


def other_measurements(entries: Iterable[ModelEntry]) -> str:
    """The measurements no distance table holds, one line per model."""
    in_tables = {(s.features, s.reference): {n for r in s.rows for n in r.values} for s in reference_sets()}
    lines = []
    for e in entries:
        rest = [placed(m) for m in e.metrics if m.metric not in RANKED_METRICS
                and m.metric not in in_tables.get((m.features, m.reference), ())]
        if rest:
            lines.append(f"- `{e.name}`: " + "; ".join(rest))
    return "\n".join(lines) or "-"
