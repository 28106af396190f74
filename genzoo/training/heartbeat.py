"""No silent hang: under several processes each one says, every few seconds, that it is alive and which
step it is in; when one stops answering (a hung node or GPU, a stopped process) the others name it in one
sentence and the run exits, keeping its last checkpoint, instead of waiting in a collective call.

Each process writes ``OUT/checkpoints/.heartbeat/rank-R.json`` (its process ID, host, step, and the
times of its last beat and of its last finished step) from a daemon thread, and reads the others'.
A process whose beat is older than the run's ``--collective-timeout`` has stopped; one that beats but
has not finished a step in that time while another has is stuck inside it. The process that notices
prints the sentence and ends with :data:`EXIT_STUCK`; ``accelerate launch`` then ends the rest.
The collectives' own time-out (torch's, one minute later) is the fallback.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

EXIT_STUCK = 124  # what timeout(1) returns for a command that ran out of time
FOLDER = ".heartbeat"


class Heartbeat:
    """This process's beat, and the watch over the others' (started only with several processes)."""

    def __init__(self, out: Path, rank: int, processes: int, timeout_seconds: float):
        self.folder = Path(out) / "checkpoints" / FOLDER
        self.rank, self.processes, self.timeout = rank, processes, float(timeout_seconds)
        self.interval = max(0.2, min(10.0, self.timeout / 6))
        self.step, self.stepped_at = 0, time.time()
        self.started = time.time()
        self._stop = threading.Event()
        self._writing = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self, step: int) -> None:
        self.step, self.stepped_at = step, time.time()
        self.started = self.stepped_at
        self.folder.mkdir(parents=True, exist_ok=True)
        self._beat()
        self._thread = threading.Thread(target=self._run, name="genzoo-heartbeat", daemon=True)
        self._thread.start()

    def finished(self, step: int) -> None:
        """Called after each step: ``step`` steps are done (said at once, so a name names the right step)."""
        self.step, self.stepped_at = step, time.time()
        if self._thread is not None:
            try:
                self._beat()
            except OSError:
                pass  # the thread tries again

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._beat()
                problem = self.stuck()
            except OSError:
                continue  # a beat that cannot be written now (a full disk) is tried again
            if problem and not self._stop.is_set():
                print(f"\n{problem}; the run stops here, keeping its last checkpoint: end that process (or restart "
                      f"its node) and continue with --resume", file=sys.stderr, flush=True)
                os._exit(EXIT_STUCK)

    def _beat(self) -> None:
        document = {"pid": os.getpid(), "host": socket.gethostname(), "step": self.step, "beat": time.time(),
                    "stepped": self.stepped_at}
        path = self.folder / f"rank-{self.rank}.json"
        tmp = path.with_name(path.name + ".tmp")
        with self._writing:
            tmp.write_text(json.dumps(document))
            os.replace(tmp, path)

    def stuck(self) -> str | None:
        """One sentence naming a process that stopped answering or is stuck in a step, else None."""
        now = time.time()
        beats = {rank: _read(self.folder / f"rank-{rank}.json") for rank in range(self.processes)}
        beats = {rank: b if b and b["beat"] >= self.started - 1 else None for rank, b in beats.items()}  # not an earlier run's
        ahead = max((b["step"] for b in beats.values() if b), default=self.step)
        for rank, beat in beats.items():
            if rank == self.rank:
                continue
            if beat is None:
                if now - self.stepped_at > self.timeout:
                    return f"process {rank} of {self.processes} has not started for {_minutes(now - self.stepped_at)}"
                continue
            who = f"process {rank} of {self.processes} (process ID {beat['pid']} on {beat['host']})"
            if now - beat["beat"] > self.timeout:
                return (f"{who} stopped answering {_minutes(now - beat['beat'])} ago, in step {beat['step'] + 1}; "
                        f"the others waited for it for --collective-timeout")
            if now - beat["stepped"] > self.timeout and beat["step"] < ahead:
                return (f"{who} has been in step {beat['step'] + 1} for {_minutes(now - beat['stepped'])} while "
                        f"others finished it (--collective-timeout)")
        return None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text())
        return document if isinstance(document, dict) and {"pid", "host", "step", "beat", "stepped"} <= set(document) else None
    except (OSError, ValueError):
        return None


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} minutes"


__all__ = ["EXIT_STUCK", "Heartbeat"]
