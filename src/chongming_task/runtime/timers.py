"""One timer thread per clock, alive only while some run has a deadline.

Timeouts and graceful stop windows need someone awake at a deadline even when the
task's own thread is stuck in code that never reaches a checkpoint. A thread per run
would double the thread count of a controller running thousands of tasks, so every
run sharing a clock shares one :class:`TimerService`: a heap of deadlines and a thread
that waits on the clock for the earliest one. Runs without a timeout and without a
pending stop schedule nothing, and when nothing is scheduled the thread exits.

Waits go through ``clock.wait``, so a ``FakeClock`` drives every deadline: the
service thread counts as one of ``FakeClock.sleepers`` exactly while it waits for one.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import threading
import weakref
from collections.abc import Callable
from typing import ClassVar, Final

from chongming_task.core.clock import Clock

__all__ = ["EPSILON", "TimerEntry", "TimerService"]

log = logging.getLogger("chongming_task.runtime")

#: Slack for float deadlines: a deadline at ``t`` counts as due when the clock reads
#: ``t - EPSILON``, so ``FakeClock.advance`` to exactly ``t`` always releases it.
EPSILON: Final = 1e-9

#: Real seconds the thread waits, idle, for a new deadline before it exits. Not clock
#: time: an idle thread is no sleeper of a ``FakeClock`` (nothing of the run waits).
LINGER: Final = 2.0

#: Compact the heap once it holds this many cancelled entries more than live ones.
_COMPACT_SLACK: Final = 256


class TimerEntry:
    """One scheduled callback; :meth:`TimerService.cancel` makes it inert."""

    __slots__ = ("callback", "cancelled", "deadline", "popped", "seq")

    def __init__(self, deadline: float, seq: int, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.seq = seq
        self.callback = callback
        self.cancelled = False
        self.popped = False

    def __lt__(self, other: TimerEntry) -> bool:
        return (self.deadline, self.seq) < (other.deadline, other.seq)


class TimerService:
    """Calls callbacks at monotonic deadlines of one clock, from one lazily started thread."""

    _registry: ClassVar[weakref.WeakKeyDictionary[Clock, TimerService]] = (
        weakref.WeakKeyDictionary()
    )
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._heap: list[TimerEntry] = []
        self._cancelled = 0
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._seq = itertools.count()

    @classmethod
    def for_clock(cls, clock: Clock) -> TimerService:
        """The service shared by every run on ``clock``."""
        with cls._registry_lock:
            try:
                service = cls._registry.get(clock)
            except TypeError:  # an unhashable clock: give it its own service
                return cls(clock)
            if service is None:
                service = cls(clock)
                with contextlib.suppress(TypeError):  # not weak-referenceable: unshared
                    cls._registry[clock] = service
            return service

    def schedule(self, deadline: float, callback: Callable[[], None]) -> TimerEntry:
        """Call ``callback`` (from the service thread) once ``clock.monotonic() >= deadline``."""
        entry = TimerEntry(deadline, next(self._seq), callback)
        with self._lock:
            heapq.heappush(self._heap, entry)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="chongming-task-timers", daemon=True
                )
                self._thread.start()
            elif self._heap[0] is entry:
                self._wake.set()
        return entry

    def cancel(self, entry: TimerEntry) -> None:
        with self._lock:
            if entry.cancelled:
                return
            entry.cancelled = True
            if entry.popped:
                return
            self._cancelled += 1
            if self._heap and self._heap[0] is entry:
                self._wake.set()  # let the thread drop it (and exit if nothing is left)
            if self._cancelled > len(self._heap) - self._cancelled + _COMPACT_SLACK:
                self._heap = [item for item in self._heap if not item.cancelled]
                heapq.heapify(self._heap)
                self._cancelled = 0

    @property
    def pending(self) -> int:
        """How many live deadlines are scheduled (for tests and diagnostics)."""
        with self._lock:
            return len(self._heap) - self._cancelled

    def _loop(self) -> None:
        expired = False  # the last idle wait ran out without a new deadline
        while True:
            due: TimerEntry | None = None
            remaining: float | None = None
            with self._lock:
                while self._heap and self._heap[0].cancelled:
                    heapq.heappop(self._heap).popped = True
                    self._cancelled -= 1
                if not self._heap:
                    if expired:
                        self._thread = None
                        return
                    self._wake.clear()
                else:
                    top = self._heap[0]
                    now = self._clock.monotonic()
                    if now >= top.deadline - EPSILON:
                        due = heapq.heappop(self._heap)
                        due.popped = True
                    else:
                        remaining = top.deadline - now
                        self._wake.clear()
            expired = False
            if due is not None:
                try:
                    due.callback()
                except Exception:
                    log.exception("a supervision callback failed")
                continue
            if remaining is None:
                # Idle: stay a moment before exiting, so runs with a deadline coming one
                # after another (a schedule firing every second) do not start a thread each.
                expired = not self._wake.wait(LINGER)
                continue
            self._clock.wait(self._wake, max(0.0, remaining - EPSILON))
