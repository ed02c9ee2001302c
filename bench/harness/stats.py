"""Small, dependency-free statistics for benchmark samples.

The harness reports the median of per-round values (robust against one noisy round)
together with the min and max, so a reader sees the spread and not only a point.
Percentiles use linear interpolation between closest ranks (NumPy's default), which
keeps p99 of a 200-sample round meaningful instead of collapsing onto the maximum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation.

    Raises:
        ValueError: when ``values`` is empty or ``q`` is outside 0..100.
    """
    if not values:
        raise ValueError("percentile of an empty sample")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    """The 50th percentile."""
    return percentile(values, 50.0)


@dataclass(frozen=True)
class Summary:
    """Median, min and max of one metric across the measured rounds."""

    median: float
    min: float
    max: float
    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        """Summarise per-round values (at least one)."""
        return cls(median(values), min(values), max(values), tuple(values))

    def to_dict(self) -> dict[str, object]:
        """JSON form; raw values are kept so a reader can recompute anything."""
        return {
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "values": list(self.values),
        }


def latency_metrics(samples_s: Sequence[float], prefix: str = "") -> dict[str, float]:
    """p50 / p99 / max in milliseconds of latency samples given in seconds."""
    ms = [s * 1000.0 for s in samples_s]
    return {
        f"{prefix}p50_ms": percentile(ms, 50),
        f"{prefix}p99_ms": percentile(ms, 99),
        f"{prefix}max_ms": max(ms),
    }
