"""The Go scheduler's remaining behaviours: a dispatch's input, a display name, and
cancelling a manual-run request nobody has claimed yet (issue 27, item 4)."""

from __future__ import annotations

from typing import Any

import pytest

from chongming_task.errors import ConfigurationError
from chongming_task.schedule import CronTrigger, Schedule, ScheduleAdmin
from chongming_task.states import TaskStatus

from .conftest import Harness


def with_input(ctx: Any, input: dict[str, Any] | None = None) -> str:
    return f"input={input}"


def without_input(ctx: Any) -> str:
    return "plain"


def hourly(name: str, task: str, **options: Any) -> Schedule:
    return Schedule(name=name, task=task, trigger=CronTrigger("0 * * * *"), **options)


def test_an_input_payload_reaches_metadata_and_the_tasks_input_parameter(
    harness: Harness,
) -> None:
    scheduler = harness.node({"with": with_input, "without": without_input})
    scheduler.add(hourly("a", "with"))
    scheduler.add(hourly("b", "without"))
    admin = ScheduleAdmin(harness.store, clock=harness.clock, actor="cli")
    first = admin.request_run("a", input={"month": "2026-01"})
    second = admin.request_run("b", input={"month": "2026-02"})
    harness.step(1)
    runs = {c: scheduler.pending_commands[c] for c in (first.command_id, second.command_id)}
    a = harness.settled(runs[first.command_id])
    b = harness.settled(runs[second.command_id])
    assert a.metadata["input"] == {"month": "2026-01"}
    assert a.outcome == "input={'month': '2026-01'}"
    assert b.metadata["input"] == {"month": "2026-02"}
    assert (b.status, b.outcome) == (TaskStatus.SUCCEEDED, "plain")
    local = scheduler.run_now("a", input={"k": 1})
    assert harness.settled(local.task_id).outcome == "input={'k': 1}"
    with pytest.raises(ConfigurationError, match="JSON object"):
        admin.request_run("a", input=["not", "an", "object"])  # type: ignore[arg-type]


def test_a_display_name_is_recorded_and_validated(harness: Harness) -> None:
    scheduler = harness.node({"without": without_input})
    control = scheduler.add(hourly("nightly", "without", display_name="  Nightly report  "))
    assert control.display_name == "Nightly report"
    assert scheduler.add(hourly("other", "without")).shown_name == "other"
    with pytest.raises(ConfigurationError, match="display name"):
        hourly("x", "without", display_name="   ")
    with pytest.raises(ConfigurationError, match="display name"):
        hourly("x", "without", display_name="n" * 192)
    run = scheduler.run_now("nightly")
    snapshot = harness.settled(run.task_id)
    assert snapshot.metadata["control"]["display_name"] == "Nightly report"


def test_an_unclaimed_manual_run_request_can_be_cancelled(harness: Harness) -> None:
    scheduler = harness.node({"without": without_input})
    scheduler.add(hourly("a", "without"))
    admin = ScheduleAdmin(harness.store, clock=harness.clock, actor="cli")
    keep = admin.request_run("a", reason="keep")
    drop = admin.request_run("a", reason="drop")
    cancelled = admin.cancel_run(drop.command_id, operator="alice", reason="mistake")
    assert cancelled.status == "completed"
    assert cancelled.result["cancelled"] is True
    assert "alice" in cancelled.result["error"]
    # The other request kept its place and runs; the cancelled one never does.
    harness.step(1)
    assert list(scheduler.pending_commands) == [keep.command_id]
    harness.settled(scheduler.pending_commands[keep.command_id])
    manual = [r for r in harness.runs("a") if r.metadata["trigger_type"] == "manual"]
    assert len(manual) == 1
    assert manual[0].metadata["trigger"]["command_id"] == keep.command_id
    with pytest.raises(ConfigurationError, match="already completed"):
        admin.cancel_run(drop.command_id)
    with pytest.raises(ConfigurationError, match="no manual-run request"):
        admin.cancel_run("nope")


def test_a_claimed_request_cannot_be_cancelled(harness: Harness) -> None:
    import threading

    gate = threading.Event()
    scheduler = harness.node({"hold": lambda ctx: gate.wait(10)})
    scheduler.add(hourly("a", "hold"))
    admin = ScheduleAdmin(harness.store, clock=harness.clock, actor="cli")
    request = admin.request_run("a")
    try:
        harness.step(1, settle=False)
        assert request.command_id in scheduler.pending_commands
        with pytest.raises(ConfigurationError, match="claimed by node-a"):
            admin.cancel_run(request.command_id)
    finally:
        gate.set()
