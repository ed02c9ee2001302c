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

from chongming_task._service import FINISHED, BackgroundService, StepResult
from chongming_task.core import Clock

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
        self._service = BackgroundService(
            "chongming-task-timers", self._pass, clock=clock, linger=LINGER
        )
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
            earliest = self._heap[0] is entry
        if earliest:
            # Wakes the thread to wait for this one instead, or starts it: it ends only
            # with an empty heap, so a later deadline always finds it running.
            self._service.ensure_started()
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
                self._service.wake()  # let the thread drop it (and end if nothing is left)
            if self._cancelled > len(self._heap) - self._cancelled + _COMPACT_SLACK:
                self._heap = [item for item in self._heap if not item.cancelled]
                heapq.heapify(self._heap)
                self._cancelled = 0

    @property
    def pending(self) -> int:
        """How many live deadlines are scheduled (for tests and diagnostics)."""
        with self._lock:
            return len(self._heap) - self._cancelled

    def _pass(self) -> StepResult:
        """Call the earliest due callback, or say how long until it is due."""
        with self._lock:
            while self._heap and self._heap[0].cancelled:
                heapq.heappop(self._heap).popped = True
                self._cancelled -= 1
            if not self._heap:
                return FINISHED  # after LINGER, unless a deadline comes meanwhile
            top = self._heap[0]
            now = self._clock.monotonic()
            if now < top.deadline - EPSILON:
                return max(0.0, top.deadline - now - EPSILON)
            due = heapq.heappop(self._heap)
            due.popped = True
        try:
            due.callback()
        except Exception:
            log.exception("a supervision callback failed")
        return 0.0
