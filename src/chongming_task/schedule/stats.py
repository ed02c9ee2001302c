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

from chongming_task.model import TaskSnapshot, parse_datetime
from chongming_task.schedule.control import ScheduleControl
from chongming_task.states import TaskStatus

__all__ = [
    "RECENT_RUNS",
    "RunSummary",
    "ScheduleStatistics",
    "SchedulerHealth",
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
    """Is scheduling working? ``problems`` says why not, one sentence each."""

    status: HealthStatus
    """``unhealthy``: firings are not happening (late tick, store errors, overdue
    schedules). ``degraded``: firings happen but some schedules keep failing."""
    schedules: int
    active: int
    paused: int
    running: int
    """Unfinished runs of all schedules."""
    failing: tuple[str, ...]
    """Schedules whose last run(s) failed (``consecutive_failures > 0``)."""
    overdue: tuple[str, ...]
    """Active schedules whose next run is past due by more than the allowance."""
    next_due: datetime | None
    next_due_schedule: str | None
    last_tick_at: datetime | None
    """``None`` when no scheduler loop is observed (e.g. a CLI process)."""
    tick_late: bool
    store_errors: int
    """Store failures of the scheduler loop since its last clean tick."""
    problems: tuple[str, ...]
    checked_at: datetime

    @property
    def healthy(self) -> bool:
        """Firings are happening (a ``degraded`` scheduler is still healthy)."""
        return self.status != "unhealthy"


def scheduler_health(
    controls: Sequence[ScheduleControl],
    *,
    now: datetime,
    running: Mapping[str, int],
    late_after: float,
    last_tick_at: datetime | None = None,
    store_errors: int = 0,
    last_store_error: str | None = None,
) -> SchedulerHealth:
    """Health from the control records, unfinished-run counts and the loop's state.

    Args:
        controls: every schedule's record.
        now: the current time.
        running: unfinished runs per schedule name.
        late_after: seconds after which a tick, or an active schedule's due firing,
            counts as late.
        last_tick_at: the scheduler loop's last completed tick, if one is observed.
        store_errors: store failures since the loop's last clean tick.
        last_store_error: the latest of those, already redacted.
    """
    allowance = timedelta(seconds=late_after)
    active = [c for c in controls if not c.paused]
    failing = tuple(sorted(c.name for c in controls if c.consecutive_failures > 0))
    overdue = tuple(
        sorted(
            c.name for c in active if c.next_run_at is not None and now - c.next_run_at > allowance
        )
    )
    upcoming = [c for c in active if c.next_run_at is not None]
    soonest = min(upcoming, key=lambda c: c.next_run_at or now, default=None)
    tick_late = last_tick_at is not None and now - last_tick_at > allowance
    problems: list[str] = []
    if tick_late and last_tick_at is not None:
        seconds = (now - last_tick_at).total_seconds()
        problems.append(f"scheduler tick is late: last tick {seconds:.0f}s ago")
    if store_errors:
        detail = f": {last_store_error}" if last_store_error else ""
        problems.append(f"{store_errors} store error(s) since the last clean tick{detail}")
    if overdue:
        problems.append(
            f"overdue schedule(s) {', '.join(overdue)}: due firings were not claimed; "
            "is a scheduler running and does it own their buckets?"
        )
    unhealthy = bool(problems)
    if failing:
        problems.append(f"failing schedule(s): {', '.join(failing)}")
    status: HealthStatus = "unhealthy" if unhealthy else "degraded" if failing else "ok"
    return SchedulerHealth(
        status=status,
        schedules=len(controls),
        active=len(active),
        paused=len(controls) - len(active),
        running=sum(running.values()),
        failing=failing,
        overdue=overdue,
        next_due=soonest.next_run_at if soonest else None,
        next_due_schedule=soonest.name if soonest else None,
        last_tick_at=last_tick_at,
        tick_late=tick_late,
        store_errors=store_errors,
        problems=tuple(problems),
        checked_at=now,
    )
