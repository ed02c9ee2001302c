"""The state machine: the only writer of a task's status (guide §1.3, §9).

Every change goes through one private ``_apply``: it checks the transition table
(``states.TRANSITIONS``) and the guards of §9.3, bumps ``status_version`` by exactly
one, replaces the frozen snapshot, and appends one :class:`Transition`. Illegal
moves raise :class:`InvalidTransition` naming the current state, the action and the
allowed targets; they are never silently ignored.

The machine is not thread-safe on its own: ``TaskRun`` and the controller serialise
calls under their lock, which is what keeps "single writer" true.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from chongming_task.core.clock import Clock, SystemClock
from chongming_task.errors import AttemptsExhausted, ConfigurationError, InvalidTransition
from chongming_task.model import Failure, FailureKind, JSONValue, TaskSnapshot, Transition
from chongming_task.states import TERMINAL, TRANSITIONS, TaskStatus

__all__ = ["StateMachine", "Triggers"]

S = TaskStatus


class Triggers:
    """The default ``trigger`` of each edge kind, as ``layer:event``."""

    CREATED = "machine:created"
    BLOCKED = "controller:blocked"
    QUEUED = "controller:queued"
    STARTING = "executor:starting"
    LAUNCHED = "executor:launched"
    PAUSE_REQUESTED = "control:pause_requested"
    PAUSED = "runtime:paused"
    PAUSE_ABORTED = "runtime:pause_aborted"
    RESUMED = "control:resumed"
    STOP_REQUESTED = "control:stop_requested"
    STOPPED = "runtime:stopped"
    SUCCEEDED = "runtime:returned"
    FAILED = "runtime:failed"
    RETRY_SCHEDULED = "runtime:retry_scheduled"
    CANCELLED = "orchestrator:cancelled"
    SKIPPED = "orchestrator:skipped"
    LOST = "runtime:lost"
    RETRY = "machine:retry"
    RESET = "machine:reset"
    FORCED = "machine:forced"


#: Sources from which a resurrecting ``retry()`` is allowed (guide §1.4).
RETRYABLE_TERMINALS = frozenset({S.FAILED, S.STOPPED, S.CANCELLED, S.LOST})

#: Where a stop request goes from each non-terminal state: occupying states need the
#: ``stopping`` buffer, the others stop at once (guide §9.2, closing rule).
_STOP_TARGET = {
    S.PENDING: S.STOPPED,
    S.BLOCKED: S.STOPPED,
    S.QUEUED: S.STOPPED,
    S.PAUSED: S.STOPPED,
    S.RETRY_WAIT: S.STOPPED,
    S.STARTING: S.STOPPING,
    S.RUNNING: S.STOPPING,
    S.PAUSING: S.STOPPING,
}

_PAUSE_TARGET = {
    S.QUEUED: S.PAUSED,
    S.RETRY_WAIT: S.PAUSED,
    S.STARTING: S.PAUSING,
    S.RUNNING: S.PAUSING,
}


class StateMachine:
    """Owns one task's snapshot and its transition history."""

    def __init__(
        self,
        snapshot: TaskSnapshot,
        transitions: Iterable[Transition] = (),
        *,
        clock: Clock | None = None,
    ) -> None:
        self._snapshot = snapshot
        self._transitions: list[Transition] = list(transitions)
        self._clock: Clock = clock or SystemClock()

    # ------------------------------------------------------------ construction

    @classmethod
    def create(
        cls,
        task_id: str,
        name: str,
        *,
        max_attempts: int = 1,
        label: str | None = None,
        tags: Iterable[str] = (),
        priority: int = 0,
        bucket: int | None = None,
        bucket_key: str | None = None,
        owner: str | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
        clock: Clock | None = None,
    ) -> StateMachine:
        """A new task in ``pending`` at version 0, with its creation record."""
        if not isinstance(task_id, str) or not task_id:
            raise ConfigurationError(f"task_id must be a non-empty string, got {task_id!r}")
        if "\x00" in task_id:
            raise ConfigurationError("task_id must not contain NUL characters")
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"task name must be a non-empty string, got {name!r}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigurationError(
                f"max_attempts must be an integer >= 1 (1 means no retry), got {max_attempts!r}"
            )
        tag_set = frozenset(tags)
        for tag in tag_set:
            if not isinstance(tag, str):
                raise ConfigurationError(f"tags must be strings, got {tag!r}")
        clock = clock or SystemClock()
        now = clock.now()
        snapshot = TaskSnapshot(
            task_id=task_id,
            name=name,
            label=label,
            status=S.PENDING,
            status_version=0,
            created_at=now,
            updated_at=now,
            max_attempts=max_attempts,
            tags=tag_set,
            priority=priority,
            bucket=bucket,
            bucket_key=bucket_key,
            owner=owner,
            metadata=dict(metadata or {}),
        )
        record = Transition(
            task_id=task_id,
            from_status=None,
            to_status=S.PENDING,
            trigger=Triggers.CREATED,
            version=0,
            at=now,
            actor=owner,
        )
        return cls(snapshot, [record], clock=clock)

    # ------------------------------------------------------------ reading

    @property
    def snapshot(self) -> TaskSnapshot:
        return self._snapshot

    @property
    def status(self) -> TaskStatus:
        return self._snapshot.status

    @property
    def transitions(self) -> tuple[Transition, ...]:
        return tuple(self._transitions)

    @property
    def task_id(self) -> str:
        return self._snapshot.task_id

    def can(self, target: TaskStatus) -> bool:
        """Whether the table allows ``status -> target`` right now (guards not included)."""
        return target in TRANSITIONS[self.status]

    def can_stop(self) -> bool:
        return self.status in _STOP_TARGET

    def can_pause(self) -> bool:
        return self.status in _PAUSE_TARGET

    def can_resume(self) -> bool:
        return self.status is S.PAUSED

    def can_retry(self) -> bool:
        return self.status in RETRYABLE_TERMINALS

    # ------------------------------------------------------------ edges

    def mark_blocked(self, *, reason: str | None = None, trigger: str = Triggers.BLOCKED) -> None:
        self._apply(S.BLOCKED, trigger, reason=reason)

    def mark_queued(
        self, *, actor: str | None = None, reason: str | None = None, trigger: str = Triggers.QUEUED
    ) -> None:
        """Accepted and waiting for a slot (from pending, blocked or retry_wait)."""
        self._apply(S.QUEUED, trigger, actor=actor, reason=reason, queued_at=self._clock.now())

    def mark_starting(
        self, *, executor: str | None = None, trigger: str = Triggers.STARTING
    ) -> None:
        """Begin a new attempt. Raises ``AttemptsExhausted`` past ``max_attempts``."""
        snap = self._snapshot
        self._check_edge(S.STARTING, trigger)
        if snap.attempt + 1 > snap.max_attempts:
            raise AttemptsExhausted(snap.task_id, snap.attempt, snap.max_attempts)
        now = self._clock.now()
        self._apply(
            S.STARTING,
            trigger,
            reason=f"executor={executor}" if executor else None,
            attempt=snap.attempt + 1,
            started_at=now,
            first_started_at=snap.first_started_at or now,
            failure=None,
        )

    def mark_running(self, *, trigger: str = Triggers.LAUNCHED) -> None:
        """The body is executing. Guard: the attempt must have started (``started_at``)."""
        self._check_edge(S.RUNNING, trigger)
        if self.status is not S.STARTING:
            # paused/pausing -> running are resume and abort; they have their own methods.
            raise self._invalid(S.RUNNING, trigger, "use resume() or abort_pause() for this edge")
        self._require_started(S.RUNNING, trigger)
        self._apply(S.RUNNING, trigger)

    def mark_pausing(
        self,
        *,
        actor: str | None = None,
        reason: str | None = None,
        trigger: str = Triggers.PAUSE_REQUESTED,
    ) -> None:
        self._apply(S.PAUSING, trigger, actor=actor, reason=reason)

    def mark_paused(
        self, *, actor: str | None = None, reason: str | None = None, trigger: str = Triggers.PAUSED
    ) -> None:
        """Confirmed in place (from pausing) or immediately (from queued/retry_wait)."""
        self._apply(S.PAUSED, trigger, actor=actor, reason=reason)

    def abort_pause(
        self, *, reason: str | None = None, trigger: str = Triggers.PAUSE_ABORTED
    ) -> None:
        """Roll an unconfirmed pause back to running. Guard: must be in ``pausing``."""
        if self.status is not S.PAUSING:
            raise self._invalid(S.RUNNING, trigger, "abort_pause() is only legal from pausing")
        self._apply(S.RUNNING, trigger, reason=reason)

    def resume(
        self,
        *,
        actor: str | None = None,
        reason: str | None = None,
        trigger: str = Triggers.RESUMED,
    ) -> TaskStatus:
        """Undo a pause: back to ``running`` if paused in place, else to ``queued`` (§4.3)."""
        if self.status is not S.PAUSED:
            raise self._invalid(S.RUNNING, trigger, "resume() is only legal from paused")
        target = S.RUNNING if self.paused_in_place else S.QUEUED
        extra: dict[str, Any] = {} if target is S.RUNNING else {"queued_at": self._clock.now()}
        self._apply(target, trigger, actor=actor, reason=reason, **extra)
        return target

    @property
    def paused_in_place(self) -> bool:
        """True when the current pause holds a started attempt (it came through pausing)."""
        return self.status is S.PAUSED and self._snapshot.started_at is not None

    def mark_stopping(
        self,
        *,
        actor: str | None = None,
        reason: str | None = None,
        trigger: str = Triggers.STOP_REQUESTED,
    ) -> None:
        self._apply(S.STOPPING, trigger, actor=actor, reason=reason)

    def mark_stopped(
        self,
        *,
        actor: str | None = None,
        reason: str | None = None,
        failure: Failure | None = None,
        trigger: str = Triggers.STOPPED,
    ) -> None:
        """A manual stop took effect. The failure kind is ``cancelled``, never retryable."""
        failure = failure or Failure(
            kind=FailureKind.CANCELLED, message=reason or "stopped", retryable=False
        )
        self._finish(S.STOPPED, trigger, actor=actor, reason=reason, failure=failure)

    def request_stop(self, *, actor: str | None = None, reason: str | None = None) -> TaskStatus:
        """Apply a stop request: ``stopping`` if the task occupies a slot, else ``stopped``."""
        target = _STOP_TARGET.get(self.status)
        if target is None:
            raise self._invalid(S.STOPPING, Triggers.STOP_REQUESTED, "the task cannot be stopped")
        if target is S.STOPPING:
            self.mark_stopping(actor=actor, reason=reason)
        else:
            self.mark_stopped(actor=actor, reason=reason, trigger=Triggers.STOP_REQUESTED)
        return target

    def request_pause(self, *, actor: str | None = None, reason: str | None = None) -> TaskStatus:
        """Apply a pause request: ``pausing`` if the task occupies a slot, else ``paused``."""
        target = _PAUSE_TARGET.get(self.status)
        if target is None:
            raise self._invalid(S.PAUSING, Triggers.PAUSE_REQUESTED, "the task cannot be paused")
        if target is S.PAUSING:
            self.mark_pausing(actor=actor, reason=reason)
        else:
            self._apply(S.PAUSED, Triggers.PAUSE_REQUESTED, actor=actor, reason=reason)
        return target

    def mark_succeeded(
        self,
        *,
        outcome: JSONValue = None,
        reason: str | None = None,
        trigger: str = Triggers.SUCCEEDED,
    ) -> None:
        self._finish(S.SUCCEEDED, trigger, reason=reason, outcome=outcome, failure=None)

    def mark_failed(self, failure: Failure, *, trigger: str = Triggers.FAILED) -> None:
        self._finish(S.FAILED, trigger, reason=failure.message, failure=failure)

    def mark_retry_wait(
        self,
        failure: Failure,
        *,
        delay: float | None = None,
        trigger: str = Triggers.RETRY_SCHEDULED,
    ) -> None:
        """The attempt failed and another is due after a backoff of ``delay`` seconds."""
        reason = failure.message if delay is None else f"retry in {delay:.3g}s: {failure.message}"
        self._apply(S.RETRY_WAIT, trigger, reason=reason, failure=failure, started_at=None)

    def mark_cancelled(
        self,
        *,
        reason: str,
        actor: str | None = None,
        failure: Failure | None = None,
        trigger: str = Triggers.CANCELLED,
    ) -> None:
        """Cancelled by orchestration (fail_fast), not by a person (that is ``stopped``)."""
        failure = failure or Failure(kind=FailureKind.CANCELLED, message=reason, retryable=False)
        self._finish(S.CANCELLED, trigger, actor=actor, reason=reason, failure=failure)

    def mark_skipped(
        self,
        *,
        reason: str,
        failure: Failure | None = None,
        actor: str | None = None,
        trigger: str = Triggers.SKIPPED,
    ) -> None:
        failure = failure or Failure(
            kind=FailureKind.CONDITION_FALSE, message=reason, retryable=False
        )
        self._finish(S.SKIPPED, trigger, actor=actor, reason=reason, failure=failure)

    def mark_lost(
        self,
        failure: Failure | None = None,
        *,
        actor: str | None = None,
        reason: str | None = None,
        trigger: str = Triggers.LOST,
    ) -> None:
        """The carrier is gone or was abandoned: the result is unknown (retryable)."""
        failure = failure or Failure(
            kind=FailureKind.LOST, message=reason or "result unknown", retryable=True
        )
        self._finish(
            S.LOST, trigger, actor=actor, reason=reason or failure.message, failure=failure
        )

    # ------------------------------------------------------------ explicit escapes

    def retry(
        self, *, extra_attempts: int = 1, actor: str | None = None, reason: str | None = None
    ) -> None:
        """Resurrect a failed/stopped/cancelled/lost task to ``queued``, keeping its history.

        ``max_attempts`` grows so that ``extra_attempts`` more attempts are possible.
        """
        if not self.can_retry():
            raise self._invalid(
                S.QUEUED,
                Triggers.RETRY,
                "retry() is only legal from failed, stopped, cancelled or lost",
            )
        if extra_attempts < 1:
            raise ConfigurationError(f"extra_attempts must be >= 1, got {extra_attempts!r}")
        snap = self._snapshot
        self._apply(
            S.QUEUED,
            Triggers.RETRY,
            actor=actor,
            reason=reason,
            check=False,
            max_attempts=max(snap.max_attempts, snap.attempt + extra_attempts),
            finished_at=None,
            failure=None,
            outcome=None,
            started_at=None,
            queued_at=self._clock.now(),
        )

    def reset(
        self, *, confirm: bool = False, actor: str | None = None, reason: str | None = None
    ) -> None:
        """Back to ``pending``, discarding the attempt history. Demands ``confirm=True``."""
        if confirm is not True:
            raise ConfigurationError(
                "reset() discards every attempt of the task; call reset(confirm=True) "
                "if that is what you want, or retry() to keep the history"
            )
        self._apply(
            S.PENDING,
            Triggers.RESET,
            actor=actor,
            reason=reason,
            check=False,
            attempt=0,
            started_at=None,
            first_started_at=None,
            finished_at=None,
            queued_at=None,
            failure=None,
            outcome=None,
            progress=None,
        )

    def force_transition(self, target: TaskStatus, *, actor: str, reason: str) -> None:
        """Move to any state, bypassing the table. The only such door: it must be audited."""
        if not isinstance(actor, str) or not actor.strip():
            raise ConfigurationError("force_transition() needs a non-empty actor (who did this)")
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigurationError("force_transition() needs a non-empty reason (why)")
        extra: dict[str, Any] = {}
        if target in TERMINAL:
            extra["finished_at"] = self._clock.now()
        self._apply(target, Triggers.FORCED, actor=actor, reason=reason, check=False, **extra)

    # ------------------------------------------------------------ internals

    def _finish(self, target: TaskStatus, trigger: str, **changes: Any) -> None:
        self._apply(target, trigger, finished_at=self._clock.now(), **changes)

    def _require_started(self, target: TaskStatus, trigger: str) -> None:
        if self._snapshot.started_at is None:
            raise self._invalid(target, trigger, "the task has no started attempt")

    def _check_edge(self, target: TaskStatus, trigger: str) -> None:
        if target not in TRANSITIONS[self.status]:
            raise self._invalid(target, trigger)

    def _invalid(
        self, target: TaskStatus | None, trigger: str, detail: str | None = None
    ) -> InvalidTransition:
        return InvalidTransition(
            task_id=self.task_id,
            current=self.status,
            target=target,
            action=trigger,
            allowed=TRANSITIONS[self.status],
            detail=detail,
        )

    def _apply(
        self,
        target: TaskStatus,
        trigger: str,
        *,
        actor: str | None = None,
        reason: str | None = None,
        check: bool = True,
        **changes: Any,
    ) -> Transition:
        if check:
            self._check_edge(target, trigger)
            if target is S.RUNNING and self.status is S.PAUSED:
                self._require_started(target, trigger)
        snap = self._snapshot
        now = self._clock.now()
        version = snap.status_version + 1
        self._snapshot = snap.replace(
            status=target, status_version=version, updated_at=now, **changes
        )
        record = Transition(
            task_id=snap.task_id,
            from_status=snap.status,
            to_status=target,
            trigger=trigger,
            version=version,
            at=now,
            actor=actor,
            reason=reason,
            attempt=self._snapshot.attempt,
        )
        self._transitions.append(record)
        return record

    def update(self, **changes: Any) -> TaskSnapshot:
        """Change non-status fields (progress, lease, pid, metadata) without a transition.

        ``status`` and ``status_version`` cannot be changed here: that is what the
        ``mark_*`` methods are for.
        """
        forbidden = {"status", "status_version", "task_id"} & changes.keys()
        if forbidden:
            raise ConfigurationError(
                f"update() cannot change {sorted(forbidden)}; use the mark_* methods"
            )
        self._snapshot = self._snapshot.replace(**changes)
        return self._snapshot

    def __repr__(self) -> str:
        snap = self._snapshot
        return (
            f"StateMachine(task_id={snap.task_id!r}, status={snap.status.value}, "
            f"version={snap.status_version}, attempt={snap.attempt}/{snap.max_attempts})"
        )
