"""Stop in three phases, pause and resume (guide §4), on threads and inline."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from _status import status_now
from chongming_task._model import FailureKind
from chongming_task.policies import FixedBackoff, RetryPolicy
from chongming_task.run import TaskRun
from chongming_task.runtime._context import TaskContext
from chongming_task.runtime.executors.inline import InlineExecutor
from chongming_task.testing import FakeClock, wait_until

from .helpers import HAPPY, PATIENCE, TICK, S, Stuck, busy, path, reach, settle, triggers

BEFORE_STOP = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING]


def test_cooperative_stop_ends_stopped_with_a_cancelled_failure() -> None:
    run = TaskRun(busy())
    run.start()
    reach(run, S.RUNNING)
    assert run.stop(reason="发布窗口", actor="ops")
    outcome = run.wait(timeout=PATIENCE)
    assert path(run) == [*BEFORE_STOP, S.STOPPED]
    stopping = run.transitions[-2]
    assert (stopping.trigger, stopping.actor, stopping.reason) == (
        "control:stop_requested",
        "ops",
        "发布窗口",
    )
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert outcome.failure.retryable is False
    assert "发布窗口" in outcome.failure.message
    assert not run.stop(reason="after the end")


def test_a_second_stop_while_stopping_is_accepted_and_adds_nothing() -> None:
    clock = FakeClock()  # the graceful window never ends unless the test says so
    body = Stuck()
    run = TaskRun(body, clock=clock)
    run.start()
    body.wait_entered()
    assert run.stop(reason="first")
    before = run.transitions
    assert run.stop(reason="again")
    assert run.transitions == before
    body.release.set()
    assert run.wait(PATIENCE).status is S.STOPPED
    assert path(run) == [*BEFORE_STOP, S.STOPPED]


def test_a_run_that_holds_no_slot_stops_at_once() -> None:
    pending = TaskRun(busy())
    assert pending.stop(reason="never mind")
    assert path(pending) == [S.PENDING, S.STOPPED]
    queued = TaskRun(busy())
    queued.enqueue()
    assert queued.stop()
    assert path(queued) == [S.PENDING, S.QUEUED, S.STOPPED]
    assert queued.wait(PATIENCE).status is S.STOPPED


def test_a_stop_just_before_the_return_gives_stopping_then_succeeded() -> None:
    def body(ctx: TaskContext) -> str:
        wait_until(lambda: ctx.is_stop_requested, timeout=PATIENCE)
        return "finished anyway"

    run = TaskRun(body)
    run.start()
    reach(run, S.RUNNING)
    run.stop(reason="too late")
    outcome = run.wait(PATIENCE)
    assert outcome.ok
    assert outcome.value == "finished anyway"
    assert path(run) == [*BEFORE_STOP, S.SUCCEEDED]


def test_a_thread_that_ignores_checkpoints_is_abandoned_as_lost() -> None:
    clock = FakeClock()
    body = Stuck()
    run = TaskRun(body, clock=clock, graceful_stop=5)
    run.start()
    ctx = body.wait_entered()
    run.stop(reason="deploy")
    assert ctx.is_stop_requested
    settle(clock, run, S.STOPPING)  # the timer thread waits for the window's end
    clock.advance(4.9)
    assert run.status is S.STOPPING
    clock.advance(0.1)
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.LOST
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.LOST
    assert outcome.failure.retryable is True
    assert "may still be running" in outcome.failure.message
    assert path(run) == [*BEFORE_STOP, S.LOST]
    assert not body.release.is_set()  # the body is still there: that is what lost means
    body.release.set()


def test_except_exception_around_the_loop_is_still_stoppable() -> None:
    errors: list[BaseException] = []

    def body(ctx: TaskContext) -> None:
        try:
            while True:
                ctx.checkpoint()
                threading.Event().wait(TICK)
        except Exception as exc:  # wants business errors, must not get the stop
            errors.append(exc)

    run = TaskRun(body)
    run.start()
    reach(run, S.RUNNING)
    run.stop()
    assert run.wait(PATIENCE).status is S.STOPPED
    assert errors == []


def test_three_ways_to_end_a_resident_task() -> None:
    def raises(ctx: TaskContext) -> None:
        while True:
            ctx.checkpoint()
            threading.Event().wait(TICK)

    def returns(ctx: TaskContext) -> int:
        processed = 0
        while not ctx.is_stop_requested:
            ctx.checkpoint()
            processed += 1
            threading.Event().wait(TICK)
        return processed

    stuck = Stuck()
    outcomes: dict[str, Any] = {}
    for label, body, graceful in (("raises", raises, 5.0), ("returns", returns, 5.0)):
        run = TaskRun(body, graceful_stop=graceful)
        run.start()
        reach(run, S.RUNNING)
        run.stop(reason="deploy")
        outcomes[label] = run.wait(PATIENCE)
    run = TaskRun(stuck, graceful_stop=0.05)
    run.start()
    stuck.wait_entered()
    run.stop(reason="deploy")
    outcomes["ignores"] = run.wait(PATIENCE)
    stuck.release.set()
    assert outcomes["raises"].status is S.STOPPED
    assert outcomes["raises"].value is None
    assert outcomes["returns"].status is S.SUCCEEDED
    assert outcomes["returns"].value >= 1
    assert outcomes["ignores"].status is S.LOST


def test_pause_is_confirmed_at_a_checkpoint_and_resume_goes_back_to_running() -> None:
    run = TaskRun(busy())
    run.start()
    reach(run, S.RUNNING)
    assert run.pause(timeout=PATIENCE, actor="ops")
    assert run.status is S.PAUSED
    assert run.pause()  # already paused
    assert run.resume(actor="ops")
    assert status_now(run) is S.RUNNING
    assert not run.resume()
    run.stop()
    run.wait(PATIENCE)
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
    assert triggers(run)[4:7] == ["control:pause_requested", "runtime:paused", "control:resumed"]


def test_an_unconfirmed_pause_is_rolled_back_and_returns_false() -> None:
    clock = FakeClock()
    body = Stuck()
    run = TaskRun(body, clock=clock)
    run.start()
    body.wait_entered()
    result: list[bool] = []
    pauser = threading.Thread(target=lambda: result.append(run.pause(timeout=3)))
    pauser.start()
    settle(clock, run, S.PAUSING)  # the timer thread watches the confirmation window
    clock.advance(3)
    pauser.join(PATIENCE)
    assert result == [False]
    assert run.status is S.RUNNING
    abort = run.transitions[-1]
    assert (abort.from_status, abort.to_status, abort.trigger) == (
        S.PAUSING,
        S.RUNNING,
        "runtime:pause_aborted",
    )
    body.release.set()  # its next checkpoint does not pause any more
    assert run.wait(PATIENCE).value == "released"
    assert path(run) == [
        S.PENDING,
        S.QUEUED,
        S.STARTING,
        S.RUNNING,
        S.PAUSING,
        S.RUNNING,
        S.SUCCEEDED,
    ]


def test_resume_while_pausing_withdraws_the_pause() -> None:
    body = Stuck()
    run = TaskRun(body)
    run.start()
    body.wait_entered()
    result: list[bool] = []
    pauser = threading.Thread(target=lambda: result.append(run.pause(timeout=PATIENCE)))
    pauser.start()
    reach(run, S.PAUSING)
    assert run.resume()
    pauser.join(PATIENCE)
    assert result == [False]
    body.release.set()
    assert run.wait(PATIENCE).ok
    assert run.transitions[5].trigger == "runtime:pause_aborted"


def test_a_pause_before_the_start_resumes_to_queued() -> None:
    run = TaskRun(busy(threading.Event()))
    run.enqueue()
    assert run.pause()
    assert run.status is S.PAUSED
    assert run.resume()
    assert status_now(run) is S.QUEUED
    run.stop()
    assert path(run) == [S.PENDING, S.QUEUED, S.PAUSED, S.QUEUED, S.STOPPED]


def test_a_pause_during_the_backoff_resumes_to_queued_then_runs() -> None:
    clock = FakeClock()
    calls: list[int] = []

    def body(ctx: TaskContext) -> int:
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("transient")
        return ctx.attempt

    run = TaskRun(body, clock=clock, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(60)))
    run.start()
    settle(clock, run, S.RETRY_WAIT)
    assert run.pause()
    assert run.status is S.PAUSED
    clock.advance(120)  # the backoff is void while paused
    assert run.status is S.PAUSED
    assert run.resume()
    outcome = run.wait(PATIENCE)
    assert outcome.value == 2
    assert calls == [1, 2]
    assert path(run) == [
        S.PENDING,
        S.QUEUED,
        S.STARTING,
        S.RUNNING,
        S.RETRY_WAIT,
        S.PAUSED,
        S.QUEUED,
        S.STARTING,
        S.RUNNING,
        S.SUCCEEDED,
    ]


def test_a_managed_run_waits_for_start_after_it_is_requeued() -> None:
    clock = FakeClock()

    def body(ctx: TaskContext) -> int:
        if ctx.attempt == 1:
            raise RuntimeError("transient")
        return ctx.attempt

    run = TaskRun(body, clock=clock, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(60)))
    run.enqueue(actor="controller")
    run.start()
    settle(clock, run, S.RETRY_WAIT)
    assert run.pause()
    assert run.resume()
    assert run.status is S.QUEUED
    wait_until(lambda: not run._state.driving, timeout=PATIENCE)  # handed back
    assert run.status is S.QUEUED  # nothing starts it but its owner
    run.start()
    assert run.wait(PATIENCE).value == 2
    assert path(run)[-4:] == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]


def test_stop_while_paused_in_place_ends_stopped_and_unblocks_the_body() -> None:
    cleaned = threading.Event()

    def body(ctx: TaskContext) -> None:
        try:
            while True:
                ctx.checkpoint()
                threading.Event().wait(TICK)
        finally:
            cleaned.set()

    run = TaskRun(body)
    run.start()
    reach(run, S.RUNNING)
    assert run.pause(timeout=PATIENCE)
    assert run.stop(reason="while paused")
    assert run.wait(PATIENCE).status is S.STOPPED
    assert cleaned.wait(PATIENCE)
    assert path(run)[-3:] == [S.PAUSING, S.PAUSED, S.STOPPED]


def test_stop_during_the_backoff_ends_at_once_without_another_attempt() -> None:
    clock = FakeClock()
    calls: list[int] = []

    def body(ctx: TaskContext) -> None:
        calls.append(ctx.attempt)
        raise RuntimeError("transient")

    run = TaskRun(body, clock=clock, retry=RetryPolicy(max_attempts=5, backoff=FixedBackoff(60)))
    run.start()
    settle(clock, run, S.RETRY_WAIT)
    assert run.stop(reason="give up")
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.STOPPED
    clock.advance(600)
    assert calls == [1]
    assert path(run) == [
        S.PENDING,
        S.QUEUED,
        S.STARTING,
        S.RUNNING,
        S.RETRY_WAIT,
        S.STOPPED,
    ]


def test_inline_pause_is_honestly_false_but_stop_works() -> None:
    holder: list[TaskRun] = []
    answers: list[bool] = []

    def body(ctx: TaskContext) -> None:
        run = holder[0]
        answers.append(run.pause(timeout=0))
        run.stop(reason="from inside")
        ctx.checkpoint()

    run = TaskRun(body, executor=InlineExecutor())
    holder.append(run)
    run.start()  # returns when the run is over
    assert run.done
    assert answers == [False]
    assert path(run) == [*BEFORE_STOP, S.STOPPED]


def test_a_pause_requested_while_starting_is_confirmed_before_the_body() -> None:
    ran = threading.Event()
    run = TaskRun(lambda ctx: ran.set())
    run.enqueue()
    # Enter "starting" without a carrier yet, so the pause surely lands before the body.
    with run._state.transaction():
        run._driver.begin_attempt_locked()
        run._state.started = run._state.driving = True
    answers: list[bool] = []
    pauser = threading.Thread(target=lambda: answers.append(run.pause(timeout=PATIENCE)))
    pauser.start()
    reach(run, S.PAUSING)
    run.executor.launch(run._driver.drive, name="late carrier")
    pauser.join(PATIENCE)
    assert answers == [True]
    assert not ran.is_set()
    assert run.resume()
    assert run.wait(PATIENCE).ok
    assert ran.is_set()
    assert path(run) == [
        S.PENDING,
        S.QUEUED,
        S.STARTING,
        S.PAUSING,
        S.PAUSED,
        S.RUNNING,
        S.SUCCEEDED,
    ]


def test_plain_run_is_the_happy_path() -> None:
    run = TaskRun(lambda ctx: "ok")
    run.start()
    run.wait(PATIENCE)
    assert path(run) == HAPPY


def test_first_requests_racing_from_many_threads_share_one_condition() -> None:
    """The condition is made on first use; threads asking at once must get the same one,
    or a paused body would wait on a condition the stop never notifies."""
    from chongming_task.runtime._control import Control

    control = Control()
    start = threading.Barrier(8)
    seen: list[object] = []

    def ask() -> None:
        start.wait()
        seen.append(control._condition())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PATIENCE)
    assert len(seen) == 8
    assert len({id(cond) for cond in seen}) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_can_make_a_condition_the_parent_was_making_at_the_fork() -> None:
    """A lock held by a parent's thread at the fork would stay held in the child forever."""
    from chongming_task.runtime._control import Control

    held = Control._making
    held.acquire()  # as if another thread were making a condition right now
    try:
        pid = os.fork()
        if pid == 0:  # the child: it must not block on the parent's held lock
            ok = Control._making is not held and Control()._condition() is not None
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        held.release()
    assert os.waitstatus_to_exitcode(status) == 0
