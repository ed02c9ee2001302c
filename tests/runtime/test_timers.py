"""TimerService: one waiting thread per clock, alive only while something is due."""

from __future__ import annotations

import threading

from chongming_task.runtime._timers import TimerService
from chongming_task.testing import FakeClock, wait_until

from .helpers import PATIENCE


def test_callbacks_fire_in_deadline_order_on_the_clock() -> None:
    clock = FakeClock()
    service = TimerService.for_clock(clock)
    assert TimerService.for_clock(clock) is service
    fired: list[str] = []
    done = threading.Event()
    service.schedule(20, lambda: fired.append("b"))
    service.schedule(10, lambda: fired.append("a"))
    later = service.schedule(30, lambda: fired.append("never"))
    service.schedule(40, done.set)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    assert service.pending == 4
    clock.advance(10)
    wait_until(lambda: fired == ["a"], timeout=PATIENCE)
    service.cancel(later)
    service.cancel(later)  # twice is harmless
    clock.advance(30)
    assert done.wait(PATIENCE)
    assert fired == ["a", "b"]
    wait_until(lambda: clock.sleepers == 0, timeout=PATIENCE, message="the thread to leave")
    assert service.pending == 0


def test_an_earlier_deadline_wakes_the_waiting_thread() -> None:
    clock = FakeClock()
    service = TimerService.for_clock(clock)
    fired = threading.Event()
    service.schedule(100, lambda: None)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    service.schedule(5, fired.set)
    clock.advance(5)
    assert fired.wait(PATIENCE)


def test_a_failing_callback_does_not_kill_the_thread() -> None:
    clock = FakeClock()
    service = TimerService.for_clock(clock)
    fired = threading.Event()

    def broken() -> None:
        raise RuntimeError("bug in a callback")

    service.schedule(1, broken)
    service.schedule(2, fired.set)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    clock.advance(2)
    assert fired.wait(PATIENCE)


def test_many_cancellations_compact_the_heap() -> None:
    clock = FakeClock()
    service = TimerService.for_clock(clock)
    entries = [service.schedule(1000 + i, lambda: None) for i in range(600)]
    for entry in entries[1:]:
        service.cancel(entry)
    assert service.pending == 1
    assert len(service._heap) < 600
    service.cancel(entries[0])
    wait_until(lambda: clock.sleepers == 0, timeout=PATIENCE)
