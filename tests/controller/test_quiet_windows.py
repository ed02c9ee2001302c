"""Quiet windows: the controller's pollers begin nothing around a scheduled release.

On the fake clock: every step is driven by ``advance`` and observed, never timed.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from chongming_task import Controller, InMemoryTaskStore
from chongming_task.controller.commands import CommandPoller
from chongming_task.controller.quiet import AFTER, BEFORE, QuietWindows
from chongming_task.errors import ConfigurationError
from chongming_task.testing import wait_until
from chongming_task.testing.fake_clock import FakeClock


def test_without_windows_a_wait_is_not_cut() -> None:
    quiet = QuietWindows(FakeClock())
    assert quiet.bound(0.2) == 0.2
    assert quiet.sit_out(threading.Event()) is True


def test_a_wait_ends_where_the_window_begins_and_is_zero_inside_it() -> None:
    clock = FakeClock()
    quiet = QuietWindows(clock)
    quiet.add_around(1.0)
    assert quiet.bound(10) == pytest.approx(1.0 - BEFORE)
    assert quiet.bound(0.2) == 0.2
    clock.advance(1.0)
    assert quiet.bound(0.2) == 0
    clock.advance(AFTER)
    assert quiet.bound(0.2) == 0.2  # closed, and forgotten


def test_the_same_instant_marked_twice_is_one_window() -> None:
    clock = FakeClock()
    quiet = QuietWindows(clock)
    quiet.add_around(1.0)
    clock.advance(0.0005)
    quiet.add_around(0.9995)
    assert len(quiet._windows) == 1
    start, end = quiet._windows[0]
    assert start == pytest.approx(1.0 - BEFORE)
    assert end == pytest.approx(1.0 + AFTER)


def test_sitting_out_waits_for_the_end_of_the_window_or_a_stop() -> None:
    clock = FakeClock()
    quiet = QuietWindows(clock)
    quiet.add_around(0.001)
    outcome: list[tuple[bool, float]] = []
    stop = threading.Event()

    def sit() -> None:
        outcome.append((quiet.sit_out(stop), clock.monotonic()))

    thread = threading.Thread(target=sit)
    thread.start()
    clock.wait_for_sleepers(1)
    assert outcome == []  # inside the window: still sitting
    clock.advance(0.001 + AFTER)
    thread.join(5)
    assert outcome == [(True, pytest.approx(0.001 + AFTER))]

    quiet.add_around(0.001)
    stopped: list[bool] = []
    thread = threading.Thread(target=lambda: stopped.append(quiet.sit_out(stop)))
    thread.start()
    clock.wait_for_sleepers(1)
    stop.set()
    thread.join(5)
    assert stopped == [False]


class _Recording(InMemoryTaskStore):
    """Records when (fake monotonic seconds) the poller claims and starts a wait."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.fake = clock
        self.claims: list[float] = []
        self.waits: list[float] = []

    def claim_commands(self, *args: Any, **kwargs: Any) -> Any:
        self.claims.append(self.fake.monotonic())
        return super().claim_commands(*args, **kwargs)

    def wait_for_commands(self, timeout: float) -> None:
        self.waits.append(self.fake.monotonic())
        super().wait_for_commands(timeout)


def test_the_command_poller_begins_no_poll_inside_a_window() -> None:
    clock = FakeClock()
    store = _Recording(clock)
    quiet = QuietWindows(clock)
    quiet.add_around(0.5)  # quiet from 0.495 to 0.505
    entries: list[float] = []
    sit_out = quiet.sit_out

    def recording_sit_out(stop: threading.Event) -> bool:
        entries.append(clock.monotonic())
        return sit_out(stop)

    quiet.sit_out = recording_sit_out  # type: ignore[method-assign]
    poller = CommandPoller(
        store=store,
        owner="node-a",
        lookup=lambda task_id: None,
        interval=0.2,
        lease=10,
        pause_timeout=5,
        on_failure=lambda *args: None,
        clock=clock,
        quiet=quiet,
    )

    def asleep_after(loops: int) -> None:
        wait_until(lambda: len(entries) >= loops)
        clock.wait_for_sleepers(1)

    poller.start()
    try:
        asleep_after(1)
        assert store.claims == [0]
        clock.advance(0.2)
        asleep_after(2)
        assert store.claims == [0, pytest.approx(0.2)]
        clock.advance(0.3)  # 0.5: the wait ran out inside the window
        asleep_after(3)
        assert len(store.claims) == 2  # sitting it out, no claim at 0.5
        clock.advance(0.01)  # 0.51: the window is over
        wait_until(lambda: len(store.claims) == 3)
        assert store.claims[2] >= 0.5 + AFTER
        # No claim and no wait (a cross-process check on SQLite) began inside it.
        assert not [t for t in (*store.claims, *store.waits) if 0.5 - BEFORE < t < 0.5 + AFTER]
    finally:
        poller.request_stop()
        clock.advance(1)  # ends the fake-clock wait the poller sits in
        poller.stop()


def test_quiet_around_a_past_instant_is_ignored() -> None:
    clock = FakeClock()
    with Controller(store=InMemoryTaskStore(clock=clock), clock=clock) as controller:
        controller.quiet_around(clock.now() - timedelta(seconds=1))
        assert controller._quiet.bound(0.2) == 0.2
        controller.quiet_around(clock.now() + timedelta(seconds=1))
        assert controller._quiet.bound(10) == pytest.approx(1 - BEFORE)


@pytest.mark.parametrize("bad", ["2026-01-01T00:00:00Z", None])
def test_quiet_around_refuses_what_is_not_an_aware_datetime(bad: object) -> None:
    from datetime import datetime

    with Controller(store=InMemoryTaskStore()) as controller:
        for instant in (bad, datetime(2026, 1, 1)):
            with pytest.raises(ConfigurationError, match="timezone-aware datetime"):
                controller.quiet_around(instant)  # type: ignore[arg-type]
        assert controller._quiet.bound(0.2) == 0.2  # nothing was marked


def test_a_window_books_one_supervision_deadline_at_its_end() -> None:
    """The timer thread is started when the window is marked, and a run's deadline
    booked inside the window is not the earliest (so it wakes nobody)."""
    from chongming_task.controller import quiet as quiet_module
    from chongming_task.policies import Timeout
    from chongming_task.runtime.timers import TimerService

    clock = FakeClock()
    with Controller(store=InMemoryTaskStore(clock=clock), clock=clock, max_parallel=2) as ctl:
        service = TimerService.for_clock(clock)
        before = service.pending
        ctl.quiet_around(clock.now() + timedelta(seconds=1))
        ctl.quiet_around(clock.now() + timedelta(seconds=1))  # the same instant again
        assert service.pending == before + 1
        ctl.register("t", lambda ctx: None)
        ctl.submit("t", task_id="armed", blocked="armed", timeout=Timeout(total=3600))
        clock.advance(1)
        assert ctl.release_many(["armed"], trigger="schedule:due") == {}
        with service._lock:
            top = service._heap[0]
        assert top.callback is quiet_module._no_op
        assert top.deadline == pytest.approx(1 + AFTER)
        clock.advance(AFTER)  # the window's own deadline comes: nothing happens
        wait_until(lambda: service.pending == 0)


def test_quiet_around_never_raises(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from chongming_task.controller import controller as controller_module

    def broken(clock: Any, seconds_ahead: float) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(controller_module, "keep_timers_ahead", broken)
    clock = FakeClock()
    with Controller(store=InMemoryTaskStore(clock=clock), clock=clock) as controller:
        controller.quiet_around(clock.now() + timedelta(seconds=1))
        assert controller._quiet.bound(10) == pytest.approx(1 - BEFORE)  # the window holds
    assert "keeping the supervision timers ahead" in caplog.text
