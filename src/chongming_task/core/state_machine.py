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
from datetime import datetime
from typing import Any, Final

from chongming_task._model import (
    Failure,
    FailureKind,
    JSONValue,
    TaskSnapshot,
    Transition,
    ensure_json,
)
from chongming_task._redact import redact_reason
from chongming_task.core._clock import Clock, SystemClock
from chongming_task.errors import AttemptsExhausted, ConfigurationError, InvalidTransition
from chongming_task.states import TERMINAL, TRANSITIONS, TaskStatus

__all__ = ["StateMachine", "Triggers"]

S = TaskStatus


class _Now:
    """Stands for "the instant of this transition" in the changes given to ``_apply``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOW"


_NOW: Final = _Now()


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
    OPERATOR_RETRY = "operator:retry"
    """A person ran a finished task again (``Client.retry``, CLI ``retry``, dashboard)."""
    RESET = "machine:reset"
    FORCED = "machine:forced"
    HANDED_BACK = "worker:shutdown_requeue"
    REPAUSED = "worker:shutdown_paused"


#: Sources from which a resurrecting ``retry()`` is allowed (guide §1.4). ``succeeded``
#: and ``skipped`` are not failures; running them again is a new task or a ``reset()``.
RETRYABLE_TERMINALS = frozenset({S.FAILED, S.STOPPED, S.CANCELLED, S.LOST})

#: States without a current attempt: entering one of them clears ``started_at``, so a
#: later pause cannot be mistaken for a pause in place (which resumes to ``running``).
_NO_CURRENT_ATTEMPT = frozenset({S.PENDING, S.BLOCKED, S.QUEUED, S.RETRY_WAIT})

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

_FIELDS: Final = frozenset(TaskSnapshot.__dataclass_fields__)
#: Set only by transitions (``status_version`` counts them) or never (the id).
_FIXED: Final = frozenset({"status", "status_version", "task_id"})
_UPDATABLE: Final = _FIELDS - _FIXED

_PAUSE_TARGET = {
    S.QUEUED: S.PAUSED,
    S.RETRY_WAIT: S.PAUSED,
    S.STARTING: S.PAUSING,
    S.RUNNING: S.PAUSING,
}


class StateMachine:
    """Owns one task's snapshot and its transition history.

    Build a new task with :meth:`create`, or rehydrate a stored one with
    ``StateMachine(snapshot, transitions, clock=clock)``. Each ``mark_*`` method is one
    kind of edge; it raises :class:`InvalidTransition` when the table or a guard of
    guide §9.3 forbids it, and then changes nothing. ``retry()``, ``reset()`` and
    ``force_transition()`` are the explicit escapes from terminal states.
    """

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
    def create(  # noqa: C901 (validates every field of a new task in one place)
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
        """A new task in ``pending`` at version 0, with its creation record.

        Raises:
            ConfigurationError: An argument is malformed (the message names it).
        """
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"task name must be a non-empty string, got {name!r}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigurationError(
                f"max_attempts must be an integer >= 1 (1 means no retry), got {max_attempts!r}"
            )
        if isinstance(tags, str):
            raise ConfigurationError(
                f"tags must be a collection of strings, not the string {tags!r}; "
                f"write tags=[{tags!r}]"
            )
        tag_set = frozenset(tags)
        for tag in tag_set:
            if not isinstance(tag, str):
                raise ConfigurationError(f"tags must be strings, got {tag!r}")
        if owner is not None and not isinstance(owner, str):
            raise ConfigurationError(f"owner must be a string or None, got {owner!r}")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise ConfigurationError(f"priority must be an integer, got {priority!r}")
        meta: dict[str, JSONValue] = {}
        if metadata is not None:
            if not isinstance(metadata, Mapping):
                raise ConfigurationError(f"metadata must be a mapping, got {metadata!r}")
            meta = dict(metadata)
            ensure_json(meta, "metadata")
        if not isinstance(task_id, str) or not task_id:
            raise ConfigurationError(f"task_id must be a non-empty string, got {task_id!r}")
        if "\x00" in task_id:
            raise ConfigurationError("task_id must not contain NUL characters")
        for field_name, text in (("label", label), ("bucket_key", bucket_key)):
            if text is not None and not isinstance(text, str):
                raise ConfigurationError(f"{field_name} must be a string or None, got {text!r}")
        if bucket is not None and (
            isinstance(bucket, bool) or not isinstance(bucket, int) or bucket < 0
        ):
            raise ConfigurationError(f"bucket must be an integer >= 0 or None, got {bucket!r}")
        clock = clock or SystemClock()
        now = _checked_now(clock)
        snapshot = TaskSnapshot(
            task_id=task_id,
            name=name,
            status=S.PENDING,
            status_version=0,
            created_at=now,
            updated_at=now,
            label=label,
            max_attempts=max_attempts,
            tags=tag_set,
            priority=priority,
            bucket=bucket,
            bucket_key=bucket_key,
            owner=owner,
            metadata=meta,
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
        """The current frozen snapshot (a new object after every change)."""
        return self._snapshot

    @property
    def status(self) -> TaskStatus:
        """The current lifecycle stage."""
        return self._snapshot.status

    @property
    def transitions(self) -> tuple[Transition, ...]:
        """Every accepted transition, oldest first, starting with the creation record."""
        return tuple(self._transitions)

    def transitions_after(self, count: int) -> list[Transition]:
        """The transitions after the first ``count`` (a new list; empty if none).

        For the runtime, which hands each new transition on once: it need not copy
        the whole history at every transition to find the new ones.
        """
        return self._transitions[count:]

    @property
    def task_id(self) -> str:
        """The task's id."""
        return self._snapshot.task_id

    def can(self, target: TaskStatus) -> bool:
        """Whether the table allows ``status -> target`` right now (guards not included)."""
        return target in TRANSITIONS[self.status]

    def can_stop(self) -> bool:
        """Whether :meth:`request_stop` would be accepted now."""
        return self.status in _STOP_TARGET

    def can_pause(self) -> bool:
        """Whether :meth:`request_pause` would be accepted now."""
        return self.status in _PAUSE_TARGET

    def can_resume(self) -> bool:
        """Whether :meth:`resume` would be accepted now."""
        return self.status is S.PAUSED

    def can_retry(self) -> bool:
        """Whether :meth:`retry` would be accepted now (failed, stopped, cancelled, lost)."""
        return self.status in RETRYABLE_TERMINALS

    # ------------------------------------------------------------ edges

    def mark_blocked(self, *, reason: str | None = None, trigger: str = Triggers.BLOCKED) -> None:
        """Waiting for upstream nodes (from pending).

        Raises:
            InvalidTransition: The current state has no edge to ``blocked``.
        """
        self._apply(S.BLOCKED, trigger, reason=reason)

    def mark_queued(
        self, *, actor: str | None = None, reason: str | None = None, trigger: str = Triggers.QUEUED
    ) -> None:
        """Accepted and waiting for a slot (from pending, blocked, paused or retry_wait).

        Clears ``started_at``: a queued task has no current attempt, and a stale start
        time would later make a pause look like a pause in place.

        Raises:
            InvalidTransition: The current state has no edge to ``queued``.
        """
        self._apply(
            S.QUEUED,
            trigger,
            actor=actor,
            reason=reason,
            queued_at=_NOW,
            started_at=None,
        )

    def mark_starting(
        self, *, executor: str | None = None, trigger: str = Triggers.STARTING
    ) -> None:
        """Begin a new attempt (from queued or retry_wait): ``attempt`` grows by one.

        Raises:
            InvalidTransition: The current state has no edge to ``starting``.
            AttemptsExhausted: ``attempt + 1`` would exceed ``max_attempts`` (§9.3).
        """
        snap = self._snapshot
        self._check_edge(S.STARTING, trigger)
        if snap.attempt + 1 > snap.max_attempts:
            raise AttemptsExhausted(snap.task_id, snap.attempt, snap.max_attempts)
        self._apply(
            S.STARTING,
            trigger,
            reason=f"executor={executor}" if executor else None,
            check=False,  # checked above
            attempt=snap.attempt + 1,
            started_at=_NOW,
            first_started_at=snap.first_started_at or _NOW,
            failure=None,
        )

    def mark_running(self, *, trigger: str = Triggers.LAUNCHED) -> None:
        """The body is executing (from starting, or from an in-place pause).

        The guard is the one of guide §9.3: the attempt must have a ``started_at``.
        So ``paused -> running`` is legal for a pause in place and refused for a task
        paused while queued or in ``retry_wait`` (it never started: :meth:`resume`
        sends it back to ``queued``). :meth:`resume` and :meth:`abort_pause` remain the
        usual ways back from a pause; they also say *why* (their triggers).

        Raises:
            InvalidTransition: The current state has no edge to ``running``, or the
                attempt has no ``started_at`` (guard of §9.3).
        """
        self._check_edge(S.RUNNING, trigger)
        self._require_started(S.RUNNING, trigger)
        self._apply(S.RUNNING, trigger, check=False)  # checked above

    def mark_pausing(
        self,
        *,
        actor: str | None = None,
        reason: str | None = None,
        trigger: str = Triggers.PAUSE_REQUESTED,
    ) -> None:
        """A pause was requested of a task holding a slot (from starting or running).

        Raises:
            InvalidTransition: The current state has no edge to ``pausing``.
        """
        self._apply(S.PAUSING, trigger, actor=actor, reason=reason)

    def mark_paused(
        self, *, actor: str | None = None, reason: str | None = None, trigger: str = Triggers.PAUSED
    ) -> None:
        """Confirmed in place (from pausing) or immediately (from queued/retry_wait).

        Raises:
            InvalidTransition: The current state has no edge to ``paused``.
        """
        self._apply(S.PAUSED, trigger, actor=actor, reason=reason)

    def abort_pause(
        self, *, reason: str | None = None, trigger: str = Triggers.PAUSE_ABORTED
    ) -> None:
        """Roll an unconfirmed pause back to ``running`` (guide §4.2).

        Raises:
            InvalidTransition: Not in ``pausing`` (guard of §9.3).
        """
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
        """Undo a pause: back to ``running`` if paused in place, else to ``queued`` (§4.3).

        Returns:
            The state the task is in now.

        Raises:
            InvalidTransition: Not in ``paused``.
        """
        if self.status is not S.PAUSED:
            raise self._invalid(S.RUNNING, trigger, "resume() is only legal from paused")
        target = S.RUNNING if self.paused_in_place else S.QUEUED
        extra: dict[str, Any] = {} if target is S.RUNNING else {"queued_at": _NOW}
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
        """A stop was requested of a task holding a slot; the graceful window starts.

        Raises:
            InvalidTransition: The current state has no edge to ``stopping``.
        """
        self._apply(S.STOPPING, trigger, actor=actor, reason=reason)

    def mark_stopped(
        self,
        *,
        actor: str | None = None,
        reason: str | None = None,
        failure: Failure | None = None,
        trigger: str = Triggers.STOPPED,
    ) -> None:
        """A manual stop took effect. The failure kind is ``cancelled``, never retryable.

        Raises:
            InvalidTransition: The current state has no edge to ``stopped``.
        """
        reason = redact_reason(reason)  # the failure's message too (transitions redact theirs)
        failure = failure or Failure(
            kind=FailureKind.CANCELLED, message=reason or "stopped", retryable=False
        )
        self._finish(S.STOPPED, trigger, actor=actor, reason=reason, failure=failure)

    def request_stop(self, *, actor: str | None = None, reason: str | None = None) -> TaskStatus:
        """Apply a stop request: ``stopping`` if the task occupies a slot, else ``stopped``.

        Returns:
            The state the task is in now.

        Raises:
            InvalidTransition: The task is terminal or already ``stopping``.
        """
        target = _STOP_TARGET.get(self.status)
        if target is None:
            raise self._invalid(S.STOPPING, Triggers.STOP_REQUESTED, "the task cannot be stopped")
        if target is S.STOPPING:
            self.mark_stopping(actor=actor, reason=reason)
        else:
            self.mark_stopped(actor=actor, reason=reason, trigger=Triggers.STOP_REQUESTED)
        return target

    def request_pause(self, *, actor: str | None = None, reason: str | None = None) -> TaskStatus:
        """Apply a pause request: ``pausing`` if the task occupies a slot, else ``paused``.

        Returns:
            The state the task is in now.

        Raises:
            InvalidTransition: ``can_pause()`` is false (terminal, stopping, or
                already pausing/paused, or not yet queued).
        """
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
        """The body returned (from running, or from stopping when it finished first, §4.4).

        Raises:
            InvalidTransition: The current state has no edge to ``succeeded``.
        """
        self._finish(S.SUCCEEDED, trigger, reason=reason, outcome=outcome, failure=None)

    def mark_failed(self, failure: Failure, *, trigger: str = Triggers.FAILED) -> None:
        """The task failed for good: no retry is due or possible.

        Raises:
            InvalidTransition: The current state has no edge to ``failed``.
        """
        self._finish(S.FAILED, trigger, reason=failure.message, failure=failure)

    def mark_retry_wait(
        self,
        failure: Failure,
        *,
        delay: float | None = None,
        trigger: str = Triggers.RETRY_SCHEDULED,
    ) -> None:
        """The attempt failed and another is due after a backoff of ``delay`` seconds.

        Raises:
            InvalidTransition: The current state has no edge to ``retry_wait``.
            AttemptsExhausted: No attempt is left, so waiting for one would be a lie.
        """
        self._check_edge(S.RETRY_WAIT, trigger)
        snap = self._snapshot
        if snap.attempt >= snap.max_attempts:
            raise AttemptsExhausted(snap.task_id, snap.attempt, snap.max_attempts)
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
        """Cancelled by orchestration (fail_fast), not by a person (that is ``stopped``).

        Raises:
            InvalidTransition: The current state has no edge to ``cancelled``.
        """
        text = redact_reason(reason) or "cancelled"
        failure = failure or Failure(kind=FailureKind.CANCELLED, message=text, retryable=False)
        self._finish(S.CANCELLED, trigger, actor=actor, reason=text, failure=failure)

    def mark_skipped(
        self,
        *,
        reason: str,
        failure: Failure | None = None,
        actor: str | None = None,
        trigger: str = Triggers.SKIPPED,
    ) -> None:
        """Not run: a condition was false, an upstream failed, or the body said so.

        Raises:
            InvalidTransition: The current state has no edge to ``skipped``.
        """
        text = redact_reason(reason) or "skipped"
        failure = failure or Failure(
            kind=FailureKind.CONDITION_FALSE, message=text, retryable=False
        )
        self._finish(S.SKIPPED, trigger, actor=actor, reason=text, failure=failure)

    def mark_lost(
        self,
        failure: Failure | None = None,
        *,
        actor: str | None = None,
        reason: str | None = None,
        trigger: str = Triggers.LOST,
        release_lease: bool = False,
    ) -> None:
        """The carrier is gone or was abandoned: the result is unknown (retryable).

        Pass a ``failure`` saying why (§9.3): ``lost`` means "we do not know", and the
        reason is what lets an operator decide between re-running and checking by hand.
        ``release_lease`` also clears ``lease_until`` in the same change: ``reconcile()``
        declares the lease's holder gone.

        Raises:
            InvalidTransition: The current state has no edge to ``lost``.
        """
        reason = redact_reason(reason)
        failure = failure or Failure(
            kind=FailureKind.LOST, message=reason or "result unknown", retryable=True
        )
        extra: dict[str, Any] = {"lease_until": None} if release_lease else {}
        self._finish(
            S.LOST,
            trigger,
            actor=actor,
            reason=reason or failure.message,
            failure=failure,
            **extra,
        )

    def hand_back(
        self,
        *,
        actor: str | None = None,
        reason: str | None = None,
        trigger: str = Triggers.HANDED_BACK,
    ) -> None:
        """A worker shutting down gives the task back to the queue: ``-> queued``.

        From ``stopping`` (the worker stopped the body at a checkpoint, the edge the
        guide's table gains for this, ``GUIDE_ADDITIONS``), ``paused`` or
        ``retry_wait``. The attempt it cut short does not use up the retry budget
        (``max_attempts`` grows by one), and ``started_at`` is cleared: the next worker
        starts a new attempt. From ``stopping`` the task is let go in the same change
        (no owner, no lease): any worker may claim it. From ``paused`` it keeps its
        owner: the caller pauses it again (``queued -> paused``, trigger
        ``worker:shutdown_paused``) and lets it go then, so no worker can claim it in
        between.

        Raises:
            InvalidTransition: Not in stopping, paused or retry_wait.
        """
        snap = self._snapshot
        if snap.status not in (S.STOPPING, S.PAUSED, S.RETRY_WAIT):
            raise self._invalid(
                S.QUEUED, trigger, "hand_back() is only legal from stopping, paused or retry_wait"
            )
        unheld: dict[str, Any] = (
            {}
            if snap.status is S.PAUSED
            else {"owner": None, "lease_owner": None, "lease_until": None}
        )
        self._apply(
            S.QUEUED,
            trigger,
            actor=actor,
            reason=reason,
            max_attempts=snap.max_attempts + 1,
            started_at=None,
            queued_at=_NOW,
            **unheld,
        )

    # ------------------------------------------------------------ explicit escapes

    def body_skipped(self, *, reason: str, trigger: str = "runtime:skipped") -> None:
        """End a running attempt as ``skipped`` because its body raised ``TaskSkipped``.

        Not an edge of the transition table: guide §9.2 has no ``running -> skipped``,
        so ``can(SKIPPED)`` is False from ``running`` and :meth:`mark_skipped` refuses
        it. Like :meth:`retry` and :meth:`reset`, this is an explicit operation outside
        the table, for the one case where a body that ran concludes "nothing to do"
        (a scheduled sync with no changes): not an error, never retried. The failure
        is ``condition_false`` carrying ``reason``.

        Raises:
            InvalidTransition: Not ``running``.
        """
        if self.status is not S.RUNNING:
            raise self._invalid(
                S.SKIPPED, trigger, "body_skipped() is only legal from running (TaskSkipped)"
            )
        # Redacted (one line, at most 512 characters) like every other recorded reason:
        # TaskSkipped's text comes from the body.
        text = redact_reason(reason) or "skipped"
        failure = Failure(kind=FailureKind.CONDITION_FALSE, message=text, retryable=False)
        self._apply(S.SKIPPED, trigger, reason=text, check=False, finished_at=_NOW, failure=failure)

    def retry(
        self,
        *,
        extra_attempts: int = 1,
        actor: str | None = None,
        reason: str | None = None,
        trigger: str = Triggers.RETRY,
    ) -> None:
        """Resurrect a failed/stopped/cancelled/lost task to ``queued``, keeping its history.

        ``max_attempts`` grows so that ``extra_attempts`` more attempts are possible.
        ``trigger`` names who resurrects it: ``machine:retry`` by default,
        ``operator:retry`` for a person's retry (``Client.retry`` and its surfaces).

        Raises:
            InvalidTransition: Not in failed, stopped, cancelled or lost.
            ConfigurationError: ``extra_attempts`` is not an integer >= 1.
        """
        if not self.can_retry():
            raise self._invalid(
                S.QUEUED, trigger, "retry() is only legal from failed, stopped, cancelled or lost"
            )
        if (
            isinstance(extra_attempts, bool)
            or not isinstance(extra_attempts, int)
            or extra_attempts < 1
        ):
            raise ConfigurationError(
                f"extra_attempts must be an integer >= 1, got {extra_attempts!r}"
            )
        snap = self._snapshot
        self._apply(
            S.QUEUED,
            trigger,
            actor=actor,
            reason=reason,
            check=False,
            max_attempts=max(snap.max_attempts, snap.attempt + extra_attempts),
            finished_at=None,
            failure=None,
            outcome=None,
            started_at=None,
            queued_at=_NOW,
        )

    def reset(
        self, *, confirm: bool = False, actor: str | None = None, reason: str | None = None
    ) -> None:
        """Back to ``pending`` from a terminal state, discarding the attempt count.

        The audit trail is kept: the reset is one more transition in it. Only terminal
        tasks can be reset: a live one has a carrier that would keep running under a
        snapshot claiming it never started (stop it first).

        Raises:
            ConfigurationError: ``confirm`` is not ``True``.
            InvalidTransition: The task is not in a terminal state.
        """
        if confirm is not True:
            raise ConfigurationError(
                "reset() discards every attempt of the task; call reset(confirm=True) "
                "if that is what you want, or retry() to keep the history"
            )
        if self.status not in TERMINAL:
            raise self._invalid(
                S.PENDING, Triggers.RESET, "reset() is only legal from a terminal state"
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

    def force_transition(
        self,
        target: TaskStatus,
        *,
        actor: str,
        reason: str,
        failure: Failure | None = None,
    ) -> None:
        """Move to any state, bypassing the table. The only such door: it must be audited.

        For an operator who checked a ``lost`` task's side effects by hand, for example.
        ``finished_at`` is set when entering a terminal state and cleared when leaving
        one; ``started_at`` is cleared when entering a state without a current attempt.
        ``failure``, when given, replaces the snapshot's failure.

        Raises:
            InvalidTransition: ``actor`` or ``reason`` is empty: the guard of §9.3 (no
                audit information, no forced move), and guard failures are
                ``InvalidTransition`` (§10).
            ConfigurationError: ``target`` is not a status.
        """
        try:
            target = TaskStatus(target)
        except ValueError:
            raise ConfigurationError(
                f"force_transition() target must be a TaskStatus, got {target!r}"
            ) from None
        for field, value, meaning in (("actor", actor, "who did this"), ("reason", reason, "why")):
            if not isinstance(value, str) or not value.strip():
                raise self._invalid(
                    target,
                    Triggers.FORCED,
                    f"force_transition() needs a non-empty {field} ({meaning}), got "
                    f"{value!r}; with an actor and a reason it may move to any state",
                )
        extra: dict[str, Any] = {}
        if target in TERMINAL:
            extra["finished_at"] = _NOW
        else:
            extra["finished_at"] = None
        if target in _NO_CURRENT_ATTEMPT:
            extra["started_at"] = None
        if failure is not None:
            extra["failure"] = failure
        self._apply(target, Triggers.FORCED, actor=actor, reason=reason, check=False, **extra)

    # ------------------------------------------------------------ internals

    def _finish(self, target: TaskStatus, trigger: str, **changes: Any) -> None:
        self._apply(target, trigger, finished_at=_NOW, **changes)

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
        """Take the edge to ``target``; ``check=False`` when the caller checked it."""
        if check:
            self._check_edge(target, trigger)
            if target is S.RUNNING and self.status is S.PAUSED:
                self._require_started(target, trigger)
        snap = self._snapshot
        now = _checked_now(self._clock)
        version = snap.status_version + 1
        for name, value in changes.items():
            if value is _NOW:
                changes[name] = now  # one instant per transition
        self._snapshot = after = snap.replace(
            status=target, status_version=version, updated_at=now, **changes
        )
        record = Transition(
            task_id=snap.task_id,
            from_status=snap.status,
            to_status=after.status,
            trigger=trigger,
            version=version,
            at=now,
            actor=actor,
            reason=reason,
            attempt=after.attempt,
        )
        self._transitions.append(record)
        return record

    def update(self, **changes: Any) -> TaskSnapshot:
        """Change non-status fields (progress, lease, pid, metadata) without a transition.

        ``status`` and ``status_version`` cannot be changed here: that is what the
        ``mark_*`` methods are for.
        """
        self._check_update(changes)
        self._snapshot = self._snapshot.replace(**changes)
        return self._snapshot

    @staticmethod
    def _check_update(changes: Mapping[str, Any]) -> None:
        if not _UPDATABLE.issuperset(changes):
            forbidden = sorted(_FIXED & changes.keys())
            if forbidden:
                raise ConfigurationError(
                    f"update() cannot change {forbidden}; use the mark_* methods"
                )
            raise ConfigurationError(
                f"update() got unknown snapshot field(s) {sorted(changes.keys() - _FIELDS)}; "
                f"TaskSnapshot has {sorted(_FIELDS)}"
            )

    def __repr__(self) -> str:
        snap = self._snapshot
        return (
            f"StateMachine(task_id={snap.task_id!r}, status={snap.status.value}, "
            f"version={snap.status_version}, attempt={snap.attempt}/{snap.max_attempts})"
        )


def _checked_now(clock: Clock) -> datetime:
    """The clock's reading, refused unless it is a timezone-aware datetime."""
    now = clock.now()
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise ConfigurationError(
            f"the clock's now() must return a timezone-aware datetime, got {now!r}"
        )
    return now
