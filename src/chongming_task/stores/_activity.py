"""What the store's charts say: activity over a window of time (``TaskRecordStore.activity``).

One rule for every store, written once here: a window ``[since, until)`` cut into
slots of ``step``; per slot, the transitions into ``running`` (*started*: every
attempt's start, a resumed task's included), into ``succeeded`` (*succeeded*) and into
``failed`` or ``lost`` (*failed*), counted from the stored history; per task name, the
median and 95th percentile of how long the most recent finished tasks ran; and the
queue depth per task bucket now (queued tasks nobody holds).

Durations are a bounded sample, the same on every store: the ``DURATION_SAMPLE`` most
recently finished tasks of the window (succeeded or failed, finished inside it), each
``finished_at - started_at`` of its last attempt. Percentiles are nearest-rank over
that sample (the value at rank ``ceil(q * n)``, so p95 of 20 values is the 19th), which
an operator can check by hand; a window with more finished tasks than the sample
describes its most recent ones, and says how many it read (``sampled``).

The SQL stores count the slots in SQL over an index range of the transitions
(``ct_transitions_at``) and read the sample through ``ct_tasks_updated``; the default
of the abstract store and the in-memory store apply the same rule in Python.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from chongming_task.errors import ConfigurationError
from chongming_task.states import TaskStatus

__all__ = [
    "CHARTED",
    "DURATION_SAMPLE",
    "FINISHED",
    "MAX_SLOTS",
    "SERIES",
    "Activity",
    "ActivitySlot",
    "DurationStats",
    "build_activity",
    "check_window",
    "percentile",
    "slot_of",
    "tally",
]

#: The series of a chart, in drawing order.
SERIES: Final = ("started", "succeeded", "failed")
#: Which series a transition into each status counts in.
CHARTED: Final[Mapping[TaskStatus, str]] = {
    TaskStatus.RUNNING: "started",
    TaskStatus.SUCCEEDED: "succeeded",
    TaskStatus.FAILED: "failed",
    TaskStatus.LOST: "failed",
}
#: Statuses whose tasks' durations are sampled (they ran to an end).
FINISHED: Final = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})
#: Finished tasks read for the durations, most recent first.
DURATION_SAMPLE: Final = 5_000
#: The most slots one window may have (a day of minutes).
MAX_SLOTS: Final = 1_440


@dataclass(frozen=True, slots=True)
class ActivitySlot:
    """One slot of the window: ``[start, start + step)``."""

    start: datetime
    started: int = 0
    succeeded: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class DurationStats:
    """How long one task name's sampled tasks ran, in seconds."""

    name: str
    count: int
    p50: float
    p95: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Activity:
    """The answer of ``TaskRecordStore.activity``."""

    since: datetime
    until: datetime
    step: timedelta
    slots: tuple[ActivitySlot, ...]
    durations: tuple[DurationStats, ...]
    """Per task name (sorted by name)."""
    sampled: int
    """Finished tasks the durations were computed from (at most ``DURATION_SAMPLE``)."""
    queued: tuple[tuple[int | None, int], ...]
    """``(bucket, queued tasks nobody holds)`` now, by bucket (``None``: no bucket) first."""

    def totals(self) -> dict[str, int]:
        """Each series summed over the window."""
        return {name: sum(getattr(slot, name) for slot in self.slots) for name in SERIES}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (instants as ISO-8601, durations and step in seconds)."""
        return {
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "step_seconds": self.step.total_seconds(),
            "series": list(SERIES),
            "slots": [
                {
                    "start": s.start.isoformat(),
                    "started": s.started,
                    "succeeded": s.succeeded,
                    "failed": s.failed,
                }
                for s in self.slots
            ],
            "totals": self.totals(),
            "durations": [
                {"name": d.name, "count": d.count, "p50_seconds": d.p50, "p95_seconds": d.p95}
                for d in self.durations
            ],
            "durations_sampled": self.sampled,
            "durations_sample_limit": DURATION_SAMPLE,
            "queued": [{"bucket": b, "queued": n} for b, n in self.queued],
        }


def check_window(since: object, until: object, step: object) -> int:
    """The number of slots of ``[since, until)`` by ``step``; refuses a window no chart has.

    Raises:
        ConfigurationError: ``since``/``until`` not aware datetimes, ``until`` not after
            ``since``, ``step`` not a timedelta of at least one second, the window not a
            whole number of steps, or more than ``MAX_SLOTS`` slots.
    """
    start, end = _aware("since", since), _aware("until", until)
    if not isinstance(step, timedelta) or step < timedelta(seconds=1):
        raise ConfigurationError(f"activity: step must be a timedelta of 1 s or more, got {step!r}")
    if end <= start:
        raise ConfigurationError(f"activity: until ({end}) must be after since ({start})")
    slots, rest = divmod(end - start, step)
    if rest or slots > MAX_SLOTS:
        raise ConfigurationError(
            f"activity: the window must be a whole number of steps, at most {MAX_SLOTS} "
            f"(got {end - start} by {step}); widen the step or shorten the window"
        )
    return slots


def _aware(name: str, value: object) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ConfigurationError(
            f"activity: {name} must be a timezone-aware datetime, got {value!r}"
        )
    return value


def slot_of(at: datetime, since: datetime, until: datetime, step: timedelta) -> int | None:
    """The slot ``at`` falls in, or ``None`` outside ``[since, until)``."""
    if not since <= at < until:
        return None
    return (at - since) // step


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending, non-empty list (``q`` in ``(0, 1]``)."""
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def build_activity(
    *,
    since: datetime,
    until: datetime,
    step: timedelta,
    counts: Mapping[tuple[int, str], int],
    finished: Iterable[tuple[str, datetime | None, datetime | None]],
    queued: Mapping[int | None, int],
) -> Activity:
    """The answer from what a store read.

    Args:
        counts: ``(slot, series) -> transitions``; slots outside the window are ignored.
        finished: ``(name, started_at, finished_at)`` of the sampled finished tasks,
            most recent first; the first ``DURATION_SAMPLE`` that finished inside the
            window and have both instants are used.
        queued: Queued tasks nobody holds, per bucket.
    """
    slots = check_window(since, until, step)
    rows = [
        ActivitySlot(
            since + step * index,
            counts.get((index, "started"), 0),
            counts.get((index, "succeeded"), 0),
            counts.get((index, "failed"), 0),
        )
        for index in range(slots)
    ]
    per_name: dict[str, list[float]] = {}
    sampled = 0
    for name, started_at, finished_at in finished:
        if sampled >= DURATION_SAMPLE:
            break
        if started_at is None or finished_at is None or not since <= finished_at < until:
            continue
        sampled += 1
        per_name.setdefault(name, []).append(max(0.0, (finished_at - started_at).total_seconds()))
    durations = []
    for name in sorted(per_name):
        ordered = sorted(per_name[name])
        durations.append(
            DurationStats(name, len(ordered), percentile(ordered, 0.5), percentile(ordered, 0.95))
        )
    order = sorted(queued.items(), key=lambda item: (item[0] is not None, item[0] or 0))
    return Activity(
        since=since,
        until=until,
        step=step,
        slots=tuple(rows),
        durations=tuple(durations),
        sampled=sampled,
        queued=tuple((bucket, n) for bucket, n in order if n),
    )


def tally(
    transitions: Iterable[tuple[datetime, TaskStatus]],
    since: datetime,
    until: datetime,
    step: timedelta,
) -> Counter[tuple[int, str]]:
    """``(slot, series) -> count`` of ``(at, to_status)`` pairs (the Python stores' count)."""
    counts: Counter[tuple[int, str]] = Counter()
    for at, status in transitions:
        series = CHARTED.get(status)
        if series is None:
            continue
        index = slot_of(at, since, until, step)
        if index is not None:
            counts[index, series] += 1
    return counts
