"""Guide §1.4 (revival), §9.3 (guards), §10 (errors), §11 (FAQ claims), §12 (testing).

§10's two ``try`` samples run as task bodies: ``except Exception`` must not swallow
a stop, and ``except TaskCancelled: raise`` must let it through while handling real
business errors. §12's test function is completed as its comment describes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from _status import status_now
from chongming_task import TaskContext, TaskStatus, errors
from chongming_task._model import Failure, FailureKind
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import (
    AttemptsExhausted,
    ConfigurationError,
    InvalidTransition,
    TaskCancelled,
    TaskError,
)
from chongming_task.policies import FixedBackoff, RetryPolicy
from chongming_task.states import GUIDE_ADDITIONS, TRANSITIONS

from .conftest import PATIENCE, S, path, reach

FAILED = Failure(kind=FailureKind.EXCEPTION, message="boom", retryable=True)


def running_machine(max_attempts: int = 1) -> StateMachine:
    machine = StateMachine.create("t", "task", max_attempts=max_attempts)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    return machine


# ---------------------------------------------------------------- §1.4


def test_s1_4_retry_keeps_history_and_reset_discards_it() -> None:
    machine = running_machine()
    machine.mark_lost(Failure(kind=FailureKind.LOST, message="gone", retryable=True))
    assert machine.can_retry()
    before = len(machine.transitions)
    machine.retry()
    assert machine.status is S.QUEUED
    assert machine.snapshot.attempt == 1  # the attempt history is kept
    assert machine.snapshot.max_attempts == 2  # room for one more
    assert len(machine.transitions) == before + 1
    machine.mark_starting()
    assert machine.snapshot.attempt == 2
    machine.mark_running()
    machine.mark_failed(FAILED)
    with pytest.raises(ConfigurationError, match="confirm"):
        machine.reset()  # dangerous: needs a second confirmation
    machine.reset(confirm=True)
    assert status_now(machine) is S.PENDING
    assert machine.snapshot.attempt == 0  # discarded


@pytest.mark.parametrize("terminal", [S.SUCCEEDED, S.FAILED, S.STOPPED, S.LOST])
def test_s1_4_terminal_states_have_no_out_edges(terminal: S) -> None:
    assert TRANSITIONS[terminal] == frozenset()


# ---------------------------------------------------------------- §9.2

GUIDE_9_2 = """
PENDING:    {BLOCKED, QUEUED, SKIPPED, CANCELLED, STOPPED}
BLOCKED:    {QUEUED, SKIPPED, CANCELLED, STOPPED}
QUEUED:     {STARTING, PAUSED, SKIPPED, STOPPED, CANCELLED}
STARTING:   {RUNNING, RETRY_WAIT, PAUSING, STOPPING, FAILED, CANCELLED, LOST}
RUNNING:    {SUCCEEDED, FAILED, RETRY_WAIT, PAUSING, STOPPING, CANCELLED, LOST}
PAUSING:    {PAUSED, RUNNING, STOPPING, FAILED, CANCELLED, LOST}
PAUSED:     {QUEUED, RUNNING, STOPPED, CANCELLED}
RETRY_WAIT: {STARTING, QUEUED, PAUSED, STOPPED, FAILED, CANCELLED}
STOPPING:   {STOPPED, SUCCEEDED, FAILED, LOST}
SUCCEEDED / FAILED / STOPPED / CANCELLED / SKIPPED / LOST:  {}
"""


def test_s9_2_transition_table_is_the_guide() -> None:
    guide: dict[S, set[S]] = {}
    for line in GUIDE_9_2.strip().splitlines():
        sources, targets = line.split(":", 1)
        inner = targets.strip().strip("{}")
        # By name through the class itself: mypy reads ``S[...]`` (an alias) as a type.
        allowed = {TaskStatus[name.strip()] for name in inner.split(",") if name.strip()}
        for source in sources.split("/"):
            guide[TaskStatus[source.strip()]] = allowed
    assert set(guide) == set(S)
    for source, target in GUIDE_ADDITIONS:  # documented additions (tests/model pins them)
        guide[source] = guide[source] | {target}
    actual = {source: set(targets) for source, targets in TRANSITIONS.items()}
    assert actual == guide  # verbatim: a body raising TaskSkipped is outside the table


# ---------------------------------------------------------------- §9.3 guards


def test_s9_3_mark_running_needs_a_started_attempt() -> None:
    machine = StateMachine.create("t", "task")
    machine.mark_queued()
    machine.request_pause()  # paused while queued: never started
    assert machine.status is S.PAUSED
    assert S.RUNNING in TRANSITIONS[S.PAUSED]  # the table alone would allow it
    with pytest.raises(InvalidTransition):
        machine.mark_running()
    assert machine.status is S.PAUSED
    assert machine.resume() is S.QUEUED  # the guarded way back: never started -> queued


def test_s9_3_abort_pause_only_from_pausing() -> None:
    machine = running_machine()
    machine.request_pause()
    machine.mark_paused()
    with pytest.raises(InvalidTransition):
        machine.abort_pause()
    assert machine.status is S.PAUSED
    machine.resume()
    machine.request_pause()
    machine.abort_pause()  # pausing -> running: the rollback
    assert status_now(machine) is S.RUNNING


def test_s9_3_mark_starting_within_the_attempt_budget() -> None:
    machine = running_machine(max_attempts=1)
    with pytest.raises(AttemptsExhausted):
        machine.mark_retry_wait(FAILED)  # no attempt left: waiting for one would be a lie
    machine = StateMachine.create("t", "task", max_attempts=1)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    machine.force_transition(S.QUEUED, actor="ops", reason="test the budget")
    with pytest.raises(AttemptsExhausted):
        machine.mark_starting()
    assert issubclass(AttemptsExhausted, TaskError)


@pytest.mark.parametrize(("actor", "reason"), [("", "why"), ("ops", ""), ("  ", "x")])
def test_s9_3_force_transition_needs_actor_and_reason(actor: str, reason: str) -> None:
    machine = running_machine()
    with pytest.raises(InvalidTransition):  # a guard failure (§10)
        machine.force_transition(S.SUCCEEDED, actor=actor, reason=reason)
    assert machine.status is S.RUNNING


def test_s9_3_force_transition_is_audited_and_mark_lost_keeps_a_reason() -> None:
    machine = running_machine()
    machine.mark_lost(Failure(kind=FailureKind.LOST, message="worker vanished", retryable=True))
    assert machine.snapshot.failure is not None
    assert machine.snapshot.failure.message == "worker vanished"
    # §11: after checking the side effects by hand, an operator settles it.
    machine.force_transition(S.SUCCEEDED, actor="alice", reason="rows verified in the table")
    record = machine.transitions[-1]
    assert (record.actor, record.reason) == ("alice", "rows verified in the table")
    assert machine.status is S.SUCCEEDED
    bare = running_machine()
    bare.mark_lost()  # without a failure, a lost failure is still recorded
    assert bare.snapshot.failure is not None
    assert bare.snapshot.failure.kind is FailureKind.LOST


# ---------------------------------------------------------------- §10


def test_s10_hierarchy() -> None:
    for name in (
        "InvalidTransition", "DependencyFailed", "CircularDependency", "TaskTimeout",
        "TaskExecutionError", "AttemptsExhausted", "ConcurrencyConflict", "StoreError",
        "ConfigurationError",
    ):  # fmt: skip
        assert issubclass(getattr(errors, name), TaskError), name
    assert issubclass(TaskCancelled, BaseException)
    assert not issubclass(TaskCancelled, Exception)
    assert not issubclass(TaskCancelled, TaskError)


def test_s10_except_exception_does_not_swallow_the_stop() -> None:
    from chongming_task.run import TaskRun

    logged: list[BaseException] = []
    work_done: list[int] = []

    def work() -> None:
        work_done.append(1)
        time.sleep(0.002)

    def log(exc: BaseException) -> None:
        logged.append(exc)

    def body(ctx: Any) -> None:
        try:
            while True:
                ctx.checkpoint()
                work()
        except Exception as exc:  # 想捕获业务异常
            log(exc)  # 但会把停止信号一起吃掉

    run = TaskRun(body)
    run.start()
    reach(run, S.RUNNING)
    run.stop(reason="stop it")
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.STOPPED  # the stop went through
    assert logged == []  # except Exception never saw TaskCancelled
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED]


def test_s10_recommended_pattern() -> None:
    from chongming_task.run import TaskRun

    handled: list[str] = []
    calls = {"n": 0}

    def body(ctx: Any) -> None:
        while True:
            try:
                ctx.checkpoint()
                calls["n"] += 1
                if calls["n"] == 2:
                    raise ValueError("bad row")
                time.sleep(0.002)
            except TaskCancelled:
                raise  # 取消要放行
            except Exception as exc:
                handled.append(str(exc))  # 只处理真正的业务异常

    run = TaskRun(body)
    run.start()
    from chongming_task.testing import wait_until

    wait_until(lambda: handled, timeout=PATIENCE)
    run.stop(reason="enough")
    assert run.wait(PATIENCE).status is S.STOPPED
    assert handled == ["bad row"]


# ---------------------------------------------------------------- §11


def test_s11_wait_timeout_does_not_kill_the_task() -> None:
    from chongming_task.run import TaskRun

    release = threading.Event()

    def body(ctx: Any) -> str:
        while not release.wait(0.002):
            ctx.checkpoint()
        return "done"

    run = TaskRun(body)
    run.start()
    reach(run, S.RUNNING)
    with pytest.raises(TimeoutError):
        run.wait(timeout=0.05)
    assert run.status is S.RUNNING
    release.set()
    assert run.wait(PATIENCE).ok


def test_s11_retries_start_over() -> None:
    from chongming_task.run import run_task

    starts: list[int] = []

    def body(ctx: TaskContext) -> int:
        starts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise OSError("first attempt dies midway")
        return ctx.attempt

    outcome = run_task(body, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)))
    assert outcome.value == 2
    assert starts == [1, 2]  # the body ran again from its first line


# ---------------------------------------------------------------- §12


def test_idle_timeout_fires_without_waiting() -> None:
    from chongming_task.policies import Timeout
    from chongming_task.run import run_task
    from chongming_task.testing import FakeClock

    clock = FakeClock()
    # 通过 clock 注入控制时间，配合 handle.heartbeat 即可在毫秒内验证超时逻辑
    from chongming_task.run import TaskRun

    silent = threading.Event()

    def stuck(ctx: Any) -> None:
        ctx.heartbeat.beat()
        silent.set()
        while not ctx.is_stop_requested:  # no checkpoint: looks stuck
            time.sleep(0.002)
        ctx.checkpoint()

    started = time.monotonic()
    run = TaskRun(stuck, clock=clock, timeout=Timeout(idle=60))
    run.start()
    assert silent.wait(PATIENCE)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    clock.advance(60)
    outcome = run.wait(timeout=PATIENCE)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_IDLE
    assert time.monotonic() - started < 5  # 60 s of task time in milliseconds of real time
    assert run_task is not None


def test_s12_common_practices() -> None:
    from chongming_task.run import TaskRun
    from chongming_task.runtime.executors.inline import InlineExecutor
    from chongming_task.testing import FakeClock

    def flaky(ctx: Any) -> int:
        if ctx.attempt == 1:
            raise OSError("transient")
        return int(ctx.attempt)

    clock = FakeClock()
    run = TaskRun(
        flaky,
        clock=clock,  # FakeClock 注入
        executor=InlineExecutor(),  # 执行同步化，测试不必等线程
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)),  # 去掉重试等待
    )
    run.start()
    assert run.done
    assert path(run) == [  # 断言 run.transitions，而不是只断言最终状态
        S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.RETRY_WAIT,
        S.STARTING, S.RUNNING, S.SUCCEEDED,
    ]  # fmt: skip
