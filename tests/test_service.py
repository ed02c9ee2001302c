"""``BackgroundService``: the lifecycle every long-lived library thread shares.

Time goes through a ``FakeClock``: a test waits until the thread is parked on the
clock (``wait_for_sleepers``), then advances it, so no test sleeps.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from chongming_task._service import ERROR_DELAY, FINISHED, BackgroundService, StepResult
from chongming_task.errors import ControllerClosed, InvalidState
from chongming_task.testing import FakeClock, wait_until


class Counter:
    """A step that counts its passes and waits ``delay`` after each."""

    def __init__(self, delay: float | None = 10.0) -> None:
        self.passes = 0
        self.delay = delay
        self.passed = threading.Condition()

    def __call__(self) -> float | None:
        with self.passed:
            self.passes += 1
            self.passed.notify_all()
        return self.delay

    def wait_for(self, passes: int) -> None:
        with self.passed:
            assert self.passed.wait_for(lambda: self.passes >= passes, 5.0), self.passes


class FailsFirst:
    """A step whose first ``failures`` passes raise; the later ones wait until woken."""

    def __init__(self, failures: int = 1) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self) -> StepResult:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(f"bad {self.calls}")
        return None


def test_start_runs_a_pass_then_waits_on_the_clock() -> None:
    clock = FakeClock()
    step = Counter(delay=10.0)
    service = BackgroundService("svc-test", step, clock=clock)
    service.start()
    try:
        step.wait_for(1)
        clock.wait_for_sleepers(1)
        assert step.passes == 1
        assert service.alive
        assert service.running
        assert service.started
        clock.advance(10.0)
        step.wait_for(2)
    finally:
        assert service.stop()
    assert (service.alive, service.stopping, service.running) == (False, True, False)


def test_the_thread_is_named() -> None:
    clock = FakeClock()
    seen: list[str] = []

    def step() -> StepResult:
        seen.append(threading.current_thread().name)
        return None

    service = BackgroundService("chongming-test[node-1]", step, clock=clock)
    service.start()
    wait_until(lambda: seen, timeout=5, message="a pass")
    service.stop()
    assert seen == ["chongming-test[node-1]"]


def test_wake_cuts_the_wait_short() -> None:
    clock = FakeClock()
    step = Counter(delay=None)  # wait until woken
    service = BackgroundService("svc-wake", step, clock=clock)
    service.start()
    try:
        step.wait_for(1)
        service.wake()
        step.wait_for(2)
    finally:
        service.stop()


def test_stop_ends_a_wait_at_once_and_is_idempotent() -> None:
    clock = FakeClock()
    step = Counter(delay=3600.0)
    service = BackgroundService("svc-stop", step, clock=clock)
    service.start()
    step.wait_for(1)
    clock.wait_for_sleepers(1)
    assert service.stop(timeout=5.0)
    assert service.stop(timeout=5.0)  # again: nothing to do
    assert step.passes == 1


def test_a_failing_pass_is_reported_and_the_thread_carries_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    step = FailsFirst()
    service = BackgroundService("svc-fail", step, clock=clock)
    with caplog.at_level(logging.ERROR, logger="chongming_task.service"):
        service.start()
        clock.wait_for_sleepers(1)  # waiting out the error delay
        assert service.errors == 1
        assert service.last_error == "RuntimeError: bad 1"
        assert service.alive
        clock.advance(ERROR_DELAY)
        wait_until(lambda: step.calls == 2, timeout=5, message="the next pass")
    service.stop()
    last_error: str | None = service.last_error
    assert last_error is None  # the pass after it went well
    assert any("svc-fail" in record.getMessage() and record.exc_info for record in caplog.records)


def test_on_error_reports_and_chooses_the_delay() -> None:
    clock = FakeClock()
    reported: list[tuple[str, int]] = []
    step = FailsFirst(2)

    def on_error(exc: Exception, failures: int) -> float:
        reported.append((str(exc), failures))
        return 0.0  # retry at once

    service = BackgroundService("svc-report", step, clock=clock, on_error=on_error)
    service.start()
    wait_until(lambda: step.calls == 3, timeout=5, message="three passes")
    service.stop()
    assert reported == [("bad 1", 1), ("bad 2", 2)]  # consecutive failures counted
    assert service.errors == 2


def test_a_failing_error_report_does_not_kill_the_thread() -> None:
    clock = FakeClock()
    step = FailsFirst()

    def on_error(exc: Exception, failures: int) -> float:
        raise KeyError("the reporter is broken too")

    service = BackgroundService("svc-broken-report", step, clock=clock, on_error=on_error)
    service.start()
    clock.wait_for_sleepers(1)
    clock.advance(ERROR_DELAY)
    wait_until(lambda: step.calls == 2, timeout=5, message="a pass after the failed report")
    assert service.alive
    service.stop()


def test_stop_before_start_refuses_a_later_start() -> None:
    service = BackgroundService("svc-never", Counter(), clock=FakeClock())
    assert service.stop()  # never started: nothing to join
    assert not service.started
    with pytest.raises(ControllerClosed, match="svc-never was stopped"):
        service.start()
    assert service.ensure_started() is False
    assert not service.alive


def test_a_stopped_service_is_not_restarted() -> None:
    clock = FakeClock()
    step = Counter()
    service = BackgroundService("svc-once", step, clock=clock)
    service.start()
    step.wait_for(1)
    service.stop()
    with pytest.raises(ControllerClosed):
        service.start()
    assert isinstance(ControllerClosed("x"), InvalidState)
    assert service.ensure_started() is False
    assert step.passes == 1


def test_start_twice_is_refused_but_ensure_started_is_idempotent() -> None:
    clock = FakeClock()
    step = Counter(delay=None)
    service = BackgroundService("svc-twice", step, clock=clock)
    assert service.ensure_started() is True
    try:
        with pytest.raises(InvalidState, match="already started"):
            service.start()
        step.wait_for(1)
        assert service.ensure_started() is True  # running: woken, not started again
        step.wait_for(2)
    finally:
        service.stop()


def test_final_runs_once_after_the_last_pass_of_a_stop() -> None:
    clock = FakeClock()
    events: list[str] = []

    def step() -> StepResult:
        events.append("pass")
        return None

    service = BackgroundService(
        "svc-final",
        step,
        clock=clock,
        final=lambda: events.append("final"),
    )
    service.start()
    wait_until(lambda: events, timeout=5, message="a pass")
    service.stop()
    assert events == ["pass", "final"]


def test_initial_wait_delays_the_first_pass() -> None:
    clock = FakeClock()
    step = Counter(delay=None)
    service = BackgroundService("svc-later", step, clock=clock, initial_wait=5.0)
    service.start()
    try:
        clock.wait_for_sleepers(1)
        assert step.passes == 0
        clock.advance(5.0)
        step.wait_for(1)
    finally:
        service.stop()


def test_a_finished_service_ends_and_starts_again_on_demand() -> None:
    clock = FakeClock()
    work: list[int] = []
    done: list[int] = []
    lock = threading.Lock()

    def step() -> StepResult:
        with lock:
            if not work:
                return FINISHED
            done.append(work.pop())
        return 0.0

    service = BackgroundService("svc-lazy", step, clock=clock)
    for item in (1, 2):
        with lock:
            work.append(item)
        assert service.ensure_started()
        wait_until(lambda: not service.alive, timeout=5, message="the thread to end")
    assert done == [1, 2]
    assert service.started
    assert not service.stopping


def test_join_from_its_own_thread_does_not_wait_for_itself() -> None:
    clock = FakeClock()
    joined: list[bool] = []
    service: BackgroundService

    def step() -> StepResult:
        joined.append(service.stop(timeout=5.0))
        return None

    service = BackgroundService("svc-self", step, clock=clock)
    service.start()
    wait_until(lambda: joined, timeout=5, message="the step to stop its service")
    assert joined == [False]
    assert service.join(5.0)


def test_a_base_exception_ends_the_thread_loudly(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    caught: list[type[BaseException]] = []
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        caught.append(args.exc_type)

    def step() -> StepResult:
        raise SystemExit(3)

    threading.excepthook = hook
    try:
        with caplog.at_level(logging.CRITICAL, logger="chongming_task.service"):
            service = BackgroundService("svc-exit", step, clock=clock)
            service.start()
            assert service.join(5.0)
    finally:
        threading.excepthook = previous
    assert caught == [SystemExit]
    assert any("svc-exit ended" in record.getMessage() for record in caplog.records)


#: Where a thread may still be created by hand: the base itself, and the threads that
#: live for one run or one command (carriers, relays, the child's pipe, a pause waiting
#: for its confirmation), plus the testing helpers.
_PER_RUN_THREADS = frozenset(
    {
        "_service.py",
        "controller/_commands.py",
        "runtime/executors/_carriers.py",
        "runtime/executors/_process.py",
        "runtime/executors/_process_child.py",
    }
)


def test_every_long_lived_library_thread_is_a_background_service() -> None:
    import chongming_task

    package = Path(chongming_task.__file__).parent
    by_hand = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if "threading.Thread(" in path.read_text(encoding="utf-8")
    }
    by_hand = {name for name in by_hand if not name.startswith("testing/")}
    assert by_hand <= _PER_RUN_THREADS, sorted(by_hand - _PER_RUN_THREADS)
