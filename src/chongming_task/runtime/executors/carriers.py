"""Daemon carrier threads that are reused once their run is over, never pooled blindly.

Starting a thread is the most expensive step of a short task: ``Thread.start()``
waits until the new thread has run, and on a busy interpreter that handshake waits
for the GIL (milliseconds under load, measured in W1 of ``bench/``). So a carrier
whose run has ended parks itself for a while (``LINGER`` seconds) and the next launch
hands it the next run instead of starting a thread.

This is not a ``ThreadPoolExecutor``, on purpose:

- carriers are daemon threads, never joined at interpreter exit, so a stuck task
  cannot keep the process alive (guide §7.3);
- there is no fixed size and no queue: a launch with no idle carrier starts a new
  thread at once, so the concurrency limit stays the controller's business;
- a carrier whose attempt was *abandoned* (the run gave it up as ``lost`` because a
  thread cannot be killed) is retired for good when its body finally returns: a
  thread we declared "may still be running" is never trusted with another task;
- each run starts in a fresh, empty ``contextvars.Context``, exactly like a new
  thread, so context variables never leak from one task into the next.

A launch that must begin at a known instant (the scheduler's armed firings) asks
for idle carriers ahead of it (:meth:`CarrierPool.keep_ready`): starting a thread at
the instant costs 0.2-5 ms, handing a job to a parked one about 0.1 ms.

After ``os.fork()`` the child forgets the parent's idle carriers (their threads do
not exist there).
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Final

__all__ = [
    "IDLE_NAME",
    "LINGER",
    "MAX_IDLE",
    "SHARED",
    "Carrier",
    "CarrierPool",
    "carrying_on",
    "current_carrier",
    "hand_on_successor",
    "launching_together",
]

#: Seconds an idle carrier waits for its next run before its thread exits.
LINGER: Final = 2.0
#: Idle carriers kept at most; a carrier finding this many already idle exits.
MAX_IDLE: Final = 64
#: The name an idle carrier carries, so it is never mistaken for a task's thread.
IDLE_NAME: Final = "chongming-task:idle"

_local = threading.local()


class Carrier:
    """One carrier thread and its hand-off slot."""

    __slots__ = (
        "abandoned",
        "finishing",
        "job",
        "name",
        "ready",
        "successor",
        "thread",
        "together",
    )

    def __init__(self) -> None:
        self.job: Callable[[], None] | None = None
        self.name = IDLE_NAME
        self.ready = threading.Lock()
        self.ready.acquire()  # released once per hand-off
        self.abandoned = False
        """Set by the executor when the run gave this carrier up (``lost``)."""
        self.thread: threading.Thread | None = None
        self.together = False
        """Its job was launched with others (:func:`launching_together`)."""
        self.finishing = False
        """Its body has returned: what is left of the job is recording how it ended."""
        self.successor: tuple[Callable[[], None], str] | None = None
        """A job launched from this carrier while finishing: it runs here next."""


class _Flag:
    """Sets the thread-local flag ``name`` for a block (nested blocks restore it).

    A class rather than ``@contextmanager``: the controller opens one at every run's
    end, and a generator-based context manager costs four Python calls more.
    """

    __slots__ = ("_before", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._before = False

    def __enter__(self) -> None:
        self._before = getattr(_local, self._name, False)
        setattr(_local, self._name, True)

    def __exit__(self, *exc_info: object) -> None:
        setattr(_local, self._name, self._before)


def launching_together() -> AbstractContextManager[None]:
    """Mark the launches made in this block as one group that should begin together.

    A carrier whose body returns while another carrier of the group still waits for
    the GIL yields it once (``ThreadExecutor``): CPython hands the GIL over only when
    its holder blocks (or after 5 ms), so the first body's whole conclusion would
    otherwise run before the second body begins. The scheduler launches every firing
    of an instant together; ordinary launches are not affected.
    """
    return _Flag("together")


def carrying_on() -> AbstractContextManager[None]:
    """Let a finishing carrier keep the first job launched in this block for itself.

    Only for a launch made when nothing of the carrier's own run can still run user
    code (its delivery, listeners and done callbacks are over): the kept job starts
    only once the current job returns, so anything that could wait for it here would
    wait forever. The controller pumps the next run this way after a run's end.
    """
    return _Flag("carry_on")


def hand_on_successor() -> None:
    """Launch elsewhere a job deferred to this carrier, if any (see ``CarrierPool.launch``).

    For a carrier that is about to wait or run another body instead of returning:
    a deferred job must not wait behind it. A no-op outside a carrier.
    """
    carrier: Carrier | None = getattr(_local, "carrier", None)
    if carrier is None:
        return
    carrier.finishing = False
    successor, carrier.successor = carrier.successor, None
    if successor is not None:
        SHARED.launch(successor[0], name=successor[1])


def current_carrier() -> Carrier | None:
    """The carrier the calling thread is, or ``None`` outside a carrier thread."""
    carrier: Carrier | None = getattr(_local, "carrier", None)
    return carrier


class CarrierPool:
    """Idle carriers waiting for a run, most recently parked first."""

    def __init__(self, *, linger: float = LINGER, max_idle: int = MAX_IDLE) -> None:
        self._linger = linger
        self._max_idle = max_idle
        self._lock = threading.Lock()
        self._idle: list[Carrier] = []
        self.started = 0
        """Threads started so far (a reused carrier does not count)."""
        self.together_waiting = 0
        """Jobs launched together (:func:`launching_together`) not begun yet."""
        self._readying = 0
        """Carriers started by :meth:`keep_ready` that have not parked yet."""

    @property
    def idle(self) -> int:
        """Carriers parked right now."""
        with self._lock:
            return len(self._idle)

    def launch(self, job: Callable[[], None], *, name: str) -> None:
        """Run ``job`` on an idle carrier, or on a new daemon thread if none is idle.

        Raises:
            RuntimeError: A new thread was needed and could not be started.
        """
        together = getattr(_local, "together", False)
        current: Carrier | None = getattr(_local, "carrier", None)
        if (
            current is not None
            and current.finishing
            and getattr(_local, "carry_on", False)
            and current.successor is None
            and not current.abandoned
            and not together
        ):
            # Launched by a carrier whose own run is over and fully delivered (see
            # carrying_on): it takes the job itself once its job returns, instead of
            # waking another carrier and parking -- two thread switches and a GIL
            # hand-off saved per task on a busy controller.
            current.successor = (job, name)
            return
        with self._lock:
            carrier = self._idle.pop() if self._idle else None
            if together:
                self.together_waiting += 1
        if carrier is not None:
            carrier.job, carrier.name, carrier.together = job, name, together
            carrier.ready.release()
            return
        carrier = Carrier()
        carrier.job, carrier.name, carrier.together = job, name, together
        thread = threading.Thread(target=self._serve, args=(carrier,), name=name, daemon=True)
        carrier.thread = thread
        try:
            thread.start()
        except BaseException:
            if together:
                with self._lock:
                    self.together_waiting -= 1
            raise
        with self._lock:
            self.started += 1

    def keep_ready(self, count: int) -> int:
        """Make sure ``count`` carriers are idle, starting threads that park at once.

        For launches due soon at a known instant: they then take a parked carrier
        instead of starting a thread there. A ready carrier is an ordinary idle one
        (any launch may take it; it exits after ``linger`` seconds unused), and at
        most ``max_idle`` are kept. Returns how many threads were started.

        Raises:
            RuntimeError: A thread could not be started.
        """
        with self._lock:
            missing = min(count, self._max_idle) - len(self._idle) - self._readying
            if missing <= 0:
                return 0
            self._readying += missing
        started = 0
        try:
            for _ in range(missing):
                carrier = Carrier()
                thread = threading.Thread(
                    target=self._serve, args=(carrier,), name=IDLE_NAME, daemon=True
                )
                carrier.thread = thread
                thread.start()
                started += 1
        finally:
            with self._lock:
                self.started += started
                self._readying -= missing - started  # the started ones count down on parking
        return started

    def _serve(self, carrier: Carrier) -> None:
        _local.carrier = carrier
        thread = threading.current_thread()
        if carrier.job is None and not self._park(carrier, thread, readying=True):
            return  # started by keep_ready, and not needed after all
        while True:
            job, carrier.job = carrier.job, None
            assert job is not None
            if carrier.together:
                carrier.together = False
                with self._lock:
                    self.together_waiting -= 1
            thread.name = carrier.name
            carrier.finishing = False
            try:
                contextvars.Context().run(job)  # an exception ends the thread, as before
            finally:
                # A parked carrier must not keep its last job alive: through the run's
                # listeners that is the whole controller, its store and every run it
                # holds, long after the controller was closed and dropped.
                job = None
                carrier.finishing = False
                successor, carrier.successor = carrier.successor, None
                if successor is not None and carrier.abandoned:
                    self.launch(successor[0], name=successor[1])  # never on this thread
                    successor = None
            if successor is not None:
                carrier.job, carrier.name = successor
                continue
            if carrier.abandoned or not self._park(carrier, thread):
                return

    def _park(self, carrier: Carrier, thread: threading.Thread, *, readying: bool = False) -> bool:
        """Wait idle for the next job; False when the carrier should exit instead.

        ``readying``: a carrier started by :meth:`keep_ready`, counted as coming
        until it is idle (under the same lock, so it is never counted twice or not
        at all).
        """
        thread.name = carrier.name = IDLE_NAME
        with self._lock:
            if readying:
                self._readying -= 1
            if len(self._idle) >= self._max_idle:
                return False
            self._idle.append(carrier)
        if carrier.ready.acquire(timeout=self._linger):
            return True
        with self._lock:
            if carrier in self._idle:
                self._idle.remove(carrier)
                return False
        # A launch took this carrier between the timeout and the lock: its job is coming.
        carrier.ready.acquire()
        return True

    def _forget_after_fork(self) -> None:
        # The idle carriers' threads do not exist in a forked child.
        self._lock = threading.Lock()
        self._idle = []
        self.together_waiting = 0
        self._readying = 0


#: The carriers every ThreadExecutor shares: reuse across executors and controllers.
SHARED: Final = CarrierPool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=SHARED._forget_after_fork)
