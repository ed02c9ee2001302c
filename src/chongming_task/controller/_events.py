"""Transition fan-out to subscribers: metrics, tracing, pipelines, schedule statistics.

Every accepted transition is delivered, after its write-through, in order per task,
together with the snapshot after it. A subscriber can never fail or block a task:

- *Queued* subscribers (the default) are called by one dispatcher thread per
  controller, so a slow exporter delays only other subscribers, never a run.
- *Inline* subscribers are called in the thread that made the transition, before the
  run moves on; they are for orchestration that must react before anyone observes the
  next state (pipelines releasing downstream nodes). They must be quick.

Either way an exception is caught, counted in ``errors`` and logged, never raised
into the run.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from chongming_task._model import TaskSnapshot, Transition
from chongming_task._service import FINISHED, BackgroundService, StepResult
from chongming_task.core import SystemClock

__all__ = ["EventBus", "Subscriber"]

log = logging.getLogger("chongming_task.controller")

Subscriber = Callable[[Transition, TaskSnapshot], None]


@dataclass(frozen=True, slots=True, eq=False)
class _Subscription:
    fn: Subscriber
    inline: bool


class EventBus:
    """Subscribers of one controller and the thread that feeds the queued ones."""

    def __init__(self, *, name: str = "chongming-events") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._subscriptions: tuple[_Subscription, ...] = ()
        self._has_inline = False
        self._queue: deque[tuple[Transition, TaskSnapshot]] = deque()
        # The clock is never waited on: the dispatcher blocks on its condition.
        self._service = BackgroundService(name, self._dispatch_one, clock=SystemClock())
        self._closed = False
        self._busy = False
        self._error_lock = threading.Lock()
        self.errors = 0
        """Exceptions raised by subscribers so far (each is also logged)."""

    def subscribe(self, fn: Subscriber, *, inline: bool = False) -> Callable[[], None]:
        """Add ``fn``; the returned callable removes it again (idempotent)."""
        if not callable(fn):
            raise TypeError(f"a subscriber must be callable, got {fn!r}")
        subscription = _Subscription(fn, inline)
        with self._lock:
            self._set_subscriptions((*self._subscriptions, subscription))

        def unsubscribe() -> None:
            with self._lock:
                self._set_subscriptions(
                    tuple(s for s in self._subscriptions if s is not subscription)
                )

        return unsubscribe

    def _set_subscriptions(self, subscriptions: tuple[_Subscription, ...]) -> None:
        """Replace the subscriptions (hold the lock); :attr:`has_inline` is kept with them,
        since the controller asks it at every run's end."""
        self._subscriptions = subscriptions
        self._has_inline = any(subscription.inline for subscription in subscriptions)

    @property
    def has_subscribers(self) -> bool:
        return bool(self._subscriptions)

    @property
    def has_inline(self) -> bool:
        """Whether some subscriber runs in the transition's thread (it must come first)."""
        return self._has_inline

    def publish(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """Deliver one transition: inline subscribers now, queued ones on the dispatcher."""
        subscriptions = self._subscriptions
        if not subscriptions:
            return
        queued = False
        for subscription in subscriptions:
            if subscription.inline:
                self._call(subscription.fn, transition, snapshot)
            else:
                queued = True
        if queued:
            with self._lock:
                if self._closed:
                    return
                self._queue.append((transition, snapshot))
                if not self._service.started:  # it ends only once closed: never again
                    self._service.ensure_started()
                self._wake.notify()

    def flush(self, timeout: float | None = None) -> bool:
        """Block until every queued event has been delivered; ``False`` on timeout."""
        with self._lock:
            return self._wake.wait_for(lambda: not self._queue and not self._busy, timeout)

    def close(self, timeout: float | None = 5.0) -> None:
        """Deliver what is queued (within ``timeout``), then stop the dispatcher."""
        self.flush(timeout)
        with self._lock:
            self._closed = True
            self._wake.notify_all()
        # Joined, not stopped: what flush() left (a subscriber slower than ``timeout``)
        # is still delivered; the dispatcher ends once the queue is empty.
        self._service.join(timeout)

    # ------------------------------------------------------------ internals

    def _dispatch_one(self) -> StepResult:
        """Deliver the next queued event (waiting for one); finished once closed and
        drained."""
        with self._lock:
            self._busy = False
            self._wake.notify_all()
            while not self._queue and not self._closed:
                self._wake.wait()
            if not self._queue:
                return FINISHED
            transition, snapshot = self._queue.popleft()
            self._busy = True
            subscriptions = self._subscriptions
        for subscription in subscriptions:
            if not subscription.inline:
                self._call(subscription.fn, transition, snapshot)
        return 0.0

    def _call(self, fn: Subscriber, transition: Transition, snapshot: TaskSnapshot) -> None:
        try:
            fn(transition, snapshot)
        except Exception:
            with self._error_lock:
                self.errors += 1
            log.exception(
                "transition subscriber %r failed on %s %s -> %s (the task is not affected)",
                fn,
                transition.task_id,
                transition.from_status,
                transition.to_status,
                extra={"task_id": transition.task_id},
            )
