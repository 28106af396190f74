"""How many CPU threads torch uses: set once, before torch starts its thread pool.

``--threads N`` (``genzoo --threads N VERB``), ``GENZOO_THREADS`` or ``OMP_NUM_THREADS``, else the cores this process may use
(its CPU affinity) shared between the processes ``accelerate launch`` started on this machine. When the
machine's load shows other work already holds the cores, OpenMP's threads wait passively instead of spinning
(spinning threads that wait for a core cost far more than they give; passive waiting beat fewer threads in
docs/results.md, "Threads on a busy machine"), or, where OpenMP has already started, they are fewer; genzoo says
which in one line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

THREADS_ENV = "GENZOO_THREADS"
_OMP = "OMP_NUM_THREADS"
_WAIT_POLICY = "OMP_WAIT_POLICY"


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def busy_cores(cores: int, loadavg: str = "/proc/loadavg") -> int:
    """How many of ``cores`` other work holds now: the one-minute load average, rounded, at most ``cores``; where the
    system says how many processes run at this moment (Linux), no more than those besides this one, since the
    average still counts, for a minute, work that has just ended (a script's training before its eval)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0
    busy = int(load + 0.5)
    running = running_now(loadavg)
    if running is not None:
        busy = min(busy, running - 1)
    return max(0, min(cores, busy))


def running_now(loadavg: str = "/proc/loadavg") -> int | None:
    """The processes runnable at this moment, this one included (the 4th field of /proc/loadavg, "R/TOTAL"); None
    where the file is missing or reads otherwise."""
    try:
        fields = Path(loadavg).read_text().split()
        return int(fields[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return None


def choose_threads(requested: int | None, cores: int, processes: int, busy: int,
                   passive_possible: bool = True) -> tuple[int, str]:
    """The thread count and, when the machine is busy, the sentence that says what was done about it ("" otherwise):
    the threads wait passively (``passive_possible``: OpenMP has not started and its wait policy is not set), else
    they are fewer."""
    if requested is not None:
        return requested, ""
    share = max(1, cores // max(1, processes))
    free = max(1, (cores - busy) // max(1, processes))
    if free >= share:
        return share, ""
    why = f"this machine's load shows {busy} of its {cores} cores busy with other work"
    if passive_possible:
        return share, (f"threads: {share}, waiting passively ({why}: threads that spin while they wait for a core cost "
                       f"more than they give; --threads N or {THREADS_ENV} sets the count)")
    return free, f"threads: {free} of {share} ({why}; --threads N or {THREADS_ENV} sets it)"


def requested_threads(option: int | None) -> int | None:
    """``--threads``, else ``GENZOO_THREADS``, else ``OMP_NUM_THREADS`` (a choice made for OpenMP itself); refused in
    one sentence unless a positive integer."""
    if option is not None:
        value, where = option, "--threads"
    else:
        where = next((name for name in (THREADS_ENV, _OMP) if os.environ.get(name, "").strip()), None)
        if where is None:
            return None
        value = os.environ[where].strip()
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        from .errors import GenzooError

        raise GenzooError(f"{where} must be a positive integer (the CPU threads torch uses), got {value!r}")
    return number


def configure_threads(option: int | None = None, say=None) -> int:
    """Set torch's CPU threads for this process, once, before torch starts them; returns the count."""
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    cores = usable_cores()
    passive_possible = "torch" not in sys.modules and not os.environ.get(_WAIT_POLICY, "").strip()
    threads, notice = choose_threads(requested_threads(option), cores, processes, busy_cores(cores), passive_possible)
    os.environ[_OMP] = str(threads)  # torch reads it when it starts; subprocesses inherit it
    if notice and passive_possible:  # a busy machine: choose_threads kept every thread, to wait passively
        os.environ[_WAIT_POLICY] = "PASSIVE"  # read by OpenMP when torch loads it
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    if notice:
        (say or (lambda text: print(text, file=sys.stderr)))(notice)
    return threads


__all__ = ["THREADS_ENV", "choose_threads", "configure_threads", "usable_cores"]
