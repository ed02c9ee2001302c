"""The one JSON view of a task, shared by the CLI (``--json``) and the dashboard's API.

``chongming-task status --json``, ``ps --json``, ``run``/``submit``/``stop --json``
and the dashboard's ``/api/tasks`` and ``/api/tasks/{id}`` all print what
:func:`task_doc` builds, so the two can never disagree and there is one redaction
rule for what they show: the progress message, the failure message and traceback,
the outcome, the metadata (the enqueued arguments in ``metadata["recipe"]`` among
them) and the last log lines are redacted on the way out
(:mod:`chongming_task._redact`), since a row may have been written by an older or a
foreign writer that did not redact.

The fields are an explicit list, not a ``to_dict()`` passthrough, so a change in the
storage codec cannot silently change what scripts parse; within a schema version
fields are only ever added (docs/cli.md, docs/dashboard.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from chongming_task._redact import redact, redact_json, redact_traceback
from chongming_task.controller._table import elapsed_seconds
from chongming_task.core import utc_now
from chongming_task.core.state_machine import StateMachine
from chongming_task.stores._queue_records import parent_of, recipe_of

if TYPE_CHECKING:
    from chongming_task._model import Failure, Progress, TaskSnapshot, Transition

__all__ = [
    "LOGS_KEY",
    "LOG_TAIL_LINES",
    "controls_of",
    "due_at",
    "failure_doc",
    "progress_doc",
    "stored_tail",
    "task_doc",
    "transition_doc",
]

#: Lines a process keeps per task (``worker.LogTail``); ``status`` shows them all.
LOG_TAIL_LINES: Final = 10
#: Where the tail lives in the task's metadata.
LOGS_KEY: Final = "logs"


def _dt(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def stored_tail(snapshot: TaskSnapshot, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last ``lines`` log lines a ``LogTail`` stored on ``snapshot`` (redacted).

    What readers in other processes show (``status``, the dashboard). The lines were
    redacted when recorded; they are redacted again here, since a row may have been
    written by an older or foreign writer. A task whose process kept no tail has none.
    """
    logs = snapshot.metadata.get(LOGS_KEY)
    if not isinstance(logs, list):
        return []
    return [redact(str(line)) or "" for line in logs[-lines:]] if lines > 0 else []


def due_at(snapshot: TaskSnapshot) -> datetime | None:
    """When a task enqueued with a delay may start (its recipe's ``not_before``)."""
    recipe = recipe_of(snapshot)
    return recipe.not_before if recipe is not None else None


def controls_of(snapshot: TaskSnapshot) -> dict[str, bool]:
    """Which controls are legal now, from the state machine (``can_stop`` & co); ``retry``
    also needs the stored recipe a worker runs it from."""
    machine = StateMachine(snapshot)
    return {
        "stop": machine.can_stop(),
        "pause": machine.can_pause(),
        "resume": machine.can_resume(),
        "retry": machine.can_retry() and recipe_of(snapshot) is not None,
    }


def progress_doc(progress: Progress | None) -> dict[str, Any] | None:
    """``{"done", "total", "unit", "message", "fraction", "text"}`` or ``null``."""
    if progress is None:
        return None
    return {
        "done": progress.done,
        "total": progress.total,
        "unit": progress.unit,
        "message": redact(progress.message),
        "fraction": progress.fraction,
        "text": redact(progress.render()),
    }


def failure_doc(failure: Failure | None, *, traceback: bool = True) -> dict[str, Any] | None:
    """``{"kind", "message", "retryable", "exception_type", "traceback"}`` or ``null``."""
    if failure is None:
        return None
    doc: dict[str, Any] = {
        "kind": failure.kind.value,
        "message": redact(failure.message),
        "retryable": failure.retryable,
        "exception_type": failure.exception_type,
    }
    if traceback:
        doc["traceback"] = redact_traceback(failure.traceback)
    return doc


def task_doc(
    snapshot: TaskSnapshot, now: datetime | None = None, *, full: bool = True
) -> dict[str, Any]:
    """One task as the CLI's ``--json`` and the dashboard's API show it.

    Args:
        snapshot: The task.
        now: Against what an unfinished task's ``elapsed`` counts (default: the wall
            clock); a finished task's ``elapsed`` does not depend on it.
        full: With ``failure.traceback``, ``outcome``, ``metadata`` and ``logs`` (the
            CLI and the dashboard's task page); ``False`` leaves them out, for the
            dashboard's lists.
    """
    doc: dict[str, Any] = {
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
        "due_at": _dt(due_at(snapshot)),
        "progress": progress_doc(snapshot.progress),
        "last_heartbeat_at": _dt(snapshot.last_heartbeat_at),
        "lease_owner": snapshot.lease_owner,
        "lease_until": _dt(snapshot.lease_until),
        "failure": failure_doc(snapshot.failure, traceback=full),
        "controls": controls_of(snapshot),
        "parent": parent_of(snapshot),
    }
    if full:
        doc["outcome"] = redact_json(snapshot.outcome)
        doc["metadata"] = redact_json(dict(snapshot.metadata))
        doc["logs"] = stored_tail(snapshot)
    return doc


def transition_doc(transition: Transition) -> dict[str, Any]:
    """One audit record, as ``history --json`` and the dashboard's timeline show it."""
    return {
        "version": transition.version,
        "at": _dt(transition.at),
        "from": None if transition.from_status is None else transition.from_status.value,
        "to": transition.to_status.value,
        "trigger": transition.trigger,
        "actor": transition.actor,
        "reason": redact(transition.reason),
        "attempt": transition.attempt,
    }
