"""Quiet windows: moments when a controller's own polling threads keep still.

Why: a thread whose timed wait ends while another thread holds the GIL runs as soon
as that thread blocks. The scheduler's loop holds the GIL while it spins up to a
scheduled instant, and the first time it blocks is the commit of the released runs'
``-> starting`` -- so a poll that came due during the spin ran right there, in the
middle of the release, and the bodies began after it. On the SQLite store the
command poller checks for commands from other processes every 10 ms: an
instrumented W3 run (docs/performance.md, "Fourth pass") had the poller's check or
claim inside the window from 1 ms before an instant to the second body in 7 of 20
instants, those bodies beginning 0.5-0.8 ms later than the others.

What: the scheduler marks each instant it will release runs at
(``Controller.quiet_around``), as soon as it knows it (after the tick before, so at
least one poll interval ahead: a poller already waiting sees a window only when it
next bounds its wait); the command poller and the lease keeper do not begin a poll
inside ``[instant - BEFORE, instant + AFTER]`` and resume right after it. A
command or a lease renewal is delayed by at most the window (10 ms), nothing is
skipped.

The supervision timers are the third such thread: a run with a deadline (a
schedule's ``max_runtime``, one hour by default) books it when it is released, and
the timer service of the controller's clock started its thread right then if none
was running -- at the first instant after a new controller, 0.16-0.56 ms of
``Thread.start()`` in the middle of the release -- and woke it otherwise, since the
new deadline was the earliest. A window also books a no-op deadline at its end
(:func:`keep_timers_ahead`): the thread is started and woken when the window is
marked, a tick or an arming ahead, and a run's deadline booked in the window is not
the earliest, so nobody is woken for it.
"""

from __future__ import annotations

import threading
from typing import Final

from chongming_task.core.clock import Clock
from chongming_task.runtime.timers import TimerService

__all__ = ["AFTER", "BEFORE", "QuietWindows", "keep_timers_ahead"]

#: A window opens this long before the instant: a poll begun just before it (a
#: cross-process check, well under a millisecond) is over by the instant.
BEFORE: Final = 0.005
#: ... and closes this long after it: the release, the commit and the bodies'
#: start take about a millisecond; the scheduler's loop stands aside up to 5 ms.
AFTER: Final = 0.005
#: Most windows kept ahead (one per armed instant; older ones are dropped).
MAX_WINDOWS: Final = 64


class QuietWindows:
    """Upcoming quiet windows on one clock's monotonic readings."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: list[tuple[float, float]] = []

    def add_around(self, seconds_ahead: float) -> bool:
        """Keep quiet around the moment ``seconds_ahead`` from now (on the clock).

        Returns False if that moment was in a window already (marked twice).
        """
        at = self._clock.monotonic() + seconds_ahead
        start, end = at - BEFORE, at + AFTER
        new = True
        with self._lock:
            kept: list[tuple[float, float]] = []
            for window in self._windows:  # the same instant marked again: one window
                if window[0] <= end and start <= window[1]:
                    new = new and not window[0] <= at <= window[1]
                    start, end = min(start, window[0]), max(end, window[1])
                else:
                    kept.append(window)
            kept.append((start, end))
            kept.sort()
            self._windows = kept[-MAX_WINDOWS:]
        return new

    def bound(self, timeout: float) -> float:
        """``timeout``, cut to end where the next window begins (0 inside one)."""
        now = self._clock.monotonic()
        with self._lock:
            self._drop_past(now)
            if not self._windows:
                return timeout
            return max(0.0, min(timeout, self._windows[0][0] - now))

    def sit_out(self, stop: threading.Event) -> bool:
        """Wait until the window we are in (if any) closes; False if ``stop`` was set."""
        while True:
            now = self._clock.monotonic()
            with self._lock:
                self._drop_past(now)
                current = self._windows[0] if self._windows else None
            if current is None or now < current[0]:
                return not stop.is_set()
            if self._clock.wait(stop, current[1] - now):
                return False

    def _drop_past(self, now: float) -> None:
        while self._windows and self._windows[0][1] <= now:
            self._windows.pop(0)


def keep_timers_ahead(clock: Clock, seconds_ahead: float) -> None:
    """Book a no-op supervision deadline on ``clock`` where a window ending then ends.

    The timer thread is started now (if it is not running) rather than by the first
    deadline booked at the instant, and stays the earliest deadline through the
    window, so the runs released in it book theirs without waking the thread.
    """
    TimerService.for_clock(clock).schedule(clock.monotonic() + seconds_ahead + AFTER, _no_op)


def _no_op() -> None:
    """The window's own deadline: nothing to do when it comes."""
