"""Frozen value objects of the model layer and their exact JSON codec.

Every store depends on the codec: ``to_dict``/``from_dict`` round-trip each type
exactly (timezone-aware datetimes, unicode, nested JSON). Dictionaries carry a
format version so a future field change can be migrated instead of guessed at.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from enum import StrEnum
from typing import Any, Final, TypeAlias, TypeVar

from chongming_task._checkpoint_gaps import CheckpointGaps
from chongming_task._public import public
from chongming_task._redact import redact_reason
from chongming_task._validation import escape_surrogates
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

_C = TypeVar("_C")
_T = TypeVar("_T")
_Reader: TypeAlias = Callable[[_C, Mapping[str, Any]], _T]

JSONValue: TypeAlias = Any
"""A value that ``json.dumps`` accepts without a ``default`` hook."""


@public
class FailureKind(StrEnum):
    """Why an attempt or a task did not succeed (guide §5.2, plus four of our own)."""

    EXCEPTION = "exception"
    NONZERO_EXIT = "nonzero_exit"
    TIMEOUT_START = "timeout_start"
    TIMEOUT_ATTEMPT = "timeout_attempt"
    TIMEOUT_IDLE = "timeout_idle"
    TIMEOUT_NO_PROGRESS = "timeout_no_progress"
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
    # Only an offset with seconds and microseconds has a "." seven characters from the end.
    tail = _SUBSECOND_OFFSET.search(value) if value[-7:-6] == "." else None
    if tail is not None:
        # CPython 3.11 reads "+00:00:00.000001" as UTC: rebuild such offsets by hand.
        sign = -1 if tail["sign"] == "-" else 1
        offset = sign * timedelta(
            hours=int(tail["h"]),
            minutes=int(tail["m"]),
            seconds=int(tail["s"]),
            microseconds=int(tail["us"]),
        )
        if parsed.utcoffset() != offset:
            parsed = parsed.replace(tzinfo=timezone(offset))
    return parsed


_SUBSECOND_OFFSET: Final = re.compile(
    r"(?P<sign>[+-])(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)\.(?P<us>\d{6})$"
)


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


#: One encoder for every store write (``json.dumps`` with options builds one per call).
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def dumps(value: object) -> str:
    """Compact, deterministic JSON used by every store (strict: no NaN or infinity)."""
    return _ENCODER.encode(value)


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


def _mapping(data: object, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise StoreError(f"corrupt {what}: expected a JSON object, got {data!r}")
    return data


def _stored(what: str) -> Callable[[_Reader[_C, _T]], _Reader[_C, _T]]:
    """A ``from_dict`` of stored ``what``: a JSON object, and what it cannot read raises
    ``StoreError``."""

    def decorate(read: _Reader[_C, _T]) -> _Reader[_C, _T]:
        @functools.wraps(read)
        def from_dict(cls: _C, data: Mapping[str, Any]) -> _T:
            data = _mapping(data, what)
            try:
                return read(cls, data)
            except (KeyError, TypeError, ValueError) as exc:
                raise StoreError(f"corrupt {what} {data!r}: {exc!r}") from exc

        return from_dict

    return decorate


def _coerce_status(value: object, name: str) -> TaskStatus:
    """Accept a ``TaskStatus`` or its string value (stores and callers pass either)."""
    if isinstance(value, TaskStatus):
        return value
    if isinstance(value, str):
        try:
            return TaskStatus(value)
        except ValueError:
            pass
    allowed = ", ".join(status.value for status in TaskStatus)
    raise ConfigurationError(f"{name} must be a TaskStatus ({allowed}), got {value!r}")


def _require_int(value: object, name: str, *, minimum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum}, got {value!r}")


def _require_optional_str(value: object, name: str) -> None:
    if value is not None and not isinstance(value, str):
        raise ConfigurationError(f"{name} must be a string or None, got {value!r}")


def _require_text(value: object, name: str) -> None:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{name} must be a non-empty string, got {value!r}")


def _int_field(data: Mapping[str, Any], key: str, default: int | None, what: str) -> int:
    """Read an integer written by ``to_dict`` (required if ``default`` is None)."""
    value = data[key] if default is None else data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise StoreError(f"corrupt {what}: {key} must be an integer, got {value!r}")
    return value


def _status(value: object, what: str) -> TaskStatus:
    if not isinstance(value, str):
        raise StoreError(f"corrupt {what}: unknown status {value!r}")
    try:
        return TaskStatus(value)
    except ValueError as exc:
        raise StoreError(f"corrupt {what}: unknown status {value!r}") from exc


# ---------------------------------------------------------------- value objects


@public
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
        # Finite only: NaN and infinity are not JSON, so a store could not save them.
        for name in ("done", "total"):
            value = getattr(self, name)
            if value is None and name == "total":
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise ConfigurationError(f"Progress.{name} must be a finite number, got {value!r}")
        _require_optional_str(self.unit, "Progress.unit")
        _require_optional_str(self.message, "Progress.message")

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
        """A JSON-ready dict; :meth:`from_dict` reverses it exactly."""
        return {"done": self.done, "total": self.total, "unit": self.unit, "message": self.message}

    @classmethod
    @_stored("progress")
    def from_dict(cls, data: Mapping[str, Any]) -> Progress:
        """Rebuild from :meth:`to_dict` output; anything malformed raises ``StoreError``."""
        return cls(
            done=data["done"],
            total=data.get("total"),
            unit=data.get("unit"),
            message=data.get("message"),
        )


@public
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

    def __post_init__(self) -> None:
        kind: object = self.kind
        if not isinstance(kind, FailureKind):
            try:
                object.__setattr__(self, "kind", FailureKind(str(kind)))
            except ValueError:
                allowed = ", ".join(member.value for member in FailureKind)
                raise ConfigurationError(
                    f"Failure.kind must be a FailureKind ({allowed}), got {kind!r}"
                ) from None
        if not isinstance(self.message, str):
            raise ConfigurationError(f"Failure.message must be a string, got {self.message!r}")
        if not isinstance(self.retryable, bool):
            raise ConfigurationError(
                f"Failure.retryable must be True or False, got {self.retryable!r}"
            )
        _require_optional_str(self.exception_type, "Failure.exception_type")
        _require_optional_str(self.traceback, "Failure.traceback")
        # Text from the body (an exception about a file name): a lone surrogate is kept
        # as its backslash escape, so the store can write it (_validation).
        for name in ("message", "exception_type", "traceback"):
            text = getattr(self, name)
            if text is not None and not text.isascii():
                object.__setattr__(self, name, escape_surrogates(text))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reverses it exactly."""
        return {
            "kind": self.kind.value,
            "message": self.message,
            "retryable": self.retryable,
            "exception_type": self.exception_type,
            "traceback": self.traceback,
        }

    @classmethod
    @_stored("failure")
    def from_dict(cls, data: Mapping[str, Any]) -> Failure:
        """Rebuild from :meth:`to_dict` output; anything malformed raises ``StoreError``."""
        kind = data["kind"]
        if not isinstance(kind, str):
            raise TypeError(f"kind must be a string, got {kind!r}")
        return cls(
            kind=FailureKind(kind),
            message=data["message"],
            retryable=data.get("retryable", False),
            exception_type=data.get("exception_type"),
            traceback=data.get("traceback"),
        )


@public
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
    """Why, redacted (``chongming_task._redact.redact_reason``) when the record is made."""
    attempt: int = 0

    def __post_init__(self) -> None:
        _require_text(self.task_id, "Transition.task_id")
        source: object = self.from_status
        if source is not None and not isinstance(source, TaskStatus):
            object.__setattr__(
                self, "from_status", _coerce_status(source, "Transition.from_status")
            )
        target: object = self.to_status
        if not isinstance(target, TaskStatus):
            object.__setattr__(self, "to_status", _coerce_status(target, "Transition.to_status"))
        _require_text(self.trigger, "Transition.trigger")
        _require_int(self.version, "Transition.version", minimum=0)
        _require_int(self.attempt, "Transition.attempt", minimum=0)
        if not isinstance(self.at, datetime):
            raise ConfigurationError(f"Transition.at must be a datetime, got {self.at!r}")
        _require_aware(self.at, "Transition.at")
        _require_optional_str(self.actor, "Transition.actor")
        _require_optional_str(self.reason, "Transition.reason")
        if self.reason is not None:
            object.__setattr__(self, "reason", redact_reason(self.reason))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a format version; :meth:`from_dict` reverses it exactly."""
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
    @_stored("transition")
    def from_dict(cls, data: Mapping[str, Any]) -> Transition:
        """Rebuild from :meth:`to_dict` output; anything malformed raises ``StoreError``."""
        _check_version(data, "transition")
        source = data.get("from")
        at = parse_datetime(data["at"], "transition time")
        if at is None:
            raise TypeError("at must not be null")
        return cls(
            task_id=data["task_id"],
            from_status=None if source is None else _status(source, "transition"),
            to_status=_status(data["to"], "transition"),
            trigger=data["trigger"],
            version=_int_field(data, "version", None, "transition"),
            at=at,
            actor=data.get("actor"),
            reason=data.get("reason"),
            attempt=_int_field(data, "attempt", 0, "transition"),
        )


@public
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
    checkpoint_gaps: CheckpointGaps | None = None
    """Gaps between the body's consecutive checkpoints over its attempts (side channel)."""

    def __post_init__(self) -> None:
        # Inline, not through ``_SNAPSHOT_CHECKS``: every snapshot read from a store is
        # built here, and a call per field doubles the cost (reconcile reads 100,000).
        _require_text(self.task_id, "TaskSnapshot.task_id")
        _require_text(self.name, "TaskSnapshot.name")
        status: object = self.status
        if not isinstance(status, TaskStatus):
            object.__setattr__(self, "status", _coerce_status(status, "TaskSnapshot.status"))
        _require_int(self.status_version, "TaskSnapshot.status_version", minimum=0)
        _require_int(self.attempt, "TaskSnapshot.attempt", minimum=0)
        _require_int(self.max_attempts, "TaskSnapshot.max_attempts", minimum=1)
        _require_int(self.priority, "TaskSnapshot.priority")
        if self.bucket is not None:
            _require_int(self.bucket, "TaskSnapshot.bucket", minimum=0)
        if self.pid is not None:
            _require_int(self.pid, "TaskSnapshot.pid")
        for name in _INSTANTS:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
                _INSTANT_CHECKS[name](value)  # raises, naming the field
        progress: object = self.progress
        if progress is not None and not isinstance(progress, Progress):
            _SNAPSHOT_CHECKS["progress"](progress)
        failure: object = self.failure
        if failure is not None and not isinstance(failure, Failure):
            _SNAPSHOT_CHECKS["failure"](failure)
        gaps: object = self.checkpoint_gaps
        if gaps is not None and not isinstance(gaps, CheckpointGaps):
            _SNAPSHOT_CHECKS["checkpoint_gaps"](gaps)
        tags = _check_tags(self.tags)
        if tags is not self.tags:
            object.__setattr__(self, "tags", tags)
        _check_metadata(self.metadata)

    @property
    def is_terminal(self) -> bool:
        """True once the task reached one of the six terminal states."""
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
        """A copy with ``changes`` applied, each changed value validated.

        The same checks as construction run on every value that enters the snapshot;
        the fields copied unchanged were checked when this snapshot was built.

        Raises:
            TypeError: A name in ``changes`` is not a snapshot field.
            ConfigurationError: A value is malformed (the message names it).
        """
        new = object.__new__(TaskSnapshot)
        for set_slot, value in zip(_SLOT_SETTERS, _read_fields(self), strict=True):
            set_slot(new, value)
        for name, value in changes.items():
            check = _SNAPSHOT_CHECKS.get(name)
            if check is None:
                raise TypeError(f"TaskSnapshot has no field {name!r}")
            object.__setattr__(new, name, check(value))
        return new

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a format version; :meth:`from_dict` reverses it exactly."""
        gaps = self.checkpoint_gaps
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
            "checkpoint_gaps": None if gaps is None else gaps.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskSnapshot:
        """Rebuild from :meth:`to_dict` output; anything malformed raises ``StoreError``."""
        data = _mapping(data, "task snapshot")
        _check_version(data, "task snapshot")
        what = "task snapshot"
        when = parse_datetime
        try:
            created = when(data["created_at"], "created_at")
            updated = when(data["updated_at"], "updated_at")
            if created is None or updated is None:
                raise TypeError("created_at and updated_at must not be null")
            progress = data.get("progress")
            failure = data.get("failure")
            gaps = data.get("checkpoint_gaps")
            tags = data.get("tags") or []
            if not isinstance(tags, list):
                raise TypeError(f"tags must be a list of strings, got {tags!r}")
            metadata = data.get("metadata") or {}
            if not isinstance(metadata, dict):
                raise TypeError(f"metadata must be an object, got {metadata!r}")
            return cls(
                task_id=data["task_id"],
                name=data["name"],
                label=data.get("label"),
                status=_status(data["status"], "task snapshot"),
                status_version=_int_field(data, "status_version", None, what),
                attempt=_int_field(data, "attempt", 0, what),
                max_attempts=_int_field(data, "max_attempts", 1, what),
                created_at=created,
                updated_at=updated,
                queued_at=when(data.get("queued_at"), "queued_at"),
                started_at=when(data.get("started_at"), "started_at"),
                first_started_at=when(data.get("first_started_at"), "first_started_at"),
                finished_at=when(data.get("finished_at"), "finished_at"),
                progress=None if progress is None else Progress.from_dict(progress),
                last_heartbeat_at=when(data.get("last_heartbeat_at"), "heartbeat"),
                lease_owner=data.get("lease_owner"),
                lease_until=when(data.get("lease_until"), "lease_until"),
                failure=None if failure is None else Failure.from_dict(failure),
                outcome=data.get("outcome"),
                tags=frozenset(tags),
                bucket=data.get("bucket"),
                bucket_key=data.get("bucket_key"),
                priority=_int_field(data, "priority", 0, what),
                owner=data.get("owner"),
                pid=data.get("pid"),
                metadata=dict(metadata),
                checkpoint_gaps=None if gaps is None else CheckpointGaps.from_dict(gaps),
            )
        except (KeyError, TypeError, ValueError) as exc:
            task_id = data.get("task_id")
            raise StoreError(f"corrupt task snapshot {task_id!r}: {exc!r}") from exc


# ---------------------------------------------------------------- snapshot field checks

#: The datetime fields of a snapshot: each a timezone-aware datetime or ``None``.
_INSTANTS: Final = (
    "created_at",
    "updated_at",
    "queued_at",
    "started_at",
    "first_started_at",
    "finished_at",
    "last_heartbeat_at",
    "lease_until",
)


def _check_tags(value: object) -> frozenset[str]:
    if isinstance(value, str):
        raise ConfigurationError(
            f"TaskSnapshot.tags must be a collection of strings, not the string {value!r} "
            "(which would become a set of its characters); wrap it: tags={...}"
        )
    # Callers pass sets or lists; the snapshot always holds a frozenset.
    tags = value if isinstance(value, frozenset) else frozenset(value)  # type: ignore[call-overload]
    for tag in tags:
        if not isinstance(tag, str):
            raise ConfigurationError(f"TaskSnapshot.tags must hold strings, got {tag!r}")
    return tags


def _field_check(check: Any, name: str, **options: Any) -> Any:
    """A one-argument check of field ``name`` that returns the value to store."""

    def checked(value: object) -> object:
        check(value, f"TaskSnapshot.{name}", **options)
        return value

    return checked


def _optional(check: Any) -> Any:
    def checked(value: object) -> object:
        return value if value is None else check(value)

    return checked


def _instant_check(name: str) -> Any:
    def checked(value: object) -> object:
        if value is None:
            return value
        if not isinstance(value, datetime):
            raise ConfigurationError(f"TaskSnapshot.{name} must be a datetime, got {value!r}")
        _require_aware(value, f"TaskSnapshot.{name}")
        return value

    return checked


def _instance_check(name: str, kind: type) -> Any:
    def checked(value: object) -> object:
        if value is not None and not isinstance(value, kind):
            raise ConfigurationError(
                f"TaskSnapshot.{name} must be a {kind.__name__} or None, got {value!r}"
            )
        return value

    return checked


def _check_metadata(value: object) -> object:
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"TaskSnapshot.metadata must be a mapping of JSON values, got {value!r}"
        )
    return value


def _any(value: object) -> object:
    return value


#: One check per snapshot field, returning the value to store (coerced where the model
#: coerces: a status string, a tag collection). Construction runs them all,
#: ``replace`` only those of the changed fields.
_SNAPSHOT_CHECKS: Final[dict[str, Any]] = {
    "task_id": _field_check(_require_text, "task_id"),
    "name": _field_check(_require_text, "name"),
    "status": lambda value: _coerce_status(value, "TaskSnapshot.status"),
    "status_version": _field_check(_require_int, "status_version", minimum=0),
    "attempt": _field_check(_require_int, "attempt", minimum=0),
    "max_attempts": _field_check(_require_int, "max_attempts", minimum=1),
    "priority": _field_check(_require_int, "priority"),
    "bucket": _optional(_field_check(_require_int, "bucket", minimum=0)),
    "pid": _optional(_field_check(_require_int, "pid")),
    **(_INSTANT_CHECKS := {name: _instant_check(name) for name in _INSTANTS}),
    "progress": _instance_check("progress", Progress),
    "failure": _instance_check("failure", Failure),
    "checkpoint_gaps": _instance_check("checkpoint_gaps", CheckpointGaps),
    "tags": _check_tags,
    "metadata": _check_metadata,
}
_SNAPSHOT_FIELDS: Final = tuple(TaskSnapshot.__dataclass_fields__)
#: Every field's value in one call, and each field's slot setter: ``replace`` copies
#: the snapshot through them (a frozen dataclass refuses ``setattr``).
_read_fields: Final = operator.attrgetter(*_SNAPSHOT_FIELDS)
_SLOT_SETTERS: Final = tuple(TaskSnapshot.__dict__[name].__set__ for name in _SNAPSHOT_FIELDS)
for _name in _SNAPSHOT_FIELDS:
    _SNAPSHOT_CHECKS.setdefault(_name, _any)
