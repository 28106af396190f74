"""A run's files under faults: damaged checkpoints are refused by name and --resume falls back to the newest
whole one; two runs never share a folder; non-finite losses stop a run before its step is saved; an
unwritable --out is refused before any work. Each refusal is one sentence, never a traceback."""

import json
import os
import shutil
import subprocess
import sys
import threading

import pytest
import torch
from safetensors.torch import load_file

import genzoo
from genzoo.errors import GenzooError
from genzoo.runlock import RunLock


def _fit(out, npz, steps, **kw):
    kw.setdefault("checkpoint_every", 3)
    kw.setdefault("sample_every", 0)
    return genzoo.fit("toy", steps=steps, out=out, dataset=f"npz:{npz}", batch_size=8, progress=False,
                      precision="fp32", **kw)


def _weights(run):
    return load_file(str(run / "model.safetensors"))


@pytest.fixture
def straight(toy_site, toy_npz, tmp_path_factory):
    """An uninterrupted 9-step run with an EMA, to compare resumed runs with."""
    return _fit(tmp_path_factory.mktemp("straight") / "run", toy_npz, 9, config={"ema_decay": 0.5})


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _overwrite_4k(path):
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 4096] = bytes(len(data[middle:middle + 4096]))
    data[middle] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name, damage, said", [
    ("model.safetensors", _truncate, "model.safetensors has"),
    ("ema.safetensors", _truncate, "ema.safetensors has"),
    ("optimizer-0.safetensors", _truncate, "optimizer-0.safetensors has"),
    ("rng-rank0.safetensors", _truncate, "rng-rank0.safetensors has"),
    ("optimizer-0.json", _truncate, "optimizer-0.json has"),
    ("rng-rank0.json", _truncate, "rng-rank0.json has"),
    ("rng-rank0.safetensors", os.remove, "rng-rank0.safetensors is missing"),
    ("optimizer-0.json", os.remove, "optimizer-0.json is missing"),
    ("model.safetensors", _overwrite_4k, "model.safetensors is altered"),
    ("state.json", _truncate, "state.json is damaged"),
])
def test_a_damaged_latest_checkpoint_is_named_and_resume_falls_back_exactly(straight, toy_npz, tmp_path, capfd,
                                                                           name, damage, said):
    run = _fit(tmp_path / "run", toy_npz, 6, config={"ema_decay": 0.5})
    damage(run / "checkpoints" / "step-00000006" / name)
    _fit(run, toy_npz, 9, config={"ema_decay": 0.5}, resume=True)
    err = capfd.readouterr().err
    assert f"checkpoint step-00000006: {said}" in err and "it is skipped" in err
    a, b = _weights(straight), _weights(run)
    assert all(torch.equal(a[k], b[k]) for k in a)  # resumed from step 3: the weights of an uninterrupted run
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 10))


def test_with_no_whole_checkpoint_resume_says_so_in_one_sentence(toy_site, toy_npz, tmp_path):
    run = _fit(tmp_path / "run", toy_npz, 6)
    for checkpoint in (run / "checkpoints").iterdir():
        _truncate(checkpoint / "model.safetensors")
    with pytest.raises(GenzooError, match=r"no checkpoint of .* is whole \(checkpoint step-00000003: "
                                          r"model.safetensors has \d+ bytes"):
        _fit(run, toy_npz, 9, resume=True)


def test_export_of_a_damaged_checkpoint_names_the_file(toy_site, toy_npz, tmp_path):
    from genzoo.checkpoints import model_from_checkpoint

    run = _fit(tmp_path / "run", toy_npz, 6)
    _overwrite_4k(run / "checkpoints" / "step-00000003" / "optimizer-0.safetensors")
    with pytest.raises(GenzooError, match="step-00000003: optimizer-0.safetensors is altered"):
        model_from_checkpoint(run, 3)


def test_a_second_fit_on_a_folder_in_use_is_refused_naming_the_holder(toy_site, toy_npz, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    holder = RunLock(out)
    holder.acquire()
    try:
        with pytest.raises(GenzooError, match=rf"in use by another genzoo fit \(process {os.getpid()} on .*, started "):
            _fit(out, toy_npz, 3)
    finally:
        holder.release()
    assert not (out / "fit.json").exists()  # the refused run wrote nothing
    _fit(out, toy_npz, 3)  # the lock of a process that is gone does not block: its file stays, its lock does not
    assert (out / ".lock").is_file() and (out / "fit.json").is_file()


def test_two_fits_started_together_train_one_run(toy_site, toy_npz, tmp_path):
    out, results = tmp_path / "run", []

    def one():
        try:
            _fit(out, toy_npz, 6)
            results.append("trained")
        except GenzooError as exc:
            results.append(str(exc))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.split(" (")[0] for r in results)[1] == "trained"  # one trained; the other was refused
    refused = [r for r in results if r != "trained"]
    assert len(refused) == 1 and ("in use by another genzoo fit" in refused[0] or "already holds a run" in refused[0])
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 7))


def test_a_run_killed_before_its_first_checkpoint_starts_again_with_the_same_command(toy_site, toy_npz, tmp_path,
                                                                                   capfd):
    run = _fit(tmp_path / "run", toy_npz, 2, checkpoint_every=100)
    shutil.rmtree(run / "checkpoints")  # as if killed before any checkpoint: fit.json and a log remain
    _fit(run, toy_npz, 4)
    assert "stopped before its first checkpoint; nothing of it is kept, so it starts again" in capfd.readouterr().err
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    shutil.rmtree(run / "checkpoints")
    _fit(run, toy_npz, 4, resume=True)  # --resume with nothing to resume from starts again too
    assert "no complete checkpoint yet; the run starts again from step 0" in capfd.readouterr().err


def test_a_non_finite_loss_stops_the_run_and_keeps_the_last_checkpoint(toy_site, toy_npz, tmp_path):
    toy = genzoo.get_host().method("toy")

    class Diverges(toy):
        def training_step(self, batch):
            losses = super().training_step(batch)
            if batch["step"] == 4:
                losses["loss"] = losses["loss"] * float("nan")
            return losses

    with pytest.raises(GenzooError, match=r"step 5: loss is nan \(not finite\), so training stopped without saving "
                                          r"that step; the checkpoint of step 3 is kept"):
        genzoo.fit(Diverges, steps=9, out=tmp_path / "run", dataset=f"npz:{toy_npz}", batch_size=8, progress=False,
                   checkpoint_every=3, sample_every=0, precision="fp32")
    run = tmp_path / "run"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-00000003"]
    assert all(torch.isfinite(t).all() for t in _weights(run).values())
    _fit(run, toy_npz, 9, resume=True, allow_changes=True, config={"lr": 1e-3})  # a changed setting continues it
    segments = json.loads((run / "fit.json").read_text())["segments"]
    assert segments[-1]["steps"] == [3, 9] and segments[-1]["changed"] == ["config.lr"]


def test_resume_names_the_changed_field_and_allow_changes_accepts_it(toy_site, toy_npz, tmp_path):
    run = _fit(tmp_path / "run", toy_npz, 3)
    with pytest.raises(GenzooError) as info:
        _fit(run, toy_npz, 6, resume=True, config={"latent": 3})
    message = str(info.value)
    assert "Config field 'latent' differs" in message and "was 4, now 3" in message and "--allow-changes" in message
    assert "\n" not in message and len(message) < 300
    with pytest.raises(GenzooError, match="does not fit this method's network"):
        _fit(run, toy_npz, 6, resume=True, allow_changes=True, config={"latent": 3})


def test_an_unwritable_out_is_refused_before_any_work(toy_site, toy_npz, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(GenzooError, match=r"--out .*a-file/run: .* is not writable"):
        _fit(blocker / "run", toy_npz, 3)


@pytest.mark.slow
def test_read_only_folders_are_refused_in_one_sentence_without_the_power_to_override_permissions(toy_site, toy_npz,
                                                                                                tmp_path):
    """Root ignores permissions; setpriv drops that power (CAP_DAC_OVERRIDE) for the command."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed; the fast test covers the same refusal")
    run = _fit(tmp_path / "run", toy_npz, 3)
    locked = tmp_path / "locked"
    locked.mkdir()
    cases = {"read-only folder": (locked, []), "read-only parent": (locked / "new" / "run", []),
             "read-only checkpoints": (run, ["--resume", "--steps", "6"])}
    os.chmod(locked, 0o555)
    os.chmod(run / "checkpoints", 0o555)
    try:
        for case, (out, extra) in cases.items():
            command = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps",
                       "-dac_override,-dac_read_search", "--", sys.executable, "-m", "genzoo", "fit", "toy",
                       "--dataset", f"npz:{toy_npz}", "--steps", "3", "--batch-size", "8", "--no-progress",
                       "--precision", "fp32", "--out", str(out), *extra]
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            assert done.returncode == 1, (case, done.stderr[-2000:])
            lines = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
            assert len(lines) == 1 and "is not writable (permission denied)" in lines[0], (case, done.stderr)
            assert "Traceback" not in done.stderr, case
    finally:
        os.chmod(locked, 0o755)
        os.chmod(run / "checkpoints", 0o755)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-00000003"]


def test_a_full_disk_mid_run_is_one_sentence_and_keeps_the_last_checkpoint(toy_site, toy_npz, tmp_path, monkeypatch):
    import errno

    import genzoo.checkpoints as ckpt

    original = ckpt.save_training_state
    calls = []

    def fills_the_disk(staging, state):
        calls.append(state.step)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(staging / "model.safetensors"))
        return original(staging, state)

    monkeypatch.setattr(ckpt, "save_training_state", fills_the_disk)
    with pytest.raises(GenzooError, match=r"cannot write .*model.safetensors \(no space left on the device\); the "
                                          r"last complete checkpoint is kept"):
        _fit(tmp_path / "run", toy_npz, 9)
    monkeypatch.setattr(ckpt, "save_training_state", original)
    _fit(tmp_path / "run", toy_npz, 9, resume=True)
    assert json.loads((tmp_path / "run" / "fit.json").read_text())["segments"][-1]["steps"] == [3, 9]
