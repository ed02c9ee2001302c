"""The exception hierarchy of guide §10.

::

    TaskError
    ├─ InvalidTransition      an illegal state transition (including failed guards)
    ├─ DependencyFailed       an upstream node did not succeed
    ├─ CircularDependency     the dependency graph has a cycle
    ├─ TaskTimeout            a timeout scope expired
    ├─ TaskExecutionError     wraps an exception raised by user code (keeps __cause__)
    ├─ AttemptsExhausted      the retry budget is used up
    ├─ ConcurrencyConflict    an optimistic-concurrency write lost the race
    ├─ StoreError             the persistence layer failed
    └─ ConfigurationError     invalid configuration or arguments (also a ValueError)

    TaskCancelled             separate: a BaseException, never a TaskError

Messages are built from attributes, so callers read ``exc.task_id`` or ``exc.allowed``
instead of parsing strings.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chongming_task.states import TaskStatus

__all__ = [
    "AttemptsExhausted",
    "CircularDependency",
    "ConcurrencyConflict",
    "ConfigurationError",
    "DependencyFailed",
    "InvalidTransition",
    "StoreError",
    "TaskCancelled",
    "TaskError",
    "TaskExecutionError",
    "TaskTimeout",
]


class TaskError(Exception):
    """Root of every error this library raises on purpose."""


class InvalidTransition(TaskError):
    """A transition that the table or a guard forbids.

    Raised instead of returning ``False``: a silently ignored "stop" is the kind of bug
    that takes days to find (guide §1.3).
    """

    def __init__(
        self,
        *,
        task_id: str,
        current: TaskStatus,
        target: TaskStatus | None,
        action: str,
        allowed: Iterable[TaskStatus],
        detail: str | None = None,
    ) -> None:
        self.task_id = task_id
        self.current = current
        self.target = target
        self.action = action
        self.allowed = tuple(sorted(allowed, key=lambda status: status.value))
        self.detail = detail
        allowed_text = (
            ", ".join(status.value for status in self.allowed)
            if self.allowed
            else "none (terminal)"
        )
        target_text = target.value if target is not None else "?"
        message = (
            f"illegal state transition: {current.value} -> {target_text}; "
            f"action {action!r}; allowed now: {allowed_text}"
        )
        if detail:
            message = f"{message} ({detail})"
        super().__init__(message)


class DependencyFailed(TaskError):
    """An upstream node did not succeed, so this node must not run."""


class CircularDependency(TaskError):
    """The pipeline's dependency graph has a cycle; ``cycle`` lists its node ids."""

    def __init__(self, cycle: Iterable[str]) -> None:
        self.cycle = tuple(cycle)
        super().__init__("circular dependency: " + " -> ".join(self.cycle))


class TaskTimeout(TaskError):
    """A timeout scope (``start``, ``attempt``, ``idle``, ``no_progress`` or ``total``) expired."""

    def __init__(self, scope: str, seconds: float) -> None:
        self.scope = scope
        self.seconds = seconds
        super().__init__(f"{scope} timeout of {seconds:g}s expired")


class TaskExecutionError(TaskError):
    """Wraps an exception raised by user code; the original is ``__cause__``."""


class AttemptsExhausted(TaskError):
    """``mark_starting`` would exceed ``max_attempts`` (a budget problem, not a table one)."""

    def __init__(self, task_id: str, attempt: int, max_attempts: int) -> None:
        self.task_id = task_id
        self.attempt = attempt
        self.max_attempts = max_attempts
        super().__init__(
            f"task {task_id!r} has used {attempt} of {max_attempts} attempts; "
            "no attempt is left (raise max_attempts or retry() from a terminal state)"
        )


class ConcurrencyConflict(TaskError):
    """An optimistic write found a different ``status_version`` than it expected."""

    def __init__(self, task_id: str, expected: int | None, actual: int | None) -> None:
        self.task_id = task_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"concurrent write to task {task_id!r}: expected status_version {expected}, "
            f"store has {actual}"
        )


class StoreError(TaskError):
    """The persistence layer failed; the cause is chained as ``__cause__``."""


class SchemaMissing(StoreError):
    """A store opened without creating its schema (``create_schema=False``, the CLI's
    read commands) found no chongming-task tables, or tables at another version."""


class ConfigurationError(TaskError, ValueError):
    """Invalid configuration or arguments. The message says what is allowed."""


class TaskCancelled(BaseException):
    """Raised inside a task at ``checkpoint()`` when a stop was requested.

    It derives from ``BaseException`` (like ``asyncio.CancelledError``) so that
    ``except Exception`` around a task's loop cannot swallow it (guide §10).
    """

    def __init__(self, reason: str | None = None, source: str = "stop") -> None:
        self.reason = reason
        self.source = source
        super().__init__(reason, source)

    def __str__(self) -> str:
        if self.reason:
            return f"task cancelled by {self.source}: {self.reason}"
        return f"task cancelled by {self.source}"

    def __reduce__(self) -> tuple[type[TaskCancelled], tuple[str | None, str]]:
        return (type(self), (self.reason, self.source))
