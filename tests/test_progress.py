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


def test_a_long_loop_writes_a_line_every_30_s_and_10_percent_whichever_is_rarer_and_its_end():
    out = io.StringIO()
    items = list(progress.progress_lines(range(40), desc="refining", unit="batch", total=40, stream=out,
                                         clock=Clock(10.0)))  # 10 s a batch: 30 s (3 batches) is rarer than 10%
    assert items == list(range(40))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("refining: 4/40 batches (10%), ") and "about" in lines[0] and "left" in lines[0]
    assert len(lines) == 10 and lines[-1].startswith("refining: 40/40 batches (100%)")
    slow = io.StringIO()  # 100 s a batch: 30 s would be every batch, so 10% (4 batches) decides
    list(progress.progress_lines(range(40), desc="sampling", unit="batch", total=40, stream=slow, clock=Clock(100.0)))
    assert [line.split(" ")[1] for line in slow.getvalue().splitlines()][:3] == ["4/40", "8/40", "12/40"]


def test_a_short_loop_a_nested_loop_and_a_loop_without_a_total_stay_quiet_or_say_only_time():
    out = io.StringIO()
    list(progress.progress_lines(range(10), desc="sampling", unit="batch", total=10, stream=out, clock=Clock(1.0)))
    assert out.getvalue() == ""  # 10 s in all: no line
    inner = io.StringIO()
    for _ in progress.progress_lines(range(3), desc="outer", unit="batch", total=3, stream=io.StringIO(),
                                     clock=Clock(0.0)):
        list(progress.progress_lines(range(5), desc="steps", unit="step", total=5, stream=inner, clock=Clock(100.0)))
    assert inner.getvalue() == ""  # the outer loop speaks for both
    counted = io.StringIO()
    list(progress.progress_lines(iter(range(3)), desc="reading", unit="it", total=None, stream=counted,
                                 clock=Clock(40.0)))
    assert counted.getvalue().splitlines()[0] == "reading: 1 it, 40 s"
    assert progress.duration(3725) == "1 h 02 min" and progress.duration(59.4) == "59 s"


def test_sample_in_a_pipe_writes_progress_lines_to_stderr_and_no_progress_silences_them(toy_model_dir, tmp_path,
                                                                                       monkeypatch):
    monkeypatch.setattr(progress, "LINE_EVERY_SECONDS", 0.0)  # every 10% at once
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
