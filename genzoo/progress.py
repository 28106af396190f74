"""Progress of long work: a bar on a terminal, and in logs and pipes a line on stderr now and then.

A bar is shown only when asked for (``--progress``, the default of the verbs that run long). On a
terminal it is tqdm's bar; elsewhere (a pipe, a log file, a job scheduler) the outermost loop writes
one line at a time, at most every :data:`LINE_EVERY_SECONDS` and every :data:`LINE_EVERY_SHARE` of the
work (whichever is rarer), so a long command speaks while a short one stays silent. ``--no-progress``
writes nothing at all.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Iterable, Iterator, TextIO, TypeVar

T = TypeVar("T")

LINE_EVERY_SECONDS = 30.0  # a progress line in a pipe comes at most this often ...
LINE_EVERY_SHARE = 0.10  # ... and after at least this share of the work since the last one
_running: list[str] = []  # the loops writing progress lines now, outermost first (only it writes)


def progress_bar(iterable: Iterable[T], shown: bool, **kwargs: Any) -> Iterable[T]:
    """``iterable`` with its progress shown, when ``shown``: a tqdm bar on a terminal, else lines on stderr.

    Keyword arguments go to tqdm; ``desc``, ``unit`` and ``total`` also name the lines.
    """
    if not shown:
        return iterable
    if _on_terminal(sys.stderr):
        from tqdm.auto import tqdm

        return tqdm(iterable, dynamic_ncols=True, **kwargs)
    total = kwargs.get("total")
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    return progress_lines(iterable, desc=kwargs.get("desc") or "working", unit=kwargs.get("unit") or "it",
                          total=total)


def _on_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def progress_lines(iterable: Iterable[T], *, desc: str, unit: str, total: int | None, stream: TextIO | None = None,
                   clock: Callable[[], float] = time.monotonic) -> Iterator[T]:
    """The items of ``iterable``, writing "DESC: 3/20 batches (15%), 45 s, about 4 min left" lines to ``stream``.

    A line comes once both :data:`LINE_EVERY_SECONDS` and :data:`LINE_EVERY_SHARE` of ``total`` have
    passed since the last (time alone without a total); a loop nested in another that writes lines writes
    none. When a line was written, the end is written too, so a log says the stage finished.
    """
    nested = bool(_running)
    _running.append(desc)
    start = last_time = clock()
    done = last_done = 0
    wrote = False
    try:
        for item in iterable:
            yield item
            done += 1
            now = clock()
            if nested or now - last_time < LINE_EVERY_SECONDS:
                continue
            if total and (done - last_done) < LINE_EVERY_SHARE * total and done < total:
                continue
            _write(stream, _line(desc, unit, done, total, now - start))
            last_time, last_done, wrote = now, done, True
        if wrote and done != last_done:
            _write(stream, _line(desc, unit, done, total, clock() - start))
    finally:
        _running.pop()


def _line(desc: str, unit: str, done: int, total: int | None, elapsed: float) -> str:
    units = unit if unit.endswith("s") or unit == "it" else f"{unit}es" if unit.endswith("ch") else f"{unit}s"
    if not total:
        return f"{desc}: {done:,} {units}, {duration(elapsed)}"
    text = f"{desc}: {done:,}/{total:,} {units} ({100 * done / total:.0f}%), {duration(elapsed)}"
    if done < total:
        text += f", about {duration(elapsed * (total - done) / done)} left"
    return text


def duration(seconds: float) -> str:
    """"45 s", "4 min 10 s", "1 h 05 min"."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _write(stream: TextIO | None, line: str) -> None:
    out = stream or sys.stderr
    out.write(line + "\n")
    out.flush()
