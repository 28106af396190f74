"""Long work speaks in pipes and logs too: a line on stderr now and then, nothing for short work or --no-progress."""

import io

from click.testing import CliRunner

from genzoo import progress
from genzoo.cli import cli


class Clock:
    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_long_loop_speaks_after_10_s_then_every_30_s_and_10_percent_whichever_is_rarer_and_says_its_end():
    out = io.StringIO()
    items = list(progress.progress_lines(range(40), desc="refining", unit="batch", total=40, stream=out,
                                         clock=Clock(10.0)))  # 10 s a batch: 30 s (3 batches) is rarer than 10%
    assert items == list(range(40))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("refining: 1/40 batches (2%), 10 s, about 6 min 30 s left")  # within the first 30 s
    assert [line.split(" ")[1] for line in lines[:3]] == ["1/40", "5/40", "9/40"]
    assert lines[-1].startswith("refining: 40/40 batches (100%)")
    slow = io.StringIO()  # 100 s a batch: 30 s would be every batch, so 10% (4 batches) decides
    list(progress.progress_lines(range(40), desc="sampling", unit="batch", total=40, stream=slow, clock=Clock(100.0)))
    assert [line.split(" ")[1] for line in slow.getvalue().splitlines()][:3] == ["1/40", "5/40", "9/40"]


def test_a_short_loop_stays_quiet_a_nested_one_joins_the_outer_line_and_no_total_says_only_time():
    out = io.StringIO()
    list(progress.progress_lines(range(9), desc="sampling", unit="batch", total=9, stream=out, clock=Clock(1.0)))
    assert out.getvalue() == ""  # 9 s in all: no line
    lines = io.StringIO()
    with progress.stage(True, desc="sampling", unit="batch", total=1, stream=lines, clock=Clock(4.0)):
        list(progress.progress_bar(range(35), True, desc="denoising", unit="step"))
    said = lines.getvalue().splitlines()
    assert said[0].startswith("sampling: 0/1 batches (0%), denoising: 3/35 steps (9%), ")
    assert "left" in said[0]
    counted = io.StringIO()
    list(progress.progress_lines(iter(range(3)), desc="reading", unit="it", total=None, stream=counted,
                                 clock=Clock(40.0)))
    assert counted.getvalue().splitlines()[0] == "reading: 1 it, 40 s"
    assert progress.duration(3725) == "1 h 02 min" and progress.duration(59.4) == "59 s"


def test_a_slow_first_item_still_gets_a_line_from_the_clock(monkeypatch):
    import time

    monkeypatch.setattr(progress, "FIRST_LINE_SECONDS", 0.2)
    monkeypatch.setattr(progress, "TICK_SECONDS", 0.05)
    out = io.StringIO()
    with progress.stage(True, desc="fit edm", unit="step", total=10, stream=out, clock=time.monotonic):
        time.sleep(0.6)  # a first step that compiles: no item finishes, the clock speaks
    assert out.getvalue().startswith("fit edm: 0/10 steps (0%), ")


def test_sample_in_a_pipe_writes_progress_lines_to_stderr_and_no_progress_silences_them(toy_model_dir, tmp_path,
                                                                                       monkeypatch):
    monkeypatch.setattr(progress, "FIRST_LINE_SECONDS", 0.0)  # every 10% at once
    monkeypatch.setattr(progress, "LINE_EVERY_SECONDS", 0.0)
    runner = CliRunner()
    out = str(tmp_path / "s.npz")
    spoken = runner.invoke(cli, ["sample", str(toy_model_dir), "-n", "8", "--batch-size", "2", "-o", out])
    assert spoken.exit_code == 0, spoken.output
    lines = [line for line in spoken.stderr.splitlines() if line.startswith("sampling: ")]
    assert [line.split(" ")[1] for line in lines] == ["1/4", "2/4", "3/4", "4/4"]
    assert "sampling" not in spoken.stdout
    quiet = runner.invoke(cli, ["sample", str(toy_model_dir), "-n", "8", "--batch-size", "2", "-o", out,
                                "--no-progress"])
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_fit_in_a_pipe_speaks_on_stderr_and_keeps_stdout_for_its_result(toy_site, toy_npz, tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "FIRST_LINE_SECONDS", 0.0)
    monkeypatch.setattr(progress, "LINE_EVERY_SECONDS", 0.0)
    result = CliRunner().invoke(cli, ["fit", "toy", "--dataset", f"npz:{toy_npz}", "--steps", "10", "--batch-size",
                                      "8", "--out", str(tmp_path / "run"), "--sample-every", "0"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("fit toy: ")]
    assert lines[0].startswith("fit toy: 1/10 steps (10%)") and lines[-1].startswith("fit toy: 10/10 steps (100%)")
    assert "precision:" in result.stderr and "fit toy:" not in result.stdout and "precision" not in result.stdout
