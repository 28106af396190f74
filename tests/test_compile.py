"""fit --compile: compiled networks train to the eager result within float rounding, write the same files (no
``_orig_mod.`` keys), resume either way, and ``auto`` keeps a short run eager without timing it."""

import json

import pytest
import torch
from safetensors.torch import load_file

import genzoo
from genzoo.training.compiling import AUTO_MIN_STEPS, CompilePlan, compiled_modules

TINY = {"width": 8, "levels": 2, "sample_steps": 2}


def _fit(out, toy_npz, steps, **options):
    return genzoo.fit("edm", steps=steps, out=out, dataset=f"npz:{toy_npz}", batch_size=8, config=TINY,
                      precision="fp32", progress=False, sample_every=0, checkpoint_every=1, keep_checkpoints=4,
                      **options)


def test_auto_keeps_a_short_run_eager_and_says_why(toy_npz, tmp_path, capsys):
    out = _fit(tmp_path / "run", toy_npz, 2, compile="auto")
    said = capsys.readouterr().err
    assert "compile: off (a run of 2 steps: compiling takes minutes" in said
    segment = json.loads((out / "fit.json").read_text())["segments"][-1]
    assert segment["compile"].startswith("off (a run of 2 steps")
    assert AUTO_MIN_STEPS > 2


def test_a_cached_verdict_decides_auto_and_off_compiles_nothing(monkeypatch, tmp_path):
    from genzoo_edm import EDM

    monkeypatch.setenv("GENZOO_CACHE", str(tmp_path))
    model = EDM(TINY)
    assert [name for name, _ in compiled_modules(model)] == ["net"]
    plan = CompilePlan("auto", model, "workload", 10 * AUTO_MIN_STEPS, 1, say=lambda text: None)
    assert plan.phase == "eager" and plan.choice is None  # a long run with nothing cached: timed first
    key = plan.key
    (tmp_path / "compile.json").write_text(json.dumps({key: {"compiled": False, "eager_seconds": 1.0,
                                                             "compiled_seconds": 2.0}}))
    again = CompilePlan("auto", model, "workload", 10 * AUTO_MIN_STEPS, 1, say=lambda text: None)
    assert again.choice.compiled is False and "0.5x the speed of eager" in again.choice.reason
    assert CompilePlan("off", model, "workload", 10, 1).choice.describe() == "off (as asked)"
    assert model.net._compiled_call_impl is None


@pytest.mark.slow  # compiling even a tiny U-Net takes a minute of CPU
def test_compiled_training_matches_eager_writes_the_same_files_and_resumes_either_way(toy_npz, tmp_path):
    eager = _fit(tmp_path / "eager", toy_npz, 3, compile="off")
    compiled = _fit(tmp_path / "compiled", toy_npz, 3, compile="on")
    a, b = load_file(str(eager / "model.safetensors")), load_file(str(compiled / "model.safetensors"))
    assert list(a) == list(b) and not any("_orig_mod" in key for key in b)
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
    for checkpoint in ("step-00000003",):
        assert sorted(p.name for p in (compiled / "checkpoints" / checkpoint).iterdir()) == \
            sorted(p.name for p in (eager / "checkpoints" / checkpoint).iterdir())
    # a run trained eagerly to step 2 resumes compiled, and one trained compiled resumes eagerly
    for first, then, name in (("off", "on", "eager_then_compiled"), ("on", "off", "compiled_then_eager")):
        run = _fit(tmp_path / name, toy_npz, 3, compile=first)
        import shutil

        shutil.rmtree(run / "checkpoints" / "step-00000003")
        _fit(run, toy_npz, 3, compile=then, resume=True)
        c = load_file(str(run / "model.safetensors"))
        assert all(torch.allclose(a[k], c[k], atol=1e-5) for k in a)
        assert [s.get("compile") for s in json.loads((run / "fit.json").read_text())["segments"]] == \
            [f"{first} (as asked)", f"{then} (as asked)"]


# -- sampling: genzoo sample / eval --compile ----------------------------------------------------------------------


def test_auto_compiles_sampling_only_for_long_requests_and_counts_the_methods_calls(monkeypatch):
    from genzoo import compiling

    model = genzoo.get_host().method("edm")(TINY).eval()
    assert compiling.network_calls(model, {"steps": 5, "s_churn": 1.0}) == 9  # options it does not count are left out
    assert compiling.network_calls(model, {"steps": 5, "cfg": 2.0}) == 18  # a guided step calls two denoisers
    assert compiling.compile_for_sampling(model, 64, {}, "auto") == ""  # 64 x 3 calls: stays eager, says nothing
    assert model.net._compiled_call_impl is None
    assert compiling.compile_for_sampling(model, 10**6, {}, "off") == ""
    assert model.net._compiled_call_impl is None
    monkeypatch.setattr(compiling, "AUTO_MIN_IMAGE_CALLS", 100)
    monkeypatch.setattr(compiling, "has_cpp_compiler", lambda: False)  # inductor could not build: stays eager
    assert compiling.compile_for_sampling(model, 64, {"steps": 2}, "auto") == ""
    monkeypatch.setattr(compiling, "has_cpp_compiler", lambda: True)
    said = compiling.compile_for_sampling(model, 64, {"steps": 2}, "auto")
    assert said.startswith("compile: on (64 images x 3 network calls") and model.net._compiled_call_impl is not None
    compiling.uncompile(model)
    assert model.net._compiled_call_impl is None


def test_a_method_that_does_not_count_its_calls_stays_eager_under_auto_and_a_bad_choice_is_refused(monkeypatch):
    from genzoo import compiling

    monkeypatch.setattr(compiling, "AUTO_MIN_IMAGE_CALLS", 1)
    ign = genzoo.get_host().method("ign")({"width": 8})
    assert compiling.network_calls(ign, {}) is None
    assert compiling.compile_for_sampling(ign, 10**6, {}, "auto") == ""
    with pytest.raises(genzoo.GenzooError, match="compile must be one of auto, on, off"):
        compiling.compile_for_sampling(ign, 1, {}, "sometimes")
    with pytest.raises(genzoo.GenzooError, match="compile must be one of auto, on, off"):
        genzoo.evaluate("ign-mnist", n=4, compile="sometimes")


@pytest.mark.slow  # compiling even a tiny U-Net takes a minute of CPU
def test_compiled_sampling_gives_eager_images_within_rounding():
    from genzoo import compiling

    model = genzoo.get_host().method("edm")(TINY).eval()
    eager = model.sample(6, seed=3, batch_size=6)
    assert compiling.compile_for_sampling(model, 6, {}, "on") == "compile: on (as asked)"
    compiled = model.sample(6, seed=3, batch_size=6)
    assert (compiled - eager).abs().max() < 1e-4
