"""A fake time source shared by processes: the time is a number in a file.

Several scheduler processes must see the *same* fake time for a multi-process
exactly-once test to be deterministic and fast: the test writes the time, every
process reads it. Writes are atomic (``os.replace``), so a reader never sees half a
number. Waits poll the file in short real-time steps.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

#: Real seconds between two reads of the file while waiting.
POLL = 0.002


class FileClock:
    """A ``Clock`` reading its time (epoch seconds) from ``path``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @staticmethod
    def write(path: str | Path, when: datetime) -> None:
        """Set the shared time (test process only)."""
        target = Path(path)
        scratch = target.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(repr(when.timestamp()))
        os.replace(scratch, target)

    def _read(self) -> float:
        return float(self.path.read_text())

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._read(), UTC)

    def monotonic(self) -> float:
        return self._read()

    def sleep(self, seconds: float) -> None:
        deadline = self._read() + seconds
        while self._read() < deadline:
            time.sleep(POLL)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        if timeout is None:
            return event.wait()
        deadline = self._read() + timeout
        while not event.is_set():
            if self._read() >= deadline:
                return False
            event.wait(POLL)
        return True
