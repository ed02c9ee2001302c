"""Turning a firing into a task run: overlap judged per run, skips recorded, policy applied.

Every firing becomes ``controller.submit`` of the schedule's task with the firing's
metadata, ``retry_attempts``/``retry_backoff`` as a :class:`RetryPolicy` and
``max_runtime`` as ``Timeout(total=...)``. When the schedule is paused, or
``overlap="forbid"`` finds an unfinished run of the schedule in the store, the run is
still created and ended ``skipped`` with the reason at once, so the decision is
visible in ``ps`` and history like any other run.

Overlap is judged from the store's unfinished runs of the schedule, not from an "is
running" flag: under ``overlap="allow"`` several runs may be in flight, and a flag
cleared by the first to finish would be wrong for the others.

A firing *armed* ahead of its scheduled time (``armed_until``) is created ``blocked``
with that reason and released by the scheduler's loop at the instant; see
:mod:`chongming_task.schedule.loop`.
"""

from __future__ import annotations

import logging
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Final, Literal

from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConcurrencyConflict
from chongming_task.schedule.admin import UNFINISHED
from chongming_task.schedule.control import ScheduleControl
from chongming_task.schedule.firing import TriggerType, firing_metadata
from chongming_task.states import TaskStatus
from chongming_task.stores.base import TaskQuery

if TYPE_CHECKING:
    from chongming_task.controller import Controller
    from chongming_task.model import TaskSnapshot
    from chongming_task.run import TaskRun

__all__ = ["JUDGE", "ORPHAN_TRIGGER", "armed_reason", "launch", "retire_orphan", "skip_reason"]

log = logging.getLogger("chongming_task.schedule")


class _Judge(Enum):
    JUDGE = "judge"


#: ``launch(skip=JUDGE)`` (the default): judge :func:`skip_reason` now.
JUDGE: Final = _Judge.JUDGE


def skip_reason(controller: Controller, control: ScheduleControl) -> str | None:
    """Why this firing must be recorded as skipped instead of run, or ``None``.

    Under ``overlap="forbid"`` an unfinished run that never started and whose lease
    expired (its process died before it could start it: a firing armed ahead of its
    time, or one still queued) is not a run in progress: it is ended ``skipped``
    with that reason (:func:`retire_orphan`), and does not block this firing.
    """
    if control.paused:
        detail = f": {control.status_reason}" if control.status_reason else ""
        return f"schedule {control.name!r} is paused{detail}"
    if control.overlap == "forbid":
        query = TaskQuery(metadata_eq={"schedule": control.name}, statuses=UNFINISHED, limit=10)
        while True:
            found = controller.store.query(query)
            if not found:
                return None
            for snapshot in found:
                if not retire_orphan(controller, snapshot):
                    return (
                        f"previous run {snapshot.task_id!r} of schedule {control.name!r} is "
                        f"still {snapshot.status.value} (overlap=forbid)"
                    )
    return None


#: The trigger of ``-> skipped`` for a firing whose process died before starting it.
ORPHAN_TRIGGER: Final = "schedule:orphaned"
_NOT_STARTED: Final = frozenset({TaskStatus.PENDING, TaskStatus.BLOCKED, TaskStatus.QUEUED})


def retire_orphan(controller: Controller, snapshot: TaskSnapshot) -> bool:
    """End ``snapshot`` ``skipped`` if it is an orphan; True if it was (or is now) one.

    An orphan never started (``pending``/``blocked``/``queued``, no attempt ever),
    is not held by ``controller``, and its lease expired: the process that created
    it is gone, and nobody will start it (``reconcile()`` calls it adoptable). The
    write is a compare-and-set on its version: if its holder wrote first, it is not
    an orphan after all and is left alone.
    """
    now = controller.clock.now()
    if (
        snapshot.status not in _NOT_STARTED
        or snapshot.first_started_at is not None
        or snapshot.lease_until is None
        or snapshot.lease_until > now
        or controller.run(snapshot.task_id) is not None
    ):
        return False
    reason = (
        f"never started: {snapshot.lease_owner or snapshot.owner or 'its creator'} stopped "
        f"renewing its lease (expired {snapshot.lease_until.isoformat()}) while the firing "
        f"was {snapshot.status.value}; ended by {controller.owner}"
    )
    machine = StateMachine(snapshot, clock=controller.clock)
    machine.mark_skipped(reason=reason, actor=controller.owner, trigger=ORPHAN_TRIGGER)
    try:
        controller.store.save(
            machine.snapshot.replace(lease_until=None),
            expect_version=snapshot.status_version,
            transitions=machine.transitions[-1:],
        )
    except ConcurrencyConflict:
        return False
    log.warning("schedule run %s: %s", snapshot.task_id, reason)
    return True


def launch(
    controller: Controller,
    control: ScheduleControl,
    *,
    trigger_type: TriggerType,
    scheduled_at: datetime,
    task_id: str,
    owner: str,
    catch_up: bool = False,
    operator: str | None = None,
    reason: str | None = None,
    correlation_id: str | None = None,
    command_id: str | None = None,
    skip: str | Literal[_Judge.JUDGE] | None = JUDGE,
    armed_until: datetime | None = None,
) -> TaskRun:
    """Submit one firing of ``control`` (skipped at once when :func:`skip_reason` says so).

    Args:
        skip: ``JUDGE`` (default) asks :func:`skip_reason` now; a string records the
            firing as skipped with that reason; ``None``: the caller judged that
            nothing applies.
        armed_until: Create the run ``blocked`` until this instant (the caller
            releases it then); only when no skip applies.
    """
    if skip is JUDGE:
        skip = skip_reason(controller, control)
    armed = armed_until is not None and skip is None
    metadata = firing_metadata(
        control,
        trigger_type=trigger_type,
        scheduled_at=scheduled_at,
        fired_at=controller.clock.now(),
        owner=owner,
        catch_up=catch_up,
        operator=operator,
        reason=reason,
        correlation_id=correlation_id,
        command_id=command_id,
        skip_reason=skip,
        armed=armed,
    )
    blocked: str | bool = False
    if armed and armed_until is not None:
        blocked = armed_reason(armed_until)
    return controller.submit(
        control.task,
        *control.args,
        task_id=task_id,
        tags=control.tags,
        bucket_key=control.bucket_key,
        metadata=metadata,
        retry=control.retry_policy,
        timeout=control.timeout,
        skip_reason=skip,
        blocked=blocked,
        **dict(control.kwargs),
    )


def armed_reason(instant: datetime) -> str:
    """The reason on ``-> blocked`` of a firing armed ahead of ``instant``."""
    return f"armed: waiting for its scheduled time {instant.isoformat()}"
