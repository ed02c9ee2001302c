"""Per-schedule policy at work: overlap, pause, retries, max runtime, skips, counters."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from chongming_task.errors import ConfigurationError
from chongming_task.runtime import TaskContext, TaskSkipped
from chongming_task.schedule import IntervalTrigger, Schedule
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

from .conftest import T0, Harness

RAN = ["pending", "queued", "starting", "running"]
SKIPPED_AT_ONCE = ["pending", "skipped"]


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # never leave a body blocked


def every_minute(name: str, task: str, **options: object) -> Schedule:
    return Schedule(name=name, task=task, trigger=IntervalTrigger(60, T0), **options)  # type: ignore[arg-type]


def test_overlap_forbid_records_a_skipped_run(harness: Harness, gate: threading.Event) -> None:
    scheduler = harness.node({"hold": lambda ctx: gate.wait(10)})
    scheduler.add(every_minute("sync", "hold"))
    first = harness.step(60, settle=False)[0].fired[0]
    harness.status(first, TaskStatus.RUNNING)
    second = harness.step(60, settle=False)[0].fired[0]
    skipped = harness.settled(second)
    assert skipped.status is TaskStatus.SKIPPED
    assert harness.path(second) == SKIPPED_AT_ONCE
    reason = f"previous run {first!r} of schedule 'sync' is still running (overlap=forbid)"
    assert skipped.metadata["skip"] == {"reason": reason}
    assert harness.store.history(second)[-1].reason == reason
    gate.set()
    assert harness.settled(first).status is TaskStatus.SUCCEEDED
    assert harness.path(first) == [*RAN, "succeeded"]
    third = harness.step(60)[0].fired[0]
    assert harness.path(third) == [*RAN, "succeeded"]
    wait_until(lambda: scheduler.get("sync").runs == 3)
    control = scheduler.get("sync")
    assert (control.skips, control.errors, control.last_status) == (1, 0, "succeeded")


def test_overlap_allow_runs_concurrently(harness: Harness, gate: threading.Event) -> None:
    scheduler = harness.node({"hold": lambda ctx: gate.wait(10)})
    scheduler.add(every_minute("sync", "hold", overlap="allow"))
    first = harness.step(60, settle=False)[0].fired[0]
    second = harness.step(60, settle=False)[0].fired[0]
    harness.status(first, TaskStatus.RUNNING)
    harness.status(second, TaskStatus.RUNNING)
    gate.set()
    for task_id in (first, second):
        assert harness.settled(task_id).status is TaskStatus.SUCCEEDED
        assert harness.path(task_id) == [*RAN, "succeeded"]


def test_pause_records_skips_and_resume_runs_again(harness: Harness) -> None:
    scheduler = harness.node({"noop": lambda ctx: None})
    scheduler.add(every_minute("p", "noop"))
    paused = scheduler.pause("p", operator="alice", reason="maintenance")
    assert (paused.status, paused.updated_by, paused.definition_revision) == ("paused", "alice", 2)
    skipped = harness.step(60)[0].fired[0]
    assert harness.path(skipped) == SKIPPED_AT_ONCE
    assert harness.store.history(skipped)[-1].reason == "schedule 'p' is paused: maintenance"
    scheduler.resume("p", operator="bob")
    ran = harness.step(60)[0].fired[0]
    assert harness.path(ran) == [*RAN, "succeeded"]
    wait_until(lambda: scheduler.get("p").runs == 2)
    assert scheduler.get("p").skips == 1


def test_retries_follow_retry_attempts_and_backoff(harness: Harness) -> None:
    attempts: list[int] = []

    def flaky(ctx: TaskContext) -> str:
        attempts.append(ctx.attempt)
        if len(attempts) < 3:
            raise ConnectionError("upstream refused")
        return "ok"

    scheduler = harness.node({"flaky": flaky})
    scheduler.add(every_minute("f", "flaky", retry_attempts=2, retry_backoff=5))
    task_id = harness.step(60, settle=False)[0].fired[0]
    for started in (2, 3):
        harness.status(task_id, TaskStatus.RETRY_WAIT)
        assert len(attempts) == started - 1
        harness.clock.advance(5)
        wait_until(lambda: len(attempts) == started)  # noqa: B023 - evaluated at once
    run = harness.settled(task_id)
    assert run.status is TaskStatus.SUCCEEDED
    assert run.attempt == 3
    assert harness.path(task_id) == [
        *RAN,
        "retry_wait",
        "starting",
        "running",
        "retry_wait",
        "starting",
        "running",
        "succeeded",
    ]
    assert attempts == [1, 2, 3]


def test_retries_exhausted_fail_the_run_and_count_one_error(harness: Harness) -> None:
    def broken(ctx: TaskContext) -> None:
        raise RuntimeError("login failed: password=hunter2")

    scheduler = harness.node({"broken": broken})
    scheduler.add(every_minute("b", "broken", retry_attempts=1, retry_backoff=1))
    task_id = harness.step(60, settle=False)[0].fired[0]
    harness.status(task_id, TaskStatus.RETRY_WAIT)
    harness.clock.advance(1)
    run = harness.settled(task_id)
    assert harness.path(task_id) == [*RAN, "retry_wait", "starting", "running", "failed"]
    assert run.failure is not None
    assert "hunter2" not in run.failure.message
    wait_until(lambda: scheduler.get("b").errors == 1)
    control = scheduler.get("b")
    assert (control.runs, control.consecutive_failures, control.last_status) == (1, 1, "failed")
    assert control.last_error is not None
    assert "hunter2" not in control.last_error
    assert "password=[REDACTED]" in control.last_error


def test_max_runtime_fails_the_run(harness: Harness) -> None:
    def endless(ctx: TaskContext) -> None:
        pause = threading.Event()
        while True:
            ctx.checkpoint()
            pause.wait(0.005)

    scheduler = harness.node({"endless": endless})
    scheduler.add(every_minute("e", "endless", max_runtime=10))
    task_id = harness.step(60, settle=False)[0].fired[0]
    harness.status(task_id, TaskStatus.RUNNING)
    harness.clock.advance(11)
    run = harness.settled(task_id)
    assert run.status is TaskStatus.FAILED
    assert run.failure is not None
    assert run.failure.kind.value == "timeout_total"
    assert harness.path(task_id) == [*RAN, "failed"]
    wait_until(lambda: scheduler.get("e").errors == 1)
    assert scheduler.get("e").last_error == "total timeout of 10s expired"


def test_a_body_may_end_its_run_as_skipped(harness: Harness) -> None:
    def idle(ctx: TaskContext) -> None:
        raise TaskSkipped("nothing new upstream")

    scheduler = harness.node({"idle": idle})
    scheduler.add(every_minute("i", "idle"))
    task_id = harness.step(60)[0].fired[0]
    assert harness.path(task_id) == [*RAN, "skipped"]
    wait_until(lambda: scheduler.get("i").runs == 1)
    control = scheduler.get("i")
    assert (control.errors, control.skips, control.consecutive_failures) == (0, 1, 0)
    stats = scheduler.statistics("i")
    assert (stats.runs, stats.skipped, stats.errors, stats.success_rate) == (1, 1, 0, None)
    assert stats.recent[0].error == "nothing new upstream"


def test_manual_run_in_this_process(harness: Harness) -> None:
    scheduler = harness.node({"noop": lambda ctx: "done"})
    scheduler.add(every_minute("m", "noop"))
    scheduler.add(every_minute("locked", "noop", manual_run_enabled=False))
    run = scheduler.run_now("m", operator="alice", reason="backfill", correlation_id="req-7")
    outcome = run.wait(5)
    assert outcome.value == "done"
    snapshot = harness.settled(run.task_id)
    assert snapshot.metadata["trigger_type"] == "manual"
    assert snapshot.metadata["trigger"]["operator"] == "alice"
    assert snapshot.metadata["trigger"]["reason"] == "backfill"
    assert snapshot.metadata["trigger"]["correlation_id"] == "req-7"
    assert harness.path(run.task_id) == [*RAN, "succeeded"]
    with pytest.raises(ConfigurationError, match="manual runs are disabled for schedule 'locked'"):
        scheduler.run_now("locked")
    with pytest.raises(ConfigurationError, match="'ghost' is not registered with this scheduler"):
        scheduler.run_now("ghost")
