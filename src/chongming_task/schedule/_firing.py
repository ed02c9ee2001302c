"""Pure firing decisions: which scheduled times are due now, and what a firing records.

The scheduler's loop asks :func:`plan_firings` on every tick and claims each due time
in the store; nothing here reads a clock or touches a store, so misfire handling is
tested exhaustively with plain datetimes.

Misfire policy, after downtime or a stalled tick:

- a firing is **on time** when ``now`` is within ``tolerance`` seconds after it;
  on-time firings are always due (each is a distinct firing; claims make them run once);
- older firings are **missed**. ``skip`` drops them. ``run_once`` makes the newest
  missed firing that is still within ``grace`` seconds due as one catch-up, unless an
  on-time firing is due anyway (that run already does the catching up).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from chongming_task._model import JSONValue
from chongming_task.schedule._control import ScheduleControl, redact_error
from chongming_task.schedule._definition import Misfire
from chongming_task.schedule._triggers import Trigger

__all__ = [
    "METADATA_SCHEMA",
    "DueFiring",
    "FiringPlan",
    "TriggerType",
    "firing_metadata",
    "plan_firings",
]

#: The Go scheduler's ``taskRunMetadataSchemaVersion``; the layout below extends it.
METADATA_SCHEMA: Final = "scheduler.run.v1"

#: Most firings one plan returns: a per-second schedule after a long stall must not
#: flood the controller in one tick; the rest are due again on the next tick.
MAX_DUE: Final = 100

TriggerType = Literal["cron", "interval", "manual"]


@dataclass(frozen=True, slots=True)
class DueFiring:
    """One scheduled time to claim and run."""

    scheduled_at: datetime
    catch_up: bool = False
    """A ``run_once`` catch-up of a missed firing rather than an on-time one."""


@dataclass(frozen=True, slots=True)
class FiringPlan:
    """What one tick should do for one schedule."""

    due: tuple[DueFiring, ...]
    next_at: datetime
    """The first firing strictly after ``now``: when to look again."""
    missed_from: datetime | None = None
    """The oldest missed firing (``None`` if nothing was missed)."""
    checked_until: datetime | None = None
    """Every firing up to here was decided (due, missed or dropped)."""


def plan_firings(
    trigger: Trigger,
    *,
    since: datetime,
    now: datetime,
    tolerance: float,
    misfire: Misfire = "skip",
    grace: float = 0.0,
    limit: int = MAX_DUE,
) -> FiringPlan:
    """The firings in ``(since, now]`` that are due, with the misfire policy applied.

    Args:
        trigger: the effective trigger.
        since: everything up to here was already decided (the newest claimed firing,
            the registration time, or where this scheduler last looked).
        now: the current time.
        tolerance: seconds a firing may be noticed late and still count as on time.
        misfire: ``skip`` or ``run_once``.
        grace: seconds a missed firing stays eligible for the ``run_once`` catch-up.
        limit: most firings to return (the rest are picked up next time).
    """
    on_time_from = now - timedelta(seconds=tolerance)
    first = trigger.next_after(since)
    missed_from = first if first <= on_time_from else None

    due: list[DueFiring] = []
    cursor = trigger.next_after(max(since, on_time_from))
    while cursor <= now and len(due) < limit:
        due.append(DueFiring(cursor))
        cursor = trigger.next_after(cursor)
    if len(due) == limit and cursor <= now:
        return FiringPlan(tuple(due), cursor, missed_from, due[-1].scheduled_at)

    if missed_from is not None and misfire == "run_once" and not due:
        eligible_from = now - timedelta(seconds=grace) - _EPSILON
        latest = _latest_in(trigger, max(since, eligible_from), on_time_from)
        if latest is not None:
            due.append(DueFiring(latest, catch_up=True))
    return FiringPlan(tuple(due), cursor, missed_from, now)


_EPSILON: Final = timedelta(microseconds=1)


def _latest_in(trigger: Trigger, low: datetime, high: datetime) -> datetime | None:
    """The newest firing in ``(low, high]``, probing windows that grow backwards.

    Walking forward from ``low`` would cost a day of steps for a per-second schedule
    with a day of grace; a window that quadruples finds the newest firing in a few.
    """
    window = timedelta(seconds=1)
    while True:
        start = max(low, high - window)
        found = trigger.next_after(start)
        if found <= high:
            while (following := trigger.next_after(found)) <= high:
                found = following
            return found
        if start == low:
            return None
        window *= 4


def firing_metadata(
    control: ScheduleControl,
    *,
    trigger_type: TriggerType,
    scheduled_at: datetime,
    fired_at: datetime,
    owner: str | None,
    catch_up: bool = False,
    operator: str | None = None,
    reason: str | None = None,
    correlation_id: str | None = None,
    command_id: str | None = None,
    skip_reason: str | None = None,
    armed: bool = False,
    input: JSONValue | None = None,
) -> dict[str, Any]:
    """The task metadata of one firing (``scheduler.run.v1``, extended).

    ``schedule``, ``trigger_type`` and ``scheduled_at`` sit at the top level as
    strings so stores can filter on them (``TaskQuery(metadata_eq={"schedule": n})``);
    the nested ``trigger``, ``runtime`` and ``control`` snapshots follow the Go layout.
    ``armed`` marks a firing created ahead of its scheduled time and held ``blocked``
    until then (``runtime.armed``; ``fired_at`` is when it was created). ``input`` is
    a manual dispatch's payload, recorded as ``metadata["input"]`` (the Go layout).
    """
    trigger: dict[str, Any] = {
        "type": trigger_type,
        "scheduled_at": scheduled_at.isoformat(),
        "catch_up": catch_up,
    }
    for key, value in (
        ("operator", operator),
        ("reason", redact_error(reason)),
        ("correlation_id", correlation_id),
        ("command_id", command_id),
    ):
        if value is not None:
            trigger[key] = value
    metadata: dict[str, Any] = {
        "schema_version": METADATA_SCHEMA,
        "schedule": control.name,
        "trigger_type": trigger_type,
        "scheduled_at": scheduled_at.isoformat(),
        "trigger": trigger,
        "runtime": {"owner": owner, "fired_at": fired_at.isoformat()},
        "control": control_snapshot(control),
    }
    if armed:
        metadata["runtime"]["armed"] = True
    if input is not None:
        metadata["input"] = input
    if skip_reason is not None:
        metadata["skip"] = {"reason": redact_error(skip_reason)}
    return metadata


def control_snapshot(control: ScheduleControl) -> dict[str, Any]:
    """The policy a firing ran under, as the Go ``control`` snapshot records it."""

    def iso(value: datetime | None) -> str | None:
        return None if value is None else value.isoformat()

    return {
        "configured": True,
        "display_name": control.shown_name,
        "status": control.status,
        "task": control.task,
        "pattern": control.pattern,
        "default_pattern": control.default_pattern,
        "timezone": control.timezone,
        "overlap": control.overlap,
        "manual_run_enabled": control.manual_run_enabled,
        "max_runtime": control.max_runtime,
        "retry_attempts": control.retry_attempts,
        "retry_backoff": control.retry_backoff,
        "misfire": control.misfire,
        "dst": control.dst,
        "definition_revision": control.definition_revision,
        "runs_before": control.runs,
        "errors_before": control.errors,
        "last_run_at": iso(control.last_run_at),
        "next_run_at": iso(control.next_run_at),
        "last_error": control.last_error,
    }
