"""What the schedule commands print: record and run documents, shared helpers."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chongming_task.cli._session import Session
    from chongming_task.schedule import RunSummary, ScheduleAdmin, ScheduleControl

__all__ = ["admin_for", "run_doc", "schedule_doc", "short", "when"]


def when(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def schedule_doc(control: ScheduleControl) -> dict[str, Any]:
    """One schedule's control record as ``--json`` prints it."""
    return {
        "name": control.name,
        "display_name": control.shown_name,
        "task": control.task,
        "status": control.status,
        "status_reason": control.status_reason,
        "pattern": control.pattern,
        "timezone": control.timezone,
        "default_pattern": control.default_pattern,
        "default_timezone": control.default_timezone,
        "dst": control.dst,
        "overridden": control.overridden,
        "definition_revision": control.definition_revision,
        "description": control.description,
        "overlap": control.overlap,
        "max_runtime": control.max_runtime,
        "retry_attempts": control.retry_attempts,
        "retry_backoff": control.retry_backoff,
        "manual_run_enabled": control.manual_run_enabled,
        "misfire": control.misfire,
        "misfire_grace": control.misfire_grace,
        "bucket_key": control.bucket_key,
        "registered_at": when(control.registered_at),
        "updated_at": when(control.updated_at),
        "updated_by": control.updated_by,
        "runs": control.runs,
        "errors": control.errors,
        "skips": control.skips,
        "consecutive_failures": control.consecutive_failures,
        "last_run_at": when(control.last_run_at),
        "last_status": control.last_status,
        "last_error": control.last_error,
        "next_run_at": when(control.next_run_at),
    }


def run_doc(run: RunSummary) -> dict[str, Any]:
    return {
        "task_id": run.task_id,
        "status": run.status.value,
        "trigger": run.trigger_type,
        "scheduled_at": when(run.scheduled_at),
        "started_at": when(run.started_at),
        "finished_at": when(run.finished_at),
        "duration": run.duration,
        "error": run.error,
    }


def admin_for(session: Session) -> ScheduleAdmin:
    from chongming_task.schedule import ScheduleAdmin

    return ScheduleAdmin(session.open_store(create=False), actor=session.issuer)


def short(value: datetime | None) -> str:
    return "-" if value is None else value.isoformat(timespec="seconds")
