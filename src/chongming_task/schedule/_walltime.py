"""Cron wall-clock times to real instants, under the scheduler's DST rule.

Cron names local wall-clock times; a firing needs a real instant. Away from an offset
change the mapping is one-to-one and order-preserving, so the next firing is simply
croniter's next local time. Around a change it is not: a spring-forward skips wall
times (a gap) and a fall-back repeats them (a fold). There we reason per side of the
transition instant ``T`` with offsets ``p`` before and ``q`` after it:

- real instants before ``T`` read wall time ``instant + p``;
- real instants from ``T`` on read ``instant + q``;
- spring-forward (``q > p``): wall times in ``[T+p, T+q)`` never happen;
- fall-back (``q < p``): wall times in ``[T+q, T+p)`` happen twice, the second time
  at offset ``q``.

The rule itself is stated in :mod:`chongming_task.schedule._triggers`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from typing import Final, Protocol

from chongming_task.errors import ConfigurationError

__all__ = ["next_firing"]

#: Wider than any real UTC-offset change (Lord Howe's is 30 min, historic ones 2 h),
#: and far narrower than the months between two changes of one zone.
MARGIN: Final = timedelta(hours=3)

#: Local times one search may drop (gap times under the elapsed-time rule) before
#: deciding the expression cannot fire: an hour of a per-second schedule fits easily.
_MAX_DROPS: Final = 100_000

_SECOND: Final = timedelta(seconds=1)


class _Iterator(Protocol):
    def get_next(self, ret_type: type[datetime]) -> datetime: ...


def _candidates(fields: tuple[str, ...], start: datetime) -> _Iterator:
    """croniter over naive wall time, strictly after ``start``."""
    from croniter import croniter

    iterator: _Iterator = croniter(" ".join(fields), start, second_at_beginning=len(fields) == 6)
    return iterator


def _next(iterator: _Iterator) -> datetime:
    from croniter import CroniterBadDateError

    try:
        return iterator.get_next(datetime)
    except CroniterBadDateError as exc:
        raise ConfigurationError(f"cron expression never fires again: {exc}") from exc


def _naive(instant: datetime, offset: timedelta) -> datetime:
    return (instant.astimezone(UTC) + offset).replace(tzinfo=None)


def _utc(naive: datetime, offset: timedelta) -> datetime:
    return (naive - offset).replace(tzinfo=UTC)


def _offset(tz: tzinfo, instant: datetime) -> timedelta:
    value = instant.astimezone(tz).utcoffset()
    assert value is not None
    return value


def instants_of(naive: datetime, tz: tzinfo, *, elapsed: bool) -> list[datetime]:
    """The UTC instants at which wall time ``naive`` fires, in order.

    One instant normally; in a fold both (elapsed rule) or the first (wall rule); in
    a gap none (elapsed rule) or the first instant after the gap (wall rule).
    """
    if tz is UTC:
        return [naive.replace(tzinfo=UTC)]
    first = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if first == second:
        return [first]
    # Naive comparison ignores ``fold``: does the instant read back as this wall time?
    exists = [i for i in (first, second) if i.astimezone(tz).replace(tzinfo=None) == naive]
    if len(exists) == 2:
        ordered = sorted(exists)
        return ordered if elapsed else ordered[:1]
    if exists:  # pragma: no cover - only inconsistent zone data gets here
        return exists
    if elapsed:
        return []
    return [_transition(tz, min(first, second), max(first, second))]


def _transition(tz: tzinfo, before: datetime, after: datetime) -> datetime:
    """The first instant in ``(before, after]`` with ``after``'s offset (bisection to 1 s).

    tz database transitions fall on whole seconds, so one second is exact.
    """
    target = _offset(tz, after)
    low, high = before, after
    while high - low > _SECOND:
        middle = (low + (high - low) / 2).replace(microsecond=0)
        if middle <= low:
            middle = low + _SECOND
        if _offset(tz, middle) == target:
            high = middle
        else:
            low = middle
    return high


def _first_mapped(
    fields: tuple[str, ...], tz: tzinfo, elapsed: bool, start: datetime, after: datetime
) -> datetime:
    """First firing > ``after`` among wall times > ``start``, where order is preserved."""
    iterator = _candidates(fields, start)
    for _ in range(_MAX_DROPS):
        for instant in instants_of(_next(iterator), tz, elapsed=elapsed):
            if instant > after:
                return instant
    raise ConfigurationError(f"cron expression {' '.join(fields)!r} found no firing time")


def next_firing(fields: tuple[str, ...], tz: tzinfo, elapsed: bool, after: datetime) -> datetime:
    """The first firing instant strictly after ``after`` (UTC), under the DST rule.

    Args:
        fields: validated cron fields (5, or 6 with seconds first).
        tz: the zone the expression is read in.
        elapsed: the expression's hour field is ``*`` (DST rule 2) instead of naming
            wall-clock hours (rule 3).
        after: an aware instant.
    """
    after = after.astimezone(UTC)
    p, q = _offset(tz, after - MARGIN), _offset(tz, after + MARGIN)
    if p == q:
        # No change near ``after``: wall order is real order from here on (a later
        # gap or fold is handled by ``instants_of``, which keeps order).
        return _first_mapped(fields, tz, elapsed, _naive(after, _offset(tz, after)), after)
    t = _transition(tz, after - MARGIN, after + MARGIN)
    band_low, band_high = _naive(t, min(p, q)), _naive(t, max(p, q))
    if after < t:
        # Real instants in (after, T) read at offset p, in order (a fold's first pass).
        candidate = _next(_candidates(fields, _naive(after, p)))
        if candidate < _naive(t, p):
            return _utc(candidate, p)
        start = band_low - _SECOND  # whole-second wall times >= band_low
    else:
        start = _naive(after, q)
    if q > p:  # spring-forward: [band_low, band_high) never happens
        if not elapsed and after < t:
            candidate = _next(_candidates(fields, start))
            if candidate < band_high:
                return t  # the first instant after the gap
    elif elapsed:  # fall-back, elapsed rule: the second pass fires too, at offset q
        candidate = _next(_candidates(fields, start))
        if candidate < band_high:
            return _utc(candidate, q)
    # Beyond the band every wall time occurs once, at offset q.
    return _first_mapped(fields, tz, elapsed, max(start, band_high - _SECOND), after)
