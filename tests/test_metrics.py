"""Metrics on constructed cases, through the Python API and the CLI, on data the tests make."""

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import genzoo
from genzoo.cli import cli
from genzoo.metrics import class_statistics, fid, kid, max_ssim, precision_recall
from genzoo.reporting import eval_lines


def _scipy_fid(a, b):
    from scipy import linalg

    a, b = a.double().numpy(), b.double().numpy()
    ca, cb = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    root = linalg.sqrtm(ca @ cb).real
    return float(((a.mean(0) - b.mean(0)) ** 2).sum() + np.trace(ca + cb - 2 * root))


def test_fid_of_a_set_against_itself_is_zero_and_matches_an_independent_computation():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(2000, 16, generator=g)
    b = torch.randn(2000, 16, generator=g) * 1.3 + 0.2
    assert abs(fid(a, a)) < 1e-6
    assert fid(a, b) == pytest.approx(_scipy_fid(a, b), rel=1e-4)


def test_fid_grows_monotonically_with_added_noise(toy_site, toy_npz):
    data = np.load(toy_npz)
    x = torch.from_numpy(data["x"]).float().unsqueeze(1) / 255
    g = torch.Generator().manual_seed(1)
    scores = []
    for sigma in (0.0, 0.05, 0.1, 0.2, 0.4):
        noisy = (x + sigma * torch.randn(x.shape, generator=g)).clamp(0, 1)
        result = genzoo.evaluate(noisy, n=len(x), ref=f"npz:{toy_npz}", features="toy-features", metrics="fid",
                                 progress=False)
        scores.append(result["metrics"]["fid"])
    assert scores[0] < 1e-6
    assert all(b > a for a, b in zip(scores, scores[1:]))


def test_precision_and_recall_on_constructed_cases():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(500, 8, generator=g)
    assert precision_recall(a, a.clone()) == (1.0, 1.0)
    far = torch.randn(500, 8, generator=g) + 100
    assert precision_recall(a, far) == (0.0, 0.0)
    half = torch.cat([a[:250], far[:250]])  # half the fakes lie on the data
    assert precision_recall(a, half)[0] == pytest.approx(0.5, abs=0.02)
    dropped = a[a[:, 0] > 0.5]  # mode dropping: fakes from one side of the data only
    precision, recall = precision_recall(a, dropped)
    assert precision == 1.0 and recall < 0.75


def test_kid_is_near_zero_for_one_distribution_and_positive_for_two():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(1200, 8, generator=g), torch.randn(1200, 8, generator=g)
    same, _ = kid(a, b, subset_size=500, subsets=20)
    shifted, _ = kid(a, b + 1, subset_size=500, subsets=20)
    assert abs(same) < 0.01 < shifted
    assert kid(a, b + 1, subset_size=500, subsets=20) == kid(a, b + 1, subset_size=500, subsets=20)  # seeded


def test_memorisation_of_training_images_against_themselves_is_ssim_one():
    g = torch.Generator().manual_seed(0)
    train = torch.rand(100, 1, 16, 16, generator=g)
    assert torch.allclose(max_ssim(train[:10], train, candidates=8), torch.ones(10), atol=1e-5)
    assert (max_ssim(torch.rand(10, 1, 16, 16, generator=g), train, candidates=8) < 0.5).all()


def test_class_statistics_entropy_and_accuracy():
    probs = torch.eye(4).repeat(25, 1)
    stats = class_statistics(probs, torch.arange(100) % 4)
    assert stats["entropy"] == pytest.approx(1.0) and stats["accuracy"] == 1.0 and stats["confidence"] == 1.0
    wrong_threes = class_statistics(torch.eye(4)[[0, 1, 2, 0] * 25], torch.arange(100) % 4)
    assert wrong_threes["accuracy_per_label"] == [1.0, 1.0, 1.0, 0.0] and wrong_threes["accuracy"] == 0.75
    assert class_statistics(probs, torch.zeros(100, dtype=torch.long))["accuracy_per_label"][1:] == [None] * 3
    collapsed = class_statistics(torch.eye(4)[[0] * 100], None)
    assert collapsed["entropy"] == 0.0 and collapsed["histogram"] == [1.0, 0.0, 0.0, 0.0]


def test_cli_eval_writes_json_with_the_feature_network_and_counts(toy_site, toy_npz, tmp_path):
    out = tmp_path / "eval.json"
    result = CliRunner().invoke(cli, ["eval", f"npz:{toy_npz}", "-n", "64", "--ref", f"npz:{toy_npz}",
                                      "--features", "toy-features", "--metrics", "fid,kid,precision,recall,memorization",
                                      "--kid-subset-size", "32", "--train", f"npz:{toy_npz}", "--memorization-n", "16",
                                      "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["features"]["name"] == "toy-features" and report["n"] == 64 and report["reference"]["n"] == 64
    assert set(report["metrics"]) == {"fid", "kid", "precision", "recall", "memorization"}
    memorization = report["metrics"]["memorization"]
    assert memorization["max_ssim_mean"] == pytest.approx(1.0, abs=1e-5)
    # the reference is the training file itself here, so its held-out images are found in it as well
    assert memorization["held_out_max_ssim_mean"] == pytest.approx(1.0, abs=1e-5)
    assert memorization["held_out_nn_feature_distance_mean"] == pytest.approx(0.0, abs=1e-2)
    assert memorization["n_held_out"] == memorization["n_generated"] == 16
    assert report["metrics"]["kid"]["subset_size"] == 32
    assert "fixed permutation" in report["reference"]["drawn_with"]


def test_eval_errors_are_one_clear_sentence(toy_site, toy_npz, tmp_path):
    runner = CliRunner()
    bad = runner.invoke(cli, ["eval", f"npz:{toy_npz}", "-n", "64", "--ref", f"npz:{toy_npz}", "--features",
                              "toy-features", "--metrics", "fid,sharpness"])
    assert bad.exit_code == 1 and "unknown metric(s) ['sharpness']" in bad.output
    few = runner.invoke(cli, ["eval", f"npz:{toy_npz}", "-n", "64", "--ref", f"npz:{toy_npz}", "--features",
                              "toy-features", "--metrics", "kid", "--kid-subset-size", "100"])
    assert few.exit_code == 1 and "subsets of --kid-subset-size=100 images" in few.output
    big = tmp_path / "big.npz"
    np.savez(big, x=np.zeros((64, 16, 16), dtype=np.uint8))
    shape = runner.invoke(cli, ["eval", f"npz:{big}", "-n", "64", "--ref", f"npz:{toy_npz}", "--features",
                                "toy-features", "--metrics", "fid"])
    assert shape.exit_code == 1 and "shape (1, 16, 16)" in shape.output and "(1, 8, 8)" in shape.output


def test_inception_features_offline_fail_in_one_sentence(toy_npz, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = CliRunner().invoke(cli, ["eval", f"npz:{toy_npz}", "-n", "64", "--ref", f"npz:{toy_npz}",
                                      "--features", "inception", "--metrics", "fid"])
    if result.exit_code == 0:
        pytest.skip("Inception weights are available on this machine, so the offline error cannot be shown")
    message = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(message) == 1 and "--features inception" in message[0]


def test_eval_apply_several_k_gives_one_report_each_equal_to_single_runs(toy_model_dir, toy_npz, tmp_path):
    common = dict(ref=f"npz:{toy_npz}", features="toy-features", n=64, metrics="fid,precision", progress=False)
    out = tmp_path / "reports.json"
    result = CliRunner().invoke(cli, ["eval", str(toy_model_dir), "--apply", "1,2,3", "--json", str(out),
                                      "--ref", common["ref"], "--features", "toy-features", "-n", "64",
                                      "--metrics", "fid,precision", "--no-progress"])
    assert result.exit_code == 0, result.output
    reports = json.loads(out.read_text())
    assert [r["apply"] for r in reports] == [1, 2, 3] and "(apply 3): 64 images" in result.output
    for report in reports:
        alone = genzoo.evaluate(str(toy_model_dir), apply=report["apply"], **common)
        assert alone["metrics"] == report["metrics"] and alone["apply"] == report["apply"]
    assert reports[0]["metrics"]["fid"] != reports[2]["metrics"]["fid"]  # f(f(f(z))) is not f(z)
    assert isinstance(genzoo.evaluate(str(toy_model_dir), apply=(2,), **common), list)
    bad = CliRunner().invoke(cli, ["eval", str(toy_model_dir), "--apply", "1,x", "--ref", common["ref"]])
    assert bad.exit_code == 1 and "comma list of integers" in bad.output


def test_kid_fits_a_small_n_by_default_and_the_report_says_so(toy_site, toy_npz):
    report = genzoo.evaluate(f"npz:{toy_npz}", n=48, n_ref=64, ref=f"npz:{toy_npz}", features="toy-features",
                             metrics="kid", kid_subsets=5, progress=False)
    kid = report["metrics"]["kid"]
    assert kid["subset_size"] == 48 and kid["default_subset_size"] == 1000 and kid["std"] > 0
    line = next(line for line in eval_lines(report, several=False) if line.strip().startswith("kid:"))
    assert "5 subsets of 48 images from each set: all of the smaller set, fewer than the default 1,000)" in line
    asked = genzoo.evaluate(f"npz:{toy_npz}", n=48, ref=f"npz:{toy_npz}", features="toy-features", metrics="kid",
                            kid_subsets=5, kid_subset_size=16, progress=False)["metrics"]["kid"]
    assert asked["subset_size"] == 16 and "default_subset_size" not in asked


def test_kid_with_every_image_of_both_sets_in_its_subset_is_computed_once_without_a_std(toy_site, toy_npz):
    """100 subsets of all 48 images of each set are 100 copies of one set: no spread is made up from them."""
    report = genzoo.evaluate(f"npz:{toy_npz}", n=48, ref=f"npz:{toy_npz}", features="toy-features", metrics="kid",
                             progress=False)
    scored = report["metrics"]["kid"]
    assert scored["std"] is None and scored["subsets"] == 1 and scored["subset_size"] == 48
    line = next(line for line in eval_lines(report, several=False) if line.strip().startswith("kid:"))
    assert line.endswith("(one subset: all 48 images of each set, so no standard deviation)") and "std" not in line
    a, b = torch.randn(40, 8), torch.randn(40, 8) + 0.5
    assert kid(a, b, subset_size=40, subsets=7)[1] is None and kid(a, b, subset_size=40, subsets=7)[0] > 0
    assert kid(a, torch.cat([b, b + 0.1]), subset_size=40, subsets=7)[1] > 0  # the larger set's draws differ


def test_eval_prints_every_distance_as_every_page_does(toy_site, toy_npz):
    from genzoo.reporting import format_value

    report = genzoo.evaluate(f"npz:{toy_npz}", n=48, n_ref=64, ref=f"npz:{toy_npz}", features="toy-features",
                             metrics="fid,kid,swd", kid_subsets=5, progress=False)
    lines = {line.split(":")[0].strip(): line for line in eval_lines(report, several=False)[1:]}
    metrics = report["metrics"]
    assert lines["fid"].endswith(f"fid: {format_value('fid', metrics['fid'])}")
    assert lines["swd"].endswith(f"swd: {format_value('swd', metrics['swd'])}")
    assert f"kid: {format_value('kid', metrics['kid']['mean'])} (std " in lines["kid"]
    assert "x1e3" not in " ".join(lines.values())


def test_a_bad_option_is_named_by_its_flag_before_any_metric_s_own_precondition(toy_model_dir, toy_npz):
    runner = CliRunner()
    common = ["eval", str(toy_model_dir), "-n", "16", "--ref", f"npz:{toy_npz}", "--features", "toy-features",
              "--kid-subset-size", "1000"]
    result = runner.invoke(cli, [*common, "--opt", "foo=1"])
    assert result.exit_code == 1 and result.output.startswith("Error: --opt foo: toy sample has no option 'foo'")
    typed = runner.invoke(cli, [*common, "--opt", "temperature=hot"])
    assert typed.exit_code == 1 and "--opt temperature must be a number, got 'hot'" in typed.output
    refine = runner.invoke(cli, [*common, "--refine", str(toy_model_dir), "--refine-opt", "foo=1"])
    assert refine.exit_code == 1 and refine.output.startswith("Error: --refine-opt foo: toy refine has no option")
    with pytest.raises(genzoo.GenzooError, match=r"^sample_options foo: toy sample has no option 'foo'"):
        genzoo.evaluate(str(toy_model_dir), n=16, ref=f"npz:{toy_npz}", features="toy-features",
                        sample_options={"foo": 1})


def test_the_eval_header_names_the_refiner_and_its_options():
    from genzoo.reporting import eval_header

    report = {"source": "ign", "apply": 1, "refine": "robust-mnist", "refine_options": {"eps": 2.0},
              "refine_steps": 5, "sample_options": {}, "n": 500, "reference": {"spec": "mnist:test", "n": 500},
              "features": {"name": "features-mnist"}}
    assert eval_header(report, several=False) == ("ign refined by robust-mnist (eps=2.0, steps=5): 500 images vs "
                                                  "mnist:test (500), features features-mnist")


def test_eval_says_when_the_catalogue_s_figure_was_measured_on_another_n():
    from genzoo.reporting import catalogue_notes

    figure = {"model": "ign-mnist", "metric": "fid", "value": 48.7, "n": 10000, "reference": "mnist:test"}
    report = {"metrics": {"fid": 82.0}, "n": 500, "reference": {"spec": "mnist:test", "n": 500},
              "catalogue": [figure]}
    [note] = catalogue_notes(report)
    assert "the catalogue's FID of ign-mnist, 48.7, was measured on 10,000 images, not 500" in note
    assert "not comparable" in note
    same = catalogue_notes({**report, "n": 10000})
    assert same == ["the catalogue's FID of ign-mnist, 48.7, was measured on the same n and reference"]


def test_the_catalogue_note_says_why_each_distance_differs_at_another_n():
    from genzoo.reporting import catalogue_notes

    report = {"metrics": {"fid": 82.0, "kid": {"mean": 41.0}}, "n": 500, "reference": {"spec": "mnist:test", "n": 500},
              "catalogue": [{"model": "ign-mnist", "metric": "fid", "value": 48.7, "n": 10000, "reference": "mnist:test"},
                            {"model": "ign-mnist", "metric": "kid", "value": 100.7, "n": 10000,
                             "reference": "mnist:test"}]}
    fid_note, kid_note = catalogue_notes(report)
    assert fid_note.endswith("not comparable with this one (FID reads higher from fewer images)")
    assert kid_note.endswith("(KID is unbiased at any n, but a figure from fewer images scatters more)")
    assert "grows" not in kid_note  # KID fell from 100.7 to 41 here: it is not a distance that grows as n shrinks


def test_eval_of_a_model_s_other_sampler_or_apply_is_noted_against_the_catalogue_s_figures_for_it():
    from genzoo.metrics.evaluation import EvalOptions, _catalogue_figures, _same_samples

    def noted(name, **options):
        o = EvalOptions(**options)
        return {(f["metric"], f["value"]) for f in _catalogue_figures(name, o) if _same_samples(f["of"], o)}

    two_steps = noted("consistency-mnist", sample_options={"steps": 2})
    assert ("fid", 98.1) in two_steps and ("fid", 170.4) not in two_steps
    assert ("fid", 170.4) in noted("consistency-mnist") and ("fid", 98.1) not in noted("consistency-mnist")
    assert noted("consistency-mnist", sample_options={"steps": 3}) == set()  # the catalogue has no 3-step figure
    assert ("fid", 48.4) in noted("ign-mnist", apply=2) and ("fid", 48.7) not in noted("ign-mnist", apply=2)
    assert ("fid", 51.5) in noted("ign-mnist", apply=3)
    assert noted("ign-mnist", refine="robust-mnist") == set()
