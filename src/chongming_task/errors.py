"""Every exception this library raises on purpose, in one tree (the guide's ten, extended).

::

    TaskError                   root of everything raised on purpose
    ├─ InvalidTransition        an illegal state transition (including failed guards)
    ├─ DependencyFailed         an upstream node did not succeed
    ├─ CircularDependency       the dependency graph has a cycle
    ├─ TaskTimeout              a timeout scope expired
    ├─ TaskExecutionError       wraps an exception raised by user code (keeps __cause__)
    │  └─ ChildError            ... one that could not be pickled back from a child process
    ├─ CarrierCrashed           the process carrying an attempt died without a result
    ├─ AttemptsExhausted        the retry budget is used up
    ├─ HandoffError             a bucket handoff did not complete (``stage``, ``command_id``)
    │  ├─ HandoffRefused        ... a node refused it; nothing changed (also a ConfigurationError)
    │  └─ HandoffTimeout        ... not confirmed in time; it goes on (also a TimeoutError)
    ├─ ConcurrencyConflict      an optimistic-concurrency write lost the race
    │  ├─ ClaimLost             a command claim is no longer ours
    │  └─ ScheduleConflict      a schedule's revision moved on (compare-and-set lost)
    │     └─ StaleScheduleEdit  an operator's edit was based on an old definition revision
    ├─ StoreError               the persistence layer failed
    │  ├─ SchemaMissing         no chongming-task tables (or another version) where read
    │  ├─ CorruptRows           stored rows that cannot be decoded, by task id
    │  └─ TaskNotFound          ``save`` of a task the store does not hold (also KeyError)
    └─ ConfigurationError       invalid configuration or arguments (also a ValueError)
       ├─ DuplicateTaskId       the task id is taken; nothing was submitted
       ├─ UnknownTask           no task with this id (also a LookupError)
       ├─ UnknownTaskName       the name is not registered (also a LookupError)
       ├─ ArtifactDirUnavailable  ``ctx.artifact_dir`` without ``artifact_dir=``
       └─ InvalidState          not possible in the object's current state
          └─ ControllerClosed   the controller or scheduler was closed

    TaskCancelled               separate: a BaseException, never a TaskError
    TaskSkipped                 separate: raised by a body to end as ``skipped``

The specific classes subclass ``ConfigurationError`` so ``except ConfigurationError``
written against the guide keeps catching them; catch the specific class to tell the
cases apart. Messages are built from attributes, so callers read ``exc.task_id`` or
``exc.allowed`` instead of parsing strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chongming_task._model import TaskSnapshot
    from chongming_task.states import TaskStatus

__all__ = [
    "ArtifactDirUnavailable",
    "AttemptsExhausted",
    "CarrierCrashed",
    "ChildError",
    "CircularDependency",
    "ClaimLost",
    "ConcurrencyConflict",
    "ConfigurationError",
    "ControllerClosed",
    "CorruptRows",
    "DependencyFailed",
    "DuplicateTaskId",
    "HandoffError",
    "HandoffRefused",
    "HandoffTimeout",
    "InvalidState",
    "InvalidTransition",
    "ScheduleConflict",
    "SchemaMissing",
    "StaleScheduleEdit",
    "StoreError",
    "TaskCancelled",
    "TaskError",
    "TaskExecutionError",
    "TaskNotFound",
    "TaskSkipped",
    "TaskTimeout",
    "UnknownTask",
    "UnknownTaskName",
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


class DuplicateTaskId(ConfigurationError):
    """A task id that is already taken (in this controller or in the store).

    Nothing was submitted or enqueued: choose another id, or omit it to have one
    generated.
    """

    def __init__(self, task_id: str, message: str | None = None) -> None:
        self.task_id = task_id
        super().__init__(message or f"task id {task_id!r} already exists; submit under a new id")


class UnknownTask(ConfigurationError, LookupError):
    """No task with this id, here or in the store."""

    def __init__(self, task_id: str, message: str | None = None) -> None:
        self.task_id = task_id
        super().__init__(message or f"no task {task_id!r} here or in the store")


class UnknownTaskName(ConfigurationError, LookupError):
    """A task name that is not registered: only registered names can run."""

    def __init__(self, name: str, registered: Iterable[str]) -> None:
        self.name = name
        self.registered = tuple(sorted(registered))
        known = ", ".join(self.registered) or "none"
        super().__init__(
            f"task {name!r} is not registered; registered tasks: {known}. Only registered "
            "names can be submitted (a name, never code)"
        )


class InvalidState(ConfigurationError):
    """The object cannot do this in its current state (a run that already ran, a task
    this controller does not hold). Not a transition-table refusal: that is
    :class:`InvalidTransition`."""


class ControllerClosed(InvalidState):
    """The controller (or scheduler) was closed; create a new one."""


class ArtifactDirUnavailable(ConfigurationError, AttributeError):
    """``ctx.artifact_dir`` of a run created without ``artifact_dir=`` .

    A ``ConfigurationError`` (what is wrong and how to enable it) that is also an
    ``AttributeError``: the context has no such directory, so ``hasattr(ctx,
    "artifact_dir")`` and ``getattr(ctx, "artifact_dir", None)`` answer instead of
    raising, as for any attribute that is not there.
    """


class CorruptRows(StoreError):
    """Stored task rows that cannot be decoded, named by their ``task_id``.

    ``corrupt`` maps each such task id to what is wrong with its row; ``snapshots``
    holds the rows of the same read that decode fine (in the read's order), so a
    listing can skip the broken rows with a warning instead of failing as a whole.
    """

    def __init__(self, corrupt: Mapping[str, str], snapshots: Sequence[TaskSnapshot] = ()) -> None:
        self.corrupt = dict(corrupt)
        self.snapshots = list(snapshots)
        ids = list(self.corrupt)
        first = ids[0] if ids else "?"
        more = f" (and {len(ids) - 1} more corrupt row(s): {ids[1:6]})" if len(ids) > 1 else ""
        super().__init__(f"corrupt task row {first!r}: {self.corrupt.get(first, '?')}{more}")


class TaskNotFound(StoreError, KeyError):
    """``save`` named a task the store does not hold (create it first)."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"task {task_id!r} does not exist in the store; create() it first")

    def __str__(self) -> str:
        # KeyError would quote the message; this is a sentence, not a key.
        return str(self.args[0])


class ClaimLost(ConcurrencyConflict):
    """A command claim is no longer ours: its token is stale or the command moved on.

    Raised by ``complete_command``/``release_command``/``extend_command`` when the
    token does not match the current claim, typically because our lease expired and
    another owner re-claimed the command. The caller must not act on the command.
    """

    def __init__(self, command_id: str, claim_token: str, detail: str) -> None:
        # Deliberately not ConcurrencyConflict.__init__: that message is about tasks.
        Exception.__init__(
            self, f"claim on command {command_id!r} lost (token {claim_token!r}): {detail}"
        )
        self.task_id = command_id
        self.command_id = command_id
        self.claim_token = claim_token
        self.detail = detail
        self.expected = None
        self.actual = None


class ScheduleConflict(ConcurrencyConflict):
    """``put_schedule`` lost a compare-and-set: the stored revision is not the expected one.

    ``expected`` is ``None`` for an insert that found the schedule already there;
    ``actual`` is ``None`` when the schedule does not exist.
    """

    def __init__(self, name: str, expected: int | None, actual: int | None) -> None:
        if expected is None:
            message = f"schedule {name!r} already exists (revision {actual}); pass expect_revision"
        elif actual is None:
            message = f"schedule {name!r} does not exist (expected revision {expected})"
        else:
            message = f"schedule {name!r} is at revision {actual}, expected {expected}"
        Exception.__init__(self, message)
        self.task_id = name
        self.schedule = name
        self.expected = expected
        self.actual = actual


class StaleScheduleEdit(ScheduleConflict):
    """An operator's edit was based on a ``definition_revision`` that is no longer current.

    Someone changed the schedule's definition or operator state since the edit was
    prepared; nothing was written. ``expected`` is the revision the edit was based on,
    ``actual`` the current one, ``updated_by``/``updated_at`` who changed it and when.
    """

    def __init__(
        self,
        name: str,
        expected: int,
        actual: int,
        *,
        updated_by: str | None,
        updated_at: datetime,
    ) -> None:
        super().__init__(name, expected, actual)
        who = updated_by or "someone"
        Exception.__init__(
            self,
            f"schedule {name!r} was changed by {who} at "
            f"{updated_at.isoformat(timespec='seconds')} (definition revision "
            f"{actual}; this edit was based on revision {expected}); "
            "nothing was changed: reload it and edit again",
        )
        self.updated_by = updated_by
        self.updated_at = updated_at


class CarrierCrashed(TaskError):
    """The process carrying an attempt died without a result (a native crash, ``os._exit``).

    It is what the retry policy sees for such an attempt, so ``retry_on=(Exception,)``
    retries crashes and ``give_up_on=(CarrierCrashed,)`` does not.
    """


class ChildError(TaskExecutionError):
    """Stands in for an exception that could not be pickled back to the parent."""

    def __init__(self, message: str, exception_type: str | None = None) -> None:
        self.exception_type = exception_type
        super().__init__(message)

    def __reduce__(self) -> tuple[type[ChildError], tuple[str, str | None]]:
        return (type(self), (str(self), self.exception_type))


class HandoffError(TaskError):
    """A bucket handoff (``chongming_task.buckets._handoff``) that did not complete.

    ``stage`` is the step it stopped at (``"release"`` by the old owner or ``"adopt"``
    by the new one) and ``command_id`` the command of that step, in the store.
    """

    def __init__(self, message: str, *, stage: str, command_id: str | None) -> None:
        super().__init__(message)
        self.stage = stage
        self.command_id = command_id

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_handoff, (type(self), str(self), self.stage, self.command_id))


class HandoffRefused(HandoffError, ConfigurationError):
    """A node refused the handoff (it does not own the buckets...); nothing changed."""


class HandoffTimeout(HandoffError, TimeoutError):
    """The wait ended first; the nodes finish the handoff in the store (see ``stage``)."""


def _rebuild_handoff(
    cls: type[HandoffError], message: str, stage: str, command_id: str | None
) -> HandoffError:
    return cls(message, stage=stage, command_id=command_id)


class TaskSkipped(Exception):
    """Raised by a body to end its run as ``skipped`` ("nothing to do"), not as an error.

    The run goes ``running -> skipped`` with a ``condition_false`` failure carrying
    ``reason``; it is never retried.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)

    def __reduce__(self) -> tuple[type[TaskSkipped], tuple[str]]:
        return (type(self), (self.reason,))


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
