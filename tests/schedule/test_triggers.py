"""Triggers: accepted forms, refusals, and firing sequences over days."""

from __future__ import annotations

import itertools
import sys
from datetime import UTC, datetime, timedelta

import pytest

from chongming_task.errors import ConfigurationError
from chongming_task.schedule._durations import format_duration, parse_duration
from chongming_task.schedule._triggers import (
    EPOCH,
    CronTrigger,
    IntervalTrigger,
    make_trigger,
)
from chongming_task.testing import FakeClock

START = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)  # a Monday


def times(trigger: CronTrigger | IntervalTrigger, start: datetime, count: int) -> list[str]:
    result = []
    current = start
    for _ in range(count):
        current = trigger.next_after(current)
        assert current.tzinfo is UTC
        result.append(current.strftime("%Y-%m-%d %H:%M:%S"))
    return result


def test_five_fields_are_minute_first() -> None:
    assert times(CronTrigger("30 2 * * *"), START, 3) == [
        "2026-01-05 02:30:00",
        "2026-01-06 02:30:00",
        "2026-01-07 02:30:00",
    ]


def test_six_fields_are_seconds_first_like_go_with_seconds() -> None:
    trigger = CronTrigger("15 30 2 * * *")
    assert times(trigger, START, 2) == ["2026-01-05 02:30:15", "2026-01-06 02:30:15"]
    assert times(CronTrigger("*/20 * * * * *"), START, 3) == [
        "2026-01-05 00:00:20",
        "2026-01-05 00:00:40",
        "2026-01-05 00:01:00",
    ]


@pytest.mark.parametrize(
    ("descriptor", "expected"),
    [
        ("@hourly", "2026-01-05 01:00:00"),
        ("@daily", "2026-01-06 00:00:00"),
        ("@midnight", "2026-01-06 00:00:00"),
        ("@weekly", "2026-01-11 00:00:00"),
        ("@monthly", "2026-02-01 00:00:00"),
        ("@yearly", "2027-01-01 00:00:00"),
        ("@annually", "2027-01-01 00:00:00"),
        ("@DAILY", "2026-01-06 00:00:00"),
    ],
)
def test_descriptors(descriptor: str, expected: str) -> None:
    assert times(CronTrigger(descriptor), START, 1) == [expected]


def test_every_is_an_epoch_anchored_interval() -> None:
    trigger = CronTrigger("@every 1m30s")
    assert trigger.kind == "interval"
    assert trigger.interval == IntervalTrigger(90)
    assert times(trigger, START + timedelta(seconds=1), 2) == [
        "2026-01-05 00:01:30",
        "2026-01-05 00:03:00",
    ]
    assert CronTrigger("@every 30s").describe() == "every 30s"


def test_interval_grid_and_anchor() -> None:
    anchor = datetime(2026, 1, 5, 0, 0, 7, tzinfo=UTC)
    trigger = IntervalTrigger(10, anchor)
    assert times(trigger, START, 3) == [
        "2026-01-05 00:00:07",
        "2026-01-05 00:00:17",
        "2026-01-05 00:00:27",
    ]
    # Strictly after: a firing instant maps to the next one.
    assert trigger.next_after(anchor) == anchor + timedelta(seconds=10)
    assert IntervalTrigger(timedelta(minutes=5)).seconds == 300
    assert IntervalTrigger(60).anchor == EPOCH
    assert IntervalTrigger(90).pattern == "@every 1m30s"


@pytest.mark.parametrize("bad", [0, 0.5, 1.5, -3, True, "10", float("nan")])
def test_interval_refuses_bad_seconds(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="interval must be"):
        IntervalTrigger(bad)  # type: ignore[arg-type]


def test_interval_refuses_naive_anchor() -> None:
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        IntervalTrigger(10, datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("1m30s", 90), ("2h", 7200), ("1h15m", 4500), ("1.5m", 90), ("1500ms", None)],
)
def test_go_durations(text: str, seconds: int | None) -> None:
    if seconds is None:
        with pytest.raises(ConfigurationError, match="whole number of seconds"):
            parse_duration(text)
    else:
        assert parse_duration(text) == seconds
        assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "empty"),
        ("* * *", "has 3 fields"),
        ("0 0 1 1 * 2027 x", "has 7 fields"),
        ("61 * * * *", "is not valid"),
        ("*/0 * * * *", "is not valid"),
        ("@reboot", "is not valid"),
        ("@every", "interval duration is empty"),
        ("@every 500ms", "shorter than one second"),
        ("@every soon", "is not valid"),
        ("H 2 * * *", "hashed/random"),
        ("R * * * *", "hashed/random"),
        ("0 0 30 2 *", "never matches a real date"),
    ],
)
def test_invalid_expressions_name_the_expression_and_the_allowed_forms(
    expression: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        CronTrigger(expression)
    text = str(info.value)
    if expression and "interval" not in text:
        assert repr(" ".join(expression.split())) in text
    if "interval" not in text and (
        message in ("is not valid", "hashed/random") or "fields" in message
    ):
        assert "6 fields with seconds first" in text


def test_invalid_timezone() -> None:
    with pytest.raises(ConfigurationError, match="'Mars/Olympus' is not a known IANA timezone"):
        CronTrigger("0 2 * * *", "Mars/Olympus")
    with pytest.raises(ConfigurationError, match="IANA"):
        CronTrigger("0 2 * * *", "")


def test_go_cron_tz_prefix() -> None:
    trigger = CronTrigger("CRON_TZ=Asia/Shanghai 0 2 * * *")
    assert (trigger.expression, trigger.timezone) == ("0 2 * * *", "Asia/Shanghai")
    assert times(trigger, START, 1) == ["2026-01-05 18:00:00"]
    with pytest.raises(ConfigurationError, match="give the zone once"):
        CronTrigger("TZ=Asia/Shanghai 0 2 * * *", "Europe/Berlin")


def test_next_after_needs_an_aware_datetime() -> None:
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        CronTrigger("@hourly").next_after(datetime(2026, 1, 1))
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        IntervalTrigger(5).next_after(datetime(2026, 1, 1))


def test_equality_normalises_whitespace_and_make_trigger_round_trips() -> None:
    assert CronTrigger("0  2 * *  *") == CronTrigger("0 2 * * *")
    assert CronTrigger("0 2 * * *", "Europe/Berlin") != CronTrigger("0 2 * * *")
    anchor = datetime(2026, 1, 1, 0, 0, 3, tzinfo=UTC)
    assert make_trigger("@every 10s", anchor=anchor) == IntervalTrigger(10, anchor)
    cron = make_trigger("0 2 * * *", "Asia/Tokyo")
    assert isinstance(cron, CronTrigger)
    assert cron.describe() == "cron '0 2 * * *' in Asia/Tokyo"


def test_cron_over_days_with_a_fake_clock() -> None:
    """Walk a FakeClock minute by minute through three days; fire when due."""
    clock = FakeClock(START)
    trigger = CronTrigger("0 9,17 * * 1-5", "Asia/Shanghai")
    fired: list[datetime] = []
    due = trigger.next_after(clock.now())
    for _ in range(3 * 24 * 60):
        clock.advance(60)
        while due <= clock.now():
            fired.append(due)
            due = trigger.next_after(due)
    local = [d.astimezone(trigger._tz).strftime("%a %H:%M") for d in fired]
    assert local == ["Mon 09:00", "Mon 17:00", "Tue 09:00", "Tue 17:00", "Wed 09:00", "Wed 17:00"]


def test_interval_over_days_with_a_fake_clock() -> None:
    clock = FakeClock(START)
    trigger = IntervalTrigger(7 * 3600)
    fired = []
    due = trigger.next_after(clock.now())
    for _ in range(3 * 24):
        clock.advance(3600)
        while due <= clock.now():
            fired.append(due)
            due = trigger.next_after(due)
    # The grid is anchored at the epoch, not at the clock's start: 02:00, 09:00, ...
    assert fired[0] == datetime(2026, 1, 5, 2, 0, tzinfo=UTC)
    assert len(fired) == 11
    assert all((b - a) == timedelta(hours=7) for a, b in itertools.pairwise(fired))
    assert all((d - EPOCH).total_seconds() % (7 * 3600) == 0 for d in fired)


def test_importing_the_package_does_not_import_croniter() -> None:
    import subprocess

    code = (
        "import sys, chongming_task, chongming_task.schedule; "
        "from chongming_task.schedule import IntervalTrigger; IntervalTrigger(5); "
        "assert 'croniter' not in sys.modules, 'croniter imported eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
