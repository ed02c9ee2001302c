"""The control plane across processes: commands, manual runs kept alive, overrides, health."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from chongming_task.core._clock import SystemClock
from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.schedule import CronTrigger, IntervalTrigger, Schedule
from chongming_task.schedule._admin import ScheduleAdmin
from chongming_task.states import TaskStatus
from chongming_task.stores._base import Command
from chongming_task.testing import wait_until

from .conftest import T0, Harness


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def hourly(name: str, **options: object) -> Schedule:
    return Schedule(name=name, task="work", trigger=CronTrigger("0 * * * *"), **options)  # type: ignore[arg-type]


def admin_of(harness: Harness) -> ScheduleAdmin:
    """What another process (the CLI) has: the store, nothing else."""
    return ScheduleAdmin(harness.store, clock=harness.clock, actor="cli")


def command(harness: Harness, command_id: str) -> Command:
    found = harness.store.get_command(command_id)
    assert found is not None
    return found


def test_manual_run_requested_by_another_process_reports_its_result(harness: Harness) -> None:
    scheduler = harness.node({"work": lambda ctx: "42"})
    scheduler.add(hourly("report"))
    requested = admin_of(harness).request_run(
        "report", operator="alice", reason="month end", correlation_id="req-1"
    )
    tick = harness.step(1)[0]
    assert tick.commands == 1
    task_id = scheduler.pending_commands[requested.command_id]
    assert harness.settled(task_id).status is TaskStatus.SUCCEEDED
    harness.step(1)
    done = command(harness, requested.command_id)
    assert done.status == "completed"
    assert done.result == {
        "applied": True,
        "task_id": task_id,
        "status": "succeeded",
        "ok": True,
        "skipped": False,
        "error": None,
    }
    trigger = harness.store.get(task_id).metadata["trigger"]  # type: ignore[union-attr]
    assert (trigger["type"], trigger["operator"], trigger["reason"]) == (
        "manual",
        "alice",
        "month end",
    )
    assert (trigger["correlation_id"], trigger["command_id"]) == ("req-1", requested.command_id)
    waiting = ScheduleAdmin(harness.store, clock=SystemClock())
    assert waiting.wait_for_command(requested.command_id, timeout=1).result == done.result


def test_every_claimed_run_is_kept_alive_until_it_finishes(
    harness: Harness, gate: threading.Event
) -> None:
    a = harness.node({"work": lambda ctx: gate.wait(10)}, owner="node-a")
    b = harness.node({"work": lambda ctx: gate.wait(10)}, owner="node-b")
    a.add(hourly("batch", overlap="allow"))
    admin = admin_of(harness)
    ids = [admin.request_run("batch", operator="ops").command_id for _ in range(3)]
    assert a.tick().commands == 3  # one batch, three runs in flight
    for _ in range(12):  # 120 s: four times the 30 s lease
        harness.step(10, a, b, settle=False)
        for command_id in ids:
            claimed = command(harness, command_id)
            assert claimed.status == "claimed"
            assert claimed.claimed_by == "node-a"
            assert claimed.claims == 1  # never expired, never re-claimed by node-b
            assert claimed.lease_until is not None
            assert claimed.lease_until > harness.clock.now() + timedelta(seconds=15)
    gate.set()
    for task_id in a.pending_commands.values():
        harness.settled(task_id)
    harness.step(1, a)
    assert [command(harness, i).status for i in ids] == ["completed"] * 3
    assert len(harness.runs("batch")) == 3


def test_a_reclaimed_run_is_not_started_twice(harness: Harness, gate: threading.Event) -> None:
    a = harness.node({"work": lambda ctx: gate.wait(10)}, owner="node-a")
    b = harness.node({"work": lambda ctx: gate.wait(10)}, owner="node-b")
    for node in (a, b):
        node.add(hourly("batch"))
    requested = admin_of(harness).request_run("batch")
    a.tick()
    (task_id,) = a.pending_commands.values()
    harness.status(task_id, TaskStatus.RUNNING)
    a.close()  # node-a's scheduler dies; its lease on the command runs out
    harness.clock.advance(31)
    assert b.tick().commands == 1
    assert command(harness, requested.command_id).claims == 2
    assert b.pending_commands == {requested.command_id: task_id}
    gate.set()
    harness.settled(task_id)
    b.tick()
    assert command(harness, requested.command_id).result["task_id"] == task_id
    assert [s.task_id for s in harness.runs("batch")] == [task_id]


def test_manual_runs_refused_when_disabled(harness: Harness) -> None:
    scheduler = harness.node({"work": lambda ctx: None})
    scheduler.add(hourly("locked", manual_run_enabled=False))
    with pytest.raises(ConfigurationError, match="manual runs are disabled for schedule 'locked'"):
        admin_of(harness).request_run("locked")
    raw = harness.store.submit_command(
        Command.new(kind="schedule", target="locked", action="run", issued_by="x", issued_at=T0)
    )
    harness.step(1)
    result = command(harness, raw.command_id).result
    assert result["applied"] is False
    assert "manual runs are disabled" in result["error"]
    assert harness.runs("locked") == []


def send(harness: Harness, target: str, action: str, **payload: object) -> str:
    sent = harness.store.submit_command(
        Command.new(
            kind="schedule",
            target=target,
            action=action,
            issued_by="cli",
            issued_at=harness.clock.now(),
            payload=payload,
        )
    )
    return sent.command_id


def test_operator_commands_pause_resume_set_reset(harness: Harness) -> None:
    scheduler = harness.node({"work": lambda ctx: None})
    scheduler.add(hourly("h"))
    ids = [
        send(harness, "h", "pause", operator="alice", reason="db upgrade"),
        send(harness, "h", "set", pattern="*/30 * * * *", timezone="Asia/Tokyo"),
        send(harness, "h", "set", pattern="61 * * * *"),
        send(harness, "h", "explode"),
    ]
    harness.step(1)
    results = [command(harness, i).result for i in ids]
    assert results[0] == {
        "applied": True,
        "status": "paused",
        "pattern": "0 * * * *",
        "timezone": "UTC",
        "definition_revision": 2,
    }
    assert results[1]["pattern"] == "*/30 * * * *"
    assert results[1]["timezone"] == "Asia/Tokyo"
    assert results[2]["applied"] is False
    assert "'61 * * * *' is not valid" in results[2]["error"]
    assert "unknown schedule action 'explode'" in results[3]["error"]
    control = scheduler.get("h")
    assert (control.status, control.status_reason, control.updated_by) == (
        "paused",
        "db upgrade",
        "cli",
    )
    ids = [send(harness, "h", "resume"), send(harness, "h", "reset")]
    harness.step(1)
    control = scheduler.get("h")
    assert (control.status, control.pattern, control.timezone) == ("active", "0 * * * *", "UTC")
    assert control.definition_revision == 5


def test_a_command_for_a_schedule_elsewhere_is_handed_back(harness: Harness) -> None:
    here = harness.node({"work": lambda ctx: None}, owner="node-a")
    there = harness.node({"work": lambda ctx: None}, owner="node-b")
    there.add(hourly("only-b"))
    command_id = send(harness, "only-b", "pause")
    assert here.tick().commands == 1
    handed_back = command(harness, command_id)
    assert (handed_back.status, handed_back.claimed_by) == ("pending", None)
    assert here._firing.commands.released == 1
    there.tick()
    assert command(harness, command_id).status == "completed"
    assert there.get("only-b").paused


def test_override_survives_a_redeploy(harness: Harness) -> None:
    first = harness.node({"work": lambda ctx: None}, owner="v1")
    first.add(hourly("h"))
    admin_of(harness).set_pattern("h", "15 * * * *", timezone="Europe/Berlin", operator="ops")
    admin_of(harness).pause("h", operator="ops")
    first.close()
    second = harness.node({"work": lambda ctx: None}, owner="v2")
    control = second.add(
        Schedule(name="h", task="work", trigger=CronTrigger("0 */2 * * *"), max_runtime=60)
    )
    assert (control.pattern, control.timezone, control.status) == (
        "15 * * * *",
        "Europe/Berlin",
        "paused",
    )
    assert control.default_pattern == "0 */2 * * *"
    assert control.max_runtime == 60
    assert control.definition_revision == 4


def test_health_reflects_late_ticks_store_errors_and_failures(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(ctx: object) -> None:
        raise RuntimeError("boom")

    scheduler = harness.node({"work": fail}, tick=1)
    scheduler.add(Schedule(name="f", task="work", trigger=IntervalTrigger(60, T0)))
    assert scheduler.health().status == "ok"
    harness.step(60)
    wait_until(lambda: scheduler.get("f").consecutive_failures == 1)
    health = scheduler.health()
    assert (health.status, health.failing) == ("degraded", ("f",))
    harness.clock.advance(600)  # no tick for ten minutes
    late = scheduler.health()
    assert late.status == "unhealthy"
    assert late.tick_late
    assert late.overdue == ("f",)

    def broken() -> list[object]:
        raise StoreError("database is locked")

    monkeypatch.setattr(harness.store, "list_schedules", broken)
    report = scheduler.tick()
    assert report.error == "reading schedules: StoreError: database is locked"
    assert scheduler.store_errors == 1
    monkeypatch.undo()
    failing = scheduler.health()
    assert "1 store error(s) since the last clean tick" in failing.problems[0]
    scheduler.tick()
    assert scheduler.store_errors == 0


def test_views_from_another_process(harness: Harness) -> None:
    scheduler = harness.node({"work": lambda ctx: None})
    scheduler.add(Schedule(name="v", task="work", trigger=IntervalTrigger(60, T0)))
    for _ in range(12):
        harness.step(60)
    admin = admin_of(harness)
    history = admin.history("v", limit=5)
    assert [h.scheduled_at for h in history] == [
        T0 + timedelta(minutes=m) for m in (12, 11, 10, 9, 8)
    ]
    stats = admin.statistics("v")
    assert (stats.runs, stats.succeeded, stats.success_rate, len(stats.recent)) == (
        12,
        12,
        100.0,
        10,
    )
    assert stats.next_run_at == T0 + timedelta(minutes=13)
    assert admin.health().status == "ok"
    assert [c.name for c in admin.schedules()] == ["v"]


def test_closing_hands_back_claimed_runs(harness: Harness, gate: threading.Event) -> None:
    a = harness.node({"work": lambda ctx: gate.wait(10)}, owner="node-a")
    b = harness.node({"work": lambda ctx: gate.wait(10)}, owner="node-b")
    for node in (a, b):
        node.add(hourly("batch"))
    requested = admin_of(harness).request_run("batch")
    a.tick()
    (task_id,) = a.pending_commands.values()
    a.close()
    handed_back = command(harness, requested.command_id)
    assert (handed_back.status, handed_back.claimed_by) == ("pending", None)
    b.tick()  # at once, not after the lease: it finds the run node-a started
    assert b.pending_commands == {requested.command_id: task_id}
    gate.set()
    harness.settled(task_id)
    b.tick()
    assert command(harness, requested.command_id).result["task_id"] == task_id


def test_a_closed_controller_claims_nothing(harness: Harness) -> None:
    scheduler = harness.node({"work": lambda ctx: None})
    scheduler.add(Schedule(name="m", task="work", trigger=IntervalTrigger(60, T0)))
    harness.controllers[0].close()
    report = harness.step(60, settle=False)[0]
    assert report.fired == []
    assert report.error == "the controller is closed; nothing is fired"
    assert harness.store.claim_firing("m", T0 + timedelta(minutes=1), "other", "t")


def test_add_module_registers_its_schedules(harness: Harness) -> None:
    import types

    module = types.ModuleType("jobs")
    module.nightly = hourly("nightly")  # type: ignore[attr-defined]
    module.hourly = hourly("a-hourly")  # type: ignore[attr-defined]
    module.not_a_schedule = "0 * * * *"  # type: ignore[attr-defined]
    scheduler = harness.node({"work": lambda ctx: None})
    added = scheduler.add_module(module)
    assert [c.name for c in added] == ["a-hourly", "nightly"]
    assert scheduler.names == ["a-hourly", "nightly"]


def test_a_run_that_cannot_start_is_released_and_retried(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler = harness.node({"work": lambda ctx: "ok"})
    scheduler.add(hourly("r"))
    requested = admin_of(harness).request_run("r")

    def failing(*args: object, **kwargs: object) -> None:
        raise StoreError("connection reset")

    monkeypatch.setattr(harness.store, "get", failing)
    report = scheduler.tick()
    assert report.error is not None
    assert "connection reset" in report.error
    assert scheduler.pending_commands == {}
    assert command(harness, requested.command_id).status == "pending"  # back in the queue
    monkeypatch.undo()
    scheduler.tick()
    (task_id,) = scheduler.pending_commands.values()
    harness.settled(task_id)
    scheduler.tick()
    assert command(harness, requested.command_id).result["status"] == "succeeded"
