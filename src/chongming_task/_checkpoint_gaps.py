"""How long a task body goes between checkpoints, and what that means for stop and ``idle``.

A stop lands at the body's next ``checkpoint()``. If the body sometimes runs 2 s
between checkpoints and the graceful window is 1 s, a stop that arrives at the wrong
moment misses the window and the run ends ``lost``; an ``idle`` timeout shorter than
the longest healthy gap fires on a run that is fine. Both are properties of the task
*definition*, visible long before the night they bite, so the runtime counts the gaps:

- :class:`GapRecorder` (runtime side): a few counters per run, one increment per
  checkpoint; the time paused inside a checkpoint is not a gap.
- :class:`CheckpointGaps` (a frozen value): the counts, persisted with the run's
  side channel (``TaskSnapshot.checkpoint_gaps``, ``store.touch``), never moving
  ``status_version``; merged per task name for ``chongming-task tasks --checkpoints``.
- :func:`forecast`: pure, p50/p99/max against ``graceful_stop`` and ``idle``, with
  the share of stops that would miss the window.

An ``async def`` body adds one more count: its *loop blocks*, steps that held the
shared event loop for the blocking threshold or longer without awaiting (see
``runtime/executors/_loop.py``). They are not gaps (a body may block and then reach a
checkpoint at once); they stall every other async task of the process, so the profile
keeps how many there were and the longest, and the forecast warns about them.

Quantiles come from fixed buckets, so they are upper estimates: the top of the
bucket holding the quantile, never above the largest gap seen.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from chongming_task.errors import ConfigurationError, StoreError

__all__ = [
    "BOUNDS",
    "FAST_GAP",
    "CheckpointGaps",
    "GapForecast",
    "GapRecorder",
    "forecast",
    "format_seconds",
    "merge_gaps",
]

#: Upper edges (seconds) of the gap buckets; one more bucket holds everything above.
#: Roughly 1-2-5 per decade: two buckets apart is at most a factor of five, which is
#: as fine as "will a stop land in a 5 s window" needs.
BOUNDS: Final = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    20.0,
    50.0,
    100.0,
    200.0,
    500.0,
    1000.0,
    3600.0,
)
_BUCKETS: Final = len(BOUNDS) + 1
#: Gaps shorter than this (the first bucket) are counted with one increment.
FAST_GAP: Final = BOUNDS[0]
#: A forecast warns when more stops than this would miss the graceful window.
MISS_WARN_SHARE: Final = 0.01
#: ...and when healthy gaps reach this share of ``idle``: a slightly slower day (a
#: busier disk, a colder cache) would make ``idle`` fire on a run that is fine.
IDLE_MARGIN: Final = 0.8
_FORMAT: Final = 1


def format_seconds(value: float) -> str:
    """``0.4ms``, ``250ms``, ``2s``, ``1.5e+03s``: short, for tables and messages."""
    if value < 0.001:
        return f"{value * 1000:.2g}ms"
    if value < 1.0:
        return f"{value * 1000:.3g}ms"
    return f"{value:.3g}s"


class GapRecorder:
    """The mutable counters a run's checkpoints write.

    ``checkpoint()`` does the counting inline, because it is the hot path of every
    task body: ``gap = now - last``; a gap under :data:`FAST_GAP` (the usual case) is
    one integer increment (:attr:`fast`), anything longer goes to :meth:`add_gap`.
    """

    __slots__ = ("counts", "fast", "last", "loop_block_max", "loop_blocks", "max")

    def __init__(self, last: float = 0.0) -> None:
        self.counts = [0] * _BUCKETS
        self.fast = 0
        """Gaps under :data:`FAST_GAP` (the first bucket), counted without their length."""
        self.max = 0.0
        """The longest gap of :data:`FAST_GAP` or more."""
        self.last = last
        """Monotonic time of the last checkpoint (or of the attempt's start)."""
        self.loop_blocks = 0
        """Steps of an ``async def`` body that blocked the event loop (real seconds)."""
        self.loop_block_max = 0.0
        """The longest of them, in seconds."""

    def add_gap(self, gap: float) -> None:
        """Count one gap of ``gap`` seconds (the slow path of ``checkpoint()``)."""
        self.counts[bisect_left(BOUNDS, gap)] += 1
        self.max = max(self.max, gap)

    def add_loop_block(self, seconds: float) -> None:
        """Count one step of ``seconds`` that held the event loop (written on its thread)."""
        self.loop_blocks += 1
        self.loop_block_max = max(self.loop_block_max, seconds)

    @property
    def changes(self) -> int:
        """Gaps and loop blocks counted so far: when it moves, :meth:`freeze` differs."""
        return self.count + self.loop_blocks

    def add(self, counts: Iterable[int], largest: float) -> None:
        """Add counts measured elsewhere (a child process's attempt)."""
        for index, value in enumerate(counts):
            if index < _BUCKETS and value > 0:
                self.counts[index] += value
        self.max = max(self.max, largest)

    @property
    def count(self) -> int:
        return sum(self.counts) + self.fast

    def snapshot_counts(self) -> list[int]:
        """Every bucket's count, the fast gaps in the first."""
        counts = list(self.counts)
        counts[0] += self.fast
        return counts

    def freeze(self) -> CheckpointGaps | None:
        """The counts as a value, or ``None`` before the first gap or loop block.

        When every gap was under :data:`FAST_GAP`, their lengths were not kept and
        ``max`` is that edge: an upper estimate, like the quantiles.
        """
        counts = self.snapshot_counts()
        if not any(counts) and not self.loop_blocks:
            return None
        largest = self.max if self.max > 0.0 or not any(counts) else FAST_GAP
        return CheckpointGaps(
            counts=tuple(counts),
            max=largest,
            loop_blocks=self.loop_blocks,
            loop_block_max=self.loop_block_max,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointGaps:
    """Counts of the gaps between consecutive checkpoints, per :data:`BOUNDS` bucket."""

    counts: tuple[int, ...]
    """One count per bucket: ``counts[i]`` gaps were at most ``BOUNDS[i]`` seconds (and
    above the previous edge); the last bucket holds the gaps above ``BOUNDS[-1]``."""
    max: float
    """The longest gap seen, in seconds."""
    loop_blocks: int = 0
    """Steps of an ``async def`` body that held the event loop for the blocking
    threshold or longer without awaiting (0 for a plain ``def`` task)."""
    loop_block_max: float = 0.0
    """The longest of those steps, in seconds (0.0: none)."""

    def __post_init__(self) -> None:
        counts = tuple(self.counts)
        if len(counts) != _BUCKETS or any(
            isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in counts
        ):
            raise ConfigurationError(
                f"CheckpointGaps.counts must be {_BUCKETS} integers >= 0, got {self.counts!r}"
            )
        value = self.max
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise ConfigurationError(
                f"CheckpointGaps.max must be a finite number >= 0, got {value!r}"
            )
        blocks, longest = self.loop_blocks, self.loop_block_max
        if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 0:
            raise ConfigurationError(
                f"CheckpointGaps.loop_blocks must be an integer >= 0, got {blocks!r}"
            )
        if (
            isinstance(longest, bool)
            or not isinstance(longest, int | float)
            or not math.isfinite(longest)
            or longest < 0
        ):
            raise ConfigurationError(
                f"CheckpointGaps.loop_block_max must be a finite number >= 0, got {longest!r}"
            )
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "max", float(value))
        object.__setattr__(self, "loop_block_max", float(longest))

    @property
    def count(self) -> int:
        """How many gaps were measured."""
        return sum(self.counts)

    def quantile(self, q: float) -> float | None:
        """An upper estimate of the ``q`` quantile (0 < q <= 1); ``None`` without gaps."""
        total = self.count
        if not total:
            return None
        rank = max(1, math.ceil(q * total))
        seen = 0
        for index, value in enumerate(self.counts):
            seen += value
            if seen >= rank:
                return self._top(index)
        return self.max

    @property
    def p50(self) -> float | None:
        return self.quantile(0.5)

    @property
    def p99(self) -> float | None:
        return self.quantile(0.99)

    def _top(self, index: int) -> float:
        """The representative (largest possible) gap of bucket ``index``."""
        if index >= len(BOUNDS):
            return self.max
        return min(BOUNDS[index], self.max)

    def miss_share(self, window: float) -> float:
        """The share of stops, arriving at a random moment, that would miss ``window``.

        A stop that arrives inside a gap of length ``g`` lands when the gap ends, so
        it misses the window when more than ``window`` of the gap is left: a share
        ``(g - window) / g`` of that gap's time. Weighted by time over every gap, each
        bucket counted at its largest possible gap (an upper estimate).
        """
        busy = missed = 0.0
        for index, value in enumerate(self.counts):
            if not value:
                continue
            gap = self._top(index)
            busy += value * gap
            missed += value * max(0.0, gap - window)
        return 0.0 if busy <= 0.0 else missed / busy

    def merged(self, other: CheckpointGaps) -> CheckpointGaps:
        return CheckpointGaps(
            counts=tuple(a + b for a, b in zip(self.counts, other.counts, strict=True)),
            max=max(self.max, other.max),
            loop_blocks=self.loop_blocks + other.loop_blocks,
            loop_block_max=max(self.loop_block_max, other.loop_block_max),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a format version; :meth:`from_dict` reverses it.

        The loop-block keys appear only when there were blocks, so a plain task's
        document is what it always was (and older readers ignore the keys).
        """
        data: dict[str, Any] = {"v": _FORMAT, "counts": list(self.counts), "max": self.max}
        if self.loop_blocks:
            data["loop_blocks"] = self.loop_blocks
            data["loop_block_max"] = self.loop_block_max
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckpointGaps:
        """Rebuild from :meth:`to_dict` output; anything malformed raises ``StoreError``."""
        if not isinstance(data, Mapping):
            raise StoreError(f"corrupt checkpoint gaps: expected an object, got {data!r:.80}")
        version = data.get("v", _FORMAT)
        if not isinstance(version, int) or version > _FORMAT:
            raise StoreError(
                f"checkpoint gaps were written in format version {version!r}, newer than "
                f"this library understands ({_FORMAT}); upgrade chongming-task"
            )
        try:
            return cls(
                counts=tuple(data["counts"]),
                max=data["max"],
                loop_blocks=data.get("loop_blocks", 0),
                loop_block_max=data.get("loop_block_max", 0.0),
            )
        except (KeyError, TypeError, ConfigurationError) as exc:
            raise StoreError(f"corrupt checkpoint gaps {dict(data)!r:.120}: {exc}") from exc


def merge_gaps(items: Iterable[CheckpointGaps | None]) -> CheckpointGaps | None:
    """The sum of several runs' gaps (``None`` entries skipped; ``None`` if all are)."""
    total: CheckpointGaps | None = None
    for item in items:
        if item is not None:
            total = item if total is None else total.merged(item)
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class GapForecast:
    """What the measured gaps say about a stop's graceful window and the idle timeout."""

    gaps: int
    """How many gaps were measured."""
    p50: float
    p99: float
    max: float
    graceful_stop: float | None
    """The graceful window the forecast is for (``None``: not known here)."""
    idle: float | None
    """The ``idle`` timeout of the task (``None``: none, or not known here)."""
    stop_miss_share: float | None
    """Estimated share of stops that would not land within ``graceful_stop``."""
    stop_warning: bool
    """A stop would likely not land in the window, so the run would end ``lost``."""
    idle_warning: bool
    """``idle`` would fire on a healthy run: gaps of 80% of it or more were seen."""
    loop_blocks: int = 0
    """Steps of the ``async def`` body that blocked the event loop (see :class:`CheckpointGaps`)."""
    loop_block_max: float = 0.0

    @property
    def loop_warning(self) -> bool:
        """The body blocked the shared event loop at least once."""
        return self.loop_blocks > 0

    @property
    def warnings(self) -> list[str]:
        found = []
        if self.stop_warning and self.graceful_stop is not None:
            share = self.stop_miss_share or 0.0
            found.append(
                f"a stop would likely not land in the {self.graceful_stop:g}s graceful "
                f"window (about {share:.0%} of stops would miss it and end lost): "
                f"checkpoint gaps reach p99 {format_seconds(self.p99)}, max "
                f"{format_seconds(self.max)}; checkpoint more often or widen graceful_stop"
            )
        if self.idle_warning and self.idle is not None:
            found.append(
                f"the idle timeout of {self.idle:g}s could fire on a healthy run: gaps "
                f"between checkpoints reach p99 {format_seconds(self.p99)}, max "
                f"{format_seconds(self.max)}; raise idle above the longest healthy gap or "
                "checkpoint more often"
            )
        if self.loop_warning:
            found.append(
                f"the async def body blocked the event loop {self.loop_blocks} time(s), the "
                f"longest {format_seconds(self.loop_block_max)}: every async task of its "
                "process waited meanwhile; move blocking calls off the loop "
                "(await asyncio.to_thread(...)) or make the task a plain def"
            )
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            "gaps": self.gaps,
            "p50": self.p50,
            "p99": self.p99,
            "max": self.max,
            "graceful_stop": self.graceful_stop,
            "idle": self.idle,
            "stop_miss_share": self.stop_miss_share,
            "stop_warning": self.stop_warning,
            "idle_warning": self.idle_warning,
            "loop_blocks": self.loop_blocks,
            "loop_block_max": self.loop_block_max,
            "warnings": self.warnings,
        }


def forecast(
    gaps: CheckpointGaps, *, graceful_stop: float | None, idle: float | None
) -> GapForecast:
    """Judge measured gaps against a graceful window and an idle timeout (pure).

    The stop warning fires when more than 1% of stops would miss the window; the idle
    warning when the p99 or the longest gap reaches 80% of ``idle``.
    """
    p50 = gaps.p50 or 0.0
    p99 = gaps.p99 or 0.0
    share = None if graceful_stop is None else gaps.miss_share(graceful_stop)
    return GapForecast(
        gaps=gaps.count,
        p50=p50,
        p99=p99,
        max=gaps.max,
        graceful_stop=graceful_stop,
        idle=idle,
        stop_miss_share=share,
        stop_warning=share is not None and share > MISS_WARN_SHARE,
        idle_warning=idle is not None and max(p99, gaps.max) >= IDLE_MARGIN * idle,
        loop_blocks=gaps.loop_blocks,
        loop_block_max=gaps.loop_block_max,
    )
