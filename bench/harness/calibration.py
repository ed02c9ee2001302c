"""How fast the machine ran Python during a benchmark run: its *phase*, measured.

On a shared VM one build measures up to twice as slow from one hour to the next
(docs/performance.md: a bare thread pool read 0.017, 0.0206 and 0.0435 ms in W2 in
three sessions). The ratios to baselines measured in the same run survive that; the
absolute targets do not. So a run measures one fixed piece of Python before and after
its workloads, and the report shows it beside the figures and against the previous
result in the same directory: a reader can tell a slower build from a slower hour.

The piece is W1's bare semantics from ``bench/floor.py`` (a 26-field snapshot copied
per transition, records, a store under a lock) run one task at a time on one thread
(:func:`floor.one_thread`): the same kind of Python as our per-task path, and no thread
hand-off, so it reads the CPU's speed and not where the OS placed the threads. The
cyclic garbage collector is paused during a round (collected before it) so that a
collection landing in one round and not another does not read as a change of speed.
"""

from __future__ import annotations

import gc
import json
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import floor

__all__ = ["UNIT", "Calibration", "compare", "measure", "previous_calibration"]

UNIT = "µs per task, W1's bare semantics on one thread (bench/floor.py one_thread)"


@dataclass(frozen=True)
class Calibration:
    """Median, lowest and highest of ``rounds`` rounds of ``tasks`` tasks each."""

    median_us: float
    low_us: float
    high_us: float
    rounds: int
    tasks: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Calibration:
        return cls(
            median_us=float(data["median_us"]),
            low_us=float(data["low_us"]),
            high_us=float(data["high_us"]),
            rounds=int(data["rounds"]),
            tasks=int(data["tasks"]),
        )

    def describe(self) -> str:
        return f"{self.median_us:.1f} µs a task ({self.low_us:.1f}–{self.high_us:.1f})"


def measure(*, tasks: int = 2000, rounds: int = 5) -> Calibration:
    """Run the calibration: one warm-up round of a tenth, then ``rounds`` rounds."""
    if tasks < 1 or rounds < 1:
        raise ValueError(f"tasks and rounds must be positive, got {tasks} and {rounds}")
    floor.one_thread(max(1, tasks // 10))
    figures = [_round(tasks) for _ in range(rounds)]
    return Calibration(
        median_us=round(statistics.median(figures), 2),
        low_us=round(min(figures), 2),
        high_us=round(max(figures), 2),
        rounds=rounds,
        tasks=tasks,
    )


def _round(tasks: int) -> float:
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        return floor.one_thread(tasks)
    finally:
        if enabled:
            gc.enable()


def previous_calibration(path: Path) -> tuple[str, Calibration] | None:
    """The start time and starting calibration of the result file at ``path``, if any.

    Anything missing or unreadable (no file, another schema, a run from before
    calibrations were recorded, a file cut short) gives ``None``: the comparison is a
    reading aid, and a new run must never fail over the file it replaces.
    """
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        found = Calibration.from_json(record["calibration"]["start"])
        started_at = str(record["started_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (started_at, found) if found.median_us > 0 else None


def compare(now: Calibration, previous: tuple[str, Calibration] | None) -> str:
    """``now`` against the previous run, in words (slower or faster, by how much)."""
    if previous is None:
        return "no earlier calibrated result in this directory to compare with"
    started_at, before = previous
    ratio = now.median_us / before.median_us
    if abs(ratio - 1) < 0.05:
        speed = "about as fast as"
    elif ratio > 1:
        speed = f"{ratio:.2f}× slower than"
    else:
        speed = f"{1 / ratio:.2f}× faster than"
    sizes = ""
    if (now.tasks, now.rounds) != (before.tasks, before.rounds):
        sizes = (
            f"; measured with {now.tasks:,} tasks × {now.rounds} rounds against "
            f"{before.tasks:,} × {before.rounds} (a --quick run and a full one)"
        )
    return f"{speed} the previous result here ({before.median_us:.1f} µs, run {started_at}){sizes}"
