"""``Timeout(no_progress=...)``: alive (checkpointing) but stuck (``done`` never moves)."""

from __future__ import annotations

import math
import threading

import pytest

from chongming_task._model import FailureKind
from chongming_task.errors import ConfigurationError
from chongming_task.policies import FixedBackoff, RetryPolicy, Timeout
from chongming_task.run import TaskRun
from chongming_task.runtime._context import TaskContext
from chongming_task.testing import FakeClock, wait_until

from .helpers import ATTEMPT, PATIENCE, START, S, failed_with, path, settle, triggers


class Stepped:
    """A body that checkpoints and reports ``done`` once per step the test releases."""

    def __init__(self, done: list[float]) -> None:
        self.done = done  # what each step reports; the last value repeats
        self.step = threading.Semaphore(0)
        self.stepped = threading.Semaphore(0)
        self.steps = 0

    def __call__(self, ctx: TaskContext) -> str:
        if ctx.attempt > 1:
            return f"attempt {ctx.attempt}"
        while True:
            assert self.step.acquire(timeout=PATIENCE)
            ctx.checkpoint()
            ctx.progress(self.done[min(self.steps, len(self.done) - 1)], total=100)
            self.steps += 1
            self.stepped.release()

    def advance_and_step(self, clock: FakeClock, seconds: float) -> None:
        clock.advance(seconds)
        clock.wait_for_sleepers(1, timeout=PATIENCE)
        self.step.release()
        assert self.stepped.acquire(timeout=PATIENCE)


def stop_requested(run: TaskRun) -> None:
    attempt = run._state.attempt
    assert attempt is not None
    wait_until(lambda: attempt.control.stop_requested, timeout=PATIENCE, message="a stop")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_checkpoints_without_progress_fail_as_timeout_no_progress(clock: FakeClock) -> None:
    body = Stepped([7])  # reports 7 at every step: alive, never advancing
    run = TaskRun(body, clock=clock, timeout=Timeout(idle=10, no_progress=30))
    run.start()
    settle(clock, run, S.RUNNING)
    for _ in range(6):  # t = 5 ... 30: a checkpoint every 5 s keeps idle quiet
        body.advance_and_step(clock, 5)
    attempt = run._state.attempt
    assert attempt is not None
    # done first moved at t=5 (the first report), so the window ends at 35, not 30.
    assert not attempt.control.stop_requested
    assert run.status is S.RUNNING
    clock.advance(5)
    stop_requested(run)
    body.step.release()  # the next checkpoint honours the stop
    failure = failed_with(run, FailureKind.TIMEOUT_NO_PROGRESS)
    assert failure.message == ("no_progress timeout of 30s expired: progress done did not advance")
    assert path(run) == [*START, *ATTEMPT, S.FAILED]
    assert triggers(run)[-1] == "supervisor:timeout_no_progress"
    assert run.snapshot.progress is not None
    assert run.snapshot.progress.done == 7


def test_advancing_progress_keeps_the_attempt_alive(clock: FakeClock) -> None:
    body = Stepped([float(n) for n in range(1, 40)])
    run = TaskRun(body, clock=clock, timeout=Timeout(no_progress=30))
    run.start()
    settle(clock, run, S.RUNNING)
    for _ in range(20):  # 200 s, done rising every 10 s
        body.advance_and_step(clock, 10)
    attempt = run._state.attempt
    assert attempt is not None
    assert not attempt.control.stop_requested
    assert run.status is S.RUNNING
    run.stop(reason="done testing")
    body.step.release()
    run.wait(PATIENCE)
    assert path(run) == [*START, *ATTEMPT, S.STOPPING, S.STOPPED]


def test_no_progress_is_retried_like_the_other_timeouts(clock: FakeClock) -> None:
    body = Stepped([3])
    policy = RetryPolicy(max_attempts=2, backoff=FixedBackoff(5))
    run = TaskRun(body, clock=clock, timeout=Timeout(no_progress=20), retry=policy)
    run.start()
    settle(clock, run, S.RUNNING)
    clock.advance(20)  # nothing reported at all: counts from the attempt's start
    stop_requested(run)
    body.step.release()
    settle(clock, run, S.RETRY_WAIT)
    retry = run.transitions[4]
    assert (retry.to_status, retry.trigger) == (S.RETRY_WAIT, "supervisor:timeout_no_progress")
    clock.advance(5)
    outcome = run.wait(PATIENCE)
    assert outcome.value == "attempt 2"
    assert path(run) == [*START, *ATTEMPT, S.RETRY_WAIT, *ATTEMPT, S.SUCCEEDED]


def test_not_retried_when_retry_timeouts_is_off(clock: FakeClock) -> None:
    body = Stepped([3])
    policy = RetryPolicy(max_attempts=3, retry_timeouts=False)
    run = TaskRun(body, clock=clock, timeout=Timeout(no_progress=20), retry=policy)
    run.start()
    settle(clock, run, S.RUNNING)
    clock.advance(20)
    stop_requested(run)
    body.step.release()
    failure = failed_with(run, FailureKind.TIMEOUT_NO_PROGRESS)
    assert failure.retryable is False
    assert path(run) == [*START, *ATTEMPT, S.FAILED]


def test_paused_time_does_not_count(clock: FakeClock) -> None:
    body = Stepped([5])
    run = TaskRun(body, clock=clock, timeout=Timeout(no_progress=30))
    run.start()
    settle(clock, run, S.RUNNING)
    body.advance_and_step(clock, 10)  # done=5 at t=10: the window ends at 40
    pausing = threading.Thread(target=run.pause, kwargs={"timeout": PATIENCE})
    pausing.start()
    wait_until(lambda: run.status is S.PAUSING, timeout=PATIENCE, message="pausing")
    body.step.release()  # the body's checkpoint confirms the pause and blocks there
    pausing.join(PATIENCE)
    assert run.status is S.PAUSED
    clock.advance(1000)  # paused: never counted
    assert run.status is S.PAUSED
    assert run.resume()
    body.stepped.acquire(timeout=PATIENCE)  # the body reported done=5 again after resuming
    settle(clock, run, S.RUNNING)
    clock.advance(29)  # 10 + 29 = 39 of running time since done moved
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    attempt = run._state.attempt
    assert attempt is not None
    assert not attempt.control.stop_requested
    clock.advance(1)
    stop_requested(run)
    body.step.release()
    failed_with(run, FailureKind.TIMEOUT_NO_PROGRESS)
    assert path(run) == [*START, *ATTEMPT, S.PAUSING, S.PAUSED, S.RUNNING, S.FAILED]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1, 0, 1e12, "60", True])
def test_no_progress_is_validated_like_the_other_durations(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=r"Timeout\.no_progress"):
        Timeout(no_progress=bad)  # type: ignore[arg-type]


def test_the_policy_decides_no_progress_purely() -> None:
    policy = Timeout(no_progress=30)
    assert not policy.is_unlimited

    def deadline(*, last_progress_at: float | None = None, paused: bool = False) -> object:
        return policy.next_deadline(
            submitted_at=0.0,
            attempt_started_at=0.0,
            last_beat_at=50.0,
            last_progress_at=last_progress_at,
            paused=paused,
        )

    def expired(now: float) -> object:
        return policy.expired(
            now=now,
            submitted_at=0.0,
            attempt_started_at=0.0,
            last_beat_at=50.0,
            last_progress_at=20.0,
        )

    assert deadline() == (30.0, "no_progress")
    assert deadline(last_progress_at=20.0) == (50.0, "no_progress")
    assert expired(49.9) is None
    assert expired(50.0) == "no_progress"
    assert deadline(paused=True) is None
    decision = RetryPolicy(max_attempts=2).decide(None, 1, timeout_scope="no_progress")
    assert decision.retry
