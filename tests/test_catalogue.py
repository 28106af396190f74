"""The catalogue as a user reads it: `genzoo list` and `genzoo info`, and the typed registry behind them."""

import json

import pytest
import yaml
from click.testing import CliRunner
from conftest import genzoo_plugins_only

from genzoo.cli import cli
from genzoo.errors import GenzooError
from genzoo.plugins import get_host
from genzoo.registry import (RANKED_METRICS, STATUSES, Metric, ModelEntry, ReferenceRow, ReferenceSet,
                             load_reference_sets, load_registry_file, reference_set, registry_path)
from genzoo.reporting import format_value, place


@pytest.fixture
def runner():
    return CliRunner()


def info(runner, *args, columns=80):
    result = runner.invoke(cli, ["info", *args], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


# -- genzoo info ----------------------------------------------------------------------------------------------


def test_info_of_ign_cifar10_fits_a_screen_and_says_status_scale_and_how_to_reproduce(runner):
    text = info(runner, "ign-cifar10", columns=100)
    lines = text.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 100
    assert max(map(len, info(runner, "ign-cifar10", columns=140).splitlines())) > 100  # a wide terminal is used
    assert "status: experimental." in text and "class entropy 0.841 (bar 0.9" in " ".join(text.split())
    assert "FID 677.7: between noise 0.1 (474.5) and blur (809.7)" in text
    assert "KID 145: between" in text and '"between A (a) and B (b)": the figure lies between' in text
    reproduce = text.split("reproduce")[1]
    assert "genzoo fit ign --dataset cifar10 --data-root DIR" in reproduce
    assert "genzoo export runs/ign-cifar10" in reproduce and "benchmarks/" not in reproduce
    assert "genzoo sample ign-cifar10" in text and "licence: CIFAR-10" in text


@pytest.mark.parametrize("name", sorted(entry.name for entry in load_registry_file()))
def test_info_of_every_catalogue_model_is_at_most_40_lines_and_full_keeps_the_rest(runner, name):
    short, full = info(runner, name).splitlines(), info(runner, name, "--full").splitlines()
    assert len(short) <= 40, f"genzoo info {name}: {len(short)} lines"
    too_wide = [line for line in short + full if len(line) > 80 and max(map(len, line.split())) < 72]
    assert not too_wide, f"genzoo info {name} on an 80-column terminal:\n" + "\n".join(too_wide)
    assert short[0] == full[0] and len(full) > len(short)
    full_words = " ".join(full).split()
    for command in get_host().model(name).command:  # every command is in --full, word for word
        assert all(word in full_words for word in command.split()), command


def test_info_full_adds_the_reference_rows_and_the_commands_a_short_text_leaves_out(runner):
    short, full = info(runner, "ign-celeba64"), info(runner, "ign-celeba64", "--full")
    assert "reference rows (" not in short and "SWD: real 9.91, resize 21.8, blur 36.5" in full
    if "reproduce:" in short:  # the commands gave way to a pointer
        assert "`genzoo info ign-celeba64 --full` lists them" in short and "genzoo fit ign --dataset celeba64" in full


def test_info_of_a_feature_network_names_its_command_metric_and_licence(runner, toy_site):
    text = info(runner, "features-mnist")
    assert "genzoo fit feature-classifier" in text and "accuracy 0.9942" in text and "CC BY-SA 3.0" in text


def test_info_describes_a_method_that_has_no_pretrained_model_yet(runner):
    text = info(runner, "mmb-reconstruct")
    assert "a method with no pretrained model yet" in text
    assert "genzoo fit mmb-reconstruct" in text and "count=500" in text  # a Config default
    suggestion = next(line for line in text.splitlines() if "genzoo fit mmb-reconstruct" in line)
    assert "--dataset" not in suggestion and "--set classifier=" in suggestion  # it trains without data, from one
    from genzoo.cli.list_cmd import methods_without_models

    for cls in methods_without_models():  # a method that needs data is given some, with what it lacks a default for
        assert ("--dataset NAME --data-root DIR" in info(runner, cls.name)) is cls.needs_data, cls.name
    assert json.loads(info(runner, "mmb-reconstruct", "--json"))["kind"] == "method"


def test_info_of_a_method_with_a_default_model_shows_that_model(runner):
    assert info(runner, "ign").startswith("ign-mnist: ")


def test_an_unpublished_catalogue_model_says_how_to_make_it(runner):
    text = info(runner, "mmb-mnist-classifier-subset1")
    assert "weights: not published" in text and "--set subset_seed=1" in text and "use:" not in text


def test_a_misspelt_name_gets_a_suggestion(runner):
    result = runner.invoke(cli, ["info", "ign-mnsit"])
    assert result.exit_code == 1 and "did you mean ign-mnist?" in result.output
    assert "did you mean" not in runner.invoke(cli, ["info", "nothing-like-it"]).output


# -- genzoo list ----------------------------------------------------------------------------------------------


def test_list_has_a_status_column_and_the_methods_without_a_model(runner, toy_site):
    result = runner.invoke(cli, ["list", "--wide"])
    assert result.exit_code == 0
    rows = {line.split()[0]: line for line in result.output.splitlines() if line and not line.startswith(" ")}
    assert "STATUS" in rows["NAME"]
    assert rows["ign-cifar10"].split()[4] == "experimental" and rows["ign-mnist"].split()[4] == "stable"
    assert " unpublished " in rows["mmb-mnist-classifier-subset1"]
    bare = result.output.split("no pretrained model yet")[1]
    assert "mmb-reconstruct" in bare and "ign " not in bare and "toy" not in bare  # toy has toy-tiny
    listed = json.loads(runner.invoke(cli, ["list", "--json"]).output)
    assert {"features-mnist", "toy-tiny"} <= {row["name"] for row in listed if row["kind"] == "model"}
    assert "mmb-reconstruct" in {row["name"] for row in listed if row["kind"] == "method"}


@pytest.mark.parametrize("columns", [60, 100, 160])
def test_list_fits_the_terminal_cutting_the_summary_and_wide_shows_all(runner, columns):
    listed = runner.invoke(cli, ["list"], env={"COLUMNS": str(columns)})
    assert listed.exit_code == 0
    lines = listed.output.splitlines()
    assert max(map(len, lines)) <= columns
    assert "`genzoo list --wide` shows all" in listed.output
    names = [line.split()[0] for line in lines[1:] if line and line.split()[0] in get_host().models]
    assert names == sorted(get_host().models)  # every model is listed, whatever the width
    summary = get_host().models["ign-mnist"].summary
    assert summary not in listed.output and summary in runner.invoke(cli, ["list", "--wide"]).output


def test_list_keeps_method_and_dataset_at_100_columns_and_wide_is_not_padded_by_one_long_row(runner):
    header = runner.invoke(cli, ["list"], env={"COLUMNS": "100"}).output.splitlines()[0]
    assert header.split() == ["NAME", "METHOD", "DATASET", "WEIGHTS", "STATUS"]  # the summary gave way first
    assert runner.invoke(cli, ["list"], env={"COLUMNS": "80"}).output.splitlines()[0].split() == \
        ["NAME", "METHOD", "WEIGHTS", "STATUS"]
    from genzoo.cli.list_cmd import DATASET_WIDTH

    wide = runner.invoke(cli, ["list", "--wide"]).output.splitlines()
    rows = {line.split()[0]: line for line in wide if line and not line.startswith(" ")}
    at = rows["NAME"].index("WEIGHTS")
    assert at <= rows["NAME"].index("DATASET") + DATASET_WIDTH + 2
    short = [name for name, e in get_host().all_models().items() if len(e.dataset) <= DATASET_WIDTH]
    assert short and all(rows[name][at:].startswith(get_host().all_models()[name].weights_kind()) for name in short)
    long = next(e for e in get_host().all_models().values() if len(e.dataset) > DATASET_WIDTH)
    assert long.dataset in rows[long.name] and long.summary in rows[long.name]  # whole, in its own row only


def test_list_cuts_long_dataset_descriptions_and_info_has_them_whole(runner):
    from genzoo.cli.list_cmd import DATASET_WIDTH

    long = [e for e in get_host().all_models().values() if len(e.dataset) > DATASET_WIDTH]
    listed = runner.invoke(cli, ["list"], env={"COLUMNS": "200"})
    header = listed.output.splitlines()[0]
    assert len(header[header.index("DATASET"):header.index("WEIGHTS")]) <= DATASET_WIDTH + 2
    assert long, "the bundled catalogue has long dataset descriptions (mmb-mnist)"
    assert long[0].dataset not in listed.output and "genzoo info NAME" in listed.output
    assert long[0].dataset in " ".join(info(runner, long[0].name).split())


# -- the typed registry ---------------------------------------------------------------------------------------


def test_every_catalogue_entry_has_a_status_limitations_and_genzoo_commands():
    for entry in get_host().all_models().values():
        if entry.source != "registry.yaml":
            continue
        assert entry.status in STATUSES and 20 < len(entry.limitations) < 400, entry.name
        assert entry.command, entry.name
        for command in entry.command:
            assert command.removeprefix("OMP_NUM_THREADS=1 ").startswith("genzoo "), (entry.name, command)
            assert "benchmarks/" not in command and ("--data-root" not in command or "--data-root DIR" in command)


def test_every_distance_in_the_registry_has_its_reference_rows():
    with genzoo_plugins_only():
        entries = list(get_host().all_models().values())
    for entry in entries:
        for metric in entry.metrics:
            if metric.metric in RANKED_METRICS:
                assert metric.features and metric.n and metric.reference, (entry.name, metric)
                references = reference_set(metric)
                assert references is not None and len(references.rows_with(metric.metric)) >= 3, (entry.name, metric)


def test_a_model_below_its_own_bars_is_experimental():
    models = get_host().all_models()
    assert models["ign-cifar10"].status == "experimental"
    entropy = next(m for m in models["ign-cifar10"].metrics if m.metric == "class_entropy")
    ffz = next(m for m in models["ign-cifar10"].metrics if m.of == "f(f(z))")
    fz = next(m for m in models["ign-cifar10"].metrics if m.metric == "fid" and not m.of)
    assert entropy.value < 0.9 and ffz.value > 1.05 * fz.value  # its own bars, missed


def test_reference_placement_and_units():
    refs = ReferenceSet("f", "d:test", 10, rows=tuple(
        ReferenceRow(name, "", {"fid": v}) for name, v in (("real", 1.652), ("blur", 809.7), ("resize", 365.0))))
    assert place(refs, "fid", 677.7) == "between resize (365.0) and blur (809.7)"
    assert place(refs, "fid", 0.5) == "below every reference row (lowest: real (1.7))"
    assert place(refs, "fid", 900) == "above every reference row (highest: blur (809.7))"
    assert place(refs, "kid", 1.0) == ""
    assert [format_value("kid", v) for v in (145.293, 0.02742, 54683.8, -49.0547)] == ["145", "0.0274", "54,700", "-49.1"]
    # a tie rounds half away from zero as the value reads in decimal, not as its binary form falls
    assert [format_value(m, v) for m, v in (("recall", 0.9085), ("precision", 0.6575), ("kid", -49.05), ("fid", 0.25))] \
        == ["0.909", "0.658", "-49.1", "0.3"]


def test_metrics_and_statuses_are_validated_with_clear_errors():
    with pytest.raises(GenzooError, match=r"model 'x' in test: metric 'fid' needs a number as its value"):
        ModelEntry.from_dict("x", {"method": "ign", "metrics": [{"metric": "fid", "value": "48.7 (good)"}]}, source="test")
    with pytest.raises(GenzooError, match="status must be one of stable, experimental, got 'great'"):
        ModelEntry.from_dict("x", {"method": "ign", "status": "great"}, source="test")
    plain = ModelEntry.from_dict("x", {"method": "ign", "metrics": {"fid": 12.5}, "command": "genzoo fit ign"},
                                 source="test")
    assert plain.metrics == [Metric("fid", 12.5)] and plain.command == ["genzoo fit ign"]
    assert plain.status == "experimental"  # a plugin's model says stable only when it states so


def test_registry_reference_rows_match_the_measurements_they_come_from():
    root = registry_path().parent / "benchmarks" / "results"
    files = {"features-mnist": "reference.json", "features-cifar10": "reference_cifar10.json",
             "features-celeba64": "reference_celeba64.json"}
    for references in load_reference_sets():
        dataset = references.reference.split(":")[0]
        name = files[references.features] if references.features != "pixels" else f"reference_swd_{dataset}.json"
        measured = json.loads((root / name).read_text())["rows"]
        for row in references.rows:
            key = "fid" if "fid" in row.values else "swd"
            match = [r for r in measured.values() if abs(r["metrics"][key] - row.values[key]) < 0.05]
            assert len(match) == 1, (references.features, row.images)
            if "kid" in row.values:
                assert abs(match[0]["metrics"]["kid"]["mean"] - row.values["kid"]) <= 0.002 * abs(row.values["kid"]) + 0.05
            assert match[0]["n"] == references.n and match[0]["reference"]["spec"] == references.reference


def test_registry_yaml_is_plain_yaml_with_models_and_references():
    data = yaml.safe_load(registry_path().read_text())
    assert set(data) == {"format_version", "references", "models"}


def test_each_recipe_ends_by_exporting_the_model_under_its_own_name():
    for entry in load_registry_file():
        exports = [c.split() for c in entry.command if c.split()[:2] == ["genzoo", "export"]]
        if exports and exports[-1][3].startswith("models/"):
            assert exports[-1][3] == f"models/{entry.name}", (entry.name, " ".join(exports[-1]))


def test_figures_of_one_sampler_at_two_n_say_their_n_and_the_catalogue_matches_its_results_files():
    import json
    from pathlib import Path

    entries = {e.name: e for e in load_registry_file()}
    text = " ".join(entries["robust-consistency-mnist"].limitations.split())
    assert "(FID 166.6; 170.4 on the 10,000" in text and "5,000 of" in text
    recorded = json.loads((Path(__file__).parent.parent / "benchmarks/results/gan_mnist.json").read_text())
    recall = next(m.value for m in entries["gan-mnist"].metrics if m.metric == "recall")
    assert recall == round(recorded["metrics"]["recall"], 3)
    robust = entries["robust-mnist"]
    assert "retrain it" in robust.limitations and "refines any generator's digits, ign-mnist's best" in robust.summary


def _fit_images(entry: ModelEntry, models: dict) -> int | None:
    """Training images behind a catalogue model, read from its fit commands: steps x batch, --init's model added
    (a catalogue model, or a directory that an earlier command of the list trained or exported)."""
    total, batch, steps = 0, 0, 0
    made: dict[str, int] = {}  # a directory of another method's run or export -> the images behind it
    for command in entry.command:
        words = command.split()
        option = {words[i]: words[i + 1] for i in range(len(words) - 1) if words[i].startswith("--")}
        verb = words[words.index("genzoo") + 1:words.index("genzoo") + 3]
        if verb[0] == "export":
            source, target = words[words.index("export") + 1:words.index("export") + 3]
            if source in made:
                made[target] = made[source]
            elif "--checkpoint" in option:  # the weights of an earlier step of the last fit
                total -= (steps - int(option["--checkpoint"])) * batch
            continue
        if verb[0] != "fit" or "--batch-size" not in option:
            if verb == ["fit", entry.method]:
                return None  # a full-batch fit: no batch size to multiply by
            continue
        init = option.get("--init", "")
        behind = made.get(init, models[init.removeprefix("models/")].images_seen
                          if init.removeprefix("models/") in models else 0)
        if verb != ["fit", entry.method]:  # another model trained on the way (a teacher, a base)
            made[option["--out"]] = int(option["--steps"]) * int(option["--batch-size"]) + behind
            continue
        steps, batch = int(option["--steps"]), int(option["--batch-size"])
        total += steps * batch + behind
    return total


def test_every_generator_says_how_many_images_it_saw_and_the_number_follows_from_its_commands(runner):
    models = {name: e for name, e in get_host().all_models().items() if e.source == "registry.yaml"}
    host = get_host()
    checked = []
    for name, entry in models.items():
        if "sample" in host.method(entry.method).capabilities:
            assert entry.images_seen is not None, name
        expected = _fit_images(entry, models)
        if expected is not None and entry.method != "mmb":  # mmb's generator trains on no images
            assert entry.images_seen == expected, (name, entry.images_seen, expected)
            checked.append(name)
    assert {"ign-mnist", "edm-mnist", "consistency-mnist", "gan-mnist"} <= set(checked)
    assert "images seen in training: 832,000" in info(runner, "edm-mnist")
    with pytest.raises(GenzooError, match="'images_seen' must be a whole number of images"):
        ModelEntry.from_dict("x", {"method": "ign", "images_seen": "448,000"}, source="test")
