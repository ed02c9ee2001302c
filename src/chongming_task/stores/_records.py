"""The store vocabulary: queries, commands, schedule records and the store's own errors.

These are defined here and re-exported from :mod:`chongming_task.stores._base`, their
documented home. ``__module__`` stays this module: ``typing.get_type_hints`` resolves
the string annotations of a class in the module it names.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal, NamedTuple

from chongming_task import _validation
from chongming_task._model import JSONValue, TaskSnapshot, Transition, dumps, parse_datetime
from chongming_task._public import public
from chongming_task._redact import redact_text_fields
from chongming_task._validation import OUTCOME_MAX_BYTES as _OUTCOME_MAX_BYTES
from chongming_task.errors import (
    ClaimLost,
    ConfigurationError,
    CorruptRows,
    ScheduleConflict,
    StoreError,
    TaskNotFound,
)
from chongming_task.states import TaskStatus

__all__ = [
    "OUTCOME_MAX_BYTES",
    "ClaimLost",
    "Command",
    "CorruptRows",
    "LostCandidate",
    "LostMark",
    "ScheduleConflict",
    "ScheduleRecord",
    "TaskHead",
    "TaskNotFound",
    "TaskQuery",
    "WaitingWork",
]

#: The largest task outcome a store accepts, measured as UTF-8 bytes of its compact JSON.
#: Outcomes are results, not payloads: a bigger value belongs in the artifact directory
#: with its path returned. The cap keeps one row readable in one page-in and keeps
#: ``ps`` fast; every store enforces it with a ``ConfigurationError``.
OUTCOME_MAX_BYTES: Final = _OUTCOME_MAX_BYTES

Order = Literal["created", "-created", "updated", "-updated", "priority", "id"]
CommandKind = Literal["task", "schedule", "node"]
CommandStatus = Literal["pending", "claimed", "completed"]

_ORDERS: Final = frozenset({"created", "-created", "updated", "-updated", "priority", "id"})
#: The time-window fields of ``TaskQuery`` (aware datetimes, compared as instants).
_TIME_BOUNDS: Final = ("created_after", "created_before", "updated_after", "updated_before")


def _in_window(at: datetime, after: datetime | None, before: datetime | None) -> bool:
    """``after <= at < before``, a missing bound being no bound."""
    return (after is None or at >= after) and (before is None or at < before)


def _has_argument(snapshot: TaskSnapshot, text: str) -> bool:
    """Whether the recipe's ``args`` (a list) or ``kwargs`` (an object), as compact JSON
    text (``dumps``, what the stores keep), contains ``text`` (``TaskQuery.argument``)."""
    recipe = snapshot.metadata.get("recipe")
    if not isinstance(recipe, Mapping):
        return False
    args, kwargs = recipe.get("args"), recipe.get("kwargs")
    return (isinstance(args, list) and text in dumps(args)) or (
        isinstance(kwargs, Mapping) and text in dumps(kwargs)
    )


# ---------------------------------------------------------------- errors


# ---------------------------------------------------------------- records


def _status(value: object) -> TaskStatus:
    if not isinstance(value, TaskStatus):
        raise ConfigurationError(f"TaskQuery.statuses must hold TaskStatus values, got {value!r}")
    return value


@public
@dataclass(frozen=True, kw_only=True)
class TaskQuery:
    """Filters for ``query``/``count_by_status``; every filter present must match (AND)."""

    statuses: frozenset[TaskStatus] | None = None
    """Any of these statuses; ``None`` means every status."""
    name_prefix: str | None = None
    """Task names starting with this exact, case-sensitive text (no wildcards)."""
    tag: str | None = None
    """Tasks carrying this tag."""
    bucket: int | None = None
    buckets: frozenset[int] | None = None
    """Any of these buckets (the set a node owns, guide §8.14)."""
    owner: str | None = None
    owned: bool | None = None
    """Tasks with an owner (``True``) or without one (``False``): a queued task claimed
    by a worker has one, a waiting one none (a worker's look for dead claims reads the
    claimed ones only, never the whole queue)."""
    metadata_eq: Mapping[str, str] | None = None
    """Top-level metadata keys whose value is exactly this string (``{"schedule": "n"}``)."""
    task_ids: frozenset[str] | None = None
    """Only these task ids (a page of ids found by ``query_heads``, read in full)."""
    id_prefix: str | None = None
    """Task ids starting with this exact, case-sensitive text (a range on the id index)."""
    id_after: str | None = None
    """Task ids after this one in code-point order (``>``): the keyset of ``order="id"``."""
    argument: str | None = None
    """Tasks whose enqueued arguments contain this text: the compact JSON text of
    ``metadata["recipe"]["args"]`` (a list) or ``["kwargs"]`` (an object) holds it,
    case-sensitively. No index serves it: the store reads the document of every task
    the other filters leave, so combine it with them (docs/dashboard.md)."""
    lease_expired_by: datetime | None = None
    """Tasks nobody holds at this instant: ``lease_until`` unset or not after it (``<=``).

    The judgement of ``reconcile()``, made by the store so that tasks with a live lease
    are never read: compared as instants, whatever the offsets they were written with."""
    created_after: datetime | None = None
    """Tasks created at or after this instant (``>=``; timezone-aware)."""
    created_before: datetime | None = None
    """Tasks created strictly before this instant (``<``), so that ``[after, before)``
    windows side by side never count a task twice."""
    updated_after: datetime | None = None
    """Tasks last written at or after this instant (``>=``)."""
    updated_before: datetime | None = None
    """Tasks last written strictly before this instant (``<``)."""
    limit: int | None = None
    order: Order = "created"
    """``created``/``updated`` ascending, ``-`` for descending; ``priority`` is highest
    first, then oldest first. Ties break on insertion order, so pages are stable."""

    def __post_init__(self) -> None:  # noqa: C901 (one check per TaskQuery filter)
        if self.statuses is not None:
            statuses = frozenset(
                _status(status)
                for status in _validation.check_items(self.statuses, "TaskQuery.statuses")
            )
            object.__setattr__(self, "statuses", statuses)
        if self.buckets is not None:
            buckets = _validation.check_buckets(self.buckets, "TaskQuery.buckets")
            object.__setattr__(self, "buckets", buckets)
        if self.task_ids is not None:
            given: object = self.task_ids
            if isinstance(given, str):
                raise ConfigurationError(
                    f"TaskQuery.task_ids must be a collection of ids, not the string "
                    f"{given!r}; wrap it: task_ids={{...}}"
                )
            task_ids = frozenset(
                _validation.check_lookup(task_id, "TaskQuery.task_ids[]")
                for task_id in _validation.check_items(given, "TaskQuery.task_ids")
            )
            object.__setattr__(self, "task_ids", task_ids)
        cutoff = self.lease_expired_by
        if cutoff is not None and (not isinstance(cutoff, datetime) or cutoff.tzinfo is None):
            raise ConfigurationError(
                f"TaskQuery.lease_expired_by must be a timezone-aware datetime, got {cutoff!r}"
            )
        for bound in _TIME_BOUNDS:
            value = getattr(self, bound)
            if value is not None:
                _validation.check_aware(value, f"TaskQuery.{bound}")
        if self.limit is not None and (
            isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 0
        ):
            raise ConfigurationError(f"TaskQuery.limit must be >= 0 or None, got {self.limit!r}")
        if self.limit is not None:
            _validation.check_int(self.limit, "TaskQuery.limit", maximum=_validation.INT64_MAX)
        if self.bucket is not None:
            _validation.check_int(
                self.bucket, "TaskQuery.bucket", minimum=0, maximum=_validation.INT64_MAX
            )
        for name in ("name_prefix", "tag", "owner", "id_prefix", "id_after", "argument"):
            text = getattr(self, name)
            if text is not None:
                _validation.check_lookup(text, f"TaskQuery.{name}")
        if self.owned is not None and not isinstance(self.owned, bool):
            raise ConfigurationError(
                f"TaskQuery.owned must be True, False or None, got {self.owned!r}"
            )
        if not isinstance(self.order, str) or self.order not in _ORDERS:
            raise ConfigurationError(
                f"TaskQuery.order must be one of {sorted(_ORDERS)}, got {self.order!r}"
            )
        if self.metadata_eq is not None:
            if not isinstance(self.metadata_eq, Mapping):
                raise ConfigurationError(
                    f"TaskQuery.metadata_eq must be a mapping of str to str, got "
                    f"{self.metadata_eq!r}"
                )
            for key, value in self.metadata_eq.items():
                if not isinstance(key, str) or not isinstance(value, str):
                    raise ConfigurationError(
                        f"TaskQuery.metadata_eq maps str to str, got {key!r}: {value!r}"
                    )
                _validation.check_lookup(key, "TaskQuery.metadata_eq key")
                _validation.check_lookup(value, f"TaskQuery.metadata_eq[{key!r}]")

    def matches(self, snapshot: TaskSnapshot) -> bool:  # noqa: C901 (one check per filter)
        """Whether ``snapshot`` passes every filter (the reference semantics)."""
        if self.statuses is not None and snapshot.status not in self.statuses:
            return False
        if self.name_prefix is not None and not snapshot.name.startswith(self.name_prefix):
            return False
        if self.tag is not None and self.tag not in snapshot.tags:
            return False
        if self.bucket is not None and snapshot.bucket != self.bucket:
            return False
        if self.buckets is not None and snapshot.bucket not in self.buckets:
            return False
        if self.owner is not None and snapshot.owner != self.owner:
            return False
        if self.owned is not None and (snapshot.owner is not None) != self.owned:
            return False
        if self.task_ids is not None and snapshot.task_id not in self.task_ids:
            return False
        if self.id_prefix is not None and not snapshot.task_id.startswith(self.id_prefix):
            return False
        if self.id_after is not None and not snapshot.task_id > self.id_after:
            return False
        if self.argument is not None and not _has_argument(snapshot, self.argument):
            return False
        if (
            self.lease_expired_by is not None
            and snapshot.lease_until is not None
            and snapshot.lease_until > self.lease_expired_by
        ):
            return False
        if not _in_window(snapshot.created_at, self.created_after, self.created_before):
            return False
        if not _in_window(snapshot.updated_at, self.updated_after, self.updated_before):
            return False
        if self.metadata_eq:
            for key, value in self.metadata_eq.items():
                found = snapshot.metadata.get(key)
                if not isinstance(found, str) or found != value:
                    return False
        return True


class TaskHead(NamedTuple):
    """Who a task is and where it stands, without its document (``query_heads``).

    Enough to sort tasks into what to do with them (``reconcile()`` classifies a whole
    node's tasks by it) at a fraction of the cost of decoding snapshots.
    """

    task_id: str
    status: TaskStatus
    status_version: int


class WaitingWork(NamedTuple):
    """The work queue's waiting tasks of one bucket (``TaskRecordStore.waiting_work``)."""

    depth: int
    """Tasks queued, held by nobody and enqueued with a recipe, due or not."""
    oldest_since: datetime
    """When the oldest of them (by creation, ties by insertion order) was queued: its
    ``queued_at``, else its ``created_at``."""


class LostCandidate(NamedTuple):
    """What ``mark_lost_many`` tells its ``failure`` function about one task.

    The fields a "why is it lost" message is made of, from the snapshot the store read.
    """

    task_id: str
    status: TaskStatus
    status_version: int
    owner: str | None
    lease_owner: str | None
    lease_until: datetime | None


class LostMark(NamedTuple):
    """One task ``mark_lost_many`` found, and what became of it."""

    task_id: str
    transition: Transition | None
    """The stored ``-> lost`` record; ``None`` when the task changed under the write
    (its holder wrote first): nothing was written for it."""
    snapshot: TaskSnapshot | None
    """The snapshot after the transition, when asked for (``snapshots=True``) and written."""


@dataclass(frozen=True, kw_only=True)
class Command:
    """A control request written to the store for the task's holder (guide §8.9).

    The ``reason`` and ``error`` texts of ``payload`` and ``result`` are redacted
    (``chongming_task._redact``) when a command is made, so no process writes a secret
    of an operator's reason into a store that every other process reads.
    """

    command_id: str
    kind: CommandKind
    target: str
    """The task id (``kind="task"``), the schedule name (``kind="schedule"``) or the
    node id (``kind="node"``: a bucket handoff, ``chongming_task.buckets``)."""
    action: str
    payload: Mapping[str, JSONValue]
    issued_by: str
    issued_at: datetime
    target_owner: str | None
    """Who should apply it; ``None`` lets any owner claim it."""
    status: CommandStatus = "pending"
    claimed_by: str | None = None
    claim_token: str | None = None
    """Fencing token, new on every claim: only its holder may complete/release/extend."""
    lease_until: datetime | None = None
    claims: int = 0
    """How many times the command was claimed (> 1 means a claimant died or released)."""
    completed_at: datetime | None = None
    result: JSONValue = None

    def __post_init__(self) -> None:
        if self.kind not in ("task", "schedule", "node"):
            raise ConfigurationError(
                f"Command.kind must be 'task', 'schedule' or 'node', got {self.kind!r}"
            )
        if self.status not in ("pending", "claimed", "completed"):
            raise ConfigurationError(f"Command.status is invalid: {self.status!r}")
        for name in ("issued_at", "lease_until", "completed_at"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ConfigurationError(f"Command.{name} must be timezone-aware, got {value!r}")
        object.__setattr__(self, "payload", redact_text_fields(dict(self.payload)))
        if self.result is not None:
            object.__setattr__(self, "result", redact_text_fields(self.result))

    @classmethod
    def new(
        cls,
        *,
        kind: CommandKind,
        target: str,
        action: str,
        issued_by: str,
        issued_at: datetime,
        payload: Mapping[str, JSONValue] | None = None,
        target_owner: str | None = None,
    ) -> Command:
        """A fresh pending command with a random ``command_id``."""
        return cls(
            command_id=uuid.uuid4().hex,
            kind=kind,
            target=target,
            action=action,
            payload=dict(payload or {}),
            issued_by=issued_by,
            issued_at=issued_at,
            target_owner=target_owner,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (datetimes as ISO-8601), exact under ``from_dict``."""
        return {
            "command_id": self.command_id,
            "kind": self.kind,
            "target": self.target,
            "action": self.action,
            "payload": dict(self.payload),
            "issued_by": self.issued_by,
            "issued_at": self.issued_at.isoformat(),
            "target_owner": self.target_owner,
            "status": self.status,
            "claimed_by": self.claimed_by,
            "claim_token": self.claim_token,
            "lease_until": None if self.lease_until is None else self.lease_until.isoformat(),
            "claims": self.claims,
            "completed_at": None if self.completed_at is None else self.completed_at.isoformat(),
            "result": self.result,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Command:
        """Inverse of :meth:`to_dict`; malformed data becomes ``StoreError``."""
        try:
            issued_at = parse_datetime(data["issued_at"], "command issued_at")
            assert issued_at is not None
            return cls(
                command_id=data["command_id"],
                kind=data["kind"],
                target=data["target"],
                action=data["action"],
                payload=data.get("payload") or {},
                issued_by=data["issued_by"],
                issued_at=issued_at,
                target_owner=data.get("target_owner"),
                status=data.get("status", "pending"),
                claimed_by=data.get("claimed_by"),
                claim_token=data.get("claim_token"),
                lease_until=parse_datetime(data.get("lease_until"), "command lease_until"),
                claims=int(data.get("claims", 0)),
                completed_at=parse_datetime(data.get("completed_at"), "command completed_at"),
                result=data.get("result"),
            )
        except (KeyError, TypeError, ValueError, AssertionError) as exc:
            raise StoreError(f"corrupt command: {exc!r}") from exc


@dataclass(frozen=True, kw_only=True)
class ScheduleRecord:
    """A scheduler control record. The store keeps ``data`` opaque and versions it."""

    name: str
    data: Mapping[str, JSONValue] = field(default_factory=dict)
    revision: int
    """1 after the first put, +1 on every successful put."""
    updated_at: datetime
