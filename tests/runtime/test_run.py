"""TaskRun and run_task: trajectories, outcomes, options, listeners, thread safety."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from typing import Any

import pytest

from chongming_task._model import FailureKind, TaskSnapshot, Transition
from chongming_task.errors import ConfigurationError
from chongming_task.run import TaskOutcome, TaskRun, run_task
from chongming_task.runtime._context import TaskContext
from chongming_task.runtime._timers import TimerService
from chongming_task.runtime.executors.inline import InlineExecutor
from chongming_task.states import TRANSITIONS
from chongming_task.testing import FakeClock

from .helpers import HAPPY, PATIENCE, TICK, S, busy, path, reach, triggers


def extract(ctx: TaskContext, source: str, *, batch_size: int = 100) -> dict[str, Any]:
    ctx.checkpoint()
    return {"source": source, "batch_size": batch_size}


def test_run_task_trajectory_and_outcome() -> None:
    outcome = run_task(extract, "s3://x", batch_size=500, task_id="job-1", name="抽取")
    assert isinstance(outcome, TaskOutcome)
    assert outcome.ok
    assert outcome.status is S.SUCCEEDED
    assert outcome.value == {"source": "s3://x", "batch_size": 500}
    assert outcome.failure is None
    snapshot = outcome.snapshot
    assert (snapshot.task_id, snapshot.name, snapshot.attempt) == ("job-1", "抽取", 1)
    assert snapshot.outcome == outcome.value
    assert snapshot.pid == os.getpid()
    assert snapshot.status_version == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.ok = False  # type: ignore[misc]


def test_task_run_trajectory_triggers_and_versions() -> None:
    run = TaskRun(extract, ("s3://bucket/x",), task_id="job-1", name="抽取")
    assert run.status is S.PENDING
    run.start()
    outcome = run.wait(timeout=PATIENCE)
    assert outcome.value["source"] == "s3://bucket/x"
    assert path(run) == HAPPY
    assert triggers(run) == [
        "machine:created",
        "controller:queued",
        "executor:starting",
        "executor:launched",
        "runtime:returned",
    ]
    assert [t.version for t in run.transitions] == [0, 1, 2, 3, 4]
    assert run.transitions[2].reason == "executor=thread"
    assert run.done
    assert run.task_id == "job-1"
    assert run.name == "抽取"


def test_defaults_task_id_and_name() -> None:
    run = TaskRun(extract, ("x",))
    assert run.name == "extract"
    assert len(run.task_id) == 32
    assert repr(run).startswith("TaskRun(task_id=")


def test_options_and_task_keywords_do_not_mix() -> None:
    def clashing(ctx: TaskContext, name: str, *, timeout: float = 1.0) -> str:
        return f"{name}:{timeout}"

    with pytest.raises(ConfigurationError, match=r"args=\(\.\.\.\), kwargs=\{\.\.\.\}"):
        run_task(clashing, "a")
    outcome = run_task(clashing, args=("a",), kwargs={"timeout": 2.0})
    assert outcome.value == "a:2.0"
    with pytest.raises(ConfigurationError, match="not both"):
        run_task(clashing, "a", args=("a",))
    # TaskRun takes args and kwargs explicitly, so nothing can collide there.
    run = TaskRun(clashing, ("b",), {"timeout": 3.0}, executor=InlineExecutor())
    run.start()
    assert run.wait(PATIENCE).value == "b:3.0"


def test_arguments_that_do_not_fit_are_refused_before_anything_runs() -> None:
    with pytest.raises(ConfigurationError, match="do not pass it yourself"):
        TaskRun(extract, (), {"batch_size": 1})
    with pytest.raises(ConfigurationError, match="args must be a tuple"):
        TaskRun(extract, "s3://x")
    with pytest.raises(ConfigurationError, match="callable"):
        TaskRun("extract")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="graceful_stop"):
        TaskRun(extract, ("x",), graceful_stop=-1)
    with pytest.raises(ConfigurationError, match="retry"):
        TaskRun(extract, ("x",), retry=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="tags"):
        TaskRun(extract, ("x",), tags="io")
    with pytest.raises(ConfigurationError, match="metadata"):
        TaskRun(extract, ("x",), metadata={"when": object()})


def test_a_result_that_is_not_json_fails_with_result_invalid_naming_the_type() -> None:
    def bad(ctx: TaskContext) -> set[int]:
        return {1, 2, 3}

    run = TaskRun(bad)
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.FAILED
    assert outcome.value is None
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.RESULT_INVALID
    assert "set" in outcome.failure.message
    assert outcome.failure.retryable is False
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.FAILED]


def test_the_value_is_the_object_returned() -> None:
    result = {"rows": 3, "path": "s3://bucket/x.parquet"}
    outcome = run_task(lambda ctx: result)
    assert outcome.value is result


def test_an_exception_becomes_a_redacted_failure_with_its_traceback() -> None:
    def boom(ctx: TaskContext) -> None:
        raise ConnectionError("login failed: password=hunter2")

    outcome = run_task(boom)
    failure = outcome.failure
    assert failure is not None
    assert failure.kind is FailureKind.EXCEPTION
    assert failure.exception_type == "ConnectionError"
    assert failure.message == "ConnectionError: login failed: password=[REDACTED]"
    assert failure.traceback is not None
    assert "hunter2" not in failure.traceback
    assert "in boom" in failure.traceback
    assert failure.retryable is True  # ConnectionError is an Exception: retry_on would match


def test_wait_timeout_raises_and_changes_nothing() -> None:
    gate = threading.Event()
    run = TaskRun(busy(gate))
    run.start()
    reach(run, S.RUNNING)
    before = (run.status, run.transitions)
    with pytest.raises(TimeoutError, match="changes nothing"):
        run.wait(timeout=0.05)
    assert (run.status, run.transitions) == before
    gate.set()
    assert run.wait(PATIENCE).value == "finished"


def test_start_twice_or_after_the_end_is_an_error() -> None:
    gate = threading.Event()
    run = TaskRun(busy(gate))
    run.start()
    with pytest.raises(ConfigurationError, match="already running"):
        run.start()
    gate.set()
    run.wait(PATIENCE)
    with pytest.raises(ConfigurationError, match="succeeded"):
        run.start()
    assert path(run) == HAPPY


def test_listeners_hear_every_transition_in_order_with_its_snapshot() -> None:
    heard: list[tuple[Transition, TaskSnapshot]] = []
    run = TaskRun(extract, ("x",))
    run.add_listener(lambda record, snapshot: heard.append((record, snapshot)))
    run.start()
    run.wait(PATIENCE)
    assert [r.to_status for r, _ in heard] == HAPPY[1:]
    for record, snapshot in heard:
        assert snapshot.status is record.to_status
        assert snapshot.status_version == record.version


def test_a_failing_listener_is_logged_and_never_breaks_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    heard: list[S] = []

    def broken(record: Transition, snapshot: TaskSnapshot) -> None:
        raise RuntimeError("listener bug")

    run = TaskRun(extract, ("x",))
    run.add_listener(broken)
    run.add_listener(lambda record, snapshot: heard.append(record.to_status))
    with caplog.at_level(logging.ERROR, logger="chongming_task.run"):
        run.start()
        outcome = run.wait(PATIENCE)
    assert outcome.ok
    assert heard == HAPPY[1:]
    assert "listener" in caplog.text


def test_a_listener_that_controls_the_run_keeps_the_order() -> None:
    heard: list[S] = []
    gate = threading.Event()
    run = TaskRun(busy(gate))

    def listener(record: Transition, snapshot: TaskSnapshot) -> None:
        heard.append(record.to_status)
        if record.to_status is S.RUNNING:
            run.stop(reason="stopped from a listener")  # re-enters the run
            heard.append(run.status)

    run.add_listener(listener)
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.STOPPED
    # The stop's own record is heard after the one being delivered, never before it.
    assert heard == [S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPING, S.STOPPED]
    assert path(run)[1:] == [S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED]


def test_done_callbacks_run_once_after_the_terminal_transition() -> None:
    calls: list[tuple[str, S]] = []
    run = TaskRun(extract, ("x",))
    run.add_done_callback(lambda r: calls.append(("early", r.status)))
    run.start()
    run.wait(PATIENCE)
    run.add_done_callback(lambda r: calls.append(("late", r.status)))
    assert calls == [("early", S.SUCCEEDED), ("late", S.SUCCEEDED)]


def test_outcome_is_none_until_terminal() -> None:
    gate = threading.Event()
    run = TaskRun(busy(gate))
    assert run.outcome is None
    run.start()
    assert run.outcome is None
    gate.set()
    assert run.wait(PATIENCE) == run.outcome


def test_update_fields_changes_no_status_version() -> None:
    run = TaskRun(extract, ("x",))
    version = run.snapshot.status_version
    run._update_fields(lease_owner="node-a", metadata={"k": "v"})
    assert run.snapshot.lease_owner == "node-a"
    assert run.snapshot.status_version == version
    with pytest.raises(ConfigurationError):
        run._update_fields(status=S.RUNNING)


def test_concurrent_control_keeps_a_legal_gapless_trajectory() -> None:
    gate = threading.Event()
    run = TaskRun(busy(gate), pause_timeout=0.5)
    run.start()
    reach(run, S.RUNNING)
    barrier = threading.Barrier(6)

    def hammer(index: int) -> None:
        barrier.wait()
        for _ in range(20):
            if index % 2:
                run.pause(timeout=0.2)
            else:
                run.resume()

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(5)]
    for thread in threads:
        thread.start()
    barrier.wait()
    for thread in threads:
        thread.join(PATIENCE)
    run.resume()
    run.stop(reason="end of the storm")
    outcome = run.wait(PATIENCE)
    assert outcome.status in (S.STOPPED, S.SUCCEEDED)
    records = run.transitions
    assert [r.version for r in records] == list(range(len(records)))
    for record in records[1:]:
        assert record.from_status is not None
        assert record.to_status in TRANSITIONS[record.from_status]


def test_enqueue_block_release_skip_and_cancel_for_a_controller() -> None:
    seen: list[object] = []

    def body(ctx: TaskContext) -> object:
        return ctx.input("extract", "none")

    run = TaskRun(body, executor=InlineExecutor())
    run.block(reason="waiting for upstream")
    run.release(upstream={"extract": [1, 2]}, reason="upstream done")
    run.start()
    assert run.wait(PATIENCE).value == [1, 2]
    assert path(run) == [S.PENDING, S.BLOCKED, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    assert run.transitions[2].trigger == "pipeline:released"

    skipped = TaskRun(body)
    skipped.enqueue(actor="node-a")
    skipped.skip(reason="upstream failed")
    assert path(skipped) == [S.PENDING, S.QUEUED, S.SKIPPED]
    assert skipped.wait(PATIENCE).failure is not None

    gate = threading.Event()
    cancelled = TaskRun(busy(gate))
    cancelled.add_listener(lambda record, snapshot: seen.append(record.to_status))
    cancelled.start()
    reach(cancelled, S.RUNNING)
    assert cancelled.cancel(reason="sibling failed", actor="pipeline")
    assert not cancelled.cancel(reason="again")
    outcome = cancelled.wait(PATIENCE)
    assert outcome.status is S.CANCELLED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert path(cancelled) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.CANCELLED]


def test_the_thread_carrier_is_a_named_daemon_thread() -> None:
    def body(ctx: TaskContext) -> list[object]:
        current = threading.current_thread()
        return [current.name, current.daemon]

    outcome = run_task(body, task_id="named")
    assert outcome.value == ["chongming-task:named", True]


def test_one_thread_per_run_and_no_timer_without_a_deadline() -> None:
    clock = FakeClock()
    gate = threading.Event()

    def body(ctx: TaskContext) -> None:
        gate.wait(PATIENCE)

    runs = [TaskRun(body, task_id=f"lean-{i}", clock=clock) for i in range(3)]
    for run in runs:
        run.start()
    for run in runs:
        reach(run, S.RUNNING)
    names = [thread.name for thread in threading.enumerate()]  # all three are in their bodies
    assert sum(name.startswith("chongming-task:lean-") for name in names) == 3
    assert TimerService.for_clock(clock).pending == 0
    assert clock.sleepers == 0  # no timer thread is waiting for anything
    gate.set()
    for run in runs:
        run.wait(PATIENCE)


def test_wait_real_seconds_is_the_callers_patience() -> None:
    gate = threading.Event()
    run = TaskRun(busy(gate))
    run.start()
    gate.wait(TICK)
    with pytest.raises(TimeoutError):
        run.wait(timeout=0)
    gate.set()
    run.wait(PATIENCE)
