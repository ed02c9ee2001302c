"""Issue 27, "Why": a dead holder's run is settled, health from the store's facts,
and no firing decision depends on two clocks agreeing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from chongming_task.controller._reconcile import RECONCILE_TRIGGER
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import StoreError
from chongming_task.schedule import IntervalTrigger, Schedule, ScheduleAdmin
from chongming_task.states import TaskStatus
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.testing import FakeClock, wait_until

from .conftest import T0, Harness


def beat(ctx: Any) -> str:
    return "beat"


def dead_run(harness: Harness, task_id: str, schedule: str = "beat") -> None:
    """A run that a node started and then died in: running, its lease expiring at T0+30s."""
    machine = StateMachine.create(
        task_id,
        "beat",
        owner="dead-node",
        metadata={"schedule": schedule, "scheduled_at": T0.isoformat()},
        clock=harness.clock,
    )
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    harness.store.create(
        machine.snapshot.replace(lease_owner="dead-node", lease_until=T0 + timedelta(seconds=30)),
        machine.transitions,
    )


def test_a_run_whose_holder_died_is_settled_lost_and_forbid_goes_on_firing(
    harness: Harness,
) -> None:
    scheduler = harness.node({"beat": beat}, tick=60)
    scheduler.every("beat", "beat", 60)
    dead_id = "beat@20260105T000000Z"
    dead_run(harness, dead_id)

    (_report,) = harness.step(60)  # 00:01:00; the dead node's lease expired at 00:00:30
    fired = harness.settled("beat@20260105T000100Z")
    assert fired.status is TaskStatus.SUCCEEDED  # not skipped behind the dead run
    dead = harness.store.get(dead_id)
    assert dead is not None
    assert dead.status is TaskStatus.LOST
    last = harness.store.history(dead_id)[-1]
    assert last.trigger == RECONCILE_TRIGGER
    assert dead.failure is not None
    assert "dead-node" in dead.failure.message
    wait_until(lambda: scheduler.get("beat").errors == 1)  # the lost run is counted


def test_health_counts_a_dead_holders_run_and_is_degraded_until_it_is_settled(
    harness: Harness,
) -> None:
    scheduler = harness.node({"beat": beat}, tick=60)
    scheduler.add(Schedule(name="beat", task="beat", trigger=IntervalTrigger(3600, T0)))
    dead_id = "beat@20260105T000000Z"
    dead_run(harness, dead_id)
    harness.clock.advance(40)  # the lease expired; nobody ticked yet
    health = ScheduleAdmin(harness.store, clock=harness.clock).health()
    assert health.stale_runs == 1
    assert health.blocked == ("beat",)
    assert health.status == "degraded"
    assert any(dead_id in p and "overlap=forbid" in p for p in health.problems)
    report = scheduler.tick()
    assert report.settled == [dead_id]
    health = scheduler.health()
    assert (health.stale_runs, health.blocked) == (0, ())
    assert harness.store.get(dead_id).status is TaskStatus.LOST  # type: ignore[union-attr]


def test_a_schedule_never_ticked_is_unhealthy_once_overdue(harness: Harness) -> None:
    scheduler = harness.node({"beat": beat})
    scheduler.cron("beat", "beat", "* * * * *")
    assert scheduler.health().status == "ok"
    harness.clock.advance(600)  # ten minutes, no tick at all
    for health in (scheduler.health(), ScheduleAdmin(harness.store, clock=harness.clock).health()):
        assert health.status == "unhealthy"
        assert health.overdue == ("beat",)
        assert health.next_due == T0 + timedelta(minutes=1)
        assert any("schedule 'beat' is overdue" in p for p in health.problems)


class BrokenStore(InMemoryTaskStore):
    broken = False

    def list_schedules(self) -> Any:
        if self.broken:
            raise StoreError("database is locked (outage)")
        return super().list_schedules()


def test_a_store_outage_is_unhealthy_with_the_error_never_an_exception() -> None:
    from chongming_task import Controller
    from chongming_task.schedule import Scheduler

    clock = FakeClock(T0)
    store = BrokenStore(clock=clock)
    controller = Controller(store, clock=clock)
    controller.register("beat", beat)
    scheduler = Scheduler(controller)
    try:
        scheduler.every("beat", "beat", 60)
        store.broken = True
        health = scheduler.health()
        assert health.status == "unhealthy"
        assert health.error is not None
        assert "database is locked" in health.error
        assert any("database is locked" in p for p in health.problems)
    finally:
        store.broken = False
        scheduler.close()
        controller.close(timeout=5)


def test_a_control_change_stamped_ahead_never_makes_a_due_firing_vanish(
    harness: Harness,
) -> None:
    """Another process, its clock an hour ahead, pauses and resumes (or edits) the
    schedule between two ticks: the firing due at the next tick still runs."""
    scheduler = harness.node({"beat": beat}, tick=1)
    scheduler.every("beat", "beat", 60)
    ahead = FakeClock(T0 + timedelta(hours=1))
    remote = ScheduleAdmin(harness.store, clock=ahead, actor="remote")
    fired: list[str] = []
    missed: dict[str, Any] = {}
    for minute in range(1, 11):
        harness.clock.advance(59)
        fired += scheduler.tick().fired
        ahead.advance(59)
        remote.pause("beat")
        remote.resume("beat")
        harness.clock.advance(1)
        report = scheduler.tick()
        fired += report.fired
        missed.update(report.missed)
        harness.settled(f"beat@20260105T00{minute:02d}00Z")
    assert len(fired) == 10
    assert missed == {}


def test_every_missed_firing_is_recorded_with_the_reason(harness: Harness) -> None:
    scheduler = harness.node({"beat": beat}, tick=1)
    scheduler.every("beat", "beat", 60)
    harness.step(60)
    report = harness.step(600)[0]  # a ten-minute stall
    assert report.missed["beat"] == T0 + timedelta(minutes=2)
    reason = report.missed_reasons["beat"]
    assert "misfire tolerance" in reason
    assert "misfire=skip" in reason
