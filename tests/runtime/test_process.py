"""ProcessExecutor: hard stop, crash isolation, relayed control, submission checks."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from chongming_task import ProcessExecutor
from chongming_task._model import FailureKind
from chongming_task.errors import ConfigurationError
from chongming_task.policies import FixedBackoff, RetryPolicy, Timeout
from chongming_task.run import TaskRun, run_task
from chongming_task.runtime._context import TaskContext
from chongming_task.testing import wait_until

from . import proc_tasks
from .helpers import HAPPY, PATIENCE, S, path, reach

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def executor() -> ProcessExecutor:
    return ProcessExecutor(kill_after=1.0)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_happy_path_relays_progress_logs_and_beats(
    executor: ProcessExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chongming_task.task")
    run = TaskRun(proc_tasks.count, (50,), task_id="proc-1", executor=executor)
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.ok, outcome.failure
    assert path(run) == HAPPY
    assert run.transitions[2].reason == "executor=process"
    value = outcome.value
    child_pid = value["pid"]
    assert child_pid != os.getpid()
    assert outcome.snapshot.pid == child_pid  # `ps` shows exactly this process
    assert not pid_alive(child_pid)  # joined: no zombie left behind
    assert value["logs"] == 2  # ctx.logs works inside the child
    assert outcome.snapshot.progress is not None
    assert (outcome.snapshot.progress.done, outcome.snapshot.progress.unit) == (50, "items")
    assert outcome.snapshot.last_heartbeat_at is not None
    assert [entry.message for entry in run.logs] == [
        "counted in the child",
        "a warning from the child",
    ]
    records = [r for r in caplog.records if r.name == "chongming_task.task.proc-1"]
    assert [r.levelno for r in records] == [logging.INFO, logging.WARNING]
    assert records[0].task_id == "proc-1"  # type: ignore[attr-defined]


def test_stop_and_pause_cross_the_process_boundary(executor: ProcessExecutor) -> None:
    run = TaskRun(proc_tasks.cooperative, executor=executor)
    run.start()
    reach(run, S.RUNNING)
    assert run.pause(timeout=PATIENCE)
    assert run.status is S.PAUSED
    assert run.resume()
    assert run.stop(reason="deploy")
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert path(run) == [
        S.PENDING,
        S.QUEUED,
        S.STARTING,
        S.RUNNING,
        S.PAUSING,
        S.PAUSED,
        S.RUNNING,
        S.STOPPING,
        S.STOPPED,
    ]


def test_a_child_that_ignores_the_stop_is_terminated_stopped_and_gone(
    executor: ProcessExecutor,
) -> None:
    run = TaskRun(proc_tasks.ignores_stop, executor=executor, graceful_stop=0.2)
    run.start()
    reach(run, S.RUNNING)
    pid = run.snapshot.pid
    assert pid is not None
    assert pid_alive(pid)
    run.stop(reason="it must really stop")
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.STOPPED  # not lost: the process is really gone
    assert outcome.failure is not None
    assert "SIGTERM" in outcome.failure.message
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED]
    assert not pid_alive(pid)


def test_a_native_crash_fails_only_that_task(executor: ProcessExecutor, tmp_path: Path) -> None:
    gate = threading.Event()

    def neighbour(ctx: TaskContext) -> str:
        while not gate.is_set():
            ctx.checkpoint()
            gate.wait(0.005)
        return "still fine"

    thread_run = TaskRun(neighbour)
    thread_run.start()
    other_process = TaskRun(proc_tasks.resize, ("a.png",), executor=executor)
    crashing = TaskRun(proc_tasks.segfault, executor=executor)
    crashing.start()
    other_process.start()
    outcome = crashing.wait(PATIENCE)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CRASHED
    assert "SIGSEGV" in outcome.failure.message
    assert path(crashing) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.FAILED]
    assert other_process.wait(PATIENCE).value == "A.PNG"
    assert thread_run.status is S.RUNNING
    gate.set()
    assert thread_run.wait(PATIENCE).value == "still fine"


def test_a_child_that_exits_without_a_result_is_a_crash(executor: ProcessExecutor) -> None:
    outcome = run_task(proc_tasks.exits, 3, executor=executor)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CRASHED
    assert "exited with code 3" in outcome.failure.message


def test_exceptions_results_and_retries_across_processes(
    executor: ProcessExecutor, tmp_path: Path
) -> None:
    failed = run_task(proc_tasks.fails, "token=abc bad", executor=executor)
    assert failed.failure is not None
    assert failed.failure.kind is FailureKind.EXCEPTION
    assert failed.failure.exception_type == "ValueError"
    assert failed.failure.message == "ValueError: token=[REDACTED] bad"
    assert failed.failure.traceback is not None
    assert "in fails" in failed.failure.traceback

    unpicklable = run_task(proc_tasks.raises_unpicklable, executor=executor)
    assert unpicklable.failure is not None
    assert "went wrong" in unpicklable.failure.message
    assert "hunter2" not in unpicklable.failure.message

    invalid = run_task(proc_tasks.returns_set, executor=executor)
    assert invalid.failure is not None
    assert invalid.failure.kind is FailureKind.RESULT_INVALID
    assert "set" in invalid.failure.message

    marker = tmp_path / "marker"
    run = TaskRun(
        proc_tasks.fails_until,
        (str(marker),),
        executor=executor,
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)),
    )
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.ok
    assert outcome.value != int(marker.read_text())  # a fresh process for attempt 2
    assert outcome.snapshot.attempt == 2


def test_a_timeout_ends_a_stuck_child_as_failed_never_lost(executor: ProcessExecutor) -> None:
    run = TaskRun(
        proc_tasks.ignores_stop,
        executor=executor,
        timeout=Timeout(per_attempt=0.3),
        graceful_stop=0.1,
    )
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.FAILED]
    assert outcome.snapshot.pid is not None
    assert not pid_alive(outcome.snapshot.pid)


def test_async_tasks_run_in_the_child(executor: ProcessExecutor) -> None:
    run = TaskRun(proc_tasks.async_loop, executor=executor)
    run.start()
    reach(run, S.RUNNING)
    wait_until(lambda: run.snapshot.last_heartbeat_at is not None, timeout=PATIENCE)
    assert run.pause(timeout=PATIENCE)
    assert run.resume()
    run.stop()
    assert run.wait(PATIENCE).status is S.STOPPED


def test_submission_refuses_what_a_child_could_not_load(executor: ProcessExecutor) -> None:
    def local(ctx: TaskContext) -> None:
        return None

    with pytest.raises(ConfigurationError, match="lambda"):
        TaskRun(lambda ctx: None, executor=executor)
    with pytest.raises(ConfigurationError, match="module level"):
        TaskRun(local, executor=executor)
    with pytest.raises(ConfigurationError, match=r"positional argument 1 \(lock\)"):
        TaskRun(proc_tasks.count, (threading.Lock(),), executor=executor)
    with pytest.raises(ConfigurationError, match="keyword argument 'n'"):
        TaskRun(proc_tasks.count, (), {"n": threading.Lock()}, executor=executor)
    with pytest.raises(ConfigurationError, match="upstream value 'extract'"):
        TaskRun(proc_tasks.count, (1,), upstream={"extract": threading.Lock()}, executor=executor)
    run = TaskRun(proc_tasks.count, (1,), executor=executor)
    run.block()
    with pytest.raises(ConfigurationError, match="upstream value 'x'"):
        run.release(upstream={"x": threading.Lock()})
    assert run.status is S.BLOCKED


def test_a_stop_before_the_child_starts_never_spawns_it(executor: ProcessExecutor) -> None:
    run = TaskRun(proc_tasks.cooperative, executor=executor)
    run.enqueue()
    assert run.stop(reason="changed my mind")
    assert path(run) == [S.PENDING, S.QUEUED, S.STOPPED]
    assert run.snapshot.pid is None


def test_checkpoint_gaps_counted_in_the_child_reach_the_parent(executor: ProcessExecutor) -> None:
    run = TaskRun(proc_tasks.count, (50,), executor=executor)
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.ok, outcome.failure
    gaps = outcome.snapshot.checkpoint_gaps
    assert gaps is not None
    # Every checkpoint after the first closes a gap (count checkpoints once per item).
    assert gaps.count >= 49
    assert gaps.max < 60
