"""Statistics and health come from real state: snapshots, control records, the loop."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from chongming_task._model import Failure, FailureKind, TaskSnapshot
from chongming_task.schedule import CronTrigger, Schedule, ScheduleControl
from chongming_task.schedule._stats import RECENT_RUNS, schedule_statistics, scheduler_health
from chongming_task.states import TaskStatus

T0 = datetime(2026, 1, 5, tzinfo=UTC)


def run(index: int, status: TaskStatus, seconds: float | None = 10, **extra: Any) -> TaskSnapshot:
    scheduled = T0 + timedelta(hours=index)
    started = scheduled if seconds is not None else None
    finished = scheduled + timedelta(seconds=seconds or 0) if status.is_terminal else None
    metadata: dict[str, Any] = {
        "schedule": "nightly",
        "trigger_type": "cron",
        "scheduled_at": scheduled.isoformat(),
    }
    metadata.update(extra.pop("metadata", {}))
    return TaskSnapshot(
        task_id=f"run-{index}",
        name="sync",
        status=status,
        status_version=3,
        created_at=scheduled,
        updated_at=finished or scheduled,
        started_at=started,
        first_started_at=started,
        finished_at=finished,
        metadata=metadata,
        **extra,
    )


def test_statistics_from_snapshots() -> None:
    failure = Failure(kind=FailureKind.EXCEPTION, message="boom password=[REDACTED]")
    snapshots = [
        run(0, TaskStatus.SUCCEEDED, 10),
        run(1, TaskStatus.FAILED, 30, failure=failure),
        run(2, TaskStatus.SKIPPED, None, metadata={"skip": {"reason": "schedule is paused"}}),
        run(3, TaskStatus.SUCCEEDED, 20),
        run(4, TaskStatus.RUNNING, 5),
    ]
    stats = schedule_statistics("nightly", reversed(snapshots), next_run_at=T0 + timedelta(days=1))
    assert (stats.runs, stats.succeeded, stats.errors, stats.skipped) == (4, 2, 1, 1)
    assert stats.unfinished == 1
    assert stats.success_rate is not None
    assert round(stats.success_rate, 3) == round(200 / 3, 3)  # skipped runs are not judged
    assert stats.average_duration == 20.0  # (10 + 30 + 20) / 3; the skipped run never started
    assert [r.task_id for r in stats.recent] == ["run-4", "run-3", "run-2", "run-1", "run-0"]
    assert stats.recent[2].error == "schedule is paused"
    assert stats.recent[3].error == "boom password=[REDACTED]"
    assert stats.recent[0].duration is None  # still running
    assert stats.last_run_at == T0 + timedelta(hours=3, seconds=20)
    assert stats.next_run_at == T0 + timedelta(days=1)


def test_statistics_without_runs_have_no_rates() -> None:
    stats = schedule_statistics("nightly", [])
    assert (stats.runs, stats.success_rate, stats.average_duration, stats.recent) == (
        0,
        None,
        None,
        (),
    )


def test_recent_lists_the_last_ten_newest_first() -> None:
    snapshots = [run(i, TaskStatus.SUCCEEDED) for i in range(15)]
    stats = schedule_statistics("nightly", snapshots)
    assert len(stats.recent) == RECENT_RUNS
    assert stats.recent[0].task_id == "run-14"
    assert stats.runs == 15


def control(name: str, **changes: Any) -> ScheduleControl:
    base = ScheduleControl.register(
        Schedule(name=name, task="t", trigger=CronTrigger("@hourly")), now=T0
    )
    from dataclasses import replace

    return replace(base, **changes)


def test_health_is_ok_when_everything_fires() -> None:
    now = T0 + timedelta(minutes=30)
    health = scheduler_health(
        [
            control("a", next_run_at=T0 + timedelta(hours=1)),
            control("b", next_run_at=T0 + timedelta(minutes=40)),
            control("c", status="paused", next_run_at=T0 - timedelta(days=1)),
        ],
        now=now,
        running={"a": 1, "b": 2},
        late_after=60,
        last_tick_at=now - timedelta(seconds=1),
    )
    assert health.status == "ok"
    assert health.healthy
    assert (health.schedules, health.active, health.paused, health.running) == (3, 2, 1, 3)
    assert health.next_due_schedule == "b"
    assert health.problems == ()


def test_health_reports_failing_schedules_as_degraded() -> None:
    health = scheduler_health(
        [control("a", consecutive_failures=2), control("b")],
        now=T0,
        running={},
        late_after=60,
    )
    assert health.status == "degraded"
    assert health.healthy
    assert health.failing == ("a",)
    assert health.problems == ("failing schedule(s): a",)


def test_health_is_unhealthy_on_late_tick_store_errors_and_overdue_firings() -> None:
    now = T0 + timedelta(hours=2)
    health = scheduler_health(
        [control("a", next_run_at=T0 + timedelta(hours=1))],
        now=now,
        running={},
        late_after=60,
        last_tick_at=now - timedelta(minutes=10),
        store_errors=3,
        last_store_error="database is locked",
    )
    assert health.status == "unhealthy"
    assert not health.healthy
    assert health.tick_late
    assert health.overdue == ("a",)
    assert health.problems[0] == "scheduler tick is late: last tick 600s ago"
    assert health.problems[1] == "3 store error(s) since the last clean tick: database is locked"
    assert "schedule 'a' is overdue" in health.problems[2]
