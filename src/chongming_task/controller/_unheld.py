"""Control of a queued task nobody holds yet: immediate, from any process (§9.2).

A task enqueued through the work queue and not claimed by a worker holds no resources,
so ``stop`` ends it at once (``queued -> stopped``) and ``pause``/``resume`` move it
``queued -> paused -> queued``, written by a ``StateMachine`` rehydrated from the
stored snapshot with :meth:`TaskStore.save_unheld`: that write races a worker's claim
and exactly one wins. When a worker holds the task (it claimed it first) the action
becomes an ordinary command for its holder, which applies it to its run.
"""

from __future__ import annotations

import logging
from typing import Final

from chongming_task._validation import check_lookup_id
from chongming_task.controller._commands import control_remote
from chongming_task.core._clock import Clock
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConcurrencyConflict, ConfigurationError, InvalidTransition
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskNotFound, TaskStore
from chongming_task.stores._capabilities import save_unheld, wake_workers
from chongming_task.stores._queue_records import recipe_of

__all__ = ["control_task", "control_unheld"]

log = logging.getLogger("chongming_task.queue")

_UNHELD: Final = frozenset({TaskStatus.QUEUED, TaskStatus.PAUSED})
#: Re-reads after a lost race before handing the action to the holder.
_ATTEMPTS: Final = 5


def control_unheld(  # noqa: C901 (one branch per action and per race outcome, each documented)
    store: TaskStore,
    task_id: str,
    action: str,
    *,
    actor: str,
    clock: Clock,
    reason: str | None = None,
) -> bool | None:
    """Apply ``action`` to a queued task nobody holds; ``None`` when it is held (or unknown).

    Returns ``True`` once the transition is stored, ``False`` when the action does not
    apply (already paused, not paused...).
    """
    check_lookup_id(task_id)
    for _ in range(_ATTEMPTS):
        snapshot = store.get(task_id)
        if snapshot is None or snapshot.owner is not None:
            return None
        if snapshot.status not in _UNHELD or recipe_of(snapshot) is None:
            return None
        machine = StateMachine(snapshot, clock=clock)
        try:
            if action == "stop":
                machine.request_stop(actor=actor, reason=reason)
            elif action == "pause":
                if snapshot.status is not TaskStatus.QUEUED:
                    return False
                machine.request_pause(actor=actor, reason=reason)
            elif action == "resume":
                if snapshot.status is not TaskStatus.PAUSED:
                    return False
                machine.resume(actor=actor, reason=reason)
            else:
                raise ConfigurationError(f"unknown action {action!r}; use stop, pause or resume")
        except InvalidTransition:
            return False
        try:
            save_unheld(
                store,
                machine.snapshot,
                expect_version=snapshot.status_version,
                transitions=machine.transitions,
            )
        except TaskNotFound:
            return None
        except ConcurrencyConflict:
            continue  # claimed or changed meanwhile: look again
        if action == "resume":
            wake_workers(store)
        return True
    return None


def control_task(
    store: TaskStore,
    task_id: str,
    action: str,
    *,
    actor: str,
    clock: Clock,
    reason: str | None = None,
) -> bool:
    """Control any task from any process: immediate when unheld, else a command.

    Returns ``False`` for an unknown task, like ``Controller.stop``.
    """
    done = control_unheld(store, task_id, action, actor=actor, clock=clock, reason=reason)
    if done is not None:
        return done
    return control_remote(store, task_id, action, issued_by=actor, clock=clock, reason=reason)
