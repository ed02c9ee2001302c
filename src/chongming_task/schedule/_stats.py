"""Statistics and health, computed from real state (the Go ``GetTaskStatistics`` and
``GetHealthStatus``, without the constant ``Healthy: true``).

Every number comes from the task snapshots of a schedule's runs, the control records
and what the scheduler loop observed (its last tick, its store errors). These are
pure functions, so the views are tested with hand-made snapshots.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

from chongming_task._model import TaskSnapshot, parse_datetime
from chongming_task.schedule._control import ScheduleControl
from chongming_task.states import TaskStatus

__all__ = [
    "RECENT_RUNS",
    "RunSummary",
    "ScheduleStatistics",
    "SchedulerHealth",
    "expected_firing",
    "outage_health",
    "run_summary",
    "schedule_statistics",
    "scheduler_health",
]

#: How many runs ``recent`` lists, newest first (the Go scheduler's "last 10").
RECENT_RUNS: Final = 10

_ERRORS: Final = frozenset({TaskStatus.FAILED, TaskStatus.LOST})


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run of a schedule, as history and statistics show it."""

    task_id: str
    status: TaskStatus
    trigger_type: str | None
    scheduled_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    duration: float | None
    """Seconds from first start to finish; ``None`` if it never started or is unfinished."""
    error: str | None
    """Failure message (already redacted when stored) or the skip reason."""


def run_summary(snapshot: TaskSnapshot) -> RunSummary:
    metadata = snapshot.metadata
    scheduled = metadata.get("scheduled_at")
    try:
        scheduled_at = parse_datetime(scheduled, "scheduled_at") if scheduled else None
    except Exception:  # a foreign writer's metadata must not break the view
        scheduled_at = None
    trigger_type = metadata.get("trigger_type")
    error = snapshot.failure.message if snapshot.failure is not None else None
    skip = metadata.get("skip")
    if error is None and isinstance(skip, Mapping):
        error = skip.get("reason")
    return RunSummary(
        task_id=snapshot.task_id,
        status=snapshot.status,
        trigger_type=trigger_type if isinstance(trigger_type, str) else None,
        scheduled_at=scheduled_at,
        started_at=snapshot.first_started_at or snapshot.started_at,
        finished_at=snapshot.finished_at,
        duration=snapshot.elapsed if snapshot.is_terminal else None,
        error=error,
    )


@dataclass(frozen=True, slots=True)
class ScheduleStatistics:
    """Counts and timings over the runs of one schedule that the store still holds."""

    name: str
    runs: int
    """Finished runs (skipped ones included, as the Go scheduler counts them)."""
    succeeded: int
    errors: int
    """Runs that ended ``failed`` or ``lost``."""
    skipped: int
    unfinished: int
    success_rate: float | None
    """Percent succeeded among finished, non-skipped runs; ``None`` before any."""
    average_duration: float | None
    """Mean seconds of finished runs that started; ``None`` before any."""
    recent: tuple[RunSummary, ...]
    """The last ``RECENT_RUNS`` runs, newest first."""
    last_run_at: datetime | None
    next_run_at: datetime | None

    def counts(self) -> dict[str, int | float | None]:
        """The counts and rates, by field name (what ``schedule show --json`` reports)."""
        return {
            "runs": self.runs,
            "succeeded": self.succeeded,
            "errors": self.errors,
            "skipped": self.skipped,
            "unfinished": self.unfinished,
            "success_rate": self.success_rate,
            "average_duration": self.average_duration,
        }


def _order_key(summary: RunSummary, snapshot: TaskSnapshot) -> datetime:
    return summary.scheduled_at or snapshot.created_at


def schedule_statistics(
    name: str, snapshots: Iterable[TaskSnapshot], *, next_run_at: datetime | None = None
) -> ScheduleStatistics:
    """Statistics of schedule ``name`` from the snapshots of its runs."""
    pairs = [(run_summary(snapshot), snapshot) for snapshot in snapshots]
    pairs.sort(key=lambda pair: (_order_key(*pair), pair[1].created_at), reverse=True)
    finished = [summary for summary, _ in pairs if summary.status.is_terminal]
    succeeded = sum(1 for s in finished if s.status is TaskStatus.SUCCEEDED)
    skipped = sum(1 for s in finished if s.status is TaskStatus.SKIPPED)
    judged = len(finished) - skipped
    durations = [s.duration for s in finished if s.duration is not None and s.started_at]
    last_run = max((s.finished_at for s in finished if s.finished_at), default=None)
    return ScheduleStatistics(
        name=name,
        runs=len(finished),
        succeeded=succeeded,
        errors=sum(1 for s in finished if s.status in _ERRORS),
        skipped=skipped,
        unfinished=len(pairs) - len(finished),
        success_rate=100.0 * succeeded / judged if judged else None,
        average_duration=sum(durations) / len(durations) if durations else None,
        recent=tuple(summary for summary, _ in pairs[:RECENT_RUNS]),
        last_run_at=last_run,
        next_run_at=next_run_at,
    )


HealthStatus = Literal["ok", "degraded", "unhealthy"]


@dataclass(frozen=True, slots=True)
class SchedulerHealth:
    """Is scheduling working? ``problems`` says why not, one sentence each, naming
    the schedule (or the store) each one is about."""

    status: HealthStatus
    """``unhealthy``: firings are not happening (late tick, store errors or outage,
    overdue schedules). ``degraded``: firings happen but some schedules keep failing
    or are blocked by a run whose holder died."""
    schedules: int
    active: int
    paused: int
    running: int
    """Unfinished runs of all schedules."""
    failing: tuple[str, ...]
    """Schedules whose last run(s) failed (``consecutive_failures > 0``)."""
    overdue: tuple[str, ...]
    """Active schedules whose due firing is late by more than the allowance."""
    next_due: datetime | None
    next_due_schedule: str | None
    last_tick_at: datetime | None
    """``None`` when no scheduler loop is observed (e.g. a CLI process)."""
    tick_late: bool
    store_errors: int
    """Store failures of the scheduler loop since its last clean tick."""
    problems: tuple[str, ...]
    checked_at: datetime
    stale_runs: int = 0
    """Runs of schedules whose holder's lease expired mid-run, not settled yet."""
    blocked: tuple[str, ...] = ()
    """``overlap="forbid"`` schedules that such a run blocks until it is settled."""
    error: str | None = None
    """The store failure that kept health from being computed (then ``unhealthy``)."""

    @property
    def healthy(self) -> bool:
        """Firings are happening (a ``degraded`` scheduler is still healthy)."""
        return self.status != "unhealthy"


def expected_firing(control: ScheduleControl) -> datetime | None:
    """The firing the store says is due next for an active schedule (from its facts).

    The record's ``next_run_at`` when a scheduler wrote one after the newest claimed
    firing; otherwise the trigger's first firing after the newest claimed firing, or
    after registration when none was ever claimed. It does not depend on any tick
    having run: a schedule nobody ever fired is due one period after it was
    registered.
    """
    if control.paused:
        return None
    last = control.last_fired_at
    if control.next_run_at is not None and (last is None or control.next_run_at > last):
        return control.next_run_at
    return control.trigger.next_after(last or control.registered_at)


def _seconds(delta: timedelta) -> str:
    return f"{delta.total_seconds():.0f}s"


def scheduler_health(
    controls: Sequence[ScheduleControl],
    *,
    now: datetime,
    running: Mapping[str, int],
    late_after: float,
    last_tick_at: datetime | None = None,
    store_errors: int = 0,
    last_store_error: str | None = None,
    stale: Mapping[str, Sequence[str]] | None = None,
) -> SchedulerHealth:
    """Health from the control records, unfinished-run counts and the loop's state.

    Args:
        controls: every schedule's record.
        now: the current time.
        running: unfinished runs per schedule name.
        late_after: seconds after which a tick, or an active schedule's due firing,
            counts as late (the misfire tolerance).
        last_tick_at: the scheduler loop's last completed tick, if one is observed.
        store_errors: store failures since the loop's last clean tick.
        last_store_error: the latest of those, already redacted.
        stale: per schedule, its runs whose holder's lease expired mid-run.
    """
    allowance = timedelta(seconds=late_after)
    stale = stale or {}
    active = [c for c in controls if not c.paused]
    failing = tuple(sorted(c.name for c in controls if c.consecutive_failures > 0))
    problems: list[str] = []
    expected: dict[str, datetime] = {}
    for control in active:
        try:
            due = expected_firing(control)
        except Exception as exc:  # a record no trigger can be built from
            problems.append(f"schedule {control.name!r}: its pattern cannot be evaluated: {exc}")
            continue
        if due is not None:
            expected[control.name] = due
    overdue = tuple(sorted(n for n, due in expected.items() if now - due > allowance))
    soonest_name = min(expected, key=lambda n: (expected[n], n), default=None)
    tick_late = last_tick_at is not None and now - last_tick_at > allowance
    if tick_late and last_tick_at is not None:
        problems.append(f"scheduler tick is late: last tick {_seconds(now - last_tick_at)} ago")
    if store_errors:
        detail = f": {last_store_error}" if last_store_error else ""
        problems.append(f"{store_errors} store error(s) since the last clean tick{detail}")
    for name in overdue:
        due = expected[name]
        problems.append(
            f"schedule {name!r} is overdue: its firing due {due.isoformat()} is "
            f"{_seconds(now - due)} late (tolerance {late_after:g}s) and nobody claimed it; "
            "is a scheduler running with it registered, and does it own its bucket?"
        )
    unhealthy = bool(problems)
    if failing:
        problems.append(f"failing schedule(s): {', '.join(failing)}")
    by_name = {c.name: c for c in controls}
    blocked: list[str] = []
    for name, task_ids in sorted(stale.items()):
        if not task_ids:
            continue
        record = by_name.get(name)
        forbid = record is not None and record.overlap == "forbid"
        if forbid:
            blocked.append(name)
        problems.append(
            f"schedule {name!r}: {len(task_ids)} run(s) whose holder's lease expired "
            f"mid-run ({', '.join(sorted(task_ids)[:3])}) are not settled yet"
            + (
                "; its firings are skipped (overlap=forbid) until a scheduler ends them lost"
                if forbid
                else ""
            )
        )
    degraded = bool(failing or blocked)
    status: HealthStatus = "unhealthy" if unhealthy else "degraded" if degraded else "ok"
    return SchedulerHealth(
        status=status,
        schedules=len(controls),
        active=len(active),
        paused=len(controls) - len(active),
        running=sum(running.values()),
        failing=failing,
        overdue=overdue,
        next_due=expected[soonest_name] if soonest_name else None,
        next_due_schedule=soonest_name,
        last_tick_at=last_tick_at,
        tick_late=tick_late,
        store_errors=store_errors,
        problems=tuple(problems),
        checked_at=now,
        stale_runs=sum(len(ids) for ids in stale.values()),
        blocked=tuple(blocked),
    )


def outage_health(
    error: str,
    *,
    now: datetime,
    last_tick_at: datetime | None = None,
    store_errors: int = 0,
) -> SchedulerHealth:
    """``unhealthy`` because the store could not be read; the error says why."""
    return SchedulerHealth(
        status="unhealthy",
        schedules=0,
        active=0,
        paused=0,
        running=0,
        failing=(),
        overdue=(),
        next_due=None,
        next_due_schedule=None,
        last_tick_at=last_tick_at,
        tick_late=False,
        store_errors=store_errors,
        problems=(f"the store cannot be read, so nothing can be fired: {error}",),
        checked_at=now,
        error=error,
    )
