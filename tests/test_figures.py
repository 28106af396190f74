"""One figure, one value: what registry.yaml and the docs state agrees with the results file that measured it, printed
by one rounding (genzoo.reporting.format_value) on every page.

The results files of benchmarks/results/ are the measurements; registry.yaml copies some of them, and docs/models.md
and the generated tables of docs/ print them. Each test reads a copy against its source.
"""

import importlib.util
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from genzoo.reporting import format_value

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
REGISTRY = yaml.safe_load((ROOT / "registry.yaml").read_text(encoding="utf-8"))
MODELS = REGISTRY["models"]
SHIPPED_PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if "lab" not in p.parts)
PRINTED = ("fid", "kid", "swd", "precision", "recall")  # the metrics format_value rounds by a rule of its own


def result(name: str):
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def report(name: str, *path) -> dict:
    """One report of a results file: a key path into it, or (for a list of reports of f applied k times) k."""
    node = result(name)
    if isinstance(node, list):
        return next(r for r in node if r["apply"] == path[0])
    for key in path:
        node = node[key]
    return node


def churn_row() -> dict:
    """edm-mnist's default sampler (churn 40, 18 steps) in the 10,000-sample sampler table, with the table's n."""
    table = result("edm_sampler.json")
    row = next(r for r in table["rows"] if r["options"] == {"steps": "18", "s_churn": "40"})
    return {**row, "n": table["n"]}


# (model, `of` in registry.yaml) -> the reports of the results files that measured them
SOURCES = {
    ("ign-mnist", None): lambda: [report("ign_quality.json", "apply 1"), report("swd_ign_mnist.json", 1)],
    ("ign-mnist", "f(f(z))"): lambda: [report("ign_quality.json", "apply 2"), report("swd_ign_mnist.json", 2)],
    ("ign-mnist", "f(f(f(z)))"): lambda: [report("ign_quality.json", "apply 3")],
    ("ign-cifar10", None): lambda: [report("ign_cifar10.json", "apply 1"), report("swd_ign_cifar10.json", 1)],
    ("ign-cifar10", "f(f(z))"): lambda: [report("ign_cifar10.json", "apply 2"), report("swd_ign_cifar10.json", 2)],
    ("ign-cifar10", "f(f(f(z)))"): lambda: [report("ign_cifar10.json", "apply 3")],
    ("ign-celeba64", None): lambda: [report("ign_celeba64.json", "apply 1")],
    ("ign-celeba64", "f(f(z))"): lambda: [report("ign_celeba64.json", "apply 2")],
    ("ign-celeba64", "f(f(f(z)))"): lambda: [report("ign_celeba64.json", "apply 3")],
    ("gan-mnist", None): lambda: [report("gan_mnist.json")],
    ("edm-mnist", None): lambda: [churn_row()],
    ("edm-mnist-small", None): lambda: [report("edm_mnist_small.json")],
    ("edm-cifar10", None): lambda: [report("edm_cifar10.json")],
    ("edm-cifar10", "classifier-free guidance w 2 (--opt steps=9 --opt cfg=2)"): lambda: [report("edm_cifar10_cfg2.json")],
    ("consistency-mnist", None): lambda: [report("consistency_mnist_1step.json")],
    ("consistency-mnist", "two steps (--opt steps=2)"): lambda: [report("consistency_mnist_2step.json")],
    ("consistency-cifar10", None): lambda: [report("consistency_cifar10_1step.json")],
    ("consistency-cifar10", "two steps (--opt steps=2)"): lambda: [report("consistency_cifar10_2step.json")],
    ("robust-mnist", None): lambda: [report("robust_default.json", "robust-mnist"), report("swd_robust_mnist.json")],
    ("robust-mnist", "ign-mnist, unrefined"): lambda: [report("robust_default.json", "unrefined")],
    ("robust-consistency-mnist", None):
        lambda: [report("robust_on_consistency_1step.json", "robust-consistency-mnist")],
    ("robust-consistency-mnist", "consistency-mnist (one step), unrefined"):
        lambda: [report("robust_on_consistency_1step.json", "unrefined")],
    ("robust-consistency-mnist", "consistency-mnist (one step), refined by robust-mnist"):
        lambda: [report("robust_on_consistency_1step.json", "robust-mnist")],
    ("robust-cifar10", None): lambda: [report("robust_cifar10.json", "plugins/genzoo_robust/weights/robust-cifar10"),
                                       report("swd_robust_cifar10.json")],
    ("robust-cifar10", "ign-cifar10, unrefined"): lambda: [report("robust_cifar10.json", "unrefined")],
    ("robust-consistency-cifar10", None):
        lambda: [report("robust_consistency_cifar10.json", "plugins/genzoo_robust/weights/robust-consistency-cifar10")],
    ("robust-consistency-cifar10", "consistency-cifar10 (one step), unrefined"):
        lambda: [report("robust_consistency_cifar10.json", "unrefined")],
    ("mmb-mnist", None): lambda: [report("mmb_variants.json", "runs/disjoint3-ms15"), report("swd_mmb_mnist.json")],
}


def merged(reports: list[dict]) -> dict:
    """The metrics of several reports of the same samples, as one mapping."""
    return {key: value for r in reports for key, value in r.get("metrics", r).items()}


RENAMED = {"class_entropy": ("classes", "entropy"), "confidence": ("classes", "confidence"),
           "label_agreement": ("accuracy",), "label_accuracy": ("accuracy",)}  # registry name -> results file's

def measured(source: dict, metric: str):
    value = source
    for key in RENAMED.get(metric, (metric,)):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value["mean"] if isinstance(value, dict) else value


def agrees(metric: str, stated: float, source: float) -> bool:
    """The figure prints the same from either; a metric without a rule of its own agrees to the decimals stated."""
    if metric in PRINTED:
        return format_value(metric, stated) == format_value(metric, source)
    decimals = max(-Decimal(repr(float(stated))).as_tuple().exponent, 0)
    return Decimal(repr(float(stated))) == Decimal(repr(float(source))).quantize(Decimal(1).scaleb(-decimals),
                                                                                   rounding="ROUND_HALF_UP")


def catalogue_figures():
    for name, entry in MODELS.items():
        for row in entry.get("metrics") or []:
            key = (name, row.get("of"))
            if key in SOURCES:
                yield name, row


def test_every_catalogue_figure_prints_as_its_results_file_does():
    checked, differ = 0, {}
    for name, row in catalogue_figures():
        value = measured(merged(SOURCES[(name, row.get("of"))]()), row["metric"])
        if value is None:
            continue
        checked += 1
        if not agrees(row["metric"], row["value"], value):
            differ[(name, row.get("of"), row["metric"])] = (row["value"], value)
    for group in REGISTRY["references"]:
        rows = result(re.search(r"benchmarks/results/(\S+\.json)", group["source"]).group(1))["rows"]
        named = {"real": "real training images", "resize": "resized to 7/8 and back", "blur": "Gaussian blur sigma 1",
                 "noise 0.1": "additive noise sigma 0.1", "noise 0.3": "additive noise sigma 0.3"}
        for row in group["rows"]:
            report = rows[named[row["images"]]]
            assert report["n"] == group["n"], (group["source"], row["images"])
            for metric in PRINTED:
                if metric in row:
                    checked += 1
                    value = measured(report["metrics"], metric)
                    if not agrees(metric, row[metric], value):
                        differ[(f"reference {group['features']} {group['reference']}", row["images"], metric)] = \
                            (row[metric], value)
    assert checked > 150
    assert not differ, differ


def test_a_catalogue_figure_says_its_n_as_its_results_file_does():
    checked = 0
    for name, row in catalogue_figures():
        for source in SOURCES[(name, row.get("of"))]():
            if "n" in source and row["metric"] in measured_names(source):
                assert row["n"] == source["n"], (name, row)
                checked += 1
    assert checked > 50


def measured_names(source: dict) -> set[str]:
    names = set(source.get("metrics", source))
    return names | {metric for metric, path in RENAMED.items() if path[0] in names}


def test_a_tie_rounds_half_up_on_every_page():
    # edm-mnist's recall is 9,085 of 10,000: 0.909 in registry.yaml, docs/models.md and every generated table
    assert measured(merged([churn_row()]), "recall") == 0.9085
    assert format_value("recall", 0.9085) == "0.909" and format_value("precision", 0.81) == "0.810"
    assert format_value("kid", 1596.358) == "1,600" and format_value("swd", 62.55) == "62.6"
    for page in SHIPPED_PAGES:
        text = page.read_text(encoding="utf-8")
        assert "| 0.706 | 0.908 |" not in text and "1,596" not in text, page


def gen_tables():
    spec = importlib.util.spec_from_file_location("gen_tables", ROOT / "tools" / "gen_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", gen_tables().PAGES)
def test_every_generated_table_of_every_page_is_up_to_date(page):
    assert not gen_tables().stale_blocks(ROOT / page), f"{page}: stale tables; run python tools/gen_tables.py"


def test_the_edm_models_table_is_one_page_of_results_and_one_of_the_method():
    for page in ("docs/results.md", "docs/methods/edm.md"):
        assert "<!-- generated: edm-models -->" in (ROOT / page).read_text(encoding="utf-8"), page
    assert "<!-- generated: consistency-mnist -->" in (ROOT / "docs/results.md").read_text(encoding="utf-8")


# -- docs/models.md -----------------------------------------------------------------------------------

def models_tables() -> list[list[list[str]]]:
    """The distance tables of docs/models.md (those with an n column), each a list of rows of cells."""
    tables, current = [], None
    for line in (ROOT / "docs" / "models.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| images | n |"):
            current = [[c.strip() for c in line.strip("|").split("|")]]
            tables.append(current)
        elif current is not None and line.startswith("|"):
            if not line.startswith("|---"):
                current.append([c.strip() for c in line.strip("|").split("|")])
        else:
            current = None
    return tables


def registry_figure(label: str, metric: str, n: int):
    """The registry.yaml figure a row of docs/models.md names: "`model` (status)[, of]"."""
    name, _, of = re.fullmatch(r"`([\w-]+)` \((?:stable|experimental)\)(, (.*))?", label).group(1, 2, 3)
    return next(r for r in MODELS[name]["metrics"] if r["metric"] == metric and r.get("of") == of and r["n"] == n)


def test_every_figure_of_the_model_tables_is_registry_yamls_rounded_once():
    checked = 0
    for header, *rows in models_tables():
        for metric in ("fid", "kid", "swd", "precision", "recall"):
            label = {"fid": "FID", "kid": "KID", "swd": "SWD"}.get(metric, metric)
            if label not in header:
                continue
            column = header.index(label)
            for row in rows:
                if row[0].startswith("reference") or not row[column]:
                    continue
                figure = registry_figure(row[0], metric, int(row[1].replace(",", "")))
                assert row[column] == format_value(metric, figure["value"]), (row, metric)
                checked += 1
    assert checked > 60


def test_no_figure_is_placed_among_reference_rows_of_another_n():
    unplaced = 0
    for header, *rows in models_tables():
        reference_n = {row[1] for row in rows if row[0].startswith("reference")}
        placed = header[-1].startswith("where the")
        for row in rows:
            if row[0].startswith("reference"):
                continue
            if placed and row[-1]:
                assert reference_n == {row[1]}, (header, row)
            else:
                unplaced += 1
                assert not placed or not row[-1]
    assert unplaced >= 5  # robust-consistency-mnist's 5,000 and ign-celeba64's 5,000 (rows of 10,000 and 4,000)
    text = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    assert "Measured on 5,000 images, where the reference rows are measured on 10,000" in text


# -- figures stated in prose --------------------------------------------------------------------------

def test_images_seen_are_steps_times_batch_wherever_stated():
    for name, entry in MODELS.items():
        text = " ".join(entry.get("limitations", "").split())
        for steps, batch, images in re.findall(r"([\d,]+) steps of batch (\d+)[^.]*?\(([\d,]+) images", text):
            assert int(images.replace(",", "")) == entry["images_seen"], (name, images, entry["images_seen"])
    small = f"{MODELS['edm-mnist-small']['images_seen']:,}"
    edm = (ROOT / "docs/methods/edm.md").read_text(encoding="utf-8")
    assert small == "448,000" and f"That model saw {small} training images" in edm
    assert "(448,000 images)" in MODELS["edm-mnist-small"]["limitations"]


def test_the_consistency_models_time_per_step_is_their_training_time_over_their_steps():
    def per_step(name: str, steps: int) -> str:
        seconds = float(str(MODELS[name]["provenance"]["training_seconds"]).split()[0])
        return f"{seconds / steps:.1f}"

    assert "6,000 steps" in MODELS["consistency-mnist"]["limitations"] and per_step("consistency-mnist", 6000) == "1.1"
    assert "1,500 steps" in MODELS["consistency-cifar10"]["limitations"]
    text = " ".join((ROOT / "docs/methods/consistency.md").read_text(encoding="utf-8").split())
    assert set(re.findall(r"(\d+(?:\.\d+)?) s a step", text)) == {per_step("consistency-mnist", 6000),
                                                                   per_step("consistency-cifar10", 1500)}


def test_a_bundled_models_size_in_the_docs_is_its_files():
    stated = 0
    for page in SHIPPED_PAGES:
        text = " ".join(page.read_text(encoding="utf-8").split())
        for name, size in re.findall(r"`([\w-]+)` \([^)]*?bundled, (\d+(?:\.\d+)?) MB", text):
            package, folder = MODELS[name]["bundled"].split(":")
            weights = ROOT / "plugins" / package / folder / "model.safetensors"
            assert size == f"{weights.stat().st_size / 1e6:.1f}", (page.name, name, size)
            stated += 1
    assert stated >= 4  # edm-mnist, edm-mnist-small, consistency-mnist (the same 7.7 MB network), gan-mnist


def test_results_files_name_the_model_they_hold():
    assert merged([report("edm_mnist_7000.json")])["fid"] > 50  # the 7,000-step model's 53.9, not edm-mnist's 34.5
    assert result("edm_mnist_7000.json")["source"] == "models/edm-mnist-7000"
    assert result("edm_mnist_small.json")["source"] == "edm-mnist-small"
    assert result("consistency_precision.json")["model"] == "models/edm-mnist-7000"
    assert not (RESULTS / "edm_mnist.json").exists()
    for path in RESULTS.glob("*.json"):
        assert not re.search(r'"(?:source|model)": "/', path.read_text(encoding="utf-8")), path.name
