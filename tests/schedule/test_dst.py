"""The DST rule, in Europe/Berlin (and friends), checked by hand and by brute force.

Rule (``chongming_task.schedule._triggers``): intervals ignore DST; an expression whose
hour field is ``*`` follows elapsed time (gap times skipped, the repeated hour fired
in both passes); every other expression names wall-clock hours (a time missing on a
spring-forward day fires once at the first instant after the gap, a time occurring
twice on a fall-back day fires once, at its first occurrence).
"""

from __future__ import annotations

import functools
import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chongming_task.schedule._firing import plan_firings
from chongming_task.schedule._triggers import CronTrigger, IntervalTrigger
from chongming_task.schedule._walltime import instants_of
from chongming_task.testing import FakeClock

BERLIN = ZoneInfo("Europe/Berlin")
# 2026: clocks go 02:00 CET -> 03:00 CEST on 29 March (01:00Z) and
# 03:00 CEST -> 02:00 CET on 25 October (01:00Z).
SPRING = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
FALL = datetime(2026, 10, 25, 1, 0, tzinfo=UTC)


def local_times(trigger: CronTrigger, start: datetime, end: datetime) -> list[str]:
    """Every firing in (start, end] as local 'MM-DD HH:MM+offset'."""
    result = []
    current = trigger.next_after(start)
    while current <= end:
        result.append(current.astimezone(BERLIN).strftime("%m-%d %H:%M%z"))
        current = trigger.next_after(current)
    return result


def test_spring_forward_missing_time_fires_once_after_the_gap() -> None:
    trigger = CronTrigger("30 2 * * *", "Europe/Berlin")
    window = (SPRING - timedelta(days=1, hours=1), SPRING + timedelta(days=1, hours=1))
    assert local_times(trigger, *window) == [
        "03-28 02:30+0100",
        "03-29 03:00+0200",  # 02:30 does not exist: the first instant after the gap
        "03-30 02:30+0200",
    ]


def test_spring_forward_collapses_several_missing_times_into_one_firing() -> None:
    trigger = CronTrigger("*/15 2 * * *", "Europe/Berlin")
    day = local_times(trigger, SPRING - timedelta(hours=3), SPRING + timedelta(hours=20))
    assert day == ["03-29 03:00+0200"]
    # ... and a time that also matches right after the gap is the same firing.
    both = CronTrigger("0 2,3 * * *", "Europe/Berlin")
    assert local_times(both, SPRING - timedelta(hours=3), SPRING + timedelta(hours=3)) == [
        "03-29 03:00+0200"
    ]


def test_fall_back_repeated_time_fires_once_at_first_occurrence() -> None:
    trigger = CronTrigger("30 2 * * *", "Europe/Berlin")
    window = (FALL - timedelta(days=1, hours=1), FALL + timedelta(days=1, hours=1))
    assert local_times(trigger, *window) == [
        "10-24 02:30+0200",
        "10-25 02:30+0200",  # not again at 02:30+0100
        "10-26 02:30+0100",
    ]
    # The same from inside the repeated hour: the second 02:30 never fires.
    inside = FALL + timedelta(minutes=10)  # 02:10 CET, second pass
    assert trigger.next_after(inside).astimezone(BERLIN).strftime("%m-%d %H:%M%z") == (
        "10-26 02:30+0100"
    )


def test_hour_wildcard_follows_elapsed_time() -> None:
    trigger = CronTrigger("*/30 * * * *", "Europe/Berlin")
    spring = local_times(trigger, SPRING - timedelta(minutes=45), SPRING + timedelta(minutes=45))
    assert spring == ["03-29 01:30+0100", "03-29 03:00+0200", "03-29 03:30+0200"]
    fall = local_times(trigger, FALL - timedelta(minutes=45), FALL + timedelta(minutes=75))
    assert fall == [
        "10-25 02:30+0200",
        "10-25 02:00+0100",  # the repeated hour is a real hour: it fires again
        "10-25 02:30+0100",
        "10-25 03:00+0100",
    ]
    hourly = CronTrigger("@hourly", "Europe/Berlin")
    spring_hours = local_times(hourly, SPRING - timedelta(hours=2), SPRING + timedelta(hours=1))
    assert spring_hours == ["03-29 01:00+0100", "03-29 03:00+0200", "03-29 04:00+0200"]


def test_six_field_expression_in_new_york() -> None:
    trigger = CronTrigger("CRON_TZ=America/New_York 0 30 2 * * *")
    start = datetime(2026, 3, 7, 12, tzinfo=UTC)
    got = []
    current = start
    for _ in range(3):
        current = trigger.next_after(current)
        got.append(current.astimezone(ZoneInfo("America/New_York")).strftime("%d %H:%M%z"))
    assert got == ["08 03:00-0400", "09 02:30-0400", "10 02:30-0400"]


def test_intervals_ignore_dst() -> None:
    trigger = CronTrigger("@every 45m", "Europe/Berlin")
    current = SPRING - timedelta(hours=2)
    firings = []
    for _ in range(6):
        current = trigger.next_after(current)
        firings.append(current)
    gaps = {b - a for a, b in itertools.pairwise(firings)}
    assert gaps == {timedelta(minutes=45)}
    assert IntervalTrigger(3600).next_after(FALL) == FALL + timedelta(hours=1)


def test_a_fake_clock_walk_through_both_changes_fires_once_per_night() -> None:
    """The scheduler's view: tick every minute through both change nights."""
    trigger = CronTrigger("30 2 * * *", "Europe/Berlin")
    for change in (SPRING, FALL):
        clock = FakeClock(change - timedelta(hours=6))
        since = clock.now()
        fired: list[datetime] = []
        for _ in range(24 * 60):
            clock.advance(60)
            plan = plan_firings(trigger, since=since, now=clock.now(), tolerance=90)
            fired.extend(f.scheduled_at for f in plan.due)
            since = clock.now()
        assert len(fired) == 1, fired


# ------------------------------------------------------------------ brute force

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Shanghai"]
EXPRESSIONS = [
    "30 2 * * *",
    "*/15 * * * *",
    "*/10 2 * * *",
    "0 */2 * * *",
    "@hourly",
    "15,45 1,2,3 * * *",
    "*/20 * * * * *",
    "0 30 1 * * *",
    "* * 2 * * *",
    "0 0 * * *",
]
CHANGES = {
    "Europe/Berlin": [SPRING, FALL],
    "America/New_York": [
        datetime(2026, 3, 8, 7, tzinfo=UTC),
        datetime(2026, 11, 1, 6, tzinfo=UTC),
    ],
    "Australia/Lord_Howe": [
        datetime(2026, 4, 4, 15, tzinfo=UTC),
        datetime(2026, 10, 3, 15, 30, tzinfo=UTC),
    ],
    "Asia/Shanghai": [datetime(2026, 6, 1, tzinfo=UTC)],
}


@functools.cache
def reference(expression: str, zone_name: str, start: datetime, hours: int) -> list[datetime]:
    """Every firing near ``start``: all local candidates mapped by the rule, sorted."""
    from croniter import croniter

    trigger = CronTrigger(expression, zone_name)
    zone = ZoneInfo(zone_name)
    fields = trigger._fields
    naive = start.astimezone(zone).replace(tzinfo=None) - timedelta(hours=8)
    iterator = croniter(" ".join(fields), naive, second_at_beginning=len(fields) == 6)
    found: set[datetime] = set()
    while True:
        candidate = iterator.get_next(datetime)
        if candidate > naive + timedelta(hours=hours + 12):
            return sorted(found)
        found.update(instants_of(candidate, zone, elapsed=trigger.follows_elapsed_time))


@settings(max_examples=300, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    expression=st.sampled_from(EXPRESSIONS),
    change=st.integers(min_value=0, max_value=1),
    offset=st.integers(min_value=-4 * 3600, max_value=4 * 3600),
    micros=st.integers(min_value=0, max_value=999_999),
)
def test_next_after_matches_the_brute_force_reference(
    zone: str, expression: str, change: int, offset: int, micros: int
) -> None:
    changes = CHANGES[zone]
    base = changes[change % len(changes)]
    after = base + timedelta(seconds=offset, microseconds=micros)
    trigger = CronTrigger(expression, zone)
    expected = next(i for i in reference(expression, zone, base, 30) if i > after)
    assert trigger.next_after(after) == expected


@pytest.mark.parametrize("zone", ["Europe/Berlin", "Australia/Lord_Howe"])
def test_instants_of_gap_and_fold(zone: str) -> None:
    tz = ZoneInfo(zone)
    if zone == "Europe/Berlin":
        gap, fold = datetime(2026, 3, 29, 2, 30), datetime(2026, 10, 25, 2, 30)
        gap_end = SPRING
    else:  # Lord Howe moves by 30 minutes
        gap, fold = datetime(2026, 10, 4, 2, 15), datetime(2026, 4, 5, 1, 45)
        gap_end = datetime(2026, 10, 3, 15, 30, tzinfo=UTC)
    assert instants_of(gap, tz, elapsed=True) == []
    assert instants_of(gap, tz, elapsed=False) == [gap_end]
    both = instants_of(fold, tz, elapsed=True)
    assert len(both) == 2
    assert both[0] < both[1]
    assert instants_of(fold, tz, elapsed=False) == both[:1]
