"""Precision and device chosen for the hardware: resolution on mocked capabilities, the warning,
device parsing and refusals, and what a run records of both."""

import json
import warnings

import pytest
import torch

import genzoo
from genzoo import precision as prec
from genzoo.errors import ArgumentError
from genzoo.hardware import resolve_device


@pytest.fixture
def native_cpu(monkeypatch):
    monkeypatch.setattr(prec, "cpu_has_native_bf16", lambda: True)


@pytest.fixture
def emulating_cpu(monkeypatch):
    monkeypatch.setattr(prec, "cpu_has_native_bf16", lambda: False)
    prec._warned.clear()


def _probe(times):
    calls = []

    def probe(precision):
        calls.append(precision)
        return times[precision]

    return probe, calls


def test_auto_is_fp32_where_bf16_is_emulated_and_never_probes(emulating_cpu):
    probe, calls = _probe({"fp32": 1.0, "bf16": 0.1})
    assert prec.resolve_precision("auto", torch.device("cpu"), probe, "k") == "fp32"
    assert calls == []


def test_auto_on_a_native_cpu_takes_bf16_only_when_measured_faster_and_caches_the_verdict(native_cpu):
    faster, calls = _probe({"fp32": 1.0, "bf16": 0.5})
    assert prec.resolve_precision("auto", torch.device("cpu"), faster, "workload-a") == "bf16"
    assert calls == ["fp32", "bf16"]
    assert prec.resolve_precision("auto", torch.device("cpu"), faster, "workload-a") == "bf16"
    assert calls == ["fp32", "bf16"]  # cached: not timed again
    slower, _ = _probe({"fp32": 0.5, "bf16": 0.49})  # within 5%: not worth the rounding
    assert prec.resolve_precision("auto", torch.device("cpu"), slower, "workload-b") == "fp32"
    cache = json.loads(prec._cache_file().read_text())
    assert {v["precision"] for v in cache.values()} == {"bf16", "fp32"}


def test_auto_on_cuda_follows_bf16_support(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert prec.resolve_precision("auto", torch.device("cuda")) == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert prec.resolve_precision("auto", torch.device("cuda")) == "fp32"
    assert prec.resolve_precision("fp16", torch.device("cuda")) == "fp16"


def test_bf16_where_it_is_emulated_warns_once_with_the_measured_slowdown(emulating_cpu):
    with pytest.warns(UserWarning, match="bf16 is emulated on this CPU.*28x"):
        assert prec.resolve_precision("bf16", torch.device("cpu")) == "bf16"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prec.resolve_precision("bf16", torch.device("cpu"))  # once per process


def test_refusals_are_one_sentence_naming_the_argument():
    with pytest.raises(ArgumentError, match="precision fp16 is for GPUs"):
        prec.resolve_precision("fp16", torch.device("cpu"))
    with pytest.raises(ArgumentError, match="precision must be one of auto, fp32, bf16, fp16"):
        prec.check_precision("fp8")


def test_device_parsing_and_refusals(monkeypatch):
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        assert resolve_device("auto").type in ("cpu", "mps")
        with pytest.raises(ArgumentError, match="device cuda:7 was asked for, but torch sees no CUDA device"):
            resolve_device("cuda:7")
    with pytest.raises(ArgumentError, match="device must be one of auto, cpu, cuda, cuda:N or mps"):
        resolve_device("gpu0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda:1") == torch.device("cuda:1")
    assert resolve_device("auto") == torch.device("cuda")
    with pytest.raises(ArgumentError, match=r"sees 2 CUDA device\(s\) \(cuda:0..cuda:1\)"):
        resolve_device("cuda:2")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ArgumentError, match="no Apple GPU"):
        resolve_device("mps")


def test_bf16_sampling_stays_close_to_fp32():
    model = genzoo.load("ign-mnist")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # where bf16 is emulated
        low = model.sample(8, seed=0, precision="bf16")
    full = model.sample(8, seed=0)
    assert low.dtype == torch.float32 and (low - full).abs().mean() < 0.02


def test_a_run_records_its_precision_and_hardware(toy_site, toy_npz, tmp_path):
    out = genzoo.fit("toy", steps=2, out=tmp_path / "run", dataset=f"npz:{toy_npz}", batch_size=8, progress=False,
                     precision="fp32", sample_every=0)
    provenance = json.loads((out / "config.json").read_text())["provenance"]
    fit_json = json.loads((out / "fit.json").read_text())
    assert provenance["precision"] == "fp32" and fit_json["settings"]["precision"] == "fp32"
    assert provenance["hardware"] == fit_json["hardware"] and provenance["hardware"]
    assert "threads" in provenance["hardware"] or torch.cuda.is_available()
