"""What a worker's shutdown did: each held task, where it was and where it ended."""

from __future__ import annotations

from dataclasses import dataclass

from chongming_task.states import TaskStatus

__all__ = ["ShutdownReport", "StoppedTask"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoppedTask:
    """One task the worker held at shutdown."""

    task_id: str
    name: str
    before: str
    """Its status when the shutdown began."""
    after: str
    """Its status when the shutdown ended (terminal unless it missed the deadline)."""

    @property
    def finished(self) -> bool:
        """Whether it reached a terminal state within the deadline."""
        return self.after in {status.value for status in TaskStatus if status.is_terminal}


@dataclass(frozen=True, slots=True, kw_only=True)
class ShutdownReport:
    """The outcome of ``Worker.shutdown``, task by task."""

    reason: str
    tasks: tuple[StoppedTask, ...] = ()

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
