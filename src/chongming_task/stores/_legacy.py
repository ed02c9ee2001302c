"""Schema 14: the submissions of the retired worker protocol become queued tasks.

Before schema version 14, ``chongming-task submit`` could hand a task to a worker as a
store command (``kind="task"``, ``action="submit"``, the task id as its ``target``,
``{name, args, kwargs, task_id, tags, priority, bucket_key, label, metadata}`` as its
payload) that became a task only when a worker took it. The work queue is now the one
way work crosses processes and nothing takes such commands, so the migration to
version 14 turns every submission no worker has stored as a task (pending, or claimed
by a worker that died before storing it) into the task ``Client.enqueue`` stores for
the same call: ``queued``, held by nobody, with the same id, name, JSON arguments,
tags, priority, bucket key and label, created when and by whom it was submitted. Its
command is completed with the task id as its result. A payload no worker could have
accepted (no name, a malformed id or priority...) is completed with the refusal, as
a worker did. It runs inside the migration's transaction: all or nothing, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from chongming_task._model import JSONValue, TaskSnapshot, Transition, loads
from chongming_task._validation import check_metadata, check_priority, check_task_id, check_text
from chongming_task.core import SystemClock
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.policies import BucketPolicy
from chongming_task.stores._codec import encode_json
from chongming_task.stores._dag import DAG_KEY
from chongming_task.stores._queue_records import (
    PARENT_KEY,
    RECIPE_KEY,
    UNIQUE_KEY,
    Recipe,
    WorkerRecord,
)
from chongming_task.stores._sql import history_rows
from chongming_task.stores._sqlrows import decode_command, task_params

if TYPE_CHECKING:
    from chongming_task.core._clock import Clock
    from chongming_task.stores._base import Command
    from chongming_task.stores._dialect import Cursor, Dialect

__all__ = ["ADOPTED_TRIGGER", "SUBMISSIONS_RETIRED", "adopt_submissions"]

#: The schema version that retired the submission commands.
SUBMISSIONS_RETIRED: Final = 14

#: The trigger of an adopted submission's ``-> queued`` transition.
ADOPTED_TRIGGER: Final = "queue:migrated"

#: Who completed the adopted commands (their result's ``worker``).
_ADOPTER: Final = f"schema-{SUBMISSIONS_RETIRED}-migration"

#: Metadata keys the queue writes itself: a submission's metadata never sets them.
_RESERVED: Final = (RECIPE_KEY, UNIQUE_KEY, PARENT_KEY, DAG_KEY)


class _At(SystemClock):
    """The system clock, but ``now()`` is the instant of a submission: its task's
    creation and ``-> queued`` are dated when it was submitted."""

    def __init__(self, instant: datetime) -> None:
        self.instant = instant

    def now(self) -> datetime:
        return self.instant


def adopt_submissions(cur: Cursor, dialect: Dialect, clock: Clock) -> int:
    """Turn the pending submissions into queued tasks; returns how many became tasks."""
    sql = dialect.sql
    found = cur.execute(sql["legacy_submissions"], {}).fetchall()
    if not found:
        return 0
    policy: BucketPolicy | None = None
    now = dialect.instant(clock.now())
    taken: set[str] = set()
    adopted = 0
    for row in found:
        command = decode_command(row, dialect.instant_out)
        try:
            if command.target in taken:
                raise ConfigurationError(f"task id {command.target!r} was already submitted")
            if policy is None and command.payload.get("bucket_key") is not None:
                policy = BucketPolicy(num_buckets=_num_buckets(cur, dialect))
            snapshot, transitions = _queued(command, policy)
        except (ConfigurationError, KeyError, TypeError, ValueError) as exc:
            result: JSONValue = {"accepted": False, "error": str(exc), "worker": _ADOPTER}
        else:
            params = task_params(snapshot, dialect.instant, dialect.array)
            dialect.write_task(cur, "insert_task", params, history_rows(transitions))
            taken.add(command.target)
            adopted += 1
            result = {"accepted": True, "task_id": command.target, "worker": _ADOPTER}
        cur.execute(
            sql["legacy_settle"],
            {
                "command_id": command.command_id,
                "now": now,
                "result": encode_json(result, "command result"),
            },
        )
    return adopted


def _queued(command: Command, policy: BucketPolicy | None) -> tuple[TaskSnapshot, list[Transition]]:
    """The queued task ``Client.enqueue`` stores for the submission ``command``."""
    payload: Mapping[str, Any] = command.payload
    task_id = check_task_id(command.target)
    name = check_text(payload["name"], "task name")
    args = payload.get("args") or []
    kwargs = payload.get("kwargs") or {}
    if not isinstance(args, list) or not isinstance(kwargs, Mapping):
        raise ConfigurationError("args must be a list and kwargs an object")
    priority = payload.get("priority")
    bucket_key = payload.get("bucket_key")
    metadata = check_metadata(payload.get("metadata") or {})
    recipe = Recipe(args=tuple(args), kwargs=dict(kwargs), enqueued_by=command.issued_by)
    machine = StateMachine.create(
        task_id,
        name,
        label=payload.get("label"),
        tags=payload.get("tags") or (),
        priority=0 if priority is None else check_priority(priority),
        bucket=None if bucket_key is None or policy is None else policy.bucket_for(bucket_key),
        bucket_key=bucket_key,
        metadata={
            **{key: value for key, value in metadata.items() if key not in _RESERVED},
            RECIPE_KEY: recipe.to_dict(),
        },
        clock=_At(command.issued_at),
    )
    machine.mark_queued(
        actor=command.issued_by,
        reason=f"submitted before schema {SUBMISSIONS_RETIRED}: moved to the work queue",
        trigger=ADOPTED_TRIGGER,
    )
    return machine.snapshot, list(machine.transitions)


def _num_buckets(cur: Cursor, dialect: Dialect) -> int:
    """The buckets of the workers that took submissions: the one of the last to beat.

    A bucket key maps to a bucket through the workers' ``num_buckets``; the registry
    records it. Without a record, the default every process uses (64).
    """
    latest: WorkerRecord | None = None
    for (doc,) in cur.execute(dialect.sql["select_workers"], {}).fetchall():
        try:
            record = WorkerRecord.from_dict(loads(doc, "worker record"))
        except StoreError:
            continue
        if record.num_buckets is not None and (
            latest is None or record.heartbeat_at > latest.heartbeat_at
        ):
            latest = record
    if latest is None or latest.num_buckets is None:
        return BucketPolicy().num_buckets
    return latest.num_buckets
