"""Each number has one source: the result tables of the docs are generated from registry.yaml and
benchmarks/results/ by tools/gen_tables.py, a stale table fails here, and a refiner's figures of its
generator's own samples agree with the generator's (the reference rows are checked against their
files in test_catalogue.py)."""

import importlib.util
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("gen_tables", ROOT / "tools" / "gen_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["docs/results.md", "docs/methods/ign.md", "docs/methods/robust.md",
                                  "docs/methods/mmb.md"])
def test_every_generated_table_is_up_to_date(gen, page):
    assert page in gen.PAGES
    names = [m["name"] for m in gen.BLOCK.finditer((ROOT / page).read_text(encoding="utf-8"))]
    assert names, f"{page} has no generated table"
    assert not gen.stale_blocks(ROOT / page), f"{page}: stale tables; run python tools/gen_tables.py"


def test_every_table_is_on_a_page_and_the_check_fails_on_a_stale_one(gen, tmp_path, monkeypatch, capsys):
    used = {m["name"] for page in gen.PAGES for m in gen.BLOCK.finditer((ROOT / page).read_text(encoding="utf-8"))}
    assert used == set(gen.TABLES)
    page = tmp_path / "page.md"
    page.write_text("Before.\n\n<!-- generated: ign-models -->\n| old | table |\n<!-- end generated -->\n\nAfter.\n")
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    monkeypatch.setattr(gen, "PAGES", ("page.md",))
    assert gen.main(["--check"]) == 1 and "page.md: ign-models" in capsys.readouterr().out
    assert gen.main([]) == 0
    text = page.read_text()
    assert text.startswith("Before.\n\n<!-- generated: ign-models -->\n| model | status |") and text.endswith("After.\n")
    assert "| old | table |" not in text and gen.main(["--check"]) == 0
    with pytest.raises(SystemExit, match="unknown generated block 'nope'"):
        gen.render("<!-- generated: nope -->\n<!-- end generated -->", "page.md")


def test_numbers_are_formatted_the_same_way_everywhere(gen):
    # KID as genzoo.reporting writes it everywhere: three significant figures, thousands separated
    assert [gen.kid({"kid": v}) for v in (3.1974, 796.34, 1596.4, 0.027358, -49.11, {"mean": 54684.0})] == \
        ["3.20", "796", "1,600", "0.0274", "-49.1", "54,700"]
    assert gen.kid({}) == "" and gen.fid({"fid": 1078.64}) == "1,078.6"
    assert gen.fixed(1078.64) == "1,078.6" and gen.change(35.5, 48.7) == "-27%"
    rows = [{"images": "real", "swd": 5.2}, {"images": "noise 0.1", "swd": 27.9}, {"images": "blur", "swd": 59.1}]
    assert gen.falls(8.4, rows) == "between real (5.2) and noise 0.1 (27.9)"
    assert gen.falls(99.6, rows) == "above every row (blur: 59.1)"


def _agree(a: float, b: float) -> bool:
    """Equal to the precision the registry writes (three significant figures at least)."""
    return math.isclose(a, b, rel_tol=5e-3, abs_tol=5e-3)


def test_a_refiners_unrefined_figures_are_its_generators_own(gen):
    checked = 0
    for model in ("robust-mnist", "robust-cifar10", "robust-consistency-cifar10"):
        for row in gen.entry(model)["metrics"]:
            if str(row.get("of", "")).endswith(", unrefined") and row["metric"] != "label_agreement":
                # "consistency-cifar10 (one step)": the generator's default sampler, its entry's unqualified figures
                generator = row["of"].removesuffix(", unrefined").removesuffix(" (one step)")
                assert _agree(row["value"], gen.measured(generator, row["metric"])["value"]), (model, row)
                checked += 1
    assert checked >= 9  # FID, SWD and recall of each (label agreement is the refiner's own labels')
