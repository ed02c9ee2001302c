"""What a worker's shutdown did: each held task, where it was and where it ended."""

from __future__ import annotations

from dataclasses import dataclass

from chongming_task.states import TaskStatus

__all__ = ["ShutdownReport", "StoppedTask"]

_TERMINAL = frozenset(status.value for status in TaskStatus if status.is_terminal)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoppedTask:
    """One task the worker held at shutdown."""

    task_id: str
    name: str
    before: str
    """Its status when the shutdown began."""
    after: str
    """Its status when the shutdown ended: terminal, or ``queued``/``paused`` when it
    was handed back, else it missed the deadline."""
    handed_back: bool = False
    """Given back to the queue, unheld, for another worker (``queued``, or ``paused``
    when an operator had paused it)."""

    @property
    def finished(self) -> bool:
        """Whether it reached a terminal state or was handed back within the deadline."""
        return self.handed_back or self.after in _TERMINAL


@dataclass(frozen=True, slots=True, kw_only=True)
class ShutdownReport:
    """The outcome of ``Worker.shutdown``, task by task."""

    reason: str
    tasks: tuple[StoppedTask, ...] = ()

    @property
    def handed_back(self) -> tuple[StoppedTask, ...]:
        """Tasks given back to the queue for another worker (idempotent ones, or every
        queue task under ``requeue_on_shutdown``)."""
        return tuple(task for task in self.tasks if task.handed_back)

    @property
    def stopped(self) -> tuple[StoppedTask, ...]:
        """Tasks the shutdown ended ``stopped``: not handed back (not idempotent, or not
        enqueued through the queue), so nothing runs them again by itself."""
        return tuple(task for task in self.tasks if task.after == TaskStatus.STOPPED.value)

    @property
    def lost(self) -> tuple[StoppedTask, ...]:
        """Tasks abandoned at the deadline and marked ``lost`` by the shutdown."""
        return tuple(task for task in self.tasks if task.after == TaskStatus.LOST.value)

    @property
    def unfinished(self) -> tuple[StoppedTask, ...]:
        """Tasks that did not end by themselves in time: the ``lost`` ones, and any the
        store refused to mark (their lease expires and the next ``reconcile()`` marks
        them ``lost``)."""
        return tuple(task for task in self.tasks if not task.finished or task in self.lost)

    @property
    def clean(self) -> bool:
        """True when every held task reached a terminal state in time (none lost)."""
        return not self.unfinished
