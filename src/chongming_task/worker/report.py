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
    def unfinished(self) -> tuple[StoppedTask, ...]:
        """Tasks still not terminal at the deadline: their lease will expire and the
        next ``reconcile()`` anywhere marks them ``lost`` (the body may still run)."""
        return tuple(task for task in self.tasks if not task.finished)

    @property
    def clean(self) -> bool:
        """True when every held task reached a terminal state in time."""
        return not self.unfinished
