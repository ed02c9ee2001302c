"""The dashboard's paused queues: the overview's list with Resume buttons and a pause form.

``POST /queues/pause`` (fields ``name`` or ``bucket``, and ``reason``) and ``POST
/queues/resume`` (``name`` or ``bucket``), and their ``/api/queues/...`` twins, write
what ``Client.pause_queue`` / ``resume_queue`` write, with the signed-in user as the
actor (docs/queue.md, "Pause intake"). ``GET /api/queues`` lists the pauses. The
dashboard does not know the fleet's bucket count, so a bucket is checked to be a
integer >= 0, not against ``--num-buckets``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from chongming_task.stores._base import TaskStore
from chongming_task.stores._capabilities import require_queue
from chongming_task.stores._pauses import (
    QueuePause,
    check_pause_reason,
    check_queue,
    queue_label,
    queue_scope,
)
from chongming_task.stores._queue_store import QueueStore
from chongming_task.web._params import int_param

__all__ = ["QUEUE_ACTIONS", "QueueRequest", "paused_queues"]

QUEUE_ACTIONS = ("pause", "resume")


def paused_queues(store: TaskStore) -> list[QueuePause]:
    """The store's paused queues (none for a store that keeps none)."""
    if isinstance(store, QueueStore) and store.supports_queue_pauses:
        return store.list_queue_pauses()
    return []


def _blank(value: object) -> object:
    if isinstance(value, str):
        value = value.strip()
        return value or None
    return value


class QueueRequest:
    """One checked pause or resume from a form or a JSON body.

    Raises:
        ConfigurationError: Both or neither of ``name`` and ``bucket``, a bucket that
            is not an integer >= 0 (``web._params.int_param``), a bad name, or (pause)
            no reason.
    """

    def __init__(self, action: str, fields: Mapping[str, Any]) -> None:
        bucket = _blank(fields.get("bucket"))
        if bucket is not None:
            bucket = int_param(bucket, "bucket")
        self.action = action
        self.name, self.bucket = check_queue(_blank(fields.get("name")), bucket)
        self.reason = check_pause_reason(fields.get("reason")) if action == "pause" else ""

    def apply(self, store: TaskStore, actor: str, now: datetime) -> tuple[int, dict[str, Any]]:
        """Write it: ``(HTTP status, JSON result)`` (409 to resume a queue not paused)."""
        queues = require_queue(store, "pausing a queue")
        label = queue_label(self.name, self.bucket)
        if self.action == "pause":
            pause = queues.pause_queue(
                QueuePause(
                    name=self.name,
                    bucket=self.bucket,
                    actor=actor,
                    reason=self.reason,
                    paused_at=now,
                )
            )
            message = f"intake paused: {pause.describe()}"
            return 200, {"action": "pause", "pause": pause.to_dict(), "message": message}
        if queues.resume_queue(queue_scope(self.name, self.bucket)) is None:
            return 409, {"error": f"{label} is not paused"}
        result = {"action": "resume", "name": self.name, "bucket": self.bucket}
        return 200, {**result, "actor": actor, "message": f"intake resumed: {label}"}
