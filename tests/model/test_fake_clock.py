"""FakeClock: time moves only on advance(), and advance() releases every due waiter."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest

from chongming_task.core._clock import Clock, SystemClock, utc_now
from chongming_task.errors import ConfigurationError
from chongming_task.testing import FakeClock, wait_until

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def start_thread(target: object) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


def test_both_clocks_satisfy_the_protocol() -> None:
    assert isinstance(FakeClock(), Clock)
    assert isinstance(SystemClock(), Clock)
    assert utc_now().tzinfo is not None
    assert SystemClock().now().tzinfo is not None
    assert repr(SystemClock()) == "SystemClock()"


def test_time_moves_only_on_advance() -> None:
    clock = FakeClock()
    assert clock.now() == T0
    assert clock.monotonic() == 0.0
    clock.advance(1.5)
    clock.advance(0)
    assert clock.now() == T0 + timedelta(seconds=1.5)
    assert clock.monotonic() == 1.5
    assert "2026-01-01T00:00:01.500000+00:00" in repr(clock)


def test_start_keeps_its_offset() -> None:
    start = datetime(2026, 6, 1, 8, 0, tzinfo=timezone(timedelta(hours=8)))
    clock = FakeClock(start)
    clock.advance(60)
    assert clock.now() == start + timedelta(minutes=1)
    assert clock.now().utcoffset() == timedelta(hours=8)


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "1", True])
def test_advance_refuses_bad_amounts(bad: object) -> None:
    clock = FakeClock()
    with pytest.raises(ConfigurationError):
        clock.advance(bad)  # type: ignore[arg-type]
    assert clock.monotonic() == 0.0


def test_start_and_set_need_aware_datetimes() -> None:
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        FakeClock(datetime(2026, 1, 1))
    clock = FakeClock()
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        clock.set(datetime(2026, 1, 2))
    with pytest.raises(ConfigurationError, match="backwards"):
        clock.set(T0 - timedelta(seconds=1))
    clock.set(T0 + timedelta(hours=1))
    assert clock.monotonic() == 3600.0


def test_sleep_blocks_until_advanced_far_enough() -> None:
    clock = FakeClock()
    woke = threading.Event()

    def sleeper() -> None:
        clock.sleep(10)
        woke.set()

    thread = start_thread(sleeper)
    clock.wait_for_sleepers(1)
    assert clock.sleepers == 1
    clock.advance(9.999)
    assert not woke.is_set()
    assert clock.sleepers == 1
    clock.advance(0.001)
    thread.join(timeout=5)
    assert woke.is_set()
    assert clock.sleepers == 0


def test_sleep_of_zero_returns_at_once() -> None:
    clock = FakeClock()
    clock.sleep(0)
    clock.sleep(-1)
    assert clock.sleepers == 0


def test_wait_returns_true_when_the_event_is_set_from_another_thread() -> None:
    clock = FakeClock()
    event = threading.Event()
    results: list[bool] = []
    thread = start_thread(lambda: results.append(clock.wait(event, 60)))
    clock.wait_for_sleepers(1)
    event.set()
    thread.join(timeout=5)
    assert results == [True]
    assert clock.monotonic() == 0.0


def test_wait_returns_false_when_fake_time_runs_out() -> None:
    clock = FakeClock()
    event = threading.Event()
    results: list[bool] = []
    thread = start_thread(lambda: results.append(clock.wait(event, 5)))
    clock.wait_for_sleepers(1)
    clock.advance(5)
    thread.join(timeout=5)
    assert results == [False]


def test_wait_without_timeout_needs_the_event() -> None:
    clock = FakeClock()
    event = threading.Event()
    results: list[bool] = []
    thread = start_thread(lambda: results.append(clock.wait(event, None)))
    clock.wait_for_sleepers(1)
    clock.advance(10**6)
    assert results == []
    event.set()
    thread.join(timeout=5)
    assert results == [True]


def test_wait_on_a_set_event_does_not_block() -> None:
    clock = FakeClock()
    event = threading.Event()
    event.set()
    assert clock.wait(event, 0) is True
    assert clock.wait(threading.Event(), 0) is False


def test_advance_releases_several_sleepers_by_deadline() -> None:
    clock = FakeClock()
    woke: list[int] = []
    lock = threading.Lock()

    def sleeper(seconds: int) -> None:
        clock.sleep(seconds)
        with lock:
            woke.append(seconds)

    threads = [start_thread(lambda s=s: sleeper(s)) for s in (3, 1, 2)]
    clock.wait_for_sleepers(3)
    clock.advance(2)
    wait_until(lambda: len(woke) == 2, timeout=5, message="two sleepers")
    assert sorted(woke) == [1, 2]
    clock.advance(1)
    for thread in threads:
        thread.join(timeout=5)
    assert sorted(woke) == [1, 2, 3]


def test_wait_for_sleepers_reports_code_that_never_waits() -> None:
    with pytest.raises(TimeoutError, match="expected 1 waiter"):
        FakeClock().wait_for_sleepers(1, timeout=0.05)


def test_wait_until_returns_the_value_or_times_out() -> None:
    assert wait_until(lambda: 42, timeout=1) == 42
    with pytest.raises(TimeoutError, match="the moon"):
        wait_until(lambda: False, timeout=0.02, message="the moon")
