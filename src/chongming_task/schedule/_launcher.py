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
:mod:`chongming_task.schedule._loop`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from chongming_task._model import JSONValue
from chongming_task.controller._reconcile import reconcile
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConcurrencyConflict
from chongming_task.schedule._admin import UNFINISHED
from chongming_task.schedule._control import ScheduleControl
from chongming_task.schedule._firing import TriggerType, firing_metadata
from chongming_task.schedule._registration import INPUT_PARAMETER, takes_input
from chongming_task.states import OCCUPYING, TaskStatus
from chongming_task.stores._base import TaskQuery

if TYPE_CHECKING:
    from chongming_task._model import TaskSnapshot, Transition
    from chongming_task.controller import Controller
    from chongming_task.run import TaskRun

__all__ = [
    "JUDGE",
    "ORPHAN_TRIGGER",
    "LostListener",
    "Skip",
    "armed_reason",
    "launch",
    "retire_orphan",
    "settle_lost",
    "skip_reason",
    "stale_runs",
]

#: Told of each ``-> lost`` that :func:`settle_lost` writes (the scheduler counts it).
LostListener = Callable[["Transition", "TaskSnapshot"], None]

log = logging.getLogger("chongming_task.schedule")


class _Judge(Enum):
    JUDGE = "judge"


#: ``launch(skip=JUDGE)`` (the default): judge :func:`skip_reason` now.
JUDGE: Final = _Judge.JUDGE
#: What ``launch(skip=)`` takes: ``JUDGE``, the reason of a skip, or ``None`` (none applies).
Skip: TypeAlias = str | Literal[_Judge.JUDGE] | None


def stale_runs(controller: Controller, name: str) -> list[str]:
    """Runs of schedule ``name`` that occupy a slot but whose holder's lease expired.

    Their process died mid-run: nobody will ever finish them. Runs this controller
    holds are never stale (it is alive and renews them).
    """
    query = TaskQuery(
        metadata_eq={"schedule": name},
        statuses=OCCUPYING,
        lease_expired_by=controller.clock.now(),
    )
    return [
        task_id
        for task_id, _, _ in controller.store.query_heads(query)
        if controller.run(task_id) is None
    ]


def settle_lost(
    controller: Controller, name: str, *, on_lost: LostListener | None = None
) -> tuple[str, ...]:
    """End every stale run of schedule ``name`` ``lost``, with the reason; their ids.

    The controller's ``reconcile()`` machinery restricted to the schedule's runs: an
    occupying run whose lease expired becomes ``lost`` through the store's guarded
    ``mark_lost_many`` (trigger ``reconcile:lease_expired``, the failure names the
    holder and when its lease expired); a run whose holder wrote first is left alone.
    Any live scheduler node does it, whatever bucket the run is in: the holder is
    gone, and a forbid schedule would otherwise skip every later firing forever.
    """
    report = reconcile(
        controller.store,
        clock=controller.clock,
        actor=controller.owner,
        held=[run.task_id for run in controller.runs()],
        metadata_eq={"schedule": name},
        on_lost=on_lost,
    )
    for task_id in report.lost:
        log.warning("schedule %r: run %s ended lost: its holder's lease expired", name, task_id)
    return report.lost


def skip_reason(
    controller: Controller, control: ScheduleControl, *, on_lost: LostListener | None = None
) -> str | None:
    """Why this firing must be recorded as skipped instead of run, or ``None``.

    Under ``overlap="forbid"`` an unfinished run that never started and whose lease
    expired (its process died before it could start it: a firing armed ahead of its
    time, or one still queued) is not a run in progress: it is ended ``skipped``
    with that reason (:func:`retire_orphan`), and does not block this firing. A run
    that did start and whose holder's lease expired (its process died mid-run) is
    ended ``lost`` (:func:`settle_lost`) and does not block it either.
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
                if _is_stale(controller, snapshot) and snapshot.task_id in settle_lost(
                    controller, control.name, on_lost=on_lost
                ):
                    break  # settled: look again
                if not retire_orphan(controller, snapshot):
                    return (
                        f"previous run {snapshot.task_id!r} of schedule {control.name!r} is "
                        f"still {snapshot.status.value} (overlap=forbid)"
                    )
    return None


def _is_stale(controller: Controller, snapshot: TaskSnapshot) -> bool:
    return (
        snapshot.status in OCCUPYING
        and snapshot.lease_until is not None
        and snapshot.lease_until <= controller.clock.now()
        and controller.run(snapshot.task_id) is None
    )


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
    on_lost: LostListener | None = None,
    input: JSONValue | None = None,
) -> TaskRun:
    """Submit one firing of ``control`` (skipped at once when :func:`skip_reason` says so).

    Args:
        skip: ``JUDGE`` (default) asks :func:`skip_reason` now; a string records the
            firing as skipped with that reason; ``None``: the caller judged that
            nothing applies.
        armed_until: Create the run ``blocked`` until this instant (the caller
            releases it then); only when no skip applies.
        input: A manual dispatch's payload: ``metadata["input"]``, and the keyword
            argument ``input`` when the task has a parameter of that name
            (:func:`~chongming_task.schedule._registration.takes_input`).
    """
    if skip is JUDGE:
        skip = skip_reason(controller, control, on_lost=on_lost)
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
        input=input,
    )
    kwargs = dict(control.kwargs)
    if input is not None and takes_input(controller, control.task):
        kwargs[INPUT_PARAMETER] = input
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
        **kwargs,
    )


def armed_reason(instant: datetime) -> str:
    """The reason on ``-> blocked`` of a firing armed ahead of ``instant``."""
    return f"armed: waiting for its scheduled time {instant.isoformat()}"
