"""Ordered delivery of a run's transitions to its listeners, outside the state lock.

Transitions are recorded under the run's lock (so there is one writer), but listeners
(store write-through, metrics, pipeline orchestration) run outside it: a slow store
must not stall ``stop()``, and a listener that calls back into the run must not
deadlock. The outbox keeps their order anyway: records are queued in the order they
were made and delivered by one thread at a time.

Whoever finds the delivery lock taken leaves its record to the thread that holds
it, which re-checks the queue after releasing the lock, so no record is stranded. A
listener calling back into the run only queues more records; the outer delivery loop
hands them out after the current one, in order.

Read-your-writes: :meth:`Outbox.flush` returns only once every record queued so far
reached the listeners (the controller's listener stores each one before anyone else
hears of it). Every change of a run ends with it (``RunState.transaction``), so
``pause()``, ``stop()``, ``resume()`` and the rest return with their transitions
stored, even when another thread was delivering the run's records at the time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from chongming_task._model import TaskSnapshot, Transition

__all__ = ["Listener", "Outbox"]

log = logging.getLogger("chongming_task.run")

Listener = Callable[[Transition, TaskSnapshot], None]
RunT = TypeVar("RunT")


class Outbox(Generic[RunT]):
    """Listeners, done callbacks and the done event of one run."""

    __slots__ = (
        "_deliver_lock",
        "_deliverer",
        "_done",
        "_done_callbacks",
        "_done_waiters",
        "_finished",
        "_listeners",
        "_queue",
        "_run",
        "_state_lock",
    )

    def __init__(self, run: RunT, *, lock: threading.Lock | None = None) -> None:
        """``lock`` guards listeners, callbacks and the done flag; the run passes its own
        (never held while listeners run), so a queued run owns one lock fewer."""
        self._run = run
        # A list, not a deque: it holds one or two records at a time, and an empty
        # deque costs 600 bytes per run (a controller may hold 100,000 queued runs).
        # Records, and actions (``None``, fn) to run once the records before them
        # reached the listeners (see :meth:`after_delivery`).
        self._queue: list[tuple[Transition | None, Any]] = []
        self._deliver_lock = threading.Lock()
        self._deliverer: int | None = None  # the thread holding _deliver_lock
        # Tuples, replaced whole: shared empty ones cost nothing per run until used.
        self._listeners: tuple[Listener, ...] = ()
        self._done_callbacks: tuple[Callable[[RunT], None], ...] = ()
        self._state_lock = lock or threading.Lock()
        self._finished = False
        self._done = False
        # One parked lock per blocked ``wait_done`` caller, released when done: a
        # ``threading.Event`` per waited run cost more than the rest of its delivery
        # (its Condition probes a plain lock for three methods it lacks, by exception).
        self._done_waiters: list[threading.Lock] | None = None

    def add_listener(self, listener: Listener) -> None:
        with self._state_lock:
            self._listeners = (*self._listeners, listener)

    def add_done_callback(self, callback: Callable[[RunT], None]) -> None:
        with self._state_lock:
            if not self._finished:
                self._done_callbacks = (*self._done_callbacks, callback)
                return
        self._call_done(callback)

    def put(self, record: Transition, snapshot: TaskSnapshot) -> None:
        """Queue one record; call under the run's lock, in transition order."""
        self._queue.append((record, snapshot))

    def after_delivery(self, action: Callable[[], None]) -> None:
        """Run ``action`` once every record queued so far has reached the listeners.

        At once if nothing is queued or being delivered; otherwise the delivering
        thread runs it right after those records. This is how a run launches its body
        only after its ``-> starting`` was delivered, and so stored by the
        controller's write-through, even when the start happens inside a delivery of
        the same run (a listener that starts it) or while another thread delivers.
        Call without the run's lock.
        """
        if not self._queue and not self._deliver_lock.locked():
            action()
            return
        self._queue.append((None, action))
        self.deliver()

    def flush(self) -> None:
        """Deliver, and return only once every record queued so far reached the listeners.

        Called by a listener of this run (the delivering thread itself), it returns at
        once: its records are handed out right after the current one. Call without
        the run's lock.
        """
        self.deliver()
        if self._deliverer == threading.get_ident():
            return
        if not self._queue and not self._deliver_lock.locked():
            return
        delivered = threading.Event()
        self.after_delivery(delivered.set)
        delivered.wait()

    def deliver(self) -> None:
        """Hand queued records to the listeners; call after releasing the run's lock."""
        while self._queue:
            if not self._deliver_lock.acquire(blocking=False):
                return  # the holder re-checks the queue after it lets go
            self._deliverer = threading.get_ident()
            try:
                while True:
                    try:
                        record, item = self._queue.pop(0)
                    except IndexError:
                        break
                    if record is None:
                        self._run_action(item)
                    else:
                        self._deliver_one(record, item)
            finally:
                self._deliverer = None
                self._deliver_lock.release()

    @staticmethod
    def _run_action(action: Callable[[], None]) -> None:
        try:
            action()
        except Exception:
            log.exception("post-delivery action %r failed; the run goes on", action)

    def _deliver_one(self, record: Transition, snapshot: TaskSnapshot) -> None:
        for listener in self._listeners:
            try:
                listener(record, snapshot)
            except Exception:
                log.exception(
                    "listener %r failed on %s %s -> %s; the run goes on",
                    listener,
                    record.task_id,
                    record.from_status,
                    record.to_status,
                )
        if record.to_status.is_terminal:
            with self._state_lock:
                self._finished = True
                callbacks, self._done_callbacks = self._done_callbacks, ()
            for callback in callbacks:
                self._call_done(callback)
            with self._state_lock:
                self._done = True
                waiters, self._done_waiters = self._done_waiters, None
            for waiter in waiters or ():
                waiter.release()

    @property
    def done(self) -> bool:
        """Whether the terminal transition reached every listener and done callback."""
        return self._done

    def wait_done(self, timeout: float | None) -> bool:
        """Block until :attr:`done` (at most ``timeout`` seconds); returns :attr:`done`."""
        if self.done:  # finished: no lock to make
            return True
        waiter = threading.Lock()
        waiter.acquire()
        with self._state_lock:
            if self._done:
                return True
            if self._done_waiters is None:
                self._done_waiters = []
            self._done_waiters.append(waiter)
        if waiter.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            return True
        with self._state_lock:
            if self._done_waiters is not None and waiter in self._done_waiters:
                self._done_waiters.remove(waiter)
                return False
        return True  # released between the timeout and the lock: done after all

    def _call_done(self, callback: Callable[[RunT], None]) -> None:
        try:
            callback(self._run)
        except Exception:
            log.exception("done callback %r failed; the run goes on", callback)
