"""Waiting for runs to settle: many local runs under one deadline, or a task in the store.

Like ``TaskRun.wait``, a wait that times out raises ``TimeoutError`` and changes
nothing: waiting is never a way to stop a task.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from chongming_task._model import TaskSnapshot
from chongming_task._validation import check_lookup, check_timeout
from chongming_task.errors import UnknownTask
from chongming_task.run import TaskOutcome, TaskRun
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore

__all__ = ["outcome_of", "wait_for_runs", "wait_in_store"]


def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    return max(0.0, deadline - time.monotonic())


def wait_for_runs(runs: Sequence[TaskRun], timeout: float | None) -> list[TaskOutcome]:
    """Outcomes of every run, in order, all within one ``timeout``.

    Raises:
        TimeoutError: Naming how many runs (and which, up to five) are unfinished.
        ConfigurationError: ``timeout`` is not ``None`` or seconds >= 0.
    """
    check_timeout(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    outcomes: list[TaskOutcome] = []
    for index, run in enumerate(runs):
        try:
            outcomes.append(run.wait(_remaining(deadline)))
        except TimeoutError:
            pending = [other.task_id for other in runs[index:] if not other.done]
            shown = ", ".join(pending[:5]) + (", ..." if len(pending) > 5 else "")
            raise TimeoutError(
                f"{len(pending)} task(s) still unfinished after {timeout}s: {shown} "
                "(waiting does not stop them; use stop_all() to)"
            ) from None
    return outcomes


def wait_in_store(
    store: TaskStore, task_id: str, *, timeout: float | None, interval: float
) -> TaskSnapshot:
    """Poll the store until ``task_id`` is terminal (a task held by another process).

    Raises:
        UnknownTask: The store has no such task (a ``ConfigurationError``).
        TimeoutError: It was still unfinished when ``timeout`` passed.
        ConfigurationError: ``task_id`` is no string, or ``timeout`` no seconds >= 0.
    """
    check_lookup(task_id)
    check_timeout(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = threading.Event()
    while True:
        snapshot = store.get(task_id)
        if snapshot is None:
            raise UnknownTask(task_id)
        if snapshot.is_terminal:
            return snapshot
        remaining = _remaining(deadline)
        if remaining is not None and remaining <= 0:
            raise TimeoutError(
                f"task {task_id!r} is still {snapshot.status.value} after {timeout}s "
                "(waiting does not stop it)"
            )
        pause.wait(interval if remaining is None else min(interval, remaining))


def outcome_of(snapshot: TaskSnapshot) -> TaskOutcome:
    """The outcome of a terminal snapshot read from the store."""
    return TaskOutcome(
        ok=snapshot.status is TaskStatus.SUCCEEDED,
        status=snapshot.status,
        value=snapshot.outcome if snapshot.status is TaskStatus.SUCCEEDED else None,
        failure=snapshot.failure,
        snapshot=snapshot,
    )
