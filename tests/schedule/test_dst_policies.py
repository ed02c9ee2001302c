"""Per-schedule DST policies and the preview that shows them (issue 27, item 5)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chongming_task.errors import ConfigurationError
from chongming_task.schedule import CronTrigger, Schedule, ScheduleAdmin
from chongming_task.schedule._preview import parse_count, parse_start, preview

from .conftest import Harness

NY = "America/New_York"
LORD_HOWE = "Australia/Lord_Howe"


def firings(expression: str, zone: str, dst: str, start: str, count: int) -> list[str]:
    result = preview(expression, timezone=zone, dst=dst, count=count, start=start)
    return [f"{e.local:%m-%d %H:%M %z}" for e in result.entries if e.fired and e.local]


def test_spring_forward_fixed_time_under_each_policy() -> None:
    start = "2026-03-08T00:00"
    assert firings("30 2 * * *", NY, "default", start, 1) == ["03-08 03:00 -0400"]
    assert firings("30 2 * * *", NY, "vixie", start, 1) == ["03-08 03:00 -0400"]
    assert firings("30 2 * * *", NY, "skip", start, 1) == ["03-09 02:30 -0400"]


def test_vixie_wildcard_jobs_are_the_minute_or_hour_starting_with_a_star() -> None:
    start = "2026-03-08T00:00"
    # Minute starts with '*': a wildcard job in cron(8), so the gap does not fire.
    assert firings("*/15 2 * * *", NY, "vixie", start, 1) == ["03-09 02:00 -0400"]
    # Ours: the hour field '2' names wall-clock hours: once, after the gap.
    assert firings("*/15 2 * * *", NY, "default", start, 1) == ["03-08 03:00 -0400"]
    fall = "2026-11-01T00:00"
    assert firings("*/15 1 * * *", NY, "vixie", fall, 8) == [
        *(f"11-01 01:{m:02d} -0400" for m in (0, 15, 30, 45)),
        *(f"11-01 01:{m:02d} -0500" for m in (0, 15, 30, 45)),
    ]
    assert firings("*/15 1 * * *", NY, "default", fall, 5)[-1] == "11-02 01:00 -0500"
    assert CronTrigger("0 */2 * * *", NY, dst="vixie").wildcard
    assert not CronTrigger("30 2 * * *", NY, dst="vixie").wildcard


def test_fall_back_repeats_under_skip_not_under_default() -> None:
    fall = "2026-11-01T00:00"
    assert firings("30 1 * * *", NY, "skip", fall, 2) == ["11-01 01:30 -0400", "11-01 01:30 -0500"]
    assert firings("30 1 * * *", NY, "default", fall, 2) == [
        "11-01 01:30 -0400",
        "11-02 01:30 -0500",
    ]


def test_lord_howe_half_hour_shift() -> None:
    # 2026-10-04 02:00 -> 02:30: 02:15 does not exist.
    start = "2026-10-04T00:00"
    assert firings("15 2 * * *", LORD_HOWE, "default", start, 1) == ["10-04 02:30 +1100"]
    assert firings("15 2 * * *", LORD_HOWE, "skip", start, 1) == ["10-05 02:15 +1100"]


def test_preview_marks_each_dst_change_with_what_the_policy_did() -> None:
    result = preview("*/30 * * * *", timezone=NY, count=3, start="2026-03-08T01:00")
    notes = [(e.fired, e.dst, e.note) for e in result.entries if e.note]
    assert [(fired, dst) for fired, dst, _ in notes] == [(False, "gap"), (False, "gap")]
    assert all("not fired" in (note or "") and "dst=default" in (note or "") for *_, note in notes)
    assert result.firings == [
        datetime(2026, 3, 8, 6, 30, tzinfo=UTC),
        datetime(2026, 3, 8, 7, 0, tzinfo=UTC),
        datetime(2026, 3, 8, 7, 30, tzinfo=UTC),
    ]
    fold = preview("30 1 * * *", timezone=NY, count=2, start="2026-11-01T00:00")
    skipped = [e for e in fold.entries if not e.fired]
    assert len(skipped) == 1
    assert skipped[0].dst == "overlap"
    assert "second occurrence not fired" in (skipped[0].note or "")


@pytest.mark.parametrize("value", ["dst", "", 1, "Skip"])
def test_a_bad_dst_policy_is_refused_at_registration(value: object) -> None:
    with pytest.raises(ConfigurationError, match="dst policy"):
        Schedule(name="s", task="t", trigger=CronTrigger("0 2 * * *"), dst=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="dst policy"):
        CronTrigger("0 2 * * *", dst=value)  # type: ignore[arg-type]


def test_vixie_refuses_a_seconds_field() -> None:
    with pytest.raises(ConfigurationError, match="no seconds"):
        Schedule(name="s", task="t", trigger=CronTrigger("0 0 2 * * *"), dst="vixie")


@pytest.mark.parametrize("value", [0, 1001, "nan", float("nan"), 2.5, "ten", True])
def test_bad_counts_are_refused(value: object) -> None:
    with pytest.raises(ConfigurationError, match="count"):
        parse_count(value)


@pytest.mark.parametrize("value", ["yesterday", "2026-13-01", "2026-03-08T02:30"])
def test_bad_start_times_are_refused(value: str) -> None:
    with pytest.raises(ConfigurationError, match="start time"):
        parse_start(value, NY)


def test_the_policy_is_stored_fired_by_and_shown(harness: Harness) -> None:
    scheduler = harness.node({"t": lambda ctx: None})
    scheduler.add(Schedule(name="s", task="t", trigger=CronTrigger("30 2 * * *", NY), dst="skip"))
    control = ScheduleAdmin(harness.store).get("s")
    assert control.dst == "skip"
    assert control.trigger.next_after(datetime(2026, 3, 8, 5, tzinfo=UTC)) == datetime(
        2026, 3, 9, 6, 30, tzinfo=UTC
    )
    # An operator's pattern override keeps the policy.
    assert scheduler.set_pattern("s", "15 2 * * *").trigger.dst == "skip"
