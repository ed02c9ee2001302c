"""A deterministic clock for tests: time moves only when the test says so."""

from __future__ import annotations

import math
import threading
import time
from datetime import UTC, datetime, timedelta

from chongming_task.errors import ConfigurationError

__all__ = ["FakeClock"]

#: How often a blocked ``wait`` re-checks its event in real time. Only events set by
#: other threads need it; ``advance`` wakes every waiter at once.
_EVENT_POLL_SECONDS = 0.001


class FakeClock:
    """A :class:`~chongming_task.core._clock.Clock` whose time moves only on ``advance``.

    Code under test that calls ``clock.sleep(s)`` or ``clock.wait(event, s)`` blocks
    until a test thread advances the clock far enough (or the event is set), so
    timeouts, backoff, leases and schedules are tested without real waiting.
    ``wait_for_sleepers(n)`` lets the test know that the code has reached its wait
    before it advances, which removes the race that a bare ``sleep`` would paper over.

    ``now()`` starts at ``start`` (2026-01-01 UTC by default) and ``monotonic()`` at
    ``0.0``; both move together and only forwards.
    """

    def __init__(self, start: datetime | None = None) -> None:
        if start is None:
            start = datetime(2026, 1, 1, tzinfo=UTC)
        if not isinstance(start, datetime) or start.tzinfo is None:
            raise ConfigurationError(
                f"FakeClock start must be a timezone-aware datetime, got {start!r}"
            )
        self._start = start
        self._offset = 0.0
        self._cond = threading.Condition()
        self._sleepers = 0

    # -- Clock protocol -------------------------------------------------------

    def now(self) -> datetime:
        """Wall time: ``start`` plus every ``advance`` so far."""
        with self._cond:
            return self._start + timedelta(seconds=self._offset)

    def monotonic(self) -> float:
        """Seconds advanced since construction."""
        with self._cond:
            return self._offset

    def sleep(self, seconds: float) -> None:
        """Block until the clock has been advanced by ``seconds`` (no-op if <= 0)."""
        if seconds <= 0:
            return
        with self._cond:
            deadline = self._offset + seconds
            self._sleepers += 1
            self._cond.notify_all()
            try:
                while self._offset < deadline:
                    self._cond.wait()
            finally:
                self._sleepers -= 1

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        """Block until ``event`` is set (True) or ``timeout`` fake seconds pass (False)."""
        if event.is_set():
            return True
        with self._cond:
            deadline = None if timeout is None else self._offset + timeout
            self._sleepers += 1
            self._cond.notify_all()
            try:
                while not event.is_set():
                    if deadline is not None and self._offset >= deadline:
                        return False
                    self._cond.wait(_EVENT_POLL_SECONDS)
                return True
            finally:
                self._sleepers -= 1

    # -- test controls --------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move time forward and release every waiter whose deadline has come.

        Raises:
            ConfigurationError: ``seconds`` is negative or not a finite number (time
                only moves forwards; a ``ValueError`` for callers that catch that).
        """
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
        ):
            raise ConfigurationError(f"advance() needs a finite number of seconds, got {seconds!r}")
        if seconds < 0:
            raise ConfigurationError(f"time cannot go backwards: advance({seconds!r})")
        with self._cond:
            self._offset += seconds
            self._cond.notify_all()

    def set(self, when: datetime) -> None:
        """Jump to wall time ``when`` (not earlier than now).

        Raises:
            ConfigurationError: ``when`` is naive or earlier than ``now()``.
        """
        if not isinstance(when, datetime) or when.tzinfo is None:
            raise ConfigurationError(f"set() needs a timezone-aware datetime, got {when!r}")
        with self._cond:
            delta = (when - (self._start + timedelta(seconds=self._offset))).total_seconds()
        self.advance(delta)

    @property
    def sleepers(self) -> int:
        """How many threads are blocked in ``sleep``/``wait`` on this clock right now."""
        with self._cond:
            return self._sleepers

    def wait_for_sleepers(self, count: int = 1, timeout: float = 5.0) -> None:
        """Block (in real time) until at least ``count`` threads wait on this clock.

        Raises ``TimeoutError`` after ``timeout`` real seconds: the code under test
        never reached its wait, which is a bug to report, not a race to sleep over.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._sleepers < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"expected {count} waiter(s) on the FakeClock, saw {self._sleepers}"
                    )
                self._cond.wait(remaining)

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now().isoformat()})"
