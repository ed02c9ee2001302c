"""Daemon carrier threads, reused once their run is over, never for an abandoned run.

Each run's body executes on a *carrier*: a daemon thread that, once its job is done,
waits up to ``LINGER`` seconds for the next launch before it exits. This is not a
``ThreadPoolExecutor``, on purpose:

- carriers are daemon threads, never joined at interpreter exit, so a stuck task
  cannot keep the process alive (guide §7.3);
- there is no fixed size and no queue: a launch with no idle carrier starts a new
  thread at once, so the concurrency limit stays the controller's business;
- a carrier whose attempt was *abandoned* (the run gave it up as ``lost`` because a
  thread cannot be killed) exits when its body finally returns: a thread declared
  "may still be running" is never trusted with another task;
- each job starts in a fresh, empty ``contextvars.Context``, exactly like a new
  thread, so context variables never leak from one task into the next.

After ``os.fork()`` the child forgets the parent's idle carriers (their threads do
not exist there).
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from typing import Final

__all__ = ["IDLE_NAME", "LINGER", "MAX_IDLE", "SHARED", "Carrier", "CarrierPool", "current_carrier"]

#: Seconds an idle carrier waits for its next run before its thread exits.
LINGER: Final = 2.0
#: Idle carriers kept at most; a carrier finding this many already idle exits.
MAX_IDLE: Final = 64
#: The name an idle carrier carries, so it is never mistaken for a task's thread.
IDLE_NAME: Final = "chongming-task:idle"

_local = threading.local()


class Carrier:
    """One carrier thread and its hand-off slot."""

    __slots__ = ("abandoned", "job", "name", "ready")

    def __init__(self, job: Callable[[], None], name: str) -> None:
        self.job: Callable[[], None] | None = job
        self.name = name
        self.ready = threading.Lock()
        self.ready.acquire()  # released once per hand-off
        self.abandoned = False
        """Set by the executor when the run gave this carrier up (``lost``)."""


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
        with self._lock:
            carrier = self._idle.pop() if self._idle else None
        if carrier is not None:
            carrier.job, carrier.name = job, name
            carrier.ready.release()
            return
        carrier = Carrier(job, name)
        threading.Thread(target=self._serve, args=(carrier,), name=name, daemon=True).start()
        with self._lock:
            self.started += 1

    def _serve(self, carrier: Carrier) -> None:
        _local.carrier = carrier
        thread = threading.current_thread()
        while True:
            job, carrier.job = carrier.job, None
            assert job is not None
            thread.name = carrier.name
            try:
                contextvars.Context().run(job)  # an exception ends the thread
            finally:
                # A parked carrier must not keep its last job alive: through the run's
                # listeners that is the whole controller and every run it holds.
                job = None
            if carrier.abandoned or not self._park(carrier, thread):
                return

    def _park(self, carrier: Carrier, thread: threading.Thread) -> bool:
        """Wait idle for the next job; False when the carrier should exit instead."""
        thread.name = carrier.name = IDLE_NAME
        with self._lock:
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


#: The carriers every ThreadExecutor shares: reuse across executors and controllers.
SHARED: Final = CarrierPool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=SHARED._forget_after_fork)
