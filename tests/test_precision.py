"""Precision and device chosen for the hardware: resolution on mocked capabilities, the warning,
device parsing and refusals, and what a run records of both."""

import json
import warnings
from dataclasses import dataclass

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


@dataclass
class _Shape:
    channels: int = 1
    image_size: int = 8


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
    assert provenance["precision"] == "fp32" and fit_json["segments"][-1]["precision"] == "fp32"
    assert "precision" not in fit_json["settings"] and "precision" not in fit_json  # recorded once, per segment
    assert provenance["hardware"] == fit_json["hardware"] and provenance["hardware"]
    assert "threads" in provenance["hardware"] or torch.cuda.is_available()


def test_fit_prints_its_precision_and_why(toy_site, toy_npz, tmp_path, native_cpu, monkeypatch):
    from click.testing import CliRunner

    import genzoo.training.precision as train
    from genzoo.cli import cli

    monkeypatch.setenv(prec.CACHE_ENV, str(tmp_path / "cache"))  # no verdict from an earlier test
    seconds = [1.7, 1.0]  # what the probe measures: fp32, then bf16
    monkeypatch.setattr(train, "timed", lambda work, calls=None: seconds.pop(0))
    args = ["fit", "toy", "--dataset", f"npz:{toy_npz}", "--steps", "2", "--batch-size", "8", "--no-progress",
            "--sample-every", "0"]
    auto = CliRunner().invoke(cli, args + ["--out", str(tmp_path / "auto")])
    assert auto.exit_code == 0, auto.output
    assert "precision: bf16 (native on this CPU, 1.7x faster measured)" in auto.output
    fixed = CliRunner().invoke(cli, args + ["--out", str(tmp_path / "fixed"), "--precision", "fp32"])
    assert "precision: fp32 (as asked)" in fixed.output


def test_auto_where_bf16_is_emulated_says_so(emulating_cpu):
    choice = prec.decide_precision("auto", torch.device("cpu"))
    assert choice.describe() == "fp32 (bf16 would be emulated on this CPU: no AMX or AVX512-BF16)"


def test_a_probe_times_a_few_network_calls_not_a_whole_sampler(native_cpu):
    """auto on a sampler of 40 network calls a batch: the probe runs a few of them per precision."""

    class ManySteps(genzoo.Method):
        name = "many-steps"
        summary = "a sampler of 40 network calls"
        Config = _Shape
        capabilities = frozenset({"sample"})

        def __init__(self, config=None):
            super().__init__(config)
            self.net = torch.nn.Conv2d(1, 1, 3, padding=1)

        def sample_batch(self, noise, labels):
            x = noise.randn(1, 8, 8)
            for _ in range(40):
                x = x - 0.05 * self.net(x)
            return torch.sigmoid(x)

    model = ManySteps()
    calls = []
    model.net.register_forward_pre_hook(lambda module, args: calls.append(1))
    torch.manual_seed(3)
    expected = torch.rand(2)
    torch.manual_seed(3)
    model.sample(4, seed=0, precision="auto")
    assert torch.equal(torch.rand(2), expected)  # the probe left torch's global RNG where it was
    probe_calls = len(calls) - 40
    assert 0 < probe_calls <= 4 * (prec.PROBE_CALLS + 1)  # 2 precisions x (warm-up + timed run), not 4 x 40


def test_timed_stops_a_run_after_its_network_calls():
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())  # one top-level call, two nested
    made = []

    def work():
        for _ in range(100):
            made.append(1)
            net(torch.zeros(1, 2))

    prec.timed(work, calls=3)
    assert len(made) == 2 * 4  # two runs, each stopped at the start of its 4th call
    made.clear()
    prec.timed(work, calls=None)
    assert len(made) == 200


# -- the precision a run records is the precision it ran -------------------------------------------


def _observing_toy():
    """The toy, recording for each training step the autocast dtype it ran under (None: no autocast)."""
    toy = genzoo.get_host().method("toy")

    class Observing(toy):
        seen: list = []

        def training_step(self, batch):
            device = self.device.type
            Observing.seen.append(torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None)
            return super().training_step(batch)

    return Observing


@pytest.fixture
def fp16_on_this_cpu(monkeypatch):
    _allow_fp16_on_this_cpu(monkeypatch)


def _allow_fp16_on_this_cpu(monkeypatch):
    """Let fp16 run on the CPU (it is refused there), so the fp16 path of the engine runs in the default suite."""
    import genzoo.training.start as start

    original = prec.decide_precision

    def allowing(requested, device, probe=None, probe_key=""):
        if requested == "fp16":
            return prec.PrecisionChoice("fp16", "fp16", "as asked")
        return original(requested, device, probe, probe_key)

    monkeypatch.setattr(prec, "decide_precision", allowing)
    monkeypatch.setattr(start, "decide_precision", allowing)
    monkeypatch.setattr(start, "check_runnable", lambda choice, device, out: None)


def _fp16_fit(cls, out, toy_npz, steps, **kw):
    return genzoo.fit(cls, steps=steps, out=out, dataset=f"npz:{toy_npz}", batch_size=8, progress=False,
                      sample_every=0, checkpoint_every=2, **kw)


def test_an_fp16_run_trains_in_fp16_fresh_and_resumed_and_records_what_ran(toy_site, toy_npz, tmp_path,
                                                                          fp16_on_this_cpu):
    """A run started in fp16 and resumed under the default --precision auto keeps fp16: every step of both
    segments runs under fp16 autocast with a loss scaler, and fit.json and the model say fp16."""
    from genzoo.training import loop

    scalers = []
    original = loop.TrainStep.__init__

    def recording(self, *args, **kwargs):
        scalers.append(kwargs.get("scaler"))
        original(self, *args, **kwargs)

    toy = _observing_toy()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loop.TrainStep, "__init__", recording)
        _fp16_fit(toy, tmp_path / "run", toy_npz, 2, precision="fp16")
        assert toy.seen == [torch.float16] * 2
        toy.seen.clear()
        _fp16_fit(toy, tmp_path / "run", toy_npz, 4, resume=True)  # precision auto: the run's fp16
    assert toy.seen == [torch.float16] * 2
    assert len(scalers) == 4 and all(isinstance(s, torch.amp.GradScaler) for s in scalers)
    fit_json = json.loads((tmp_path / "run" / "fit.json").read_text())
    assert [(s["steps"], s["precision"]) for s in fit_json["segments"]] == [([0, 2], "fp16"), ([2, 4], "fp16")]
    assert json.loads((tmp_path / "run" / "config.json").read_text())["provenance"]["precision"] == "fp16"


def test_a_cpu_refuses_to_resume_an_fp16_run_in_one_sentence_and_changes_nothing(toy_site, toy_npz, tmp_path,
                                                                                monkeypatch):
    """Where fp16 cannot run (a CPU), resuming an fp16 run is refused as a fresh fp16 run is, instead of
    training in fp32 while fit.json says fp16; --precision fp32 --allow-changes continues, recorded."""
    with pytest.MonkeyPatch.context() as patch:
        _allow_fp16_on_this_cpu(patch)
        _fp16_fit("toy", tmp_path / "run", toy_npz, 2, precision="fp16")
    before = (tmp_path / "run" / "fit.json").read_text()
    with pytest.raises(genzoo.GenzooError, match=r"^--resume: the run in .* trains in fp16, which runs on GPUs only; "
                                                   r"resume it on a GPU, or continue in another precision with "
                                                   r"--precision fp32 --allow-changes") as refused:
        _fp16_fit("toy", tmp_path / "run", toy_npz, 4, resume=True)
    assert "\n" not in str(refused.value)
    assert (tmp_path / "run" / "fit.json").read_text() == before
    with pytest.raises(ArgumentError, match="fp16 is for GPUs"):
        _fp16_fit("toy", tmp_path / "fresh", toy_npz, 2, precision="fp16")
    toy = _observing_toy()
    toy.seen.clear()
    _fp16_fit(toy, tmp_path / "run", toy_npz, 4, resume=True, precision="fp32", allow_changes=True)
    assert toy.seen == [None] * 2
    segments = json.loads((tmp_path / "run" / "fit.json").read_text())["segments"]
    assert [(s["precision"], s.get("changed")) for s in segments] == [("fp16", None), ("fp32", ["precision"])]


def _two_process_worker(rank, port, out, toy_npz, steps, resume, allow_fp16, precision, results):
    """One of two CPU processes (gloo), as accelerate launch runs them: genzoo fit of the observing toy."""
    import os

    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "ACCELERATE_USE_CPU": "1"})
    torch.set_num_threads(1)
    from genzoo.training.loop import Trainer
    from genzoo.training.options import FitOptions

    try:
        with pytest.MonkeyPatch.context() as patch:
            if allow_fp16:
                _allow_fp16_on_this_cpu(patch)
            toy = _observing_toy()
            opts = FitOptions(steps=steps, out=out, dataset=f"npz:{toy_npz}", batch_size=8, precision=precision,
                              device="cpu", sample_every=0, checkpoint_every=2, progress=False, resume=resume)
            trainer = Trainer(toy, opts)
            trainer.run()
        weights = {k: v.detach().clone() for k, v in trainer.state.model.state_dict().items()}
        results.put((rank, "ok", [str(d) for d in toy.seen], {k: v.tolist() for k, v in weights.items()}))
    except Exception as exc:
        results.put((rank, "error", f"{type(exc).__name__}: {exc}", None))


def _two_processes(out, toy_npz, steps, resume=False, allow_fp16=True, precision="auto"):
    import multiprocessing
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    workers = [context.Process(target=_two_process_worker, args=(rank, port, str(out), str(toy_npz), steps, resume,
                                                                 allow_fp16, precision, results)) for rank in range(2)]
    for worker in workers:
        worker.start()
    found = sorted(results.get(timeout=300) for _ in workers)
    for worker in workers:
        worker.join(timeout=60)
    return found


@pytest.mark.slow
def test_two_processes_train_an_fp16_run_in_fp16_fresh_and_resumed_or_both_refuse(toy_site, toy_npz, tmp_path):
    fresh = _two_processes(tmp_path / "run", toy_npz, 2, precision="fp16")
    assert [(r[1], r[2]) for r in fresh] == [("ok", ["torch.float16"] * 2)] * 2, fresh
    resumed = _two_processes(tmp_path / "run", toy_npz, 4, resume=True)
    assert [(r[1], r[2]) for r in resumed] == [("ok", ["torch.float16"] * 2)] * 2, resumed
    assert resumed[0][3] == resumed[1][3]  # the ranks end bit-equal
    segments = json.loads((tmp_path / "run" / "fit.json").read_text())["segments"]
    assert [(s["steps"], s["precision"], s["processes"]) for s in segments] == [([0, 2], "fp16", 2), ([2, 4], "fp16", 2)]
    refused = _two_processes(tmp_path / "run", toy_npz, 6, resume=True, allow_fp16=False)
    assert [r[1] for r in refused] == ["error", "error"] and refused[0][2] == refused[1][2], refused
    assert "trains in fp16, which runs on GPUs only" in refused[0][2]


def test_a_method_that_must_train_in_fp32_keeps_it_under_auto_and_is_warned_about_bf16(native_cpu):
    from genzoo.plugins import get_host

    consistency = get_host().method("consistency")
    assert consistency.fp32_training  # its loss is a difference of two nearby outputs
    cpu = torch.device("cpu")

    def never(precision):
        raise AssertionError("a method that trains in fp32 is not timed under auto")

    def decide(requested):
        return prec.decide_run_precision(requested, None, "consistency", consistency.fp32_training, cpu, never, "k")

    choice = decide("auto")  # never timed: the probe would pick bf16 on speed alone
    assert choice.precision == "fp32" and "consistency trains in fp32: its loss compares" in choice.describe()
    with pytest.warns(UserWarning, match="--precision bf16 for consistency, which should train in fp32: its loss"):
        assert decide("bf16").precision == "bf16"
    assert not get_host().method("edm").fp32_training
