"""Pure firing decisions: due times, misfire policy after downtime, firing metadata."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from chongming_task._model import ensure_json
from chongming_task.schedule import CronTrigger, IntervalTrigger, Schedule, ScheduleControl
from chongming_task.schedule._definition import Misfire
from chongming_task.schedule._firing import (
    METADATA_SCHEMA,
    DueFiring,
    firing_metadata,
    plan_firings,
)
from chongming_task.testing import FakeClock

T0 = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)
HOURLY = CronTrigger("0 * * * *")


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def test_on_time_firing_is_due_once() -> None:
    plan = plan_firings(HOURLY, since=at(0.5), now=at(1), tolerance=5)
    assert plan.due == (DueFiring(at(1)),)
    assert plan.next_at == at(2)
    assert plan.missed_from is None
    # Nothing new until the next hour.
    assert plan_firings(HOURLY, since=at(1), now=at(1.5), tolerance=5).due == ()


def test_a_firing_noticed_late_within_tolerance_is_still_on_time() -> None:
    plan = plan_firings(HOURLY, since=at(0.9), now=at(1) + timedelta(seconds=4), tolerance=5)
    assert plan.due == (DueFiring(at(1)),)


def test_every_on_time_firing_of_a_dense_schedule_is_due() -> None:
    trigger = IntervalTrigger(1)
    plan = plan_firings(trigger, since=T0, now=T0 + timedelta(seconds=3), tolerance=5)
    assert [f.scheduled_at for f in plan.due] == [T0 + timedelta(seconds=s) for s in (1, 2, 3)]


def test_limit_bounds_one_plan() -> None:
    trigger = IntervalTrigger(1)
    plan = plan_firings(trigger, since=T0, now=T0 + timedelta(seconds=50), tolerance=100, limit=10)
    assert len(plan.due) == 10
    assert plan.checked_until == T0 + timedelta(seconds=10)
    assert plan.next_at <= T0 + timedelta(seconds=50)  # look again at once


def test_skip_drops_missed_firings_after_downtime() -> None:
    plan = plan_firings(HOURLY, since=at(0), now=at(5.5), tolerance=60, misfire="skip")
    assert plan.due == ()
    assert plan.missed_from == at(1)
    assert plan.next_at == at(6)


def test_run_once_catches_up_the_newest_missed_firing_within_grace() -> None:
    plan = plan_firings(
        HOURLY, since=at(0), now=at(5.5), tolerance=60, misfire="run_once", grace=3600
    )
    assert plan.due == (DueFiring(at(5), catch_up=True),)
    # Outside grace: nothing to catch up.
    late = plan_firings(
        HOURLY, since=at(0), now=at(5.5), tolerance=60, misfire="run_once", grace=600
    )
    assert late.due == ()
    assert late.missed_from == at(1)


def test_run_once_does_not_add_a_catch_up_beside_an_on_time_firing() -> None:
    plan = plan_firings(
        HOURLY, since=at(0), now=at(5), tolerance=60, misfire="run_once", grace=86400
    )
    assert plan.due == (DueFiring(at(5)),)


def test_run_once_finds_the_newest_missed_second_quickly() -> None:
    trigger = CronTrigger("* * * * * *")
    now = at(30) + timedelta(seconds=0.7)  # no whole second in the tolerance window
    plan = plan_firings(
        trigger, since=at(0), now=now, tolerance=0.5, misfire="run_once", grace=86400
    )
    assert plan.due == (DueFiring(at(30), catch_up=True),)


def simulate(misfire: Misfire, *, down_hours: float) -> list[DueFiring]:
    """A scheduler loop on a FakeClock ticking every 2 min, down for a while on day 2."""
    clock = FakeClock(T0)
    trigger = CronTrigger("0 */4 * * *")
    since = clock.now()
    fired: list[DueFiring] = []
    down_from = at(30)
    down_until = down_from + timedelta(hours=down_hours)
    while clock.now() < at(72):
        clock.advance(120)
        if down_from <= clock.now() < down_until:
            continue  # the process is down: no tick, nothing persisted
        plan = plan_firings(
            trigger, since=since, now=clock.now(), tolerance=150, misfire=misfire, grace=7200
        )
        fired.extend(plan.due)
        since = plan.checked_until or since
        if plan.due:
            since = max(since, plan.due[-1].scheduled_at)
    return fired


def test_downtime_with_skip_loses_the_missed_firings() -> None:
    fired = simulate("skip", down_hours=3)
    times = [f.scheduled_at for f in fired]
    assert at(32) not in times  # missed while down (30:00-33:00)
    assert len(times) == 18 - 1
    assert not any(f.catch_up for f in fired)
    assert len(set(times)) == len(times)


def test_downtime_with_run_once_runs_one_catch_up() -> None:
    fired = simulate("run_once", down_hours=3)
    catch_ups = [f for f in fired if f.catch_up]
    assert catch_ups == [DueFiring(at(32), catch_up=True)]
    assert len(fired) == 18
    # A long outage: the missed firings are older than the grace, nothing is caught up.
    long = simulate("run_once", down_hours=9)
    assert not any(f.catch_up for f in long)


def test_firing_metadata_follows_scheduler_run_v1() -> None:
    control = ScheduleControl.register(
        Schedule(name="nightly", task="sync", trigger=CronTrigger("0 2 * * *")), now=T0
    )
    metadata = firing_metadata(
        control,
        trigger_type="manual",
        scheduled_at=at(2),
        fired_at=at(2) + timedelta(seconds=1),
        owner="node-a",
        operator="alice",
        reason="backfill",
        correlation_id="req-42",
        command_id="c1",
        skip_reason="schedule is paused",
    )
    ensure_json(metadata)
    assert metadata["schema_version"] == METADATA_SCHEMA
    assert metadata["schedule"] == "nightly"
    assert metadata["trigger_type"] == "manual"
    assert metadata["scheduled_at"] == at(2).isoformat()
    assert metadata["trigger"] == {
        "type": "manual",
        "scheduled_at": at(2).isoformat(),
        "catch_up": False,
        "operator": "alice",
        "reason": "backfill",
        "correlation_id": "req-42",
        "command_id": "c1",
    }
    assert metadata["runtime"]["owner"] == "node-a"
    assert metadata["control"]["configured"] is True
    assert metadata["control"]["pattern"] == "0 2 * * *"
    assert metadata["control"]["definition_revision"] == 1
    assert metadata["skip"] == {"reason": "schedule is paused"}
    plain = firing_metadata(
        control, trigger_type="cron", scheduled_at=at(2), fired_at=at(2), owner=None
    )
    assert "skip" not in plain
    assert set(plain["trigger"]) == {"type", "scheduled_at", "catch_up"}
