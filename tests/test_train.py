"""The shared training loop: outputs, logs, exact resume, EMA, and a 2-process run."""

import json
import math
import os
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

import genzoo
from genzoo.errors import GenzooError
from genzoo.training.batches import mirrored_half


def _fit(out, npz, steps, **kw):
    kw.setdefault("checkpoint_every", 3)
    kw.setdefault("sample_every", 3)
    kw.setdefault("batch_size", 8)
    return genzoo.fit("toy", steps=steps, out=out, dataset=f"npz:{npz}", progress=False, **kw)


def test_fit_writes_a_loadable_model_logs_grids_and_a_checkpoint(toy_site, toy_npz, tmp_path):
    out = _fit(tmp_path / "run", toy_npz, 5)
    model = genzoo.load(out)
    assert model.sample(3, seed=0).shape == (3, 1, 8, 8)
    lines = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert [l["step"] for l in lines] == [1, 2, 3, 4, 5] and {"loss", "latent_norm"} <= set(lines[0])
    assert sorted(p.name for p in (out / "samples").iterdir()) == ["step-00000003.png", "step-00000005.png"]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-00000003", "step-00000005"]  # keeps 2
    provenance = json.loads((out / "config.json").read_text())["provenance"]
    assert provenance["steps"] == 5 and provenance["dataset"].startswith("npz:") and provenance["weights"] == "raw"


def test_training_lowers_the_loss(toy_site, toy_npz, tmp_path):
    out = _fit(tmp_path / "run", toy_npz, 60, config={"lr": 0.05})
    losses = [json.loads(l)["loss"] for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert sum(losses[-10:]) / 10 < 0.7 * sum(losses[:10]) / 10


@pytest.mark.parametrize("ema", [0.0, 0.9])
def test_resume_ends_with_the_weights_of_an_uninterrupted_run(toy_site, toy_npz, tmp_path, ema):
    straight = _fit(tmp_path / "straight", toy_npz, 10, config={"ema_decay": ema})
    _fit(tmp_path / "resumed", toy_npz, 4, config={"ema_decay": ema})
    resumed = _fit(tmp_path / "resumed", toy_npz, 10, config={"ema_decay": ema}, resume=True)
    a = load_file(str(straight / "model.safetensors"))
    b = load_file(str(resumed / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    ca = load_file(str(straight / "checkpoints/step-00000010/model.safetensors"))
    cb = load_file(str(resumed / "checkpoints/step-00000010/model.safetensors"))
    assert all(torch.equal(ca[k], cb[k]) for k in ca)
    lines = (resumed / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(l)["step"] for l in lines] == list(range(1, 11))
    assert lines == (straight / "metrics.jsonl").read_text().splitlines()


def test_resume_from_an_older_checkpoint_discards_later_log_lines(toy_site, toy_npz, tmp_path):
    out = _fit(tmp_path / "run", toy_npz, 6)
    shutil.rmtree(out / "checkpoints" / "step-00000006")  # the run then holds step 3's checkpoint, and log lines to 6
    _fit(out, toy_npz, 6, resume=True)
    steps = [json.loads(l)["step"] for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]


def test_resume_refuses_changed_settings(toy_site, toy_npz, tmp_path):
    _fit(tmp_path / "run", toy_npz, 3)
    with pytest.raises(GenzooError, match="batch_size differs"):
        _fit(tmp_path / "run", toy_npz, 6, resume=True, batch_size=16)


def test_a_second_run_into_the_same_folder_needs_resume(toy_site, toy_npz, tmp_path):
    _fit(tmp_path / "run", toy_npz, 3)
    with pytest.raises(GenzooError, match="pass --resume"):
        _fit(tmp_path / "run", toy_npz, 3)


def test_unknown_config_field_is_refused_before_training(toy_site, toy_npz, tmp_path):
    with pytest.raises(GenzooError, match=r"unknown field\(s\) \['nope'\]"):
        _fit(tmp_path / "run", toy_npz, 3, config={"nope": "1"})
    assert not (tmp_path / "run").exists()


def test_ema_weights_are_what_gets_saved(toy_site, toy_npz, tmp_path):
    out = _fit(tmp_path / "run", toy_npz, 5, config={"ema_decay": 0.5})
    saved = load_file(str(out / "model.safetensors"))
    raw = load_file(str(out / "checkpoints/step-00000005/model.safetensors"))
    ema = load_file(str(out / "checkpoints/step-00000005/ema.safetensors"))
    assert all(torch.equal(saved[k], ema[k]) for k in saved)
    assert not torch.equal(saved["encoder.weight"], raw["encoder.weight"])
    assert json.loads((out / "config.json").read_text())["provenance"]["weights"] == "ema"


def test_a_checkpoint_gives_its_raw_or_ema_weights_on_request(toy_site, toy_npz, tmp_path):
    from genzoo.training.checkpoints import model_from_checkpoint

    with_ema = _fit(tmp_path / "ema", toy_npz, 5, config={"ema_decay": 0.5})
    raw = load_file(str(with_ema / "checkpoints/step-00000005/model.safetensors"))
    model, provenance = model_from_checkpoint(with_ema, 5, "raw")
    assert torch.equal(model.state_dict()["encoder.weight"], raw["encoder.weight"])
    assert provenance["weights"] == "raw"
    assert model_from_checkpoint(with_ema, 5)[1]["weights"] == "ema"
    without_ema = _fit(tmp_path / "plain", toy_npz, 5)
    with pytest.raises(GenzooError, match="keeps no EMA weights"):
        model_from_checkpoint(without_ema, 5, "ema")


def test_init_fine_tunes_from_a_model_and_records_where_it_started(toy_site, toy_npz, tmp_path):
    base = _fit(tmp_path / "base", toy_npz, 6)
    tuned = _fit(tmp_path / "tuned", toy_npz, 1, config={"lr": "0"}, init=str(base), keep_checkpoints=2)
    a, b = load_file(str(base / "model.safetensors")), load_file(str(tuned / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)  # lr 0: the start weights come through unchanged
    fresh = _fit(tmp_path / "fresh", toy_npz, 1, config={"lr": "0"})
    assert not torch.equal(load_file(str(fresh / "model.safetensors"))["encoder.weight"], a["encoder.weight"])
    provenance = json.loads((tuned / "config.json").read_text())["provenance"]
    base_commands = json.loads((base / "config.json").read_text())["provenance"]["commands"]
    assert provenance["commands"][: len(base_commands)] == base_commands and len(provenance["commands"]) == len(base_commands) + 1
    init = json.loads((tuned / "fit.json").read_text())["settings"]["init"]
    assert init["path"] == str(base) and len(init["sha256"]) == 64


def test_init_refuses_a_model_whose_network_differs(toy_site, toy_npz, tmp_path):
    base = _fit(tmp_path / "base", toy_npz, 3)
    with pytest.raises(GenzooError, match="does not fit this config's network"):
        _fit(tmp_path / "tuned", toy_npz, 3, config={"latent": "5"}, init=str(base))
    with pytest.raises(GenzooError, match="no model.safetensors there"):
        _fit(tmp_path / "other", toy_npz, 3, init=str(tmp_path))


def test_keep_checkpoints_keeps_that_many(toy_site, toy_npz, tmp_path):
    out = _fit(tmp_path / "run", toy_npz, 9, keep_checkpoints=2)
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-00000006", "step-00000009"]


def test_export_of_a_kept_checkpoint_equals_a_run_to_that_step(toy_site, toy_npz, tmp_path):
    from click.testing import CliRunner

    from genzoo.cli import cli

    straight = _fit(tmp_path / "straight", toy_npz, 3, config={"ema_decay": 0.5})
    longer = _fit(tmp_path / "longer", toy_npz, 6, config={"ema_decay": 0.5}, keep_checkpoints=2)
    result = CliRunner().invoke(cli, ["export", str(longer), str(tmp_path / "at3"), "--checkpoint", "3"])
    assert result.exit_code == 0, result.output
    a, b = load_file(str(straight / "model.safetensors")), load_file(str(tmp_path / "at3" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    provenance = json.loads((tmp_path / "at3" / "config.json").read_text())["provenance"]
    assert provenance["steps"] == 3 and provenance["checkpoint"] == "step-00000003" and provenance["weights"] == "ema"
    assert [s["steps"] for s in provenance["segments"]] == [[0, 3]]
    missing = CliRunner().invoke(cli, ["export", str(longer), str(tmp_path / "at1"), "--checkpoint", "1"])
    assert missing.exit_code != 0 and "no complete checkpoint at step 1" in missing.output and "step-00000006" in missing.output


def test_export_keeps_no_machine_paths_in_the_training_commands(toy_site, toy_npz, tmp_path):
    from click.testing import CliRunner

    from genzoo.cli import cli

    command = (f"genzoo fit toy --dataset npz:{toy_npz} --data-root {tmp_path}/data --init {tmp_path}/base "
               f"--out {tmp_path}/run --steps 3")
    run = _fit(tmp_path / "run", toy_npz, 3, command=command)
    result = CliRunner().invoke(cli, ["export", str(run), str(tmp_path / "clean")])
    assert result.exit_code == 0, result.output
    provenance = json.loads((tmp_path / "clean" / "config.json").read_text())["provenance"]
    portable = f"genzoo fit toy --dataset npz:DIR/{toy_npz.name} --data-root DIR --init models/base --out runs/run --steps 3"
    assert provenance["commands"] == [portable]
    assert str(tmp_path) not in (tmp_path / "clean" / "config.json").read_text()
    assert str(tmp_path) in (run / "config.json").read_text()  # the run itself keeps what was typed


@pytest.mark.slow
def test_two_processes_match_one_process_with_the_same_global_batch(toy_site, toy_npz, tmp_path):
    """Under `accelerate launch --multi_gpu --num_processes 2` on CPU, each process takes half the
    global batch and DDP averages gradients, so with no noise in the step the result equals one process."""
    args = ["fit", "toy", "--dataset", f"npz:{toy_npz}", "--steps", "4", "--batch-size", "8",
            "--set", "noise_weight=0", "--checkpoint-every", "2", "--sample-every", "0", "--no-progress",
            "--precision", "fp32"]  # auto probes per process batch (4 vs 8) and may pick bf16 for one of them
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
              "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "29533",
              "-m", "genzoo"]
    done = subprocess.run(launch + args + ["--out", str(tmp_path / "two")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    one = subprocess.run([sys.executable, "-m", "genzoo"] + args + ["--out", str(tmp_path / "one")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stderr[-3000:]
    assert json.loads((tmp_path / "two" / "fit.json").read_text())["processes"] == 2
    assert sorted(p.name for p in (tmp_path / "two/checkpoints/step-00000004").glob("rng-rank*.json")) == [
        "rng-rank0.json", "rng-rank1.json"]
    a = load_file(str(tmp_path / "one" / "model.safetensors"))
    b = load_file(str(tmp_path / "two" / "model.safetensors"))
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-5), key
    lines = (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 4  # only the main process writes the log


def test_grad_accum_equals_a_k_times_larger_batch(toy_site, toy_npz, tmp_path):
    """Without noise in the step, batch 8 accumulated twice computes exactly what batch 16 does.

    fp32 throughout: --precision auto probes each (method, batch) workload by timing, and on a
    busy machine batch 8 and batch 16 could get different verdicts."""
    quiet = {"noise_weight": 0.0}
    big = _fit(tmp_path / "big", toy_npz, 6, batch_size=16, config=quiet, precision="fp32")
    accumulated = _fit(tmp_path / "acc", toy_npz, 6, batch_size=8, grad_accum=2, config=quiet, precision="fp32")
    small = _fit(tmp_path / "small", toy_npz, 6, batch_size=8, config=quiet, precision="fp32")
    a, b, c = (load_file(str(d / "model.safetensors")) for d in (big, accumulated, small))
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert not all(torch.allclose(a[k], c[k], atol=1e-6) for k in a)  # the accumulation is what makes them equal
    losses = [[json.loads(l)["loss"] for l in (d / "metrics.jsonl").read_text().splitlines()] for d in (big, accumulated)]
    assert losses[0] == pytest.approx(losses[1], abs=1e-6)
    _fit(tmp_path / "acc2", toy_npz, 2, batch_size=8, grad_accum=2, config=quiet, precision="fp32")
    resumed = _fit(tmp_path / "acc2", toy_npz, 6, batch_size=8, grad_accum=2, config=quiet, precision="fp32", resume=True)
    r = load_file(str(resumed / "model.safetensors"))
    assert all(torch.equal(b[k], r[k]) for k in b)


def test_mirrored_half_flips_whole_images_by_a_coin_that_ignores_how_the_step_is_split():
    x = torch.arange(64 * 3 * 2 * 4, dtype=torch.float32).reshape(64, 3, 2, 4)
    whole = mirrored_half(x, seed=7, offset=0, per_step=64)
    flipped = [bool(torch.equal(w, a.flip(-1))) for w, a in zip(whole, x)]
    assert all(f or torch.equal(w, a) for f, w, a in zip(flipped, whole, x))
    assert 16 < sum(flipped) < 48
    halves = torch.cat([mirrored_half(x[:32], 7, 0, 64), mirrored_half(x[32:], 7, 32, 64)])
    assert torch.equal(halves, whole)
    assert not torch.equal(mirrored_half(x, seed=8, offset=0, per_step=64), whole)


def test_hflip_trains_on_mirrored_images_the_same_however_the_batch_is_accumulated(toy_site, toy_npz, tmp_path):
    quiet = {"noise_weight": 0.0}
    big = _fit(tmp_path / "big", toy_npz, 4, batch_size=16, config=quiet, precision="fp32", hflip=True)
    accumulated = _fit(tmp_path / "acc", toy_npz, 4, batch_size=8, grad_accum=2, config=quiet, precision="fp32",
                       hflip=True)
    plain = _fit(tmp_path / "plain", toy_npz, 4, batch_size=16, config=quiet, precision="fp32")
    a, b, c = (load_file(str(d / "model.safetensors")) for d in (big, accumulated, plain))
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert not all(torch.allclose(a[k], c[k], atol=1e-6) for k in a)
    assert json.loads((big / "fit.json").read_text())["settings"]["hflip"] is True
    assert json.loads((big / "config.json").read_text())["provenance"]["hflip"] is True
    with pytest.raises(GenzooError, match="--resume: hflip differs from the run"):
        _fit(tmp_path / "big", toy_npz, 6, batch_size=16, config=quiet, precision="fp32", resume=True)


def test_a_schedule_is_stepped_logged_and_resumed_exactly(toy_site, toy_npz, tmp_path):
    cfg = {"schedule": True, "lr": 0.01}
    straight = _fit(tmp_path / "straight", toy_npz, 8, config=cfg)
    lrs = [json.loads(l)["lr"] for l in (straight / "metrics.jsonl").read_text().splitlines()]
    # the lr each step used: warm-up over 2 steps, then cosine over the remaining 6 of --steps 8
    assert lrs[:3] == pytest.approx([0.005, 0.01, 0.01])
    assert lrs[-1] == pytest.approx(0.01 * 0.5 * (1 + math.cos(math.pi * 5 / 6)))
    # a run interrupted after step 3 of 8: its later checkpoints are gone, it resumes from step 3
    interrupted = _fit(tmp_path / "interrupted", toy_npz, 8, config=cfg, keep_checkpoints=3)
    for later in ("step-00000006", "step-00000008"):
        shutil.rmtree(interrupted / "checkpoints" / later)
    resumed = _fit(interrupted, toy_npz, 8, config=cfg, resume=True)
    a, b = load_file(str(straight / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (resumed / "metrics.jsonl").read_text() == (straight / "metrics.jsonl").read_text()
    with pytest.raises(genzoo.ArgumentError, match="schedule over steps 8; resume it with steps 8"):
        _fit(interrupted, toy_npz, 12, config=cfg, resume=True)


def test_tensorboard_tracker_and_the_loss_plot(toy_site, toy_npz, tmp_path):
    from click.testing import CliRunner
    from PIL import Image

    from genzoo.cli import cli

    out = _fit(tmp_path / "run", toy_npz, 6, log_with="tensorboard")
    events = list((out / "trackers").rglob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0
    with Image.open(out / "losses.png") as plot:
        assert plot.size[0] >= 400 and plot.size[1] >= 190
    again = CliRunner().invoke(cli, ["plot", str(out), "-o", str(tmp_path / "curves.png")])
    assert again.exit_code == 0 and (tmp_path / "curves.png").is_file()
    empty = CliRunner().invoke(cli, ["plot", str(tmp_path)])
    assert empty.exit_code == 1 and "metrics.jsonl does not exist" in empty.output


def test_forward_is_the_methods_own(toy_site, toy_npz, tmp_path):
    """A method may use forward for its network: the loop calls training_step, not forward."""
    toy = genzoo.get_host().method("toy")

    class WithForward(toy):
        def forward(self, x):
            return self.decode(self.encoder(x.flatten(1)))

    out = genzoo.fit(WithForward, steps=30, out=tmp_path / "run", dataset=f"npz:{toy_npz}", batch_size=8,
                     progress=False, sample_every=0, config={"lr": 0.05})
    losses = [json.loads(l)["loss"] for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert sum(losses[-5:]) < sum(losses[:5])


def _weights(run):
    return load_file(str(run / "model.safetensors"))


def test_a_short_run_exports_what_it_learned(toy_site, toy_npz, tmp_path):
    """With EMA decay 0.999 and no warm-up, 30 steps would export nearly the initial weights; the
    warm-up (decay (1 + t) / (10 + t) up to 0.999) puts the export nearer the raw weights."""
    from genzoo.configs import build_config
    from genzoo.training.ema import ema_decay_at

    assert ema_decay_at(0, 0.999) == pytest.approx(0.1) and ema_decay_at(10**6, 0.999) == 0.999
    toy = genzoo.get_host().method("toy")
    config = {"ema_decay": 0.999, "lr": 0.05}
    out = _fit(tmp_path / "run", toy_npz, 30, config=config, checkpoint_every=30)
    exported = _weights(out)
    raw = load_file(str(out / "checkpoints/step-00000030/model.safetensors"))
    torch.manual_seed(0)  # the run's seed: its initial weights
    initial = toy(build_config(toy.Config, config)).state_dict()

    def distance(a, b):
        return sum(float((a[k] - b[k]).square().sum()) for k in ("encoder.weight", "decoder.weight")) ** 0.5

    assert distance(exported, raw) < 0.5 * distance(exported, initial)
    assert distance(raw, initial) > 0.5  # the run did move the weights


def test_two_runs_of_one_fit_are_bit_identical(toy_site, toy_npz, tmp_path, monkeypatch):
    """The same command twice gives the same weights, with --precision auto timing the first run and the
    second reading the verdict from the cache, and with randomness from torch's, Python's and NumPy's RNGs."""
    from genzoo import precision as prec

    monkeypatch.setattr(prec, "cpu_has_native_bf16", lambda: True)  # so auto really probes
    monkeypatch.setenv(prec.CACHE_ENV, str(tmp_path / "cache"))
    config = {"host_rng": True, "ema_decay": 0.5}
    first = _fit(tmp_path / "first", toy_npz, 6, config=config)
    assert (tmp_path / "cache" / "precision.json").is_file()
    second = _fit(tmp_path / "second", toy_npz, 6, config=config)
    a, b = _weights(first), _weights(second)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (first / "metrics.jsonl").read_text() == (second / "metrics.jsonl").read_text()


class _FlipFlopProbe:
    """Stands in for the timing of auto's probe: fp32 wins the first decision, bf16 every later one."""

    def __init__(self):
        self.calls = 0

    def __call__(self, work, calls=None):
        self.calls += 1
        decision, precision = divmod(self.calls - 1, 2)  # each decision times fp32, then bf16
        if decision == 0:
            return 1.0 if precision == 0 else 2.0
        return 1.0 if precision == 0 else 0.1


@pytest.fixture
def interactive_ctrl_c():
    """Ctrl-C handled as an interactive Python sets it up: a pytest started as a background job (`cmd &`)
    inherits SIGINT ignored, and these tests call whatever handler is installed."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _interrupting_toy(at_steps):
    """The toy, pressing Ctrl-C in the middle of the given steps (after drawing noise), once or twice.

    Each press calls the SIGINT handler installed at that moment, as the interpreter does when the
    signal arrives: fit's handler for the first, the default (KeyboardInterrupt) once fit has put it
    back. Calling it directly keeps two presses two: signals sent back to back may arrive as one on a
    busy machine. The command-line test below sends a real signal.
    """
    import signal

    toy = genzoo.get_host().method("toy")

    class Interrupting(toy):
        def training_step(self, batch):
            losses = super().training_step(batch)
            for _ in range(at_steps.get(batch["step"], 0)):
                signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
            return losses

    return Interrupting


def test_ctrl_c_saves_the_whole_step_and_resume_is_exact_whatever_auto_would_say_now(toy_site, toy_npz, tmp_path,
                                                                                     monkeypatch, interactive_ctrl_c):
    """Ctrl-C in the middle of step 5 (its noise already drawn): fit finishes that step, saves it and stops;
    --resume ends with the weights of an uninterrupted run, although auto's probe would now pick bf16."""
    import genzoo.training.precision as train
    from genzoo import precision as prec

    monkeypatch.setattr(prec, "cpu_has_native_bf16", lambda: True)
    config = {"ema_decay": 0.9, "host_rng": True}
    common = dict(config=config, checkpoint_every=100, sample_every=0)

    def with_probe(folder, steps, **kw):
        monkeypatch.setenv(prec.CACHE_ENV, str(tmp_path / f"cache-{folder}-{kw.get('resume', False)}"))  # no verdict kept
        return _fit(tmp_path / folder, toy_npz, steps, **common, **kw)

    monkeypatch.setattr(train, "timed", _FlipFlopProbe())
    straight = with_probe("straight", 10)
    probe = _FlipFlopProbe()
    monkeypatch.setattr(train, "timed", probe)
    interrupting = _interrupting_toy({4: 1})
    monkeypatch.setenv(prec.CACHE_ENV, str(tmp_path / "cache-cut"))
    with pytest.raises(KeyboardInterrupt):
        genzoo.fit(interrupting, steps=10, out=tmp_path / "cut", dataset=f"npz:{toy_npz}", batch_size=8,
                   progress=False, **common)
    cut = tmp_path / "cut"
    assert [p.name for p in (cut / "checkpoints").iterdir()] == ["step-00000005"]  # the step in progress, whole
    assert probe.calls == 2
    resumed = with_probe("cut", 10, resume=True)
    assert probe.calls == 2  # the resumed run did not decide again
    a, b = _weights(straight), _weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (straight / "metrics.jsonl").read_text() == (resumed / "metrics.jsonl").read_text()
    fit_json = json.loads((resumed / "fit.json").read_text())
    assert [(s["steps"], s["precision"]) for s in fit_json["segments"]] == [([0, 5], "fp32"), ([5, 10], "fp32")]
    last = fit_json["segments"][-1]
    assert last["precision_requested"] == "auto" and "0.5x" in last["precision_reason"]
    provenance = json.loads((resumed / "config.json").read_text())["provenance"]
    assert provenance["segments"] == [{k: s[k] for k in ("steps", "precision", "hardware", "processes")}
                                      for s in fit_json["segments"]] and provenance["precision"] == "fp32"


def test_a_second_ctrl_c_stops_at_once_without_saving_the_step(toy_site, toy_npz, tmp_path, interactive_ctrl_c):
    import signal

    interrupting = _interrupting_toy({4: 2})
    with pytest.raises(KeyboardInterrupt):
        genzoo.fit(interrupting, steps=10, out=tmp_path / "run", dataset=f"npz:{toy_npz}", batch_size=8,
                   progress=False, checkpoint_every=3, sample_every=0, precision="fp32")
    assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == ["step-00000003"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # fit left Ctrl-C as it found it


def test_segments_past_the_checkpoint_a_run_resumes_from_are_cut(toy_site, toy_npz, tmp_path):
    out = _fit(tmp_path / "run", toy_npz, 6, keep_checkpoints=2, precision="fp32")
    shutil.rmtree(out / "checkpoints" / "step-00000006")
    _fit(out, toy_npz, 8, resume=True, precision="fp32")
    segments = json.loads((out / "fit.json").read_text())["segments"]
    assert [s["steps"] for s in segments] == [[0, 3], [3, 8]]
    assert all(s["command"] and s["hardware"] and s["processes"] == 1 for s in segments)


def test_ctrl_c_on_the_command_line_exits_130_after_saving(toy_site, toy_npz, tmp_path, monkeypatch):
    import signal
    import threading

    from click.testing import CliRunner

    from genzoo.cli import cli

    toy = genzoo.get_host().method("toy")
    step = toy.training_step

    def interrupted(self, batch):
        if batch["step"] == 2:
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # this thread: see _interrupting_toy
        return step(self, batch)

    monkeypatch.setattr(toy, "training_step", interrupted)
    result = CliRunner().invoke(cli, ["fit", "toy", "--dataset", f"npz:{toy_npz}", "--steps", "10", "--batch-size", "8",
                                      "--out", str(tmp_path / "run"), "--no-progress", "--precision", "fp32"])
    assert result.exit_code == 130, result.output
    assert "interrupted: checkpoint saved at step 3; continue with --resume" in result.output
    assert f"genzoo export {tmp_path / 'run'} DEST --checkpoint 3" in result.output


def test_a_resumed_run_reads_fit_json_once(toy_site, toy_npz, tmp_path, monkeypatch):
    """Where a run starts (its checkpoint, settings and precision) is decided in one place, from one reading."""
    import genzoo.training.record as record
    import genzoo.training.start as start

    _fit(tmp_path / "run", toy_npz, 3, precision="fp32")
    reads = []
    original = record.read_run_file

    def counted(out):
        reads.append(out)
        return original(out)

    monkeypatch.setattr(start, "read_run_file", counted)
    monkeypatch.setattr(record, "read_run_file", counted)
    monkeypatch.setattr(record.json, "loads", _counting(record.json.loads, reads, "fit.json"))
    _fit(tmp_path / "run", toy_npz, 6, resume=True, precision="fp32")
    assert len([r for r in reads if r != "fit.json"]) == 1 and reads.count("fit.json") == 1


def _counting(loads, calls, tag):
    def counted(text, *args, **kwargs):
        value = loads(text, *args, **kwargs)
        if isinstance(value, dict) and "segments" in value and "settings" in value:
            calls.append(tag)
        return value
    return counted
