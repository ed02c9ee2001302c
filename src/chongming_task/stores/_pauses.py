"""Paused intake: a queue whose queued tasks no worker claims until it is resumed.

A *queue* here is the tasks of one name (``noop``) or of one bucket (``3``). Pausing
one (``Client.pause_queue``, ``chongming-task queue pause``) stores a
:class:`QueuePause` -- which queue, who paused it, why and when -- in the store, and
the claim itself (``QueueStore.claim_queued``: inside its SQL statement, or under the
memory store's lock) passes over the queued tasks of every paused queue. So every
worker obeys it at its next claim, with no race and no restart; tasks already running
are not touched. Resuming deletes the record and wakes the workers.

One validation (:func:`check_queue`, :func:`check_pause_reason`) serves the API, the
CLI and the dashboard.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from chongming_task._model import JSONValue, TaskSnapshot
from chongming_task._validation import LINE_MAX_LENGTH, check_int, check_line, check_text
from chongming_task.errors import ConfigurationError

__all__ = [
    "QueuePause",
    "check_pause_reason",
    "check_queue",
    "pause_of",
    "pause_order",
    "queue_label",
    "queue_scope",
]

#: The longest reason a pause keeps (one line, like a task's stop reason).
REASON_MAX_LENGTH: Final = LINE_MAX_LENGTH


def queue_scope(name: str | None, bucket: int | None) -> str:
    """The stored key of a queue: ``name:noop`` or ``bucket:3``."""
    return f"bucket:{bucket}" if name is None else f"name:{name}"


def queue_label(name: str | None, bucket: int | None) -> str:
    """How messages name a queue: ``queue 'noop'`` or ``bucket 3``."""
    return f"bucket {bucket}" if name is None else f"queue {name!r}"


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuePause:
    """One paused queue, as the store keeps it: exactly one of ``name`` and ``bucket``."""

    name: str | None = None
    """The task name whose queued tasks are not claimed."""
    bucket: int | None = None
    """The bucket whose queued tasks are not claimed."""
    actor: str
    """Who paused it (the client's actor, the CLI's issuer, the dashboard user)."""
    reason: str
    paused_at: datetime

    @property
    def scope(self) -> str:
        return queue_scope(self.name, self.bucket)

    @property
    def label(self) -> str:
        return queue_label(self.name, self.bucket)

    def matches(self, snapshot: TaskSnapshot) -> bool:
        """Whether ``snapshot`` belongs to this queue."""
        if self.name is not None:
            return snapshot.name == self.name
        return snapshot.bucket is not None and snapshot.bucket == self.bucket

    def describe(self) -> str:
        """``queue 'noop' paused by ops at 2026-...: deploy`` (``ps``, ``health``, ``explain``)."""
        return f"{self.label} paused by {self.actor} at {self.paused_at.isoformat()}: {self.reason}"

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "name": self.name,
            "bucket": self.bucket,
            "actor": self.actor,
            "reason": self.reason,
            "paused_at": self.paused_at.isoformat(),
        }


def check_queue(
    name: object = None, bucket: object = None, *, num_buckets: int | None = None
) -> tuple[str | None, int | None]:
    """The queue of a pause or resume: exactly one of a task name and a bucket number.

    Raises:
        ConfigurationError: Both or neither given, a name that is not a valid task name,
            or a bucket that is not an integer in ``0..num_buckets-1``.
    """
    if (name is None) == (bucket is None):
        raise ConfigurationError(
            "name a queue: give a task name (name=...) or a bucket number (bucket=N), not "
            f"{'both' if name is not None else 'neither'}"
        )
    if name is not None:
        return check_text(name, "queue name (a task name)"), None
    number = check_int(bucket, "bucket", minimum=0)
    if num_buckets is not None and number >= num_buckets:
        raise ConfigurationError(
            f"bucket {number} is outside 0..{num_buckets - 1} (num_buckets {num_buckets}); "
            "no task is ever in it"
        )
    return None, number


def check_pause_reason(reason: object) -> str:
    """A pause's reason: required, one line, at most 512 characters (stripped).

    Raises:
        ConfigurationError: Missing, blank, or not one line of text.
    """
    text = reason.strip() if isinstance(reason, str) else reason
    if text is None or text == "":
        raise ConfigurationError(
            "a reason is required to pause a queue (it is shown to everyone who asks why "
            "its tasks wait): give reason='...' (CLI: --reason TEXT)"
        )
    return check_line(text, "reason", max_length=REASON_MAX_LENGTH, allow_empty=False)


def pause_of(snapshot: TaskSnapshot, pauses: Iterable[QueuePause]) -> QueuePause | None:
    """The pause holding ``snapshot``'s queue, if any (its name's first, then its bucket's)."""
    found = [p for p in pauses if p.matches(snapshot)]
    found.sort(key=lambda p: p.name is None)
    return found[0] if found else None


def pause_order(pause: QueuePause) -> tuple[bool, str, int]:
    """Sort key of listed pauses: names first (by name), then buckets (by number)."""
    return (pause.name is None, pause.name or "", -1 if pause.bucket is None else pause.bucket)
