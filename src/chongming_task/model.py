"""Frozen value objects of the model layer and their exact JSON codec.

Every store depends on the codec: ``to_dict``/``from_dict`` round-trip each type
exactly (timezone-aware datetimes, unicode, nested JSON). Dictionaries carry a
format version so a future field change can be migrated instead of guessed at.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Final, TypeAlias

from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.states import TaskStatus

__all__ = [
    "FORMAT_VERSION",
    "Failure",
    "FailureKind",
    "JSONValue",
    "Progress",
    "TaskSnapshot",
    "Transition",
    "dumps",
    "ensure_json",
    "loads",
    "parse_datetime",
]

#: Version of the dictionaries written by ``to_dict``; ``from_dict`` refuses newer ones.
FORMAT_VERSION: Final = 1

JSONValue: TypeAlias = Any
"""A value that ``json.dumps`` accepts without a ``default`` hook."""


class FailureKind(StrEnum):
    """Why an attempt or a task did not succeed (guide §5.2, plus three of our own)."""

    EXCEPTION = "exception"
    NONZERO_EXIT = "nonzero_exit"
    TIMEOUT_START = "timeout_start"
    TIMEOUT_ATTEMPT = "timeout_attempt"
    TIMEOUT_IDLE = "timeout_idle"
    TIMEOUT_TOTAL = "timeout_total"
    CANCELLED = "cancelled"
    LOST = "lost"
    DEPENDENCY_FAILED = "dependency_failed"
    CONDITION_FALSE = "condition_false"
    RESULT_INVALID = "result_invalid"
    CRASHED = "crashed"

    def __str__(self) -> str:
        return self.value


# ---------------------------------------------------------------- helpers


def _require_aware(value: datetime | None, name: str) -> None:
    if value is not None and value.tzinfo is None:
        raise ConfigurationError(
            f"{name} must be a timezone-aware datetime (use datetime.now(timezone.utc)), "
            f"got naive {value.isoformat()}"
        )


def _dt_out(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def parse_datetime(value: object, name: str = "datetime") -> datetime | None:
    """Parse an ISO-8601 string written by the codec; ``None`` stays ``None``."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise StoreError(f"corrupt {name}: expected an ISO-8601 string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise StoreError(f"corrupt {name}: {value!r} is not ISO-8601") from exc
    if parsed.tzinfo is None:
        raise StoreError(f"corrupt {name}: {value!r} has no timezone")
    return parsed


def ensure_json(value: object, what: str = "value") -> None:
    """Raise ``ConfigurationError`` naming the offending type if ``value`` is not JSON.

    Strict: NaN/Infinity and non-string keys are refused, because other languages and
    PostgreSQL's jsonb would not read them back.
    """
    try:
        json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{what} is not JSON-serialisable: {exc}") from exc
    _check_keys(value, what)


def _check_keys(value: object, what: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigurationError(
                    f"{what} is not JSON-serialisable: dict key {key!r} of type "
                    f"{type(key).__name__} would come back as a string; use str keys"
                )
            _check_keys(item, what)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_keys(item, what)


def dumps(value: object) -> str:
    """Compact, deterministic JSON used by every store."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def loads(text: str | bytes, what: str = "row") -> Any:
    """Parse JSON written by :func:`dumps`; corruption becomes ``StoreError``."""
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"corrupt {what}: invalid JSON ({exc})") from exc


def _check_version(data: Mapping[str, Any], what: str) -> None:
    version = data.get("v", FORMAT_VERSION)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise StoreError(
            f"{what} was written in format version {version!r}, newer than this "
            f"library understands ({FORMAT_VERSION}); upgrade chongming-task"
        )


def _status(value: object, what: str) -> TaskStatus:
    if not isinstance(value, str):
        raise StoreError(f"corrupt {what}: unknown status {value!r}")
    try:
        return TaskStatus(value)
    except ValueError as exc:
        raise StoreError(f"corrupt {what}: unknown status {value!r}") from exc


# ---------------------------------------------------------------- value objects


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """How far a running task has got. Orthogonal to status and to the heartbeat."""

    done: float
    """Units completed so far."""
    total: float | None = None
    """Units expected in all, when known."""
    unit: str | None = None
    """What is being counted ("rows", "partitions"...)."""
    message: str | None = None
    """Free text shown beside the numbers."""

    def __post_init__(self) -> None:
        if isinstance(self.done, bool) or not isinstance(self.done, int | float):
            raise ConfigurationError(f"progress done must be a number, got {self.done!r}")
        if self.total is not None and (
            isinstance(self.total, bool) or not isinstance(self.total, int | float)
        ):
            raise ConfigurationError(f"progress total must be a number, got {self.total!r}")

    @property
    def fraction(self) -> float | None:
        """``done / total`` clamped to [0, 1], or ``None`` without a positive total."""
        if not self.total:
            return None
        return max(0.0, min(1.0, self.done / self.total))

    def render(self) -> str:
        """Short text for tables: ``120/500 rows (24%)``."""
        done = f"{self.done:g}"
        text = f"{done}/{self.total:g}" if self.total is not None else done
        if self.unit:
            text = f"{text} {self.unit}"
        fraction = self.fraction
        if fraction is not None:
            text = f"{text} ({fraction:.0%})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"done": self.done, "total": self.total, "unit": self.unit, "message": self.message}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Progress:
        try:
            return cls(
                done=data["done"],
                total=data.get("total"),
                unit=data.get("unit"),
                message=data.get("message"),
            )
        except (KeyError, ConfigurationError) as exc:
            raise StoreError(f"corrupt progress {dict(data)!r}: {exc}") from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """Why a task did not succeed. Text fields are redacted before they are stored."""

    kind: FailureKind
    message: str
    retryable: bool = False
    """Whether retrying could help. Cancellation is never retryable (guide §5.1)."""
    exception_type: str | None = None
    """Qualified name of the exception class, when there was one."""
    traceback: str | None = None
    """Redacted traceback text, when there was one."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "message": self.message,
            "retryable": self.retryable,
            "exception_type": self.exception_type,
            "traceback": self.traceback,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Failure:
        try:
            return cls(
                kind=FailureKind(data["kind"]),
                message=data["message"],
                retryable=bool(data.get("retryable", False)),
                exception_type=data.get("exception_type"),
                traceback=data.get("traceback"),
            )
        except (KeyError, ValueError) as exc:
            raise StoreError(f"corrupt failure {dict(data)!r}: {exc}") from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    """One accepted state change: the unit of the audit trail and of event fan-out."""

    task_id: str
    from_status: TaskStatus | None
    """``None`` only for the creation record (``-> pending``)."""
    to_status: TaskStatus
    trigger: str
    """What caused it, as ``layer:event`` (``executor:launched``, ``runtime:pause_aborted``)."""
    version: int
    """The snapshot's ``status_version`` after this transition (+1 per transition)."""
    at: datetime
    actor: str | None = None
    """Who asked for it (an owner, an operator, ``scheduler``); ``None`` for the runtime."""
    reason: str | None = None
    attempt: int = 0

    def __post_init__(self) -> None:
        _require_aware(self.at, "Transition.at")

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": FORMAT_VERSION,
            "task_id": self.task_id,
            "from": None if self.from_status is None else self.from_status.value,
            "to": self.to_status.value,
            "trigger": self.trigger,
            "version": self.version,
            "at": _dt_out(self.at),
            "actor": self.actor,
            "reason": self.reason,
            "attempt": self.attempt,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Transition:
        _check_version(data, "transition")
        try:
            source = data.get("from")
            at = parse_datetime(data["at"], "transition time")
            assert at is not None
            return cls(
                task_id=data["task_id"],
                from_status=None if source is None else _status(source, "transition"),
                to_status=_status(data["to"], "transition"),
                trigger=data["trigger"],
                version=int(data["version"]),
                at=at,
                actor=data.get("actor"),
                reason=data.get("reason"),
                attempt=int(data.get("attempt", 0)),
            )
        except (KeyError, TypeError, AssertionError) as exc:
            raise StoreError(f"corrupt transition {dict(data)!r}: {exc}") from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSnapshot:
    """Everything known about one task at one version. Immutable: change with ``replace``.

    ``status`` is written only by the state machine; ``progress``, ``last_heartbeat_at``
    and the lease are the high-frequency side channel (``store.touch``) and never move
    ``status_version``.
    """

    task_id: str
    name: str
    status: TaskStatus
    status_version: int
    created_at: datetime
    updated_at: datetime
    label: str | None = None
    attempt: int = 0
    """Attempts started so far (the one running counts)."""
    max_attempts: int = 1
    queued_at: datetime | None = None
    started_at: datetime | None = None
    """When the current attempt started; ``None`` if the task never ran."""
    first_started_at: datetime | None = None
    finished_at: datetime | None = None
    progress: Progress | None = None
    last_heartbeat_at: datetime | None = None
    lease_owner: str | None = None
    lease_until: datetime | None = None
    failure: Failure | None = None
    outcome: JSONValue = None
    """The JSON return value of a succeeded task."""
    tags: frozenset[str] = field(default_factory=frozenset)
    bucket: int | None = None
    bucket_key: str | None = None
    priority: int = 0
    owner: str | None = None
    """The controller (``hostname:pid`` by default) that holds this task."""
    pid: int | None = None
    """The process executing the body (the child for the ProcessExecutor)."""
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)
    """JSON trigger information (schedule, pipeline node, trace context...)."""

    def __post_init__(self) -> None:
        for name in (
            "created_at",
            "updated_at",
            "queued_at",
            "started_at",
            "first_started_at",
            "finished_at",
            "last_heartbeat_at",
            "lease_until",
        ):
            _require_aware(getattr(self, name), f"TaskSnapshot.{name}")
        tags: object = self.tags
        if not isinstance(tags, frozenset):
            # Callers pass sets or lists; the snapshot always holds a frozenset.
            object.__setattr__(self, "tags", frozenset(self.tags))

    @property
    def is_terminal(self) -> bool:
        return self.status.is_terminal

    @property
    def elapsed(self) -> float | None:
        """Seconds from the first start to the finish (or ``updated_at``); ``None`` if never ran."""
        start = self.first_started_at or self.started_at
        if start is None:
            return None
        end = self.finished_at or self.updated_at
        return max(0.0, (end - start).total_seconds())

    def replace(self, **changes: Any) -> TaskSnapshot:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": FORMAT_VERSION,
            "task_id": self.task_id,
            "name": self.name,
            "label": self.label,
            "status": self.status.value,
            "status_version": self.status_version,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "created_at": _dt_out(self.created_at),
            "updated_at": _dt_out(self.updated_at),
            "queued_at": _dt_out(self.queued_at),
            "started_at": _dt_out(self.started_at),
            "first_started_at": _dt_out(self.first_started_at),
            "finished_at": _dt_out(self.finished_at),
            "progress": None if self.progress is None else self.progress.to_dict(),
            "last_heartbeat_at": _dt_out(self.last_heartbeat_at),
            "lease_owner": self.lease_owner,
            "lease_until": _dt_out(self.lease_until),
            "failure": None if self.failure is None else self.failure.to_dict(),
            "outcome": self.outcome,
            "tags": sorted(self.tags),
            "bucket": self.bucket,
            "bucket_key": self.bucket_key,
            "priority": self.priority,
            "owner": self.owner,
            "pid": self.pid,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskSnapshot:
        _check_version(data, "task snapshot")
        try:
            created = parse_datetime(data["created_at"], "created_at")
            updated = parse_datetime(data["updated_at"], "updated_at")
            assert created is not None
            assert updated is not None
            progress = data.get("progress")
            failure = data.get("failure")
            return cls(
                task_id=data["task_id"],
                name=data["name"],
                label=data.get("label"),
                status=_status(data["status"], "task snapshot"),
                status_version=int(data["status_version"]),
                attempt=int(data.get("attempt", 0)),
                max_attempts=int(data.get("max_attempts", 1)),
                created_at=created,
                updated_at=updated,
                queued_at=parse_datetime(data.get("queued_at"), "queued_at"),
                started_at=parse_datetime(data.get("started_at"), "started_at"),
                first_started_at=parse_datetime(data.get("first_started_at"), "first_started_at"),
                finished_at=parse_datetime(data.get("finished_at"), "finished_at"),
                progress=None if progress is None else Progress.from_dict(progress),
                last_heartbeat_at=parse_datetime(data.get("last_heartbeat_at"), "heartbeat"),
                lease_owner=data.get("lease_owner"),
                lease_until=parse_datetime(data.get("lease_until"), "lease_until"),
                failure=None if failure is None else Failure.from_dict(failure),
                outcome=data.get("outcome"),
                tags=frozenset(data.get("tags") or ()),
                bucket=data.get("bucket"),
                bucket_key=data.get("bucket_key"),
                priority=int(data.get("priority", 0)),
                owner=data.get("owner"),
                pid=data.get("pid"),
                metadata=dict(data.get("metadata") or {}),
            )
        except (KeyError, TypeError, AssertionError) as exc:
            raise StoreError(f"corrupt task snapshot: {exc!r}") from exc
