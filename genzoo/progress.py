"""Progress of long work, one policy for every verb: a bar on a terminal; in a pipe or a log, lines on stderr.

Work is a stage (fit's steps, sample's batches, a sampler's denoising steps within a batch, eval's feature
batches); stages nest. On a terminal each stage is a tqdm bar. Elsewhere (a pipe, a log file, a job
scheduler) one line describes every running stage, outermost first::

    sampling: 0/1 batches (0%), denoising: 12/35 steps (34%), 45 s, about 1 min 28 s left

The first line comes once :data:`FIRST_LINE_SECONDS` of the work have passed (so short work stays silent and
long work speaks within its first half minute, even when its first item is slow: a clock checks, not only the
items), then at most every :data:`LINE_EVERY_SECONDS` and only after a stage moved by
:data:`LINE_EVERY_SHARE` of its total; the end of a stage that spoke is said too. ``--no-progress``
writes nothing at all.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, TextIO, TypeVar

T = TypeVar("T")

FIRST_LINE_SECONDS = 10.0  # the first line of long work in a pipe comes once this much time has passed ...
LINE_EVERY_SECONDS = 30.0  # ... the next ones at most this often ...
LINE_EVERY_SHARE = 0.10  # ... and once a stage moved by this share of its total since the last line
TICK_SECONDS = 1.0  # how often the clock checks whether a line is due between items
HELP = ("Show progress on stderr: a bar on a terminal; in a pipe or a log, a line once 10 s have passed, then at "
        "most every 30 s and every 10% of a stage.")


@dataclass
class _Stage:
    desc: str
    unit: str
    total: int | None
    done: int = 0
    said: int = 0  # ``done`` at the last line
    postfix: str = ""

    def moved(self) -> bool:
        step = max(1.0, LINE_EVERY_SHARE * self.total) if self.total else 1
        return self.done - self.said >= step


@dataclass
class _Lines:
    """The stages of this process that write lines, and when the last line was written."""

    stream: TextIO | None
    clock: Callable[[], float]
    stages: list[_Stage] = field(default_factory=list)
    start: float = 0.0
    last: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def due(self, now: float) -> bool:
        if self.last is None:
            return now - self.start >= FIRST_LINE_SECONDS
        return now - self.last >= LINE_EVERY_SECONDS and any(stage.moved() for stage in self.stages)

    def check(self, force: bool = False) -> None:
        with self.lock:
            now = self.clock()
            if self.stages and (force or self.due(now)):
                self._write(now)

    def _write(self, now: float) -> None:
        parts = [_describe(stage) for stage in self.stages]
        elapsed = now - self.start
        text = f"{', '.join(parts)}, {duration(elapsed)}"
        left = _time_left(self.stages, elapsed)
        if left is not None:
            text += f", about {duration(left)} left"
        out = self.stream or sys.stderr
        out.write(text + "\n")
        out.flush()
        self.last = now
        for stage in self.stages:
            stage.said = stage.done


_lines: _Lines | None = None  # the line writer while stages run in this process (outside a terminal)


def _describe(stage: _Stage) -> str:
    units = _plural(stage.unit)
    if not stage.total:
        text = f"{stage.desc}: {stage.done:,} {units}"
    else:
        text = f"{stage.desc}: {stage.done:,}/{stage.total:,} {units} ({100 * stage.done / stage.total:.0f}%)"
    return f"{text} [{stage.postfix}]" if stage.postfix else text


def _time_left(stages: list[_Stage], elapsed: float) -> float | None:
    """From the outermost stage's share done (the inner stages' shares refining it)."""
    share, weight = 0.0, 1.0
    for stage in stages:
        if not stage.total:
            break
        share += weight * min(stage.done, stage.total) / stage.total
        weight /= stage.total
    if share <= 0 or share >= 1:
        return None
    return elapsed * (1 - share) / share


def _plural(unit: str) -> str:
    return unit if unit.endswith("s") or unit == "it" else f"{unit}es" if unit.endswith("ch") else f"{unit}s"


class _Ticker(threading.Thread):
    """Checks every TICK_SECONDS whether a line is due, so a slow first item does not silence the work."""

    def __init__(self, lines: _Lines):
        super().__init__(daemon=True, name="genzoo-progress")
        self.lines, self.stopped = lines, threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(TICK_SECONDS):
            self.lines.check()


class Stage:
    """One stage's progress: :meth:`update` as items finish, :meth:`set_postfix` for figures beside it."""

    def __init__(self, bar: Any = None, stage: _Stage | None = None, lines: _Lines | None = None):
        self._bar, self._stage, self._lines = bar, stage, lines

    def update(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)
        elif self._stage is not None:
            self._stage.done += n
            self._lines.check()

    def set_postfix(self, values: dict[str, Any]) -> None:
        if self._bar is not None:
            self._bar.set_postfix(values, refresh=False)
        elif self._stage is not None:
            self._stage.postfix = ", ".join(f"{k} {v}" for k, v in values.items())


@contextlib.contextmanager
def stage(shown: bool, *, desc: str, unit: str, total: int | None, initial: int = 0, leave: bool = True,
          position: int | None = None, stream: TextIO | None = None,
          clock: Callable[[], float] = time.monotonic) -> Iterator[Stage]:
    """A stage of ``total`` items (None: unknown), ``initial`` of them done already; nothing when not ``shown``."""
    global _lines
    if not shown:
        yield Stage()
        return
    if stream is None and _on_terminal(sys.stderr):
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, leave=leave, position=position,
                   dynamic_ncols=True)
        try:
            yield Stage(bar=bar)
        finally:
            bar.close()
        return
    outermost = _lines is None
    if outermost:
        _lines = _Lines(stream, clock, start=clock())
    lines = _lines
    record = _Stage(desc, unit, total, done=initial, said=initial)
    lines.stages.append(record)
    ticker = _Ticker(lines) if outermost and clock is time.monotonic else None
    if ticker is not None:
        ticker.start()
    try:
        yield Stage(stage=record, lines=lines)
        if outermost and lines.last is not None and record.done != record.said:
            lines.check(force=True)  # a log says the work finished
    finally:
        if ticker is not None:
            ticker.stopped.set()
        with lines.lock:
            lines.stages.remove(record)
        if outermost:
            _lines = None


def progress_bar(iterable: Iterable[T], shown: bool, **kwargs: Any) -> Iterable[T]:
    """``iterable`` as a stage (see :func:`stage`): ``desc``, ``unit`` and ``total`` name it (``total`` from
    ``len`` when not given); ``leave`` and ``position`` place a terminal's bar."""
    if not shown:
        return iterable
    total = kwargs.get("total")
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    return _iterate(iterable, desc=kwargs.get("desc") or "working", unit=kwargs.get("unit") or "it", total=total,
                    leave=kwargs.get("leave", True), position=kwargs.get("position"))


def _iterate(iterable: Iterable[T], **options: Any) -> Iterator[T]:
    with stage(True, **options) as progress:
        for item in iterable:
            yield item
            progress.update()


def progress_lines(iterable: Iterable[T], *, desc: str, unit: str, total: int | None, stream: TextIO | None = None,
                   clock: Callable[[], float] = time.monotonic) -> Iterator[T]:
    """The items of ``iterable`` as a stage written as lines to ``stream`` (whatever stderr is)."""
    with stage(True, desc=desc, unit=unit, total=total, stream=stream or sys.stderr, clock=clock) as progress:
        for item in iterable:
            yield item
            progress.update()


def _on_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def duration(seconds: float) -> str:
    """"45 s", "4 min 10 s", "1 h 05 min"."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
