"""When a schedule fires: cron expressions with a timezone, and fixed intervals.

Both triggers are pure: ``next_after(dt)`` maps an aware instant to the next firing
instant (always in UTC, so it can key a firing claim) with no clock reads. Parsing
and iteration are croniter's job, imported on first use so ``import chongming_task``
does not load it. This module adds what croniter leaves open: six fields with
seconds *first* (Go ``cron.WithSeconds()``), Go's ``@every <duration>``, strict
validation, and a DST policy chosen per trigger (``dst=``):

``dst="default"`` -- this library's own rule (the default):

1. Intervals (``@every``, :class:`IntervalTrigger`) count elapsed seconds; DST does
   not exist for them (under every policy).
2. A cron expression whose hour field is exactly ``*`` (``@hourly``, ``*/5 * * * *``)
   follows elapsed time: wall-clock times skipped by a spring-forward do not fire,
   and the repeated hour of a fall-back fires in both passes (it is another real
   hour).
3. Every other cron expression names wall-clock hours: a time that does not exist
   (spring-forward) fires once, at the first instant after the gap (02:30
   Europe/Berlin fires at 03:00 CEST), several such times collapsing into that one
   firing; a time that occurs twice (fall-back) fires once, at its first occurrence.

``dst="skip"`` -- robfig/cron and Temporal: a wall time that does not exist does
not fire; one that occurs twice fires twice, whatever the fields.

``dst="vixie"`` -- cron(8) (Vixie/ISC cron): a "wildcard job" -- one whose minute
*or* hour field starts with ``*`` (``*/15 2 * * *``, ``0 */2 * * *``, ``@hourly``)
-- follows rule 2; every other job ("fixed-time") follows rule 3. Five fields only:
cron(8) has no seconds.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from chongming_task._public import public
from chongming_task._validation import MAX_SECONDS, check_seconds
from chongming_task.errors import ConfigurationError
from chongming_task.schedule._durations import format_duration, parse_duration
from chongming_task.schedule._expressions import ALLOWED_FORMS, split_cron_tz, validate_fields
from chongming_task.schedule._walltime import next_firing

__all__ = [
    "DST_POLICIES",
    "EPOCH",
    "CronTrigger",
    "DstPolicy",
    "IntervalTrigger",
    "Trigger",
    "load_timezone",
    "make_trigger",
    "validate_dst",
]

DstPolicy = Literal["default", "skip", "vixie"]
#: The DST policies a cron trigger accepts (the module docstring states each rule).
DST_POLICIES: Final[tuple[DstPolicy, ...]] = ("default", "skip", "vixie")


def validate_dst(value: object) -> DstPolicy:
    """``value`` if it names a DST policy.

    Raises:
        ConfigurationError: anything else, with the allowed values.
    """
    for policy in DST_POLICIES:
        if value == policy and isinstance(value, str):
            return policy
    raise ConfigurationError(
        f"dst policy {value!r} is invalid; use 'default' (this library's rule), 'skip' "
        "(robfig/cron and Temporal: a nonexistent time does not fire, a repeated one "
        "fires twice) or 'vixie' (cron(8)'s rule)"
    )


#: Default anchor of interval grids. Every node derives the same firing times from it
#: without coordination, which is what makes (schedule, scheduled time) a usable key.
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def load_timezone(name: str) -> tzinfo:
    """The IANA zone ``name`` (``"UTC"`` needs no tz database).

    Raises:
        ConfigurationError: ``name`` is not a known IANA timezone.
    """
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(f"timezone must be an IANA name such as 'UTC', got {name!r}")
    if name == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ConfigurationError(
            f"timezone {name!r} is not a known IANA timezone; use a name such as "
            "'UTC', 'Europe/Berlin' or 'Asia/Shanghai'"
        ) from exc


def _require_aware(dt: object) -> datetime:
    if not isinstance(dt, datetime) or dt.tzinfo is None or dt.utcoffset() is None:
        raise ConfigurationError(f"next_after needs a timezone-aware datetime, got {dt!r}")
    return dt


@public
@dataclass(frozen=True, slots=True, init=False)
class IntervalTrigger:
    """Fire every ``seconds`` on the grid ``anchor + k * seconds``.

    The grid is absolute, not "``seconds`` after the last run": schedulers on several
    nodes compute identical firing times, and a late run does not shift later ones.
    """

    seconds: int
    """Whole seconds between firings (>= 1)."""
    anchor: datetime
    """An instant on the grid; UTC 1970-01-01 by default."""

    def __init__(self, seconds: float | timedelta, anchor: datetime | None = None) -> None:
        if isinstance(seconds, timedelta):
            seconds = seconds.total_seconds()
        check_seconds(seconds, "interval", maximum=MAX_SECONDS)
        if not seconds >= 1 or seconds != int(seconds):
            raise ConfigurationError(
                f"interval must be a whole number of seconds >= 1, got {seconds!r}"
            )
        anchor = EPOCH if anchor is None else anchor
        if not isinstance(anchor, datetime) or anchor.utcoffset() is None:
            raise ConfigurationError(f"interval anchor must be timezone-aware, got {anchor!r}")
        object.__setattr__(self, "seconds", int(seconds))
        object.__setattr__(self, "anchor", anchor.astimezone(UTC))

    @property
    def kind(self) -> Literal["interval"]:
        return "interval"

    @property
    def pattern(self) -> str:
        """The Go-compatible pattern text, e.g. ``@every 1m30s``."""
        return f"@every {format_duration(self.seconds)}"

    @property
    def timezone(self) -> str:
        return "UTC"

    @property
    def dst(self) -> DstPolicy:
        """Intervals count elapsed seconds: no DST policy applies to them."""
        return "default"

    def next_after(self, dt: datetime) -> datetime:
        """The first grid instant strictly after ``dt``, in UTC (the anchor if later)."""
        step = timedelta(seconds=self.seconds)
        elapsed = _require_aware(dt).astimezone(UTC) - self.anchor
        count = max(0, elapsed // step + 1)
        try:
            return self.anchor + count * step
        except OverflowError as exc:
            raise _no_firing_after(repr(self.pattern), dt) from exc

    def describe(self) -> str:
        return f"every {format_duration(self.seconds)}"


@public
@dataclass(frozen=True, slots=True, init=False)
class CronTrigger:
    """A cron expression read in an IANA timezone (the module docstring states the DST rule).

    ``@every <duration>`` is accepted as well, because the Go scheduler stores
    intervals that way; such a trigger has ``kind == "interval"`` and fires on the
    epoch-anchored grid of :class:`IntervalTrigger`.

    Raises:
        ConfigurationError: the expression or the timezone is invalid; the message
            names the expression and the forms that are allowed.
    """

    expression: str
    timezone: str
    dst: DstPolicy
    _tz: tzinfo = field(repr=False, compare=False)
    _fields: tuple[str, ...] = field(repr=False, compare=False)
    _interval: IntervalTrigger | None = field(repr=False, compare=False)

    def __init__(
        self, expression: str, timezone: str = "UTC", *, dst: DstPolicy = "default"
    ) -> None:
        if not isinstance(expression, str) or not expression.strip():
            raise ConfigurationError(f"cron expression is empty; use {ALLOWED_FORMS}")
        text, timezone = split_cron_tz(" ".join(expression.split()), timezone)
        object.__setattr__(self, "expression", text)
        object.__setattr__(self, "timezone", timezone)
        object.__setattr__(self, "dst", validate_dst(dst))
        object.__setattr__(self, "_tz", load_timezone(timezone))
        interval: IntervalTrigger | None = None
        fields: tuple[str, ...] = ()
        if text.lower().startswith("@every"):
            try:
                interval = IntervalTrigger(parse_duration(text[len("@every") :]))
            except ConfigurationError as exc:
                raise ConfigurationError(f"cron expression {text!r}: {exc}") from exc
        else:
            fields = validate_fields(text)
            if dst == "vixie" and len(fields) == 6:
                raise ConfigurationError(
                    f"cron expression {text!r} has a seconds field, but dst='vixie' is "
                    "cron(8)'s rule and cron(8) has no seconds; use 5 fields or another "
                    "dst policy"
                )
        object.__setattr__(self, "_fields", fields)
        object.__setattr__(self, "_interval", interval)

    @property
    def kind(self) -> Literal["cron", "interval"]:
        return "interval" if self._interval is not None else "cron"

    @property
    def pattern(self) -> str:
        return self.expression

    @property
    def interval(self) -> IntervalTrigger | None:
        """The interval an ``@every`` expression stands for, else ``None``."""
        return self._interval

    @property
    def fields(self) -> tuple[str, ...]:
        """The cron fields (descriptors expanded); empty for ``@every``."""
        return self._fields

    @property
    def wildcard(self) -> bool:
        """cron(8)'s "wildcard job": the minute or the hour field starts with ``*``."""
        if self._interval is not None:
            return True
        minute, hour = self._fields[-5], self._fields[-4]
        return minute.startswith("*") or hour.startswith("*")

    @property
    def follows_elapsed_time(self) -> bool:
        """DST rule 1 or 2 applies (elapsed time) rather than rule 3 (wall clock).

        An interval always; otherwise per policy: ``default`` when the hour field is
        exactly ``*``, ``skip`` always, ``vixie`` for a wildcard job.
        """
        if self._interval is not None or self.dst == "skip":
            return True
        if self.dst == "vixie":
            return self.wildcard
        return self._fields[-4] == "*"

    def next_after(self, dt: datetime) -> datetime:
        """The first firing instant strictly after ``dt``, in UTC."""
        after = _require_aware(dt)
        if self._interval is not None:
            return self._interval.next_after(after)
        try:
            return next_firing(self._fields, self._tz, self.follows_elapsed_time, after)
        except OverflowError as exc:
            raise _no_firing_after(f"cron {self.expression!r}", dt) from exc

    def describe(self) -> str:
        if self._interval is not None:
            return self._interval.describe()
        policy = "" if self.dst == "default" else f", dst={self.dst}"
        return f"cron {self.expression!r} in {self.timezone}{policy}"


def _no_firing_after(pattern: str, dt: datetime) -> ConfigurationError:
    """The error of a trigger whose next firing after ``dt`` is past ``datetime.max``."""
    return ConfigurationError(
        f"no firing of {pattern} after {dt.isoformat()}: it would be beyond the last "
        f"representable instant ({datetime.max.isoformat()})"
    )


Trigger = CronTrigger | IntervalTrigger
"""Either trigger; both offer ``kind``, ``pattern``, ``timezone``, ``next_after``, ``describe``."""


def make_trigger(
    pattern: str,
    timezone: str = "UTC",
    anchor: datetime | None = None,
    dst: DstPolicy = "default",
) -> Trigger:
    """The trigger that a persisted (pattern, timezone, DST policy) describes.

    ``@every`` patterns become an :class:`IntervalTrigger` on ``anchor``'s grid.
    Triggers are immutable, so one is built per distinct triple and then shared: a
    scheduler rebuilds every schedule's trigger on every tick, and parsing a cron
    expression costs more than the rest of the tick's decision.

    Raises:
        ConfigurationError: the pattern or the timezone is invalid.
    """
    for name, value in (("pattern", pattern), ("timezone", timezone)):
        if not isinstance(value, str):
            raise ConfigurationError(f"a schedule's {name} must be a string, got {value!r:.60}")
    return _cached_trigger(pattern, timezone, anchor, dst)


@functools.lru_cache(maxsize=1024)
def _cached_trigger(
    pattern: str, timezone: str, anchor: datetime | None, dst: DstPolicy
) -> Trigger:
    trigger = CronTrigger(pattern, timezone, dst=dst)
    if trigger.interval is not None:
        return IntervalTrigger(trigger.interval.seconds, anchor)
    return trigger
