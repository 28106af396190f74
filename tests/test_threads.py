"""The thread policy: torch's CPU threads set once, from --threads / GENZOO_THREADS / OMP_NUM_THREADS, else the
cores this process may use, fewer (and said in one line) when the machine's load shows other work holds them."""

import os
import subprocess
import sys

import pytest

from genzoo.threads import choose_threads, requested_threads


def test_the_cores_are_shared_between_a_machines_processes_and_a_request_wins():
    assert choose_threads(None, cores=8, processes=1, busy=0) == (8, "")
    assert choose_threads(None, cores=8, processes=2, busy=0) == (4, "")
    assert choose_threads(3, cores=8, processes=2, busy=8) == (3, "")


def test_a_busy_machine_waits_passively_or_gets_fewer_threads_and_one_line_saying_why():
    threads, notice = choose_threads(None, cores=2, processes=1, busy=1)
    assert threads == 2
    assert notice.startswith("threads: 2, waiting passively") and "--threads N" in notice and "\n" not in notice
    threads, notice = choose_threads(None, cores=2, processes=1, busy=1, passive_possible=False)
    assert threads == 1
    assert notice.startswith("threads: 1 of 2") and "--threads N" in notice and "\n" not in notice
    assert choose_threads(None, cores=2, processes=1, busy=2, passive_possible=False)[0] == 1  # never fewer than one


def test_a_request_comes_from_the_option_then_genzoo_threads_then_omp(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("GENZOO_THREADS", "2")
    assert requested_threads(5) == 5
    assert requested_threads(None) == 2
    monkeypatch.delenv("GENZOO_THREADS")
    assert requested_threads(None) == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert requested_threads(None) is None


def test_a_bad_thread_count_is_one_sentence(monkeypatch):
    from genzoo import GenzooError

    monkeypatch.setenv("GENZOO_THREADS", "many")
    with pytest.raises(GenzooError, match="GENZOO_THREADS must be a positive integer .* got 'many'"):
        requested_threads(None)


def test_the_cli_sets_torchs_threads_from_its_option():
    code = ("import torch; from genzoo.cli import cli; "
            "cli(['--threads', '2', 'plugins', '--json'], standalone_mode=False); "
            "print('threads', torch.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "threads 2" in out.stdout, out.stderr


def test_busy_cores_follows_what_runs_now_not_a_minute_of_load_that_has_ended(monkeypatch, tmp_path):
    from genzoo.threads import busy_cores

    monkeypatch.setattr(os, "getloadavg", lambda: (1.9, 1.5, 1.0))
    ended = tmp_path / "ended"
    ended.write_text("1.90 1.50 1.00 1/120 4242\n")  # a training just ended: only this process runs
    assert busy_cores(2, str(ended)) == 0
    running = tmp_path / "running"
    running.write_text("1.90 1.50 1.00 3/120 4242\n")  # two others run now
    assert busy_cores(2, str(running)) == 2
    assert busy_cores(2, str(tmp_path / "missing")) == 2  # no such file: the load average alone


def test_on_a_busy_machine_the_policy_sets_passive_waiting_before_torch_starts_unless_the_user_set_it():
    code = ("import os, genzoo.threads as t; t.busy_cores = lambda cores, loadavg='': cores; "
            "n = t.configure_threads(say=lambda text: print('said', text)); "
            "print('threads', n, os.environ.get('OMP_WAIT_POLICY'))")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GENZOO_THREADS")}
    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.skip("one core: a busy machine leaves no thread to lower or keep waiting")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert f"threads {cores} PASSIVE" in out.stdout and "waiting passively" in out.stdout, out.stderr
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**env, "OMP_WAIT_POLICY": "active"})
    assert "threads 1 active" in out.stdout and "threads: 1 of" in out.stdout, out.stderr
