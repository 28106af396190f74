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
from genzoo.training.lock import RunLock


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
    from genzoo.training.checkpoints import model_from_checkpoint

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

    import genzoo.training.checkpoints as ckpt

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


# -- pre-emption, full disks, changed data, a resume with nothing to do -----------------------------


def _signalling_toy(signum, at_step):
    """The toy, sent ``signum`` by the system in the middle of step ``at_step`` (after drawing its noise)."""
    import signal

    toy = genzoo.get_host().method("toy")

    class Signalled(toy):
        def training_step(self, batch):
            losses = super().training_step(batch)
            if batch["step"] == at_step:
                signal.pthread_kill(threading.get_ident(), signum)
            return losses

    return Signalled


@pytest.mark.parametrize("name", ["SIGTERM", "SIGUSR1"])
def test_a_scheduler_signal_finishes_the_step_saves_it_and_resume_is_exact(straight, toy_npz, tmp_path, capfd, name):
    import signal

    from genzoo.training.loop import Stopped

    signum = getattr(signal, name)
    run = tmp_path / "run"
    with pytest.raises(Stopped) as stopped:
        genzoo.fit(_signalling_toy(signum, 4), steps=9, out=run, dataset=f"npz:{toy_npz}", batch_size=8,
                   progress=False, precision="fp32", checkpoint_every=100, sample_every=0, config={"ema_decay": 0.5})
    assert stopped.value.signum == signum and signal.getsignal(signum) is not None
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-00000005"]
    said = [line for line in capfd.readouterr().err.splitlines() if "checkpoint saved" in line]
    assert said == [f"stopped by {name}: checkpoint saved at step 5; continue with --resume, or write that step's "
                    f"model with: genzoo export {run} DEST --checkpoint 5"]
    _fit(run, toy_npz, 9, resume=True, config={"ema_decay": 0.5})
    a, b = _weights(straight), _weights(run)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_sigterm_on_the_command_line_exits_143_after_saving(toy_site, toy_npz, tmp_path, monkeypatch):
    import signal

    from click.testing import CliRunner

    from genzoo.cli import cli

    toy = genzoo.get_host().method("toy")
    step = toy.training_step

    def signalled(self, batch):
        if batch["step"] == 1:
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        return step(self, batch)

    monkeypatch.setattr(toy, "training_step", signalled)
    result = CliRunner().invoke(cli, ["fit", "toy", "--dataset", f"npz:{toy_npz}", "--steps", "10", "--batch-size", "8",
                                      "--out", str(tmp_path / "run"), "--no-progress", "--precision", "fp32"])
    assert result.exit_code == 143, result.output
    assert "stopped by SIGTERM: checkpoint saved at step 2; continue with --resume" in result.output
    assert "model written to" not in result.output
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_full_disk_while_writing_a_checkpoint_leaves_no_staging_folder(toy_site, toy_npz, tmp_path, monkeypatch):
    import errno

    import genzoo.training.checkpoints as ckpt

    original = ckpt.write_tensors
    calls = []

    def fills_the_disk(tensors, path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 5:  # the weights of the second checkpoint (each writes rng, model, optimiser)
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return original(tensors, path, *args, **kwargs)

    monkeypatch.setattr(ckpt, "write_tensors", fills_the_disk)
    with pytest.raises(GenzooError, match=r"^cannot write .* \(no space left on the device\); the last complete "
                                          r"checkpoint is kept") as refused:
        _fit(tmp_path / "run", toy_npz, 9)
    assert "\n" not in str(refused.value)
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == ["step-00000003"]
    monkeypatch.setattr(ckpt, "write_tensors", original)
    _fit(tmp_path / "run", toy_npz, 9, resume=True)


def _other_images(path):
    data = dict(__import__("numpy").load(path))
    data["x"] = 255 - data["x"]
    __import__("numpy").savez(path, **data)


def test_resume_refuses_other_data_behind_the_same_name_and_allow_changes_accepts_it(toy_site, toy_npz, tmp_path):
    _fit(tmp_path / "run", toy_npz, 3)
    fingerprint = json.loads((tmp_path / "run" / "fit.json").read_text())["settings"]["data"]
    assert fingerprint["images"] == 64 and fingerprint["shape"] == [1, 8, 8] and len(fingerprint["sha256"]) == 16
    _other_images(toy_npz)
    with pytest.raises(GenzooError, match=r"^--resume: the training data differs from the run in .* \(was 64 images "
                                          r"of 1x8x8, sha256 \w+, now 64 images of 1x8x8, sha256 \w+\); resume on the "
                                          r"data it started with, or pass --allow-changes to continue on this data$"):
        _fit(tmp_path / "run", toy_npz, 6, resume=True)
    _fit(tmp_path / "run", toy_npz, 6, resume=True, allow_changes=True)
    segments = json.loads((tmp_path / "run" / "fit.json").read_text())["segments"]
    assert segments[-1]["changed"] == ["data"]


def test_resume_compares_the_data_not_how_its_path_is_spelled(toy_site, toy_npz, tmp_path, monkeypatch):
    monkeypatch.chdir(toy_npz.parent)
    genzoo.fit("toy", steps=3, out=tmp_path / "run", dataset=f"npz:{toy_npz.name}", batch_size=8, progress=False,
               precision="fp32", sample_every=0)
    _fit(tmp_path / "run", toy_npz, 6, resume=True)  # npz:/absolute/path/toy.npz
    assert "changed" not in json.loads((tmp_path / "run" / "fit.json").read_text())["segments"][-1]


def test_a_resume_with_nothing_to_do_changes_nothing_on_disk(toy_site, toy_npz, tmp_path, capfd):
    run = _fit(tmp_path / "run", toy_npz, 6)
    (run / "model.safetensors").write_bytes((run / "model.safetensors").read_bytes())  # an export of its own
    def files():  # .lock names whoever holds the folder, and is taken by every fit
        return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in run.rglob("*") if p.is_file() and p.name != ".lock"}

    before = files()
    _fit(run, toy_npz, 6, resume=True)
    assert "already at step 6 >= --steps 6; nothing to do" in capfd.readouterr().err
    after = files()
    assert after == before


def _process(rank, port, out, toy_npz, steps, resume, event, timeout_minutes, results):
    """One of two CPU processes (gloo), as accelerate launch runs them; ``event`` = (rank, step, signal name):
    that process is sent that signal in the middle of that step."""
    import signal

    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "ACCELERATE_USE_CPU": "1"})
    torch.set_num_threads(1)
    from genzoo.training.loop import Stopped, Trainer
    from genzoo.training.options import FitOptions

    toy = genzoo.get_host().method("toy")
    if event and event[0] == rank:
        toy = _signalling_toy(getattr(signal, event[2]), event[1])
    opts = FitOptions(steps=steps, out=out, dataset=f"npz:{toy_npz}", batch_size=8, precision="fp32", device="cpu",
                      sample_every=0, checkpoint_every=100, progress=False, resume=resume,
                      collective_timeout=timeout_minutes, overrides={"ema_decay": 0.5})
    try:
        trainer = Trainer(toy, opts)
        trainer.run()
        results.put((rank, "done", {k: v.tolist() for k, v in trainer.state.model.state_dict().items()}))
    except Stopped as exc:
        results.put((rank, f"stopped by {signal.Signals(exc.signum).name}", trainer.state.step))


def _two(out, toy_npz, steps, resume=False, event=None, timeout_minutes=10.0, wait=300):
    import multiprocessing
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    workers = [context.Process(target=_process, args=(rank, port, str(out), str(toy_npz), steps, resume, event,
                                                      timeout_minutes, results)) for rank in range(2)]
    for worker in workers:
        worker.start()
    return workers, results


@pytest.mark.slow
def test_a_signal_to_one_of_two_processes_stops_both_at_one_step_and_resume_is_exact(toy_site, toy_npz, tmp_path):
    workers, results = _two(tmp_path / "straight", toy_npz, 6)
    straight = sorted(results.get(timeout=300) for _ in workers)
    workers, results = _two(tmp_path / "cut", toy_npz, 6, event=(1, 2, "SIGTERM"))
    cut = sorted(results.get(timeout=300) for _ in workers)
    assert [(r[1], r[2]) for r in cut] == [("stopped by SIGTERM", 3)] * 2
    for worker in workers:
        worker.join(timeout=60)
    assert sorted(p.name for p in (tmp_path / "cut" / "checkpoints").glob("step-*")) == ["step-00000003"]
    workers, results = _two(tmp_path / "cut", toy_npz, 6, resume=True)
    resumed = sorted(results.get(timeout=300) for _ in workers)
    assert [r[1] for r in resumed] == ["done", "done"] and resumed[0][2] == resumed[1][2] == straight[0][2]


@pytest.mark.slow
def test_a_process_that_stops_answering_is_named_and_the_run_exits(toy_site, toy_npz, tmp_path, capfd):
    import signal

    from genzoo.training.heartbeat import EXIT_STUCK

    workers, results = _two(tmp_path / "run", toy_npz, 6, event=(1, 2, "SIGSTOP"), timeout_minutes=0.1)
    try:
        workers[0].join(timeout=600)  # starting two processes that import torch takes a while on a busy machine
        assert workers[0].exitcode == EXIT_STUCK
    finally:
        os.kill(workers[1].pid, signal.SIGKILL)
        workers[1].join(timeout=30)
    said = [line for line in capfd.readouterr().err.splitlines() if "stopped answering" in line]
    assert len(said) == 1 and said[0].startswith(f"process 1 of 2 (process ID {workers[1].pid} on ")
    assert "in step 3" in said[0] and "keeping its last checkpoint" in said[0]
