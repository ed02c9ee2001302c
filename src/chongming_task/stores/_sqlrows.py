"""Rows in, rows out: the parameters and decoders both SQL stores share.

A task row carries the snapshot document plus copies of the fields queries filter on,
and six side-channel columns that ``touch`` writes without rewriting the document
(they win over the document's copies on read). Dialects differ only in how an instant
and a list are bound, which the caller passes in as two small functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from chongming_task._model import TaskSnapshot, dumps, loads, parse_datetime
from chongming_task.errors import StoreError
from chongming_task.states import TaskStatus
from chongming_task.stores._codec import encode_snapshot
from chongming_task.stores._records import Command, CorruptRows, ScheduleRecord, TaskQuery

__all__ = [
    "ORDER_SQL",
    "STATUS_BY_VALUE",
    "TASK_COLUMNS",
    "QueryParts",
    "build_filters",
    "decode_command",
    "decode_schedule",
    "decode_task",
    "prefix_upper_bound",
    "task_params",
]

#: ``ORDER BY`` per ``TaskQuery.order``; ``seq`` (insertion order) breaks ties so that
#: pages are stable. Each one is backed by an index in both dialects.
ORDER_SQL: Final = {
    "created": "t.created_at, t.seq",
    "-created": "t.created_at DESC, t.seq DESC",
    "updated": "t.updated_at, t.seq",
    "-updated": "t.updated_at DESC, t.seq DESC",
    "priority": "t.priority DESC, t.created_at, t.seq",
    "id": "t.task_id",
}

#: The columns of a task row, in the order of both dialects' ``insert_task``.
TASK_COLUMNS: Final = (
    "task_id",
    "name",
    "status",
    "status_version",
    "created_at",
    "updated_at",
    "priority",
    "bucket",
    "owner",
    "meta_schedule",
    "meta_pipeline",
    "tags",
    "progress",
    "heartbeat_at",
    "lease_owner",
    "lease_until",
    "pid",
    "doc",
    "checkpoint_gaps",
    "meta_parent",
)

#: Metadata keys with their own indexed column (what the scheduler and pipelines ask for).
_INDEXED_METADATA: Final = {
    "schedule": "meta_schedule",
    "pipeline": "meta_pipeline",
    "parent": "meta_parent",
}

Bind = Callable[[Any], Any]


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def task_params(snapshot: TaskSnapshot, instant: Bind, array: Bind) -> dict[str, Any]:
    """Every column of a task row (the document encoded exactly once)."""
    metadata = snapshot.metadata
    schedule = metadata.get("schedule")
    pipeline = metadata.get("pipeline")
    parent = metadata.get("parent")
    progress = snapshot.progress
    gaps = snapshot.checkpoint_gaps
    return {
        "task_id": snapshot.task_id,
        "name": snapshot.name,
        "status": snapshot.status.value,
        "status_version": snapshot.status_version,
        "created_at": instant(snapshot.created_at),
        "updated_at": instant(snapshot.updated_at),
        "priority": snapshot.priority,
        "bucket": snapshot.bucket,
        "owner": snapshot.owner,
        "meta_schedule": schedule if isinstance(schedule, str) else None,
        "meta_pipeline": pipeline if isinstance(pipeline, str) else None,
        "tags": array(sorted(snapshot.tags)),
        "progress": None if progress is None else dumps(progress.to_dict()),
        "heartbeat_at": _iso(snapshot.last_heartbeat_at),
        "lease_owner": snapshot.lease_owner,
        "lease_until": _iso(snapshot.lease_until),
        "pid": snapshot.pid,
        "doc": encode_snapshot(snapshot),
        "checkpoint_gaps": None if gaps is None else dumps(gaps.to_dict()),
        "meta_parent": parent if isinstance(parent, str) else None,
    }


def decode_task(row: Sequence[Any]) -> TaskSnapshot:
    """``(doc, progress, heartbeat_at, lease_owner, lease_until, pid, task_id,
    checkpoint_gaps)`` to a snapshot; a row that does not decode is a
    :class:`CorruptRows` naming its task id."""
    try:
        return _decode_task(row)
    except StoreError as exc:
        task_id = str(row[6]) if len(row) > 6 else "?"
        raise CorruptRows({task_id: str(exc)}) from exc


def _decode_task(row: Sequence[Any]) -> TaskSnapshot:
    try:
        data = loads(row[0], "task snapshot")
        if not isinstance(data, dict):
            raise StoreError(f"corrupt task snapshot: expected a JSON object, got {data!r:.80}")
        data["progress"] = None if row[1] is None else loads(row[1], "progress")
        data["last_heartbeat_at"] = row[2]
        data["lease_owner"] = row[3]
        data["lease_until"] = row[4]
        data["pid"] = row[5]
        gaps = row[7] if len(row) > 7 else None
        data["checkpoint_gaps"] = None if gaps is None else loads(gaps, "checkpoint gaps")
        return TaskSnapshot.from_dict(data)
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"corrupt task row: {exc!r}") from exc


#: Each status by its column value (``decode_status`` without the call, in hot loops).
STATUS_BY_VALUE: Final = {status.value: status for status in TaskStatus}


def decode_status(value: object) -> TaskStatus:
    """A status column value; anything unknown is a corrupt row."""
    status = STATUS_BY_VALUE.get(value) if isinstance(value, str) else None
    if status is not None:
        return status  # one dict lookup: query_heads decodes a status per row
    try:
        return TaskStatus(str(value))
    except ValueError as exc:
        raise StoreError(f"corrupt task row: unknown status {value!r} in the database") from exc


def decode_command(row: Sequence[Any], instant_out: Callable[[Any], datetime]) -> Command:
    """The 13 command columns (``select_command`` order) to a ``Command``."""
    try:
        (command_id, kind, target, action, target_owner, status, claimed_by, claim_token) = row[:8]
        lease_until, claims, completed_at, result, doc = row[8:13]
        data = loads(doc, "command")
        issued_at = parse_datetime(data["issued_at"], "command issued_at")
        assert issued_at is not None
        return Command(
            command_id=command_id,
            kind=kind,
            target=target,
            action=action,
            payload=data["payload"],
            issued_by=data["issued_by"],
            issued_at=issued_at,
            target_owner=target_owner,
            status=status,
            claimed_by=claimed_by,
            claim_token=claim_token,
            lease_until=None if lease_until is None else instant_out(lease_until),
            claims=int(claims),
            completed_at=None if completed_at is None else instant_out(completed_at),
            result=None if result is None else loads(result, "command result"),
        )
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"corrupt command row: {exc!r}") from exc


def decode_schedule(row: Sequence[Any], instant_out: Callable[[Any], datetime]) -> ScheduleRecord:
    """``(name, revision, updated_at, data)`` to a ``ScheduleRecord``."""
    data = loads(row[3], "schedule data")
    if not isinstance(data, dict):
        raise StoreError(f"corrupt schedule {row[0]!r}: data is not a JSON object")
    return ScheduleRecord(
        name=row[0], data=data, revision=int(row[1]), updated_at=instant_out(row[2])
    )


def prefix_upper_bound(prefix: str) -> str | None:
    """The least string greater than every string that starts with ``prefix``.

    ``name >= prefix AND name < bound`` is then exactly "starts with prefix" under
    code-point (= UTF-8 byte) order, and an index range scan; no LIKE pattern, so no
    ``%``/``_`` escaping to get wrong. ``None`` means there is no upper bound.
    """
    chars = list(prefix)
    while chars:
        code = ord(chars[-1]) + 1
        if 0xD800 <= code <= 0xDFFF:
            code = 0xE000  # surrogates cannot be stored; skip to the next real character
        if code <= 0x10FFFF:
            chars[-1] = chr(code)
            return "".join(chars)
        chars.pop()
    return None


class QueryParts:
    """A ``WHERE`` clause and its parameters, built from the dialect's filter sections."""

    __slots__ = ("empty", "params", "where")

    def __init__(self, where: str, params: dict[str, Any], *, empty: bool = False) -> None:
        self.where = where
        self.params = params
        self.empty = empty
        """True when the filters can match nothing (an empty ``statuses`` set)."""


def build_filters(  # noqa: C901 (one clause per TaskQuery filter)
    query: TaskQuery | None,
    sql: Mapping[str, str],
    array: Bind,
    instant: Bind,
    *,
    probe_tags: bool = False,
) -> QueryParts:
    """Compose the ``WHERE`` of ``query`` from constant fragments; values stay parameters.

    ``probe_tags``: the tag is checked per task row (``filter_tag_probe``, where the
    dialect has it) instead of reading the tag's tasks first, for a walk that checks
    its filters row by row.
    """
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if query is None:
        return QueryParts("", params)
    if query.statuses is not None:
        if not query.statuses:
            return QueryParts("", params, empty=True)
        if len(query.statuses) == 1:
            clauses.append(sql["filter_status"])
            params["status"] = next(iter(query.statuses)).value
        else:
            clauses.append(sql["filter_statuses"])
            params["statuses"] = array(sorted(status.value for status in query.statuses))
    if query.name_prefix:
        params["name_low"] = query.name_prefix
        high = prefix_upper_bound(query.name_prefix)
        if high is None:
            clauses.append(sql["filter_name_from"])
        else:
            clauses.append(sql["filter_name_range"])
            params["name_high"] = high
    if query.tag is not None:
        # A dialect that keeps each tag with its task's name narrows the tag's tasks by
        # the name prefix in the same index range.
        if probe_tags and "filter_tag_probe" in sql:
            clauses.append(sql["filter_tag_probe"])
        elif query.name_prefix and "filter_tag_name_range" in sql:
            bounded = "name_high" in params
            clauses.append(sql["filter_tag_name_range" if bounded else "filter_tag_name_from"])
        else:
            clauses.append(sql["filter_tag"])
        params["tag"] = query.tag
    if query.bucket is not None:
        clauses.append(sql["filter_bucket"])
        params["bucket"] = query.bucket
    if query.buckets is not None:
        if not query.buckets:
            return QueryParts("", params, empty=True)
        clauses.append(sql["filter_buckets"])
        params["buckets"] = array(sorted(query.buckets))
    if query.owner is not None:
        clauses.append(sql["filter_owner"])
        params["owner"] = query.owner
    if query.owned is not None:
        clauses.append(sql["filter_owned" if query.owned else "filter_unowned"])
    if query.task_ids is not None:
        if not query.task_ids:
            return QueryParts("", params, empty=True)
        clauses.append(sql["filter_task_ids"])
        params["task_ids"] = array(sorted(query.task_ids))
    if query.id_prefix:
        params["id_low"] = query.id_prefix
        high = prefix_upper_bound(query.id_prefix)
        if high is None:
            clauses.append(sql["filter_id_from"])
        else:
            clauses.append(sql["filter_id_range"])
            params["id_high"] = high
    if query.id_after is not None:
        clauses.append(sql["filter_id_after"])
        params["id_after"] = query.id_after
    if query.argument is not None:
        clauses.append(sql["filter_argument"])
        params["argument"] = query.argument
    if query.lease_expired_by is not None:
        clauses.append(sql["filter_lease_expired"])
        params["lease_cutoff_at"] = instant(query.lease_expired_by)
        params["lease_cutoff_text"] = query.lease_expired_by.astimezone(UTC).isoformat()
    for bound in ("created_after", "created_before", "updated_after", "updated_before"):
        value = getattr(query, bound)
        if value is not None:
            # A range on the (created_at, seq) / (updated_at, seq) indexes, which also
            # serve the status-first one: pages of a time window stay index walks.
            clauses.append(sql[f"filter_{bound}"])
            params[bound] = instant(value)
    for index, (key, value) in enumerate(sorted((query.metadata_eq or {}).items())):
        column = _INDEXED_METADATA.get(key)
        if column is not None:
            clauses.append(sql[f"filter_{column}"])
            params[column] = value
        else:
            clauses.append(sql["filter_meta_key"].replace("{i}", str(index)))
            params[f"meta_key_{index}"] = key
            params[f"meta_value_{index}"] = value
    where = " WHERE " + " AND ".join(clauses) if clauses else ""
    return QueryParts(where, params)
