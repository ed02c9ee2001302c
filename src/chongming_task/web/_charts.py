"""The dashboard's charts: the store's activity (``TaskRecordStore.activity``) drawn as SVG.

Drawn on the server as inline SVG: no script, no style attribute (the CSP allows
neither), only presentation attributes. Every chart is readable without colour: one
series per chart (small multiples, each named in its heading), numbers written beside
the bars, a ``<title>``/``<desc>`` that says what it shows with its totals, and the
same numbers as a table below it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from markupsafe import Markup, escape

from chongming_task.errors import ConfigurationError
from chongming_task.stores._activity import Activity, DurationStats
from chongming_task.stores._base import TaskStore

__all__ = [
    "RANGES",
    "ChartRange",
    "bar_svg",
    "chart_range",
    "duration_svg",
    "queued_svg",
    "seconds_text",
]


@dataclass(frozen=True, slots=True)
class ChartRange:
    """A window the charts offer: ``slots`` slots of ``step`` ending with the current one."""

    key: str
    label: str
    step: timedelta
    slots: int

    def window(self, now: datetime) -> tuple[datetime, datetime]:
        """``(since, until)``: slots aligned on the step (UTC), the last one holds ``now``."""
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        until = epoch + ((now - epoch) // self.step + 1) * self.step
        return until - self.slots * self.step, until

    def activity(self, store: TaskStore, now: datetime) -> Activity:
        since, until = self.window(now)
        return store.activity(since=since, until=until, step=self.step)


#: The windows of ``/charts?range=``: per minute over the last hour, per five minutes
#: over the last day.
RANGES: Final = {
    "hour": ChartRange("hour", "last hour, per minute", timedelta(minutes=1), 60),
    "day": ChartRange("day", "last day, per 5 minutes", timedelta(minutes=5), 288),
}

_WIDTH: Final = 720
_HEIGHT: Final = 120
_PAD_LEFT: Final = 48
_PAD_BOTTOM: Final = 20
_PAD_TOP: Final = 16
_INK: Final = "#1f2937"
_BAR: Final = "#2d5b8a"


def chart_range(raw: str | None) -> ChartRange:
    """The range named by ``?range=`` (default ``hour``).

    Raises:
        ConfigurationError: Another name (the dashboard answers 400).
    """
    key = raw or "hour"
    found = RANGES.get(key)
    if found is None:
        raise ConfigurationError(f"range must be one of {', '.join(RANGES)}, got {key[:40]!r}")
    return found


def _time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%H:%M")


def _svg_open(chart_id: str, title: str, desc: str, height: int) -> str:
    return (
        f'<svg class="chart" id="{chart_id}" viewBox="0 0 {_WIDTH} {height}" '
        f'width="100%" role="img" aria-labelledby="{chart_id}-t" aria-describedby="{chart_id}-d" '
        f'xmlns="http://www.w3.org/2000/svg">'
        f'<title id="{chart_id}-t">{escape(title)}</title>'
        f'<desc id="{chart_id}-d">{escape(desc)}</desc>'
    )


def bar_svg(activity: Activity, series: str, *, label: str) -> Markup:
    """One series over the window: a bar per slot, the axis and peak written as text."""
    values = [getattr(slot, series) for slot in activity.slots]
    peak = max(values, default=0)
    total = sum(values)
    chart_id = f"chart-{series}"
    first, last = activity.slots[0].start, activity.until
    title = f"{label}: {total} in the window, at most {peak} per slot"
    desc = (
        f"{label} per {int(activity.step.total_seconds() // 60)} minute(s) from "
        f"{_time(first)} to {_time(last)} UTC; the table below lists every slot with a value."
    )
    inner_w = _WIDTH - _PAD_LEFT - 8
    inner_h = _HEIGHT - _PAD_TOP - _PAD_BOTTOM
    width = inner_w / max(1, len(values))
    parts = [_svg_open(chart_id, title, desc, _HEIGHT)]
    base_y = _PAD_TOP + inner_h
    parts.append(
        f'<line x1="{_PAD_LEFT}" y1="{base_y}" x2="{_WIDTH - 8}" y2="{base_y}" '
        f'stroke="{_INK}" stroke-width="1"/>'
    )
    parts.append(
        f'<text x="{_PAD_LEFT - 4}" y="{_PAD_TOP + 4}" text-anchor="end" font-size="11" '
        f'fill="{_INK}">{peak}</text>'
        f'<text x="{_PAD_LEFT - 4}" y="{base_y}" text-anchor="end" font-size="11" '
        f'fill="{_INK}">0</text>'
    )
    for index, value in enumerate(values):
        if not value:
            continue
        height = inner_h * value / peak
        x = _PAD_LEFT + index * width
        start = activity.slots[index].start
        parts.append(
            f'<rect x="{x:.1f}" y="{base_y - height:.1f}" width="{max(1.0, width - 1):.1f}" '
            f'height="{height:.1f}" fill="{_BAR}">'
            f"<title>{_time(start)}: {value}</title></rect>"
        )
    parts.append(
        f'<text x="{_PAD_LEFT}" y="{_HEIGHT - 4}" font-size="11" fill="{_INK}">'
        f"{_time(first)}</text>"
        f'<text x="{_WIDTH - 8}" y="{_HEIGHT - 4}" text-anchor="end" font-size="11" '
        f'fill="{_INK}">{_time(last)} UTC</text>'
    )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 (every text above is escaped or a number)


def seconds_text(value: float) -> str:
    """A duration for people: ms under a second, s under two minutes, then min."""
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"


def duration_svg(durations: tuple[DurationStats, ...]) -> Markup:
    """p50 (filled bar) and p95 (outlined bar) per task name, each value written."""
    row = 34
    height = _PAD_TOP + row * max(1, len(durations)) + 4
    longest = max((d.p95 for d in durations), default=0.0) or 1.0
    names = ", ".join(
        f"{d.name} p50 {seconds_text(d.p50)} p95 {seconds_text(d.p95)}" for d in durations
    )
    parts = [
        _svg_open(
            "chart-durations",
            "Duration per task name: p50 and p95",
            names or "No task finished in the window.",
            height,
        )
    ]
    left = 200
    inner_w = _WIDTH - left - 110
    for index, d in enumerate(durations):
        y = _PAD_TOP + index * row
        p50_w = inner_w * d.p50 / longest
        p95_w = inner_w * d.p95 / longest
        parts.append(
            f'<text x="{left - 6}" y="{y + 16}" text-anchor="end" font-size="12" '
            f'fill="{_INK}">{escape(d.name[:30])}</text>'
            f'<rect x="{left}" y="{y}" width="{max(1.0, p50_w):.1f}" height="12" fill="{_BAR}"/>'
            f'<text x="{left + max(1.0, p50_w) + 4:.1f}" y="{y + 10}" font-size="11" '
            f'fill="{_INK}">p50 {seconds_text(d.p50)}</text>'
            f'<rect x="{left}" y="{y + 14}" width="{max(1.0, p95_w):.1f}" height="12" '
            f'fill="none" stroke="{_BAR}" stroke-width="1.5" stroke-dasharray="4 2"/>'
            f'<text x="{left + max(1.0, p95_w) + 4:.1f}" y="{y + 24}" font-size="11" '
            f'fill="{_INK}">p95 {seconds_text(d.p95)}</text>'
        )
    if not durations:
        parts.append(
            f'<text x="{left}" y="{_PAD_TOP + 12}" font-size="12" fill="{_INK}">'
            "No task finished in the window.</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 (every text above is escaped or a number)


def queued_svg(queued: tuple[tuple[int | None, int], ...]) -> Markup:
    """Queued tasks nobody holds, per task bucket: a bar per bucket with its count."""
    row = 18
    height = _PAD_TOP + row * max(1, len(queued)) + 4
    deepest = max((n for _, n in queued), default=0) or 1
    described = ", ".join(f"bucket {'none' if b is None else b}: {n}" for b, n in queued)
    parts = [
        _svg_open(
            "chart-queued",
            "Queue depth per bucket (queued tasks nobody holds)",
            described or "Nothing is queued.",
            height,
        )
    ]
    left = 120
    inner_w = _WIDTH - left - 80
    for index, (bucket, count) in enumerate(queued):
        y = _PAD_TOP + index * row
        width = inner_w * count / deepest
        name = "no bucket" if bucket is None else f"bucket {bucket}"
        parts.append(
            f'<text x="{left - 6}" y="{y + 11}" text-anchor="end" font-size="12" '
            f'fill="{_INK}">{name}</text>'
            f'<rect x="{left}" y="{y}" width="{max(1.0, width):.1f}" height="13" fill="{_BAR}"/>'
            f'<text x="{left + max(1.0, width) + 4:.1f}" y="{y + 11}" font-size="11" '
            f'fill="{_INK}">{count}</text>'
        )
    if not queued:
        parts.append(
            f'<text x="{left}" y="{_PAD_TOP + 12}" font-size="12" fill="{_INK}">'
            "Nothing is queued.</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 (every text above is escaped or a number)
