"""One run per output folder: a lock that a second ``genzoo fit`` on the same ``--out`` meets at once.

The lock is an ``fcntl`` lock on ``OUT/.lock``, which the operating system drops when the process
ends however it ends, so a killed run leaves no stale lock. The file names the holder (process ID,
host and start time) for the refusal. Where ``fcntl`` does not exist (Windows) the lock is skipped.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from ..errors import GenzooError

LOCK_FILE = ".lock"


class RunLock:
    """Held from ``acquire()`` until ``release()`` (or the process's end)."""

    def __init__(self, out: Path):
        self.path = Path(out) / LOCK_FILE
        self._handle = None

    def acquire(self) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not on POSIX
            return
        handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = _describe(handle.read())
            handle.close()
            raise GenzooError(f"{self.path.parent} is in use by another genzoo fit ({holder}); wait for it to finish "
                              f"or stop it, or choose another --out") from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "started": time.strftime("%Y-%m-%d %H:%M:%S")}))
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing drops the lock
            self._handle = None


def _describe(text: str) -> str:
    try:
        holder = json.loads(text)
        return f"process {holder['pid']} on {holder['host']}, started {holder['started']}"
    except (ValueError, KeyError, TypeError):
        return "a process that is still starting"


__all__ = ["LOCK_FILE", "RunLock"]
