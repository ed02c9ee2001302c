"""Time, injected. No module below the surfaces reads the system clock directly.

Two readings, for two purposes: ``now()`` is wall time (timestamps, leases, cron) and
``monotonic()`` measures durations (timeouts, backoff) immune to clock steps.
``sleep``/``wait`` let code block on time through the clock, so ``FakeClock.advance``
releases it in tests with no real waiting.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from chongming_task._public import public

__all__ = ["Clock", "SystemClock", "utc_now"]


@public
@runtime_checkable
class Clock(Protocol):
    """What every time-dependent component receives."""

    def now(self) -> datetime:
        """Current wall time, timezone-aware (UTC)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds`` of this clock's time."""
        ...

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        """Block until ``event`` is set or ``timeout`` of this clock's time passes.

        Returns whether the event is set, like ``Event.wait``.
        """
        ...


@public
class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        return event.wait(timeout)

    def __repr__(self) -> str:
        return "SystemClock()"


def utc_now() -> datetime:
    """Wall time for the surfaces (CLI, benchmarks), which may read the clock directly."""
    return datetime.now(UTC)
