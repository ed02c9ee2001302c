"""Structured logs: a JSON formatter for log shippers and a transition logger.

The library logs through the standard ``logging`` module under ``chongming_task.*``
and puts the task on each record as ``extra`` fields -- ``task_id``, ``task_name``,
``attempt``, ``schedule`` -- so handlers can filter and route by task without parsing
messages. :class:`JsonLogFormatter` turns each record into one JSON line with those
fields as keys, which Loki, Elasticsearch or CloudWatch ingest as they are::

    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter())
    logging.getLogger("chongming_task").addHandler(handler)

No secrets: failure text is redacted where it is created (``chongming_task._redact``),
and the formatter redacts the message and any traceback once more, because a log
line reaches far more readers than the task's configuration did.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any, Final

from chongming_task._model import TaskSnapshot, Transition
from chongming_task._public import public
from chongming_task._redact import redact, redact_secrets, redact_traceback
from chongming_task.observability._events import TransitionObserver
from chongming_task.states import TaskStatus

__all__ = ["TASK_FIELDS", "JsonLogFormatter", "TransitionLogger", "task_extra"]

#: The structured fields the library attaches to records about one task.
TASK_FIELDS: Final = ("task_id", "task_name", "attempt", "schedule")

#: Attributes every ``LogRecord`` has; anything else on a record came from ``extra``.
_STANDARD: Final = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}


def task_extra(snapshot: TaskSnapshot) -> dict[str, Any]:
    """The ``extra`` fields of a log record about ``snapshot``'s task."""
    extra: dict[str, Any] = {
        "task_id": snapshot.task_id,
        "task_name": snapshot.name,
        "attempt": snapshot.attempt,
    }
    schedule = snapshot.metadata.get("schedule")
    if isinstance(schedule, str):
        extra["schedule"] = schedule
    return extra


@public
class JsonLogFormatter(logging.Formatter):
    """One JSON object per record: ``ts``, ``level``, ``logger``, ``message``, extras.

    Args:
        fields: Restrict the ``extra`` keys written to these (default: every extra,
            so application fields pass through too).
        redact_text: Redact secrets in the message and traceback (on by default).
    """

    def __init__(self, *, fields: Collection[str] | None = None, redact_text: bool = True) -> None:
        super().__init__()
        self.fields = None if fields is None else frozenset(fields)
        self.redact_text = redact_text

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        data: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact_secrets(message) if self.redact_text else message,
        }
        for key, value in record.__dict__.items():
            if key in _STANDARD or key.startswith("_") or key in data:
                continue
            if self.fields is not None and key not in self.fields:
                continue
            data[key] = _json_value(value)
        if record.exc_info:
            text = self.formatException(record.exc_info)
            data["exception"] = redact_traceback(text) if self.redact_text else text
        if record.stack_info:
            data["stack"] = record.stack_info
        return json.dumps(data, ensure_ascii=False, default=str)


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


@public
class TransitionLogger(TransitionObserver):
    """Logs every transition with the task's structured fields.

    Terminal transitions log at INFO (WARNING for failed/lost), ``running`` and
    ``retry_wait`` at INFO, the rest at DEBUG. Failure text is redacted.

    Args:
        logger: Where to log (default ``chongming_task.transitions``).
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        super().__init__()
        self.logger = logger or logging.getLogger("chongming_task.transitions")

    def on_transition(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        status = transition.to_status
        level = _level(status)
        if not self.logger.isEnabledFor(level):
            return
        extra = task_extra(snapshot)
        extra.update(
            from_status=transition.from_status.value if transition.from_status else None,
            to_status=status.value,
            trigger=transition.trigger,
            version=transition.version,
        )
        details = ""
        if transition.actor:
            details += f" by {transition.actor}"
        if transition.reason:
            details += f": {redact(transition.reason)}"
        if status in (TaskStatus.FAILED, TaskStatus.LOST, TaskStatus.RETRY_WAIT):
            failure = snapshot.failure
            if failure is not None:
                extra["failure_kind"] = failure.kind.value
                message = redact(failure.message) or ""
                if message not in details:  # the reason often quotes the failure already
                    details += f" [{failure.kind.value}: {message}]"
        source = extra["from_status"] or "-"
        self.logger.log(
            level,
            "%s %s -> %s (%s)%s",
            transition.task_id,
            source,
            status.value,
            transition.trigger,
            details,
            extra=extra,
        )


def _level(status: TaskStatus) -> int:
    if status in (TaskStatus.FAILED, TaskStatus.LOST):
        return logging.WARNING
    if status.is_terminal or status in (TaskStatus.RUNNING, TaskStatus.RETRY_WAIT):
        return logging.INFO
    return logging.DEBUG
