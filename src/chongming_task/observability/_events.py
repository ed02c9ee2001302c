"""``TransitionObserver``: a subscriber base class with one no-op hook per kind of event.

The controller publishes one thing, "an accepted transition and the snapshot after
it" (``Controller.subscribe``). Metrics, tracing and logging each want coarser events
instead: a run was created, an attempt started or ended, a retry was scheduled, a
timeout fired, the run finished. This base derives those from the transitions, once,
so each exporter overrides only the hooks it needs::

    class SlowRuns(TransitionObserver):
        def on_run_finished(self, transition, snapshot):
            if (snapshot.elapsed or 0) > 60:
                print("slow:", snapshot.task_id)

    unsubscribe = SlowRuns().attach(controller)

Delivery guarantees (they are the controller's; this class adds none and removes none):

- **In order per task.** A run hands its transitions to the controller one at a time
  (in version order) and one dispatcher thread per controller feeds every queued
  subscriber, so an observer sees each task's transitions in the order they happened.
  Different tasks interleave.
- **A slow observer cannot block a task.** Queued observers (the default) run on the
  controller's event thread, never in a run's thread; a slow one only delays the other
  queued subscribers of the same controller. ``attach(..., inline=True)`` runs the
  observer in the transitioning thread: only for quick work that must happen before
  the run moves on.
- **A failing observer cannot fail a task.** An exception is caught by the
  controller, counted in ``controller.subscriber_errors`` and logged on the
  ``chongming_task.controller`` logger; the run never sees it. Within one observer the
  remaining hooks of the same transition still run (the first error is re-raised after
  them, so it is counted once).
- **After the write-through.** By the time an observer hears a transition the
  controller has tried to store it, so a scrape of the store agrees with what the
  observer saw unless the store failed (``controller.persist_failures``).

An observer is also a plain listener: ``run.add_listener(observer)`` works on a
``TaskRun`` created without a controller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from chongming_task._model import TaskSnapshot, Transition
from chongming_task._public import public
from chongming_task.states import TaskStatus

if TYPE_CHECKING:
    from chongming_task.controller import Controller

__all__ = ["TIMEOUT_TRIGGER_PREFIX", "TransitionObserver", "timeout_scope"]

#: Triggers of the transitions a timeout causes are ``supervisor:timeout_<scope>``.
TIMEOUT_TRIGGER_PREFIX: Final = "supervisor:timeout_"

#: States with no current attempt; entering one ends the attempt that was running.
_NO_ATTEMPT: Final = frozenset(
    {TaskStatus.PENDING, TaskStatus.BLOCKED, TaskStatus.QUEUED, TaskStatus.RETRY_WAIT}
)


def timeout_scope(transition: Transition) -> str | None:
    """``start``/``attempt``/``idle``/``total`` if ``transition`` was caused by a timeout."""
    if transition.trigger.startswith(TIMEOUT_TRIGGER_PREFIX):
        return transition.trigger[len(TIMEOUT_TRIGGER_PREFIX) :] or None
    return None


@public
class TransitionObserver:
    """Turns the controller's transitions into ``on_*`` hooks; every hook is a no-op.

    Hooks are called in this order for one transition: ``on_transition``, then
    ``on_task_created``, ``on_attempt_finished`` (the previous attempt ended),
    ``on_attempt_started``, ``on_retry_scheduled``, ``on_timeout``, ``on_run_finished``
    -- each only when it applies. Override the ones you need.
    """

    def __init__(self) -> None:
        self._attempt_lock = threading.Lock()
        self._open_attempts: set[str] = set()
        self._detach: Callable[[], None] | None = None

    # ------------------------------------------------------------ hooks

    def on_transition(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """Every accepted transition, with the snapshot after it."""

    def on_task_created(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """The creation record (``-> pending``) of a submitted task."""

    def on_attempt_started(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """A new attempt began (``-> starting``); ``snapshot.attempt`` is its number."""

    def on_attempt_finished(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """The current attempt ended: retry wait, back to the queue, or the run ended.

        ``transition.attempt`` is the number of the attempt that ended.
        """

    def on_retry_scheduled(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """An attempt failed and another one is due after a backoff (``-> retry_wait``)."""

    def on_timeout(self, transition: Transition, snapshot: TaskSnapshot, scope: str) -> None:
        """A timeout of ``scope`` (start, attempt, idle, total) ended an attempt or the run."""

    def on_run_finished(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """The task reached a terminal status (``snapshot.status``)."""

    # ------------------------------------------------------------ wiring

    def attach(self, controller: Controller, *, inline: bool = False) -> Callable[[], None]:
        """Subscribe to ``controller``; returns (and remembers) the unsubscribe callable."""
        self._detach = controller.subscribe(self, inline=inline)
        return self._detach

    def detach(self) -> None:
        """Unsubscribe from the controller given to :meth:`attach` (idempotent)."""
        detach, self._detach = self._detach, None
        if detach is not None:
            detach()

    def __call__(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """Dispatch one transition to the hooks (the subscriber/listener signature)."""
        first_error: Exception | None = None
        for hook in self._hooks(transition, snapshot):
            try:
                hook()
            except Exception as exc:
                if first_error is None:
                    first_error = exc
        if first_error is not None:
            raise first_error

    # ------------------------------------------------------------ internals

    def _hooks(self, transition: Transition, snapshot: TaskSnapshot) -> list[Callable[[], None]]:
        t, s = transition, snapshot
        hooks: list[Callable[[], None]] = [lambda: self.on_transition(t, s)]
        status = t.to_status
        if t.from_status is None:
            hooks.append(lambda: self.on_task_created(t, s))
        starts = status is TaskStatus.STARTING
        ends = status.is_terminal or status in _NO_ATTEMPT or snapshot.started_at is None
        with self._attempt_lock:
            was_open = t.task_id in self._open_attempts
            if was_open and (starts or ends):
                self._open_attempts.discard(t.task_id)
            if starts and not status.is_terminal:
                self._open_attempts.add(t.task_id)
        if was_open and (starts or ends):
            hooks.append(lambda: self.on_attempt_finished(t, s))
        if starts:
            hooks.append(lambda: self.on_attempt_started(t, s))
        if status is TaskStatus.RETRY_WAIT:
            hooks.append(lambda: self.on_retry_scheduled(t, s))
        scope = timeout_scope(t)
        if scope is not None:
            hooks.append(lambda: self.on_timeout(t, s, scope))
        if status.is_terminal:
            hooks.append(lambda: self.on_run_finished(t, s))
        return hooks
