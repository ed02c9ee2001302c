"""The stable JSON documents printed by ``--json`` (documented in docs/cli.md).

Every document is an object whose ``schema`` names its kind and version
(``chongming-task.ps.v1``). Fields are only ever added within a version; a rename or
removal would bump the version. The builders here are explicit field lists, not
``to_dict()`` passthroughs, so a change in the storage codec cannot silently change
what scripts parse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from chongming_task._model import Failure, Progress, TaskSnapshot, Transition
from chongming_task.controller._table import elapsed_seconds
from chongming_task.core._clock import utc_now

__all__ = [
    "SCHEMA_VERSION",
    "document",
    "failure_doc",
    "progress_doc",
    "task_doc",
    "transition_doc",
]

#: Version suffix of every document's ``schema`` field.
SCHEMA_VERSION: Final = 1


def document(kind: str, **fields: Any) -> dict[str, Any]:
    """A top-level document: ``{"schema": "chongming-task.<kind>.v1", **fields}``."""
    return {"schema": f"chongming-task.{kind}.v{SCHEMA_VERSION}", **fields}


def _dt(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def progress_doc(progress: Progress | None) -> dict[str, Any] | None:
    """``{"done", "total", "unit", "message", "fraction"}`` or ``null``."""
    if progress is None:
        return None
    return {
        "done": progress.done,
        "total": progress.total,
        "unit": progress.unit,
        "message": progress.message,
        "fraction": progress.fraction,
    }


def failure_doc(failure: Failure | None) -> dict[str, Any] | None:
    """``{"kind", "message", "retryable", "exception_type", "traceback"}`` or ``null``."""
    if failure is None:
        return None
    return {
        "kind": failure.kind.value,
        "message": failure.message,
        "retryable": failure.retryable,
        "exception_type": failure.exception_type,
        "traceback": failure.traceback,
    }


def task_doc(snapshot: TaskSnapshot, now: datetime | None = None) -> dict[str, Any]:
    """One task, as ``ps``, ``status`` and ``run`` print it."""
    return {
        "task_id": snapshot.task_id,
        "name": snapshot.name,
        "label": snapshot.label,
        "status": snapshot.status.value,
        "terminal": snapshot.is_terminal,
        "status_version": snapshot.status_version,
        "attempt": snapshot.attempt,
        "max_attempts": snapshot.max_attempts,
        "priority": snapshot.priority,
        "tags": sorted(snapshot.tags),
        "bucket": snapshot.bucket,
        "bucket_key": snapshot.bucket_key,
        "owner": snapshot.owner,
        "pid": snapshot.pid,
        "created_at": _dt(snapshot.created_at),
        "updated_at": _dt(snapshot.updated_at),
        "queued_at": _dt(snapshot.queued_at),
        "started_at": _dt(snapshot.started_at),
        "first_started_at": _dt(snapshot.first_started_at),
        "finished_at": _dt(snapshot.finished_at),
        "elapsed": elapsed_seconds(snapshot, now or utc_now()),
        "progress": progress_doc(snapshot.progress),
        "last_heartbeat_at": _dt(snapshot.last_heartbeat_at),
        "lease_owner": snapshot.lease_owner,
        "lease_until": _dt(snapshot.lease_until),
        "failure": failure_doc(snapshot.failure),
        "outcome": snapshot.outcome,
        "metadata": dict(snapshot.metadata),
    }


def transition_doc(transition: Transition) -> dict[str, Any]:
    """One audit record, as ``history`` prints it."""
    return {
        "version": transition.version,
        "at": _dt(transition.at),
        "from": None if transition.from_status is None else transition.from_status.value,
        "to": transition.to_status.value,
        "trigger": transition.trigger,
        "actor": transition.actor,
        "reason": transition.reason,
        "attempt": transition.attempt,
    }


def tasks_docs(snapshots: Iterable[TaskSnapshot]) -> list[dict[str, Any]]:
    """``task_doc`` of each snapshot, in order."""
    return [task_doc(snapshot) for snapshot in snapshots]


def counts_doc(counts: Mapping[Any, int]) -> dict[str, int]:
    """Status -> count with string keys (statuses are ``StrEnum`` values)."""
    return {str(key): int(value) for key, value in counts.items()}
