"""Rewrite the result tables of docs/results.md and docs/methods/*.md from registry.yaml and benchmarks/results/.

    python tools/gen_tables.py           # rewrite every generated block in place
    python tools/gen_tables.py --check   # list the stale blocks and exit 1 if any (tests/test_gen_tables.py)

A generated block in a page is

    <!-- generated: NAME -->
    ...
    <!-- end generated -->

with NAME a key of TABLES; the text between the markers is replaced, the rest of the page is left
as written. Each table reads its numbers from one source: the catalogue's own figures from
registry.yaml, every other measurement from the JSON file the benchmark wrote.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

import yaml

from genzoo import reporting
from genzoo.reporting import format_value

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGES = ("docs/results.md", "docs/methods/ign.md", "docs/methods/robust.md", "docs/methods/mmb.md",
         "docs/methods/edm.md", "docs/methods/consistency.md", "docs/methods/gan.md")
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)

# -- sources -------------------------------------------------------------------------------------


@functools.cache
def result(name: str) -> Any:
    """A results file of benchmarks/results/, parsed."""
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def report(name: str, *path: str) -> dict[str, Any]:
    """The metrics of one evaluation report inside a results file."""
    node = result(name)
    for key in path:
        node = node[key]
    return node["metrics"] if "metrics" in node else node


@functools.cache
def registry() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "registry.yaml").read_text(encoding="utf-8"))


def entry(model: str) -> dict[str, Any]:
    return registry()["models"][model]


def measured(model: str, metric: str, of: str | None = None) -> dict[str, Any]:
    """The registry.yaml metric row of ``model`` (``of``: what else was scored, None for its own samples)."""
    for row in entry(model)["metrics"]:
        if row["metric"] == metric and row.get("of") == of:
            return row
    raise KeyError(f"registry.yaml has no {metric!r} of {of or 'its own samples'} for {model}")


def bundled_config(model: str) -> dict[str, Any]:
    package, folder = entry(model)["bundled"].split(":")
    return json.loads((ROOT / "plugins" / package / folder / "config.json").read_text(encoding="utf-8"))["config"]


REFERENCE_FILES = {"mnist": ("reference.json", "reference_swd_mnist.json"),
                   "cifar10": ("reference_cifar10.json", "reference_swd_cifar10.json"),
                   "celeba64": ("reference_celeba64.json", "reference_swd_celeba64.json")}
REFERENCE_ROWS = {"real": "real training images", "resize": "resized to 7/8 and back",
                  "blur": "Gaussian blur sigma 1", "noise 0.1": "additive noise sigma 0.1",
                  "noise 0.3": "additive noise sigma 0.3"}
REFERENCE_LABELS = {"real": "real training images", "resize": "resized to 7/8 and back",
                    "blur": "blurred, sigma 1", "noise 0.1": "noise sigma 0.1", "noise 0.3": "noise sigma 0.3"}


def reference(dataset: str, row: str) -> dict[str, Any]:
    """A reference row's metrics in the dataset's feature network and in pixels (SWD), merged."""
    features, pixels = REFERENCE_FILES[dataset]
    key = REFERENCE_ROWS[row]
    return {**report(features, "rows", key), **report(pixels, "rows", key)}


def pixel_rows(reference_split: str) -> list[dict[str, Any]]:
    """registry.yaml's SWD reference rows for a reference split."""
    for group in registry()["references"]:
        if group["features"] == "pixels" and group["reference"] == reference_split:
            return group["rows"]
    raise KeyError(f"registry.yaml has no SWD reference rows for {reference_split}")


# -- numbers ---------------------------------------------------------------------------------------


def fixed(value: float | None, places: int = 1) -> str:
    return "" if value is None else reporting.fixed(value, places)


def percent(share: float, places: int = 1) -> str:
    return f"{100 * share:.{places}f}%"


def change(after: float, before: float) -> str:
    return f"{100 * (after - before) / before:+.0f}%"


def fid(m: dict) -> str:
    return "" if m.get("fid") is None else format_value("fid", m["fid"])


def kid(m: dict) -> str:
    value = m.get("kid")
    value = value["mean"] if isinstance(value, dict) else value
    return "" if value is None else format_value("kid", value)  # three significant figures, as every page writes KID


def three(value: float | None) -> str:
    return fixed(value, 3)


def swd(m: dict) -> str:
    return "" if m.get("swd") is None else format_value("swd", m["swd"])  # three significant figures, as everywhere


def entropy(m: dict) -> str:
    return fixed(m["classes"]["entropy"], 4) if "classes" in m else ""


def confidence(m: dict) -> str:
    return three(m["classes"]["confidence"]) if "classes" in m else ""


def levels(m: dict) -> str:
    return " / ".join(fixed(v) for v in m["swd_per_level"].values())


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def reference_rows(dataset: str, names: list[str], cells: Callable[[dict], list[str]],
                   label: Callable[[str], str] = lambda name: f"reference: {REFERENCE_LABELS[name]}") -> list[list[str]]:
    return [[label(name), *cells(reference(dataset, name))] for name in names]


# -- the reference rows ------------------------------------------------------------------------------


def reference_fid() -> str:
    header = ["images"] + [f"{d} {m}" if m == "FID" else m for d in ("MNIST", "CIFAR-10", "CelebA")
                           for m in ("FID", "KID", "P", "R")]
    rows = []
    for name in REFERENCE_ROWS:
        cells = [REFERENCE_ROWS[name]]
        for dataset in REFERENCE_FILES:
            m = reference(dataset, name)
            cells += [fid(m), kid(m), three(m["precision"]), three(m["recall"])]
        rows.append(cells)
    return table(header, rows)


def reference_swd() -> str:
    header = ["images", "MNIST SWD", "28 / 14", "CIFAR-10 SWD", "32 / 16", "CelebA SWD", "64 / 32 / 16"]
    rows = []
    for name in REFERENCE_ROWS:
        cells = [REFERENCE_ROWS[name]]
        for dataset in REFERENCE_FILES:
            m = reference(dataset, name)
            cells += [swd(m), levels(m)]
        rows.append(cells)
    return table(header, rows)


# -- every model in SWD beside its FID (registry.yaml) ------------------------------------------------

SWD_ROWS = [  # model, what its samples are, the registry's `of` for them
    ("ign-mnist", "f(z)", None), ("ign-mnist", "f(f(z))", "f(f(z))"),
    ("robust-mnist", "ign-mnist refined", None),
    ("consistency-mnist", "one step", None), ("consistency-mnist", "two steps", "two steps (--opt steps=2)"),
    ("robust-consistency-mnist", "consistency-mnist (one step) refined", None),
    ("mmb-mnist", "class-conditional", None),
    ("ign-cifar10", "f(z)", None), ("ign-cifar10", "f(f(z))", "f(f(z))"),
    ("robust-cifar10", "ign-cifar10 refined", None),
    ("robust-consistency-cifar10", "consistency-cifar10 (one step) refined", None),
    ("ign-celeba64", "f(z)", None),
]


def falls(value: float, rows: list[dict[str, Any]]) -> str:
    """Where ``value`` lies among a reference set's rows: 'between real (5.2) and noise 0.1 (27.9)'."""
    ordered = sorted(rows, key=lambda row: row["swd"])
    below = [row for row in ordered if row["swd"] <= value]
    above = [row for row in ordered if row["swd"] > value]
    if not below:
        return f"below every row (real: {fixed(ordered[0]['swd'])})"
    if not above:
        return f"above every row ({below[-1]['images']}: {fixed(below[-1]['swd'])})"
    return (f"between {below[-1]['images']} ({fixed(below[-1]['swd'])}) and "
            f"{above[0]['images']} ({fixed(above[0]['swd'])})")


def swd_beside_fid() -> str:
    rows = []
    for model, samples, of in SWD_ROWS:
        pixels = measured(model, "swd", of)
        rows.append([f"`{model}`", samples, fixed(measured(model, "fid", of)["value"]),
                     format_value("swd", pixels["value"]), falls(pixels["value"], pixel_rows(pixels["reference"]))])
    return table(["model", "samples", "FID (own features)", "SWD", "SWD falls"], rows)


# -- IGN --------------------------------------------------------------------------------------------

APPLIED = {"apply 1": "f(z)", "apply 2": "f(f(z))", "apply 3": "f(f(f(z)))"}


def smallest_largest(m: dict) -> str:
    shares = m["classes"]["histogram"]
    low, high = min(range(len(shares)), key=shares.__getitem__), max(range(len(shares)), key=shares.__getitem__)
    return f"{low}: {percent(shares[low], 2)} / {high}: {percent(shares[high], 2)}"


def ign_mnist() -> str:
    def cells(m: dict) -> list[str]:
        return [fid(m), kid(m), three(m["precision"]), three(m["recall"]), entropy(m), confidence(m)]

    rows = [[label, *cells(report("ign_quality.json", key)), smallest_largest(report("ign_quality.json", key))]
            for key, label in APPLIED.items()]
    rows += reference_rows("mnist", list(REFERENCE_ROWS), lambda m: [*cells(m), ""])
    return table(["images", "FID", "KID", "precision", "recall", "class entropy", "confidence",
                  "smallest / largest class"], rows)


def ign_batchnorm_modes() -> str:
    modes = {"calibrated": "calibrated per source (what `sample` uses; batch-independent)",
             "batch": "train-mode statistics of each batch of 256 (batch-dependent)",
             "pooled": "pooled statistics, as running averages give (plain eval mode)"}
    data = result("ign_batchnorm_modes.json")
    rows = [[label, fixed(data[key]["fid"]), fixed(data[key]["entropy"], 4), three(data[key]["confidence"])]
            for key, label in modes.items()]
    rows += reference_rows("mnist", ["real", "blur"], lambda m: [fid(m), entropy(m), confidence(m)])
    return table(["images", "FID", "class entropy", "confidence"], rows)


def ign_projection() -> str:
    data = result("ign_projection.json")

    def cell(m: dict) -> str:
        return f"{percent(m['accuracy'])} / {m['psnr']:.1f} dB"

    labels = {"noise sigma 0.3": "Gaussian noise, sigma 0.3", "10x10 occlusion": "10x10 occluding square",
              "sketch (outline)": "sketch (outline only)"}
    rows = [[label, cell(data[key]["before"]), cell(data[key]["after K=1"]), cell(data[key]["after K=2"])]
            for key, label in labels.items()]
    return table(["corruption", "before", "f applied once", "twice"], rows)


def ign_cifar10() -> str:
    def cells(m: dict) -> list[str]:
        return [fid(m), kid(m), three(m["precision"]), three(m["recall"]), fixed(m["classes"]["entropy"], 3),
                confidence(m)]

    rows = [[label, *cells(report("ign_cifar10.json", key))] for key, label in APPLIED.items()]
    rows += reference_rows("cifar10", list(REFERENCE_ROWS), cells)
    return table(["images", "FID", "KID", "precision", "recall", "class entropy", "confidence"], rows)


def ign_celeba64() -> str:
    def cells(m: dict) -> list[str]:
        return [swd(m), levels(m), fid(m), kid(m), three(m["precision"]), three(m["recall"])]

    rows = [[label, *cells(report("ign_celeba64.json", key))] for key, label in APPLIED.items()]
    rows += reference_rows("celeba64", list(REFERENCE_ROWS), cells,
                           lambda name: "reference: the 4,000 real training faces" if name == "real"
                           else f"reference: {REFERENCE_LABELS[name]}")
    return table(["images", "SWD", "64 / 32 / 16", "FID", "KID", "precision", "recall"], rows)


def ign_passes() -> str:
    runs = result("ign_speed_passes_zen4.json")["precisions"]
    pairs = {p: runs[p]["train_256_passes_paired"] for p in ("fp32", "bf16")}
    four = [fixed(pairs[p]["four_passes_images_per_s"], 0) for p in pairs]
    three_ = [f"{pairs[p]['three_passes_images_per_s']:,.0f} "
              f"({pairs[p]['three_passes_images_per_s'] / pairs[p]['four_passes_images_per_s']:.2f}x)" for p in pairs]
    return table(["training step, batch 256", "fp32 images/s", "bf16 images/s"],
                 [["four passes of f", *four], ["three passes of f", *three_]])


def ign_models() -> str:
    rows = []
    for model in ("ign-mnist", "ign-cifar10", "ign-celeba64"):
        own = measured(model, "fid")
        dataset = own["reference"].split(":")[0]
        refs = " / ".join(fid(reference(dataset, name)) for name in ("real", "resize", "blur", "noise 0.3"))
        rows.append([f"`{model}`", entry(model)["status"], fixed(own["value"]),
                     fixed(measured(model, "fid", "f(f(z))")["value"]), refs,
                     f"`genzoo eval {model} -n {own['n']} --ref {own['reference']} --data-root DIR`"])
    return table(["model", "status", "FID of f(z)", "FID of f(f(z))",
                  "reference rows: real / resize / blur / noise 0.3", "command"], rows)


# -- the robust refiner ------------------------------------------------------------------------------


def robust_mnist() -> str:
    unrefined = report("robust_default.json", "unrefined")
    ablations = {"robust-mnist": "+ robust-mnist (joint), radius 2.0",
                 "runs/robust-clsonly (recalibrated)": "+ classifier only (BIGRoC), radius 2.0",
                 "runs/robust-plain (recalibrated)": "+ plain classifier, radius 2.0"}
    refiners = [("+ robust-mnist (joint), radius 1.0: the bundled default", result("robust_default.json")["robust-mnist"])]
    refiners += [(label, result("robust.json")[key]) for key, label in ablations.items()]
    before = result("robust_default.json")["robust-mnist"]["label_accuracy_before"]
    rows = [["ign-mnist, unrefined", fid(unrefined), kid(unrefined), three(unrefined["precision"]),
             three(unrefined["recall"]), three(before), "-"]]
    for label, row in refiners:
        m = row["metrics"]
        rows.append([label, f"{fid(m)} ({change(m['fid'], unrefined['fid'])})", kid(m), three(m["precision"]),
                     three(m["recall"]), three(m["accuracy"]), fixed(row["refine_images_per_second"], 0)])
    rows += reference_rows("mnist", ["real", "blur"],
                           lambda m: [fid(m), kid(m), three(m["precision"]), three(m["recall"]), "", ""])
    return table(["images", "FID", "KID", "precision", "recall", "label agreement", "refine images/s"], rows)


def robust_radius() -> str:
    data = result("robust_eps_sweep.json")
    unrefined = data["eps 1.0"]["unrefined"]["metrics"]
    before = data["eps 1.0"]["robust-mnist"]["label_accuracy_before"]
    rows = [["ign-mnist, unrefined", fid(unrefined), three(unrefined["precision"]), three(unrefined["recall"]),
             three(before), ""]]
    for key, run in data.items():
        m = run["robust-mnist"]["metrics"]
        rows.append([f"radius {key.split()[1]}", fid(m), three(m["precision"]), three(m["recall"]),
                     three(m["accuracy"]), fixed(run["robust-mnist"]["mean_l2_change"], 2)])
    rows += reference_rows("mnist", ["real", "blur"], lambda m: [fid(m), three(m["precision"]), three(m["recall"]), "", ""],
                           lambda name: f"reference: {REFERENCE_LABELS[name]} (10,000)")
    return table(["images", "FID", "precision", "recall", "label agreement", "mean L2 change"], rows)


def robust_cifar10() -> str:
    def cells(m: dict) -> list[str]:
        return [fid(m), kid(m), three(m["precision"]), three(m["recall"]), fixed(m["classes"]["entropy"], 3)]

    data = result("robust_cifar10.json")
    refined = data["plugins/genzoo_robust/weights/robust-cifar10"]
    rows = [["ign-cifar10", *cells(data["unrefined"]["metrics"]), three(refined["label_accuracy_before"])],
            ["refined by robust-cifar10", *cells(refined["metrics"]), three(refined["metrics"]["accuracy"])]]
    rows += reference_rows("cifar10", ["real", "resize", "blur"], lambda m: [*cells(m), ""])
    return table(["images", "FID", "KID", "precision", "recall", "class entropy", "label agreement"], rows)


def robust_refiners() -> str:
    rows = []
    for model in ("robust-mnist", "robust-consistency-mnist", "robust-cifar10", "robust-consistency-cifar10"):
        own = measured(model, "fid")
        base_row = next(row for row in entry(model)["metrics"]
                        if row["metric"] == "fid" and str(row.get("of", "")).endswith(", unrefined"))
        base_label = base_row["of"].removesuffix(", unrefined")
        base = base_label.split()[0]
        dataset = own["reference"].split(":")[0]
        recall_before = measured(model, "recall", base_row["of"])["value"]
        refs = " / ".join(fid(reference(dataset, name)) for name in ("real", "resize", "blur"))
        fids = f"{fixed(base_row['value'])} -> {fixed(own['value'])} ({change(own['value'], base_row['value'])})"
        rows.append([f"`{model}` (radius {bundled_config(model)['refine_eps']})", entry(model)["status"],
                     f"{fids}, {base_label} samples", f"{three(recall_before)} -> {three(measured(model, 'recall')['value'])}",
                     refs, f"`genzoo eval {base} --refine {model} -n {own['n']} --ref {own['reference']} --data-root DIR`"])
    return table(["refiner", "status", "FID before -> after", "recall before -> after",
                  "reference rows: real / resize / blur", "command"], rows)


def generators_and_refiners() -> str:
    def cell(file: str, key: str) -> str:
        m = report(file, key)
        return f"{fid(m)} ({m['recall']:.2f} / {m['swd']:.1f})"

    rows = [[f"`consistency-mnist`, {label}", *(cell(file, key) for key in
                                                 ("unrefined", "robust-mnist", "robust-consistency-mnist"))]
            for label, file in (("1 step", "robust_on_consistency_1step.json"),
                                ("2 steps", "robust_on_consistency_2step.json"))]
    for name, label in (("real", "real training digits"), ("blur", "Gaussian blur sigma 1")):
        m = reference("mnist", name)
        rows.append([f"reference: {label}", f"{fid(m)} ({m['recall']:.2f} / {m['swd']:.1f})", "", ""])
    return table(["generator", "no refiner", "`robust-mnist` (trained against ign-mnist)",
                  "`robust-consistency-mnist` (trained against consistency-mnist, one step)"], rows)


# -- EDM and GAN ------------------------------------------------------------------------------------


def sampler_cells(m: dict) -> list[str]:
    return [fid(m), kid(m), three(m["precision"]), three(m["recall"]), entropy(m), swd(m)]


SAMPLER_HEADER = ["FID", "KID", "precision", "recall", "class entropy", "SWD"]
SAME_N_REFERENCES = {"real training images": "real training digits", "Gaussian blur sigma 1": "blurred, sigma 1",
                     "additive noise sigma 0.1": "noise sigma 0.1"}


def same_n_reference_rows(data: dict, blanks: int) -> list[list[str]]:
    return [[f"reference: {SAME_N_REFERENCES[name]}", *[""] * blanks, *sampler_cells(m)]
            for name, m in data["reference_rows"].items()]


def edm_steps() -> str:
    data = result("edm_steps.json")
    rows = [[str(r["steps"]), str(r["network_calls"]), *sampler_cells(r["metrics"]),
             fixed(1000 * r["generate_seconds"] / data["n"], 0)] for r in data["rows"]]
    rows += [[*row, ""] for row in same_n_reference_rows(data, 1)]
    caption = (f"{data['n']:,} samples (seed {data['seed']}) of `{data['model']}` against {data['ref']}, "
               f"features-mnist (SWD on pixels); seconds to generate 1,000 images on {data['hardware']}.\n\n")
    return caption + table(["Heun steps", "network calls", *SAMPLER_HEADER, "s / 1,000 images"], rows)


def edm_sampler() -> str:
    data = result("edm_sampler.json")
    rows = [[r["label"], str(r["network_calls"]), *sampler_cells(r["metrics"]),
             fixed(1000 * r["generate_seconds"] / data["n"], 0)] for r in data["rows"]]
    rows += [[*row, ""] for row in same_n_reference_rows(data, 1)]
    caption = (f"{data['n']:,} samples (seed {data['seed']}) of `{data['model']}` against {data['ref']}, "
               f"features-mnist (SWD on pixels), sampled in {data['precision']}; seconds to generate 1,000 images "
               f"on {data['hardware']}.\n\n")
    return caption + table(["sampler", "network calls", *SAMPLER_HEADER, "s / 1,000 images"], rows)


COLOUR_HEADER = ["FID", "SWD", "precision", "recall", "label accuracy", "class entropy"]


def colour_cells(m: dict) -> list[str]:
    label_accuracy = three(m["accuracy"]) if "accuracy" in m else "-"
    entropy_ = three(m["classes"]["entropy"]) if "classes" in m else "-"
    return [fid(m), swd(m), three(m["precision"]), three(m["recall"]), label_accuracy, entropy_]


def colour_models() -> str:
    """The class-conditional CIFAR-10 models at 10,000 samples, beside ign-cifar10 and the reference rows."""
    ign = {**report("ign_cifar10.json", "apply 1"),
           "swd": next(r for r in result("swd_ign_cifar10.json") if r["apply"] == 1)["metrics"]["swd"]}
    rows = [["`edm-cifar10` (18 deterministic steps, 35 calls, bf16)", *colour_cells(report("edm_cifar10.json"))],
            ["`edm-cifar10`, `--opt steps=9 --opt cfg=2` (34 calls, bf16)", *colour_cells(report("edm_cifar10_cfg2.json"))],
            ["`consistency-cifar10`, two steps", *colour_cells(report("consistency_cifar10_2step.json"))],
            ["`consistency-cifar10`, one step", *colour_cells(report("consistency_cifar10_1step.json"))],
            ["`ign-cifar10` (one call)", *colour_cells(ign)]]
    rows += [[f"reference: {REFERENCE_LABELS[name]}", *colour_cells(reference("cifar10", name))]
             for name in ("real", "resize", "blur")]
    caption = ("10,000 samples (seed 0; labels i mod 10 for the conditional models) against cifar10:test, "
               "features-cifar10 (SWD on pixels).\n\n")
    return caption + table(["images", *COLOUR_HEADER], rows)


CIFAR10_REFINER_GENERATORS = (("`consistency-cifar10`, one step", "robust_cifar10_on_consistency_1step.json"),
                              ("`consistency-cifar10`, two steps", "robust_cifar10_on_consistency_2step.json"),
                              ("`edm-cifar10` (35 calls, bf16)", "robust_cifar10_on_edm_cifar10.json"))
CIFAR10_REFINERS = (("no refiner", "unrefined"), ("`robust-cifar10` (trained against ign-cifar10)", "robust-cifar10"),
                    ("`robust-consistency-cifar10` (trained against consistency-cifar10, one step)",
                     "plugins/genzoo_robust/weights/robust-consistency-cifar10"))


def cifar10_refiners() -> str:
    """Each class-conditional CIFAR-10 sampler before and after each CIFAR-10 refiner, on the same samples."""
    rows, n = [], set()
    for generator, file in CIFAR10_REFINER_GENERATORS:
        data = result(file)
        n.add(data["n"])
        rows += [[generator, refiner, *colour_cells(report(file, key))] for refiner, key in CIFAR10_REFINERS]
    rows += [[f"reference: {REFERENCE_LABELS[name]}", "", *colour_cells(reference("cifar10", name))]
             for name in ("real", "resize", "blur")]
    assert len(n) == 1, f"the refiner tables' generators were scored on different numbers of samples: {n}"
    caption = (f"{n.pop():,} samples of each generator (seed 0, labels i mod 10; the refiners aim at those labels) "
               "against cifar10:test, features-cifar10 (SWD on pixels); the reference rows on 10,000 images.\n\n")
    return caption + table(["generator", "refiner", *COLOUR_HEADER], rows)


def edm_cifar10_sampler() -> str:
    data = result("edm_sampler_cifar10.json")
    rows = [[r["label"], str(r["network_calls"]), *colour_cells(r["metrics"]),
             fixed(1000 * r["generate_seconds"] / data["n"], 0)] for r in data["rows"]]
    rows += [[f"reference: {REFERENCE_LABELS[name]}", "", *colour_cells(data["reference_rows"][REFERENCE_ROWS[name]]), ""]
             for name in ("real", "blur", "noise 0.1")]
    caption = (f"{data['n']:,} samples (seed {data['seed']}, labels i mod 10) of `edm-cifar10` against {data['ref']}, "
               f"features-cifar10 (SWD on pixels), sampled in {data['precision']}; seconds to generate 1,000 images "
               f"on {data['hardware']}.\n\n")
    return caption + table(["sampler", "network calls", *COLOUR_HEADER, "s / 1,000 images"], rows)


def edm_cifar10_sampler_seeds() -> str:
    """The sampler table's deterministic and guided rows at a second seed, beside the first seed's."""
    first = {r["label"]: r["metrics"] for r in result("edm_sampler_cifar10.json")["rows"]}
    data = result("edm_sampler_cifar10_seed1.json")
    rows = []
    for r in data["rows"]:
        m, m0 = r["metrics"], first[r["label"]]
        rows.append([r["label"], str(r["network_calls"]), f"{fid(m0)} / {fid(m)}", f"{swd(m0)} / {swd(m)}",
                     f"{three(m0['accuracy'])} / {three(m['accuracy'])}",
                     fixed((m0["fid"] + m["fid"]) / 2), format_value("swd", (m0["swd"] + m["swd"]) / 2)])
    references = result("edm_sampler_cifar10.json")["reference_rows"]
    rows += [[f"reference: {REFERENCE_LABELS[name]}", "", fid(m), swd(m), three(m["accuracy"]), "", ""]
             for name in ("real", "blur") for m in [references[REFERENCE_ROWS[name]]]]
    caption = (f"{data['n']:,} samples of seed 0 / seed {data['seed']} (labels i mod 10), sampled in {data['precision']}; "
               "the reference rows are the table above's.\n\n")
    return caption + table(["sampler", "network calls", "FID", "SWD", "label accuracy", "mean FID", "mean SWD"], rows)


def edm_models() -> str:
    """The bundled EDM models at the catalogue's settings, beside ign-mnist (the method's FID bar) and the
    reference rows: edm-mnist's figures are the churn row of edm_sampler.json, which registry.yaml quotes."""
    sampler = result("edm_sampler.json")
    churn = next(r for r in sampler["rows"] if r["options"] == {"steps": "18", "s_churn": "40"})
    ign = {**report("ign_quality.json", "apply 1"),
           "swd": next(r for r in result("swd_ign_mnist.json") if r["apply"] == 1)["metrics"]["swd"]}
    small = result("edm_mnist_small.json")
    rows = [[f"`edm-mnist` ({churn['label']}, {churn['network_calls']} calls, sampled in {sampler['precision']})",
             *sampler_cells(churn["metrics"])],
            ["`edm-mnist-small` (deterministic, 18 steps, 35 calls, fp32)", *sampler_cells(small["metrics"])],
            ["`ign-mnist` (one call), the method's FID bar", *sampler_cells(ign)]]
    rows += reference_rows("mnist", ["real", "noise 0.1", "blur"], sampler_cells)
    caption = (f"{sampler['n']:,} samples (seed {sampler['seed']}) of each model against {sampler['ref']}, "
               f"features-mnist (SWD on pixels).\n\n")
    return caption + table(["model", *SAMPLER_HEADER], rows)


def edm_ema() -> str:
    """Averages of the weights of edm-mnist's last training run, each scored like the bundled model."""
    data = result("edm_ema.json")
    references = result("edm_steps.json")  # the reference rows at the same n, reference and features
    if (references["n"], references["ref"]) != (data["n"], data["ref"]):
        raise SystemExit("edm_steps.json's reference rows are not at edm_ema.json's n and reference")

    def cells(m: dict) -> list[str]:
        return [fid(m), three(m["precision"]), three(m["recall"]), fixed(m["class_entropy"], 4), swd(m)]

    rows = [[r["label"], str(r["seed"]), *cells(r["metrics"])] for r in data["rows"]]
    rows += [[f"reference: {SAME_N_REFERENCES[name]}", "", fid(m), three(m["precision"]), three(m["recall"]),
              entropy(m), swd(m)] for name, m in references["reference_rows"].items()]
    caption = (f"{data['n']:,} samples of each against {data['ref']}, {data['features']} (SWD on pixels), "
               f"{data['sampler']}, sampled in {data['precision']}.\n\n")
    return caption + table(["weights", "sampling seed", "FID", "precision", "recall", "class entropy", "SWD"], rows)


def gan_vs_ign() -> str:
    comparisons = [result(name) for name in ("gan_vs_ign.json", "gan_vs_ign_3000.json")]
    rows = [[f"{run['steps']:,}", f"`{method}` ({run['source']})", *sampler_cells(run["metrics"])]
            for data in comparisons for method, run in data["runs"].items()]
    first = comparisons[0]
    rows += same_n_reference_rows(first, 1)
    caption = f"{first['n']:,} samples (seed {first['seed']}) against {first['ref']}, features-mnist (SWD on pixels).\n\n"
    return caption + table(["steps", "model", *SAMPLER_HEADER], rows)


# -- consistency and MMB ----------------------------------------------------------------------------


def consistency_mnist() -> str:
    mid_sigma = bundled_config("consistency-mnist")["mid_sigma"]
    rows = [["1 step", *sampler_cells(report("consistency_mnist_1step.json"))],
            [f"2 steps (mid_sigma {mid_sigma})", *sampler_cells(report("consistency_mnist_2step.json"))]]
    rows += reference_rows("mnist", ["real", "blur", "noise 0.3"], sampler_cells)
    return table(["sampler", *SAMPLER_HEADER], rows)


MMB_ROWS = {"runs/disjoint3-ms15": "`mmb-mnist` (three classifiers, shared set, mode seeking 15)",
            "runs/fl-ms5": "one classifier, conv, mode seeking 5 (first layer)",
            "mmb-mnist (the MLP model before commit ea6fe3b)": "one classifier, MLP generator, no mode seeking",
            "runs/reconstruct": "reconstruction baseline, 500 images"}


def mmb_mnist() -> str:
    data = result("mmb_variants.json")

    def worst(row: dict) -> str:
        per_label = row["accuracy_per_label"]
        label = min(range(len(per_label)), key=per_label.__getitem__)
        return f"{three(row['accuracy'])} ({label}: {per_label[label]:.2f})"

    def cells(row: dict) -> list[str]:
        return [percent(row["diversity_share_of_real"]), fixed(row["nn_feature_distance_to_classifier_train"], 2),
                three(row["max_ssim_to_classifier_train"]),
                percent(row["corner_blob_share"]) if "corner_blob_share" in row else ""]

    rows = [[label, fixed(data[key]["fid"]), worst(data[key]), *cells(data[key])] for key, label in MMB_ROWS.items()]
    rows.append(["reference: real test digits", "", "", *cells(data["real test digits"])])
    rows += reference_rows("mnist", ["real", "blur", "noise 0.3"], lambda m: [fid(m), "", "", "", "", ""],
                           lambda name: f"reference: {REFERENCE_LABELS[name]} (FID)")
    return table(["images", "FID", "label accuracy (worst)", "diversity", "NN feature distance", "max-SSIM",
                  "corner blobs"], rows)


def train_step_speed() -> str:
    def keyed(name: str, compiled: bool) -> dict:
        return {(r["method"], r["shape"], r["precision"]): r for r in result(name)["rows"] if r["compiled"] == compiled}

    now, before = keyed("train_step_speed.json", False), keyed("train_step_speed_before.json", False)
    paired = {on: keyed("train_step_speed_compiled.json", on) for on in (False, True)}
    rows = []
    for key, row in now.items():
        old = before[key]["seconds_per_step"]
        cells = [*key, fixed(old, 2), fixed(row["seconds_per_step"], 2), f"{old / row['seconds_per_step']:.2f}x"]
        if key in paired[True]:
            eager, compiled = paired[False][key], paired[True][key]
            cells.append(f"{fixed(eager['seconds_per_step'], 2)} / {fixed(compiled['seconds_per_step'], 2)} "
                         f"(compile {fixed(compiled['first_step_seconds'], 0)} s)")
        else:
            cells.append("")
        rows.append(cells)
    return table(["method", "shapes", "precision", "s/step before", "s/step now", "factor",
                  "eager / compiled s/step, one run"], rows)


def edm_vs_diffusers() -> str:
    data = result("edm_vs_diffusers.json")
    rows = []
    for name in ("genzoo", "diffusers"):
        r = data["rows"][name]
        rows.append([name, f"{data['parameters'][name] / 1e6:.2f}M", fixed(r["seconds_per_step"], 3),
                     fixed(r["steps_per_second"], 3), fixed(r["sample_images_per_second_9_calls"], 1)])
    ratio = data["genzoo_over_diffusers"]
    rows.append(["genzoo / diffusers", "", "", f"{ratio['training']:.2f}x", f"{ratio['sampling']:.2f}x"])
    return table(["network", "parameters", f"training s/step ({data['training_precision']})", "steps/s",
                  f"sampling images/s ({data['sampling_precision']}, 9 calls)"], rows)


def sampling_speed() -> str:
    rows = []
    for name in ("sampling_speed_edm_mnist.json", "sampling_speed.json"):
        for r in result(name)["rows"]:
            first = f"{fixed(r['first_batch_seconds'], 0)} s compile" if r["compiled"] else ""
            rows.append([r["model"], r["precision"], "on" if r["compiled"] else "off", fixed(r["seconds_per_batch"], 2),
                         fixed(r["images_per_second"], 1), f"{r['eval_10000_seconds'] / 60:.1f} min",
                         "the reference" if r["precision"] == "fp32" and not r["compiled"] else
                         f"{r['max_pixel_difference']:.4f} (mean {r['mean_pixel_difference']:.5f})", first])
    return table(["model", "precision", "compiled", "s per batch of 64", "images/s", "10,000 samples",
                  "largest pixel difference to eager fp32", "first batch"], rows)


def ign_vs_peer() -> str:
    data = result("ign_vs_peer.json")
    rows = []
    for precision, r in data["precisions"].items():
        train, sample, ratio = r["train_images_per_second"], r["sample_images_per_second"], r["genzoo_over_peer"]
        rows.append([precision, f"{train['genzoo']:,.0f} / {train['peer']:,.0f} ({ratio['training']:.2f}x)",
                     f"{sample['genzoo']:,.0f} / {sample['peer']:,.0f} ({ratio['sampling']:.2f}x)"])
    return table(["precision", f"training images/s, batch {data['batch_size']}: genzoo / peer",
                  "sampling images/s, batch 256: genzoo / peer"], rows)


def threads() -> str:
    data = result("threads.json")
    names = [k for k in data["rows"][0] if k not in ("busy_cores", "cores")]
    rows = [[str(r["busy_cores"]), *[f"{1000 * r[n]:,.0f} ms" for n in names]] for r in data["rows"]]
    return table(["cores other work holds", *names], rows)


TABLES: dict[str, Callable[[], str]] = {
    "reference-fid": reference_fid, "reference-swd": reference_swd, "swd-beside-fid": swd_beside_fid,
    "ign-mnist": ign_mnist, "ign-batchnorm-modes": ign_batchnorm_modes, "ign-projection": ign_projection,
    "ign-cifar10": ign_cifar10, "ign-celeba64": ign_celeba64, "ign-passes": ign_passes, "ign-models": ign_models,
    "robust-mnist": robust_mnist, "robust-radius": robust_radius, "robust-cifar10": robust_cifar10,
    "robust-refiners": robust_refiners, "generators-and-refiners": generators_and_refiners,
    "cifar10-refiners": cifar10_refiners,
    "consistency-mnist": consistency_mnist, "mmb-mnist": mmb_mnist, "edm-models": edm_models, "edm-ema": edm_ema,
    "edm-steps": edm_steps, "edm-sampler": edm_sampler, "edm-cifar10-sampler": edm_cifar10_sampler,
    "edm-cifar10-sampler-seeds": edm_cifar10_sampler_seeds,
    "colour-models": colour_models,
    "gan-vs-ign": gan_vs_ign, "train-step-speed": train_step_speed, "edm-vs-diffusers": edm_vs_diffusers,
    "sampling-speed": sampling_speed, "threads": threads, "ign-vs-peer": ign_vs_peer,
}


# -- pages ------------------------------------------------------------------------------------------


def render(text: str, where: str = "page") -> str:
    """``text`` with every generated block rewritten; an unknown NAME is an error naming the page."""
    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in TABLES:
            raise SystemExit(f"{where}: unknown generated block {name!r}; known: {', '.join(TABLES)}")
        return f"{match.group(1)}{TABLES[name]()}\n{match.group(4)}"

    return BLOCK.sub(fill, text)


def stale_blocks(path: Path) -> list[str]:
    """The names of the blocks of ``path`` whose text differs from what the sources give."""
    text = path.read_text(encoding="utf-8")
    fresh = {m["name"]: m["body"] for m in BLOCK.finditer(render(text, str(path)))}
    return [m["name"] for m in BLOCK.finditer(text) if m["body"] != fresh[m["name"]]]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for page in PAGES:
        path = ROOT / page
        names = stale_blocks(path)
        stale += [f"{page}: {name}" for name in names]
        if names and not check:
            path.write_text(render(path.read_text(encoding="utf-8"), page), encoding="utf-8")
    if check and stale:
        print("stale generated tables (run python tools/gen_tables.py):\n  " + "\n  ".join(stale))
        return 1
    for line in stale:
        print(f"rewrote {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
