"""The next firings of a trigger, with every DST gap or overlap that changes one explained.

``preview(trigger, count=10, start=...)`` lists the next ``count`` firings strictly
after ``start`` (UTC and local time) and, for each daylight-saving change of the zone
in that span, the wall times of the expression that the change affects: a time that
does not exist (a gap) or one that occurs twice (an overlap, or fold), and what the
trigger's DST policy did with it, and why. Entries that did not fire are listed too
(``fired=False``), so the preview shows what a reader of the cron expression might
expect and does not get. It is pure: no clock, no store.

The same computation answers ``chongming-task schedule preview`` and generates the
worked tables of ``docs/scheduling.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Final, Literal

from chongming_task._public import public
from chongming_task.errors import ConfigurationError
from chongming_task.schedule._triggers import CronTrigger, Trigger, load_timezone
from chongming_task.schedule._walltime import _candidates, _next, _offset, _transition

__all__ = ["MAX_PREVIEW", "Preview", "PreviewEntry", "parse_count", "parse_start", "preview"]

#: Most firings one preview lists.
MAX_PREVIEW: Final = 1000

_DAY: Final = timedelta(days=1)
_SECOND: Final = timedelta(seconds=1)

DstEvent = Literal["gap", "overlap"]


@dataclass(frozen=True, slots=True)
class PreviewEntry:
    """One firing, or one wall time the expression names that does not fire."""

    fired: bool
    """False: the expression names this wall time, but the policy does not fire it."""
    utc: datetime | None
    """The firing instant (UTC); ``None`` for a wall time that does not exist."""
    local: datetime | None
    """The firing instant in the trigger's zone (with its offset)."""
    wall: datetime | None
    """The wall time the expression names (naive), when it differs from ``local`` or
    did not fire: ``02:30`` of a gap that fired at ``03:00``."""
    dst: DstEvent | None = None
    """The DST change that affects this entry, if any."""
    note: str | None = None
    """What the policy did and why (only on entries a DST change affects)."""
    stands_for: tuple[datetime, ...] = ()
    """The nonexistent wall times a firing at the end of a gap stands for."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "fired": self.fired,
            "utc": None if self.utc is None else self.utc.isoformat(),
            "local": None if self.local is None else self.local.isoformat(),
            "wall": None if self.wall is None else self.wall.isoformat(),
            "dst": self.dst,
            "note": self.note,
            "stands_for": [wall.isoformat() for wall in self.stands_for],
        }


@dataclass(frozen=True, slots=True)
class Preview:
    """The next firings of one trigger from ``start``, in order."""

    pattern: str
    timezone: str
    dst: str
    start: datetime
    entries: tuple[PreviewEntry, ...]

    @property
    def firings(self) -> list[datetime]:
        """The firing instants only (UTC)."""
        return [e.utc for e in self.entries if e.fired and e.utc is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "timezone": self.timezone,
            "dst": self.dst,
            "from": self.start.isoformat(),
            "entries": [entry.to_dict() for entry in self.entries],
        }


def parse_count(value: object) -> int:
    """A preview length: a whole number in 1..``MAX_PREVIEW`` (also from text).

    Raises:
        ConfigurationError: anything else (NaN, 0, 2.5, "ten"...).
    """
    number: object = value
    if isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_PREVIEW:
        raise ConfigurationError(
            f"count must be a whole number from 1 to {MAX_PREVIEW}, got {value!r}"
        )
    return number


def parse_start(value: str | datetime, timezone: str = "UTC") -> datetime:
    """The instant a preview starts from: an aware datetime, or ISO 8601 text.

    Text without an offset is read as wall time in ``timezone`` (the first occurrence
    of a repeated time; a nonexistent one is refused).

    Raises:
        ConfigurationError: not ISO 8601, or a nonexistent local time.
    """
    if isinstance(value, datetime):
        when = value
    else:
        text = value.strip() if isinstance(value, str) else value
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except (TypeError, ValueError, AttributeError) as exc:
            raise ConfigurationError(
                f"start time {value!r} is not ISO 8601; use e.g. 2026-03-08T00:00 or "
                "2026-03-08T00:00:00+00:00"
            ) from exc
    if when.tzinfo is None or when.utcoffset() is None:
        zone = load_timezone(timezone)
        when = when.replace(tzinfo=zone)
        if when.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != when.replace(tzinfo=None):
            raise ConfigurationError(
                f"start time {value!r} does not exist in {timezone} (a DST gap); give an "
                "offset or another time"
            )
    return when.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class _Change:
    at: datetime
    before: timedelta
    after: timedelta


def _changes(tz: tzinfo, low: datetime, high: datetime) -> list[_Change]:
    """Every UTC-offset change of ``tz`` in ``(low, high]`` (zones change at most a few
    times a year, never twice within a day)."""
    found: list[_Change] = []
    cursor = low
    offset = _offset(tz, cursor)
    while cursor < high:
        step = min(cursor + _DAY, high)
        following = _offset(tz, step)
        if following != offset:
            at = _transition(tz, cursor, step)
            found.append(_Change(at, offset, following))
        cursor, offset = step, following
    return found


def _why(trigger: CronTrigger) -> str:
    hour = trigger.fields[-4]
    if trigger.dst == "skip":
        return (
            "dst=skip: a wall time that does not exist does not fire and one that occurs "
            "twice fires twice (robfig/cron, Temporal)"
        )
    if trigger.dst == "vixie":
        if trigger.wildcard:
            return (
                "dst=vixie: a wildcard job (its minute or hour field starts with '*') "
                "follows elapsed time, as cron(8) runs it"
            )
        return (
            "dst=vixie: a fixed-time job (neither minute nor hour starts with '*'): cron(8) "
            "runs skipped times right after the gap and does not repeat a repeated one"
        )
    if trigger.follows_elapsed_time:
        return "dst=default: the hour field is '*', so the expression follows elapsed time"
    return f"dst=default: the hour field {hour!r} names wall-clock hours"


def _hm(naive: datetime) -> str:
    return naive.strftime("%H:%M:%S" if naive.second else "%H:%M")


def _band(trigger: CronTrigger, low: datetime, high: datetime) -> list[datetime]:
    """The wall times in ``[low, high)`` that the expression names."""
    iterator = _candidates(trigger.fields, low - _SECOND)
    found: list[datetime] = []
    while len(found) < 10_000:
        candidate = _next(iterator)
        if candidate >= high:
            break
        found.append(candidate)
    return found


@public
def preview(  # noqa: C901 (one branch per preview option)
    trigger: Trigger | str,
    *,
    timezone: str = "UTC",
    dst: str | None = None,
    count: int = 10,
    start: datetime | str,
) -> Preview:
    """The next ``count`` firings of ``trigger`` strictly after ``start``, explained.

    Args:
        trigger: a trigger, or a cron expression read in ``timezone`` under ``dst``.
        timezone: the zone of an expression given as text.
        dst: the DST policy of an expression given as text (default ``default``).
        count: firings to list (1..1000); entries that do not fire come in addition.
        start: an aware instant, or ISO 8601 text (without an offset: wall time in
            ``timezone``).

    Raises:
        ConfigurationError: an invalid expression, zone, policy, count or start.
    """
    if isinstance(trigger, str):
        trigger = CronTrigger(trigger, timezone, dst=dst or "default")  # type: ignore[arg-type]
    elif dst is not None and isinstance(trigger, CronTrigger) and dst != trigger.dst:
        trigger = CronTrigger(trigger.expression, trigger.timezone, dst=dst)  # type: ignore[arg-type]
    total = parse_count(count)
    begin = parse_start(start, trigger.timezone)
    firings: list[datetime] = []
    cursor = begin
    for _ in range(total):
        cursor = trigger.next_after(cursor)
        firings.append(cursor)
    zone = load_timezone(trigger.timezone)
    entries: dict[datetime, PreviewEntry] = {
        instant: PreviewEntry(True, instant, instant.astimezone(zone), None) for instant in firings
    }
    extra: list[tuple[datetime, PreviewEntry]] = []
    if isinstance(trigger, CronTrigger) and trigger.interval is None and zone is not UTC:
        last = firings[-1]
        why = _why(trigger)
        elapsed = trigger.follows_elapsed_time
        for change in _changes(zone, begin, last):
            low = (change.at + min(change.before, change.after)).replace(tzinfo=None)
            high = (change.at + max(change.before, change.after)).replace(tzinfo=None)
            named = _band(trigger, low, high)
            if not named:
                continue
            jump = f"clocks go from {_hm(low if change.after > change.before else high)}"
            if change.after > change.before:  # a gap: these wall times never happen
                verb = "does" if len(named) == 1 else "do"
                what = (
                    f"{', '.join(_hm(w) for w in named)} {verb} not exist ({jump} to {_hm(high)})"
                )
                if elapsed:
                    for wall in named:
                        extra.append(
                            (
                                change.at,
                                PreviewEntry(
                                    False,
                                    None,
                                    None,
                                    wall,
                                    "gap",
                                    f"{_hm(wall)} does not exist ({jump} to {_hm(high)}): "
                                    f"not fired; {why}",
                                ),
                            )
                        )
                elif change.at in entries:
                    entries[change.at] = PreviewEntry(
                        True,
                        change.at,
                        change.at.astimezone(zone),
                        named[0],
                        "gap",
                        f"{what}: fired once at the first instant after the gap; {why}",
                        tuple(named),
                    )
            else:  # an overlap: these wall times happen twice
                for wall in named:
                    first = (wall - change.before).replace(tzinfo=UTC)
                    second = (wall - change.after).replace(tzinfo=UTC)
                    repeat = (
                        f"{_hm(wall)} occurs twice (clocks go back from {_hm(high)} to {_hm(low)})"
                    )
                    if first in entries:
                        entries[first] = PreviewEntry(
                            True,
                            first,
                            first.astimezone(zone),
                            None,
                            "overlap",
                            f"{repeat}: first occurrence fired; {why}",
                        )
                    if elapsed and second in entries:
                        entries[second] = PreviewEntry(
                            True,
                            second,
                            second.astimezone(zone),
                            None,
                            "overlap",
                            f"{repeat}: second occurrence fired too; {why}",
                        )
                    elif not elapsed and begin < second <= last:
                        extra.append(
                            (
                                second,
                                PreviewEntry(
                                    False,
                                    second,
                                    second.astimezone(zone),
                                    wall,
                                    "overlap",
                                    f"{repeat}: second occurrence not fired; {why}",
                                ),
                            )
                        )
    ordered = sorted(
        [(instant, 1, entry) for instant, entry in entries.items()]
        + [(instant, 0, entry) for instant, entry in extra],
        key=lambda item: (item[0], item[1]),
    )
    return Preview(
        pattern=trigger.pattern,
        timezone=trigger.timezone,
        dst=trigger.dst,
        start=begin,
        entries=tuple(entry for _, _, entry in ordered),
    )
