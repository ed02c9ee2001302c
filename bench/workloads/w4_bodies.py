"""Task bodies for W4, in an importable module so spawned processes can find them.

Every body has the same shape: mark the beacon, check for a stop, sleep ``PERIOD_S``.
A stop is therefore noticed at the next check; the time from the stop request to
that check is the *floor* (it depends only on the phase of the loop the stop landed
in: half a period on average), and the rest of the latency is what the machinery
costs. The beacon is how the benchmark knows both: it holds the ``time.monotonic()``
of the body's latest checks, in a small file mapped by every process that opens it
(``CLOCK_MONOTONIC``: one clock for every process of the host, on Linux and macOS),
so the stopping side can aim at a chosen phase and, after the stop, read when the
body's first check after the request happened. Marking costs about a microsecond a loop, the
same on every side.
"""

from __future__ import annotations

import itertools
import mmap
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PERIOD_S = 0.01

#: Checks a beacon remembers (16 periods: longer than any stop takes to arrive).
SLOTS = 16
_LAYOUT = struct.Struct(f"{SLOTS}d")
_SLOT = struct.Struct("d")
_OPEN: dict[str, Beacon] = {}


class Beacon:
    """The monotonic times of a body's latest checks, shared through a mapped file.

    A ring of ``SLOTS`` readings: one writer (the body), any number of readers.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._next = 0
        with open(path, "r+b") as file:
            self._map = mmap.mmap(file.fileno(), _LAYOUT.size)

    @classmethod
    def create(cls, path: str | Path) -> Beacon:
        """A new beacon file at ``path`` (no check marked yet)."""
        Path(path).write_bytes(bytes(_LAYOUT.size))
        return cls(str(path))

    @classmethod
    def shared(cls, path: str) -> Beacon:
        """The beacon at ``path``, opened once per process (never closed: no cost on exit)."""
        beacon = _OPEN.get(path)
        if beacon is None:
            beacon = _OPEN[path] = cls(path)
        return beacon

    def mark(self) -> None:
        """Record a check now (the body's side)."""
        _SLOT.pack_into(self._map, self._next * _SLOT.size, time.monotonic())
        self._next = (self._next + 1) % SLOTS

    def latest(self) -> float:
        """The latest check (0.0 before the first)."""
        return max(_LAYOUT.unpack_from(self._map, 0))

    def period(self) -> float:
        """The loop's real period: the median gap between the remembered checks.

        ``PERIOD_S`` plus the sleep's overshoot and the loop's own work; ``PERIOD_S``
        until two checks are known.
        """
        checks = sorted(t for t in _LAYOUT.unpack_from(self._map, 0) if t > 0.0)
        gaps = sorted(b - a for a, b in itertools.pairwise(checks))
        return gaps[len(gaps) // 2] if gaps else PERIOD_S

    def first_after(self, t0: float) -> float | None:
        """The first remembered check at or after ``t0``; ``None`` if there is none."""
        later = [t for t in _LAYOUT.unpack_from(self._map, 0) if t >= t0]
        return min(later) if later else None


def _marker(beacon: str | None) -> Callable[[], None]:
    return (lambda: None) if beacon is None else Beacon.shared(beacon).mark


def checkpoint_loop(ctx: Any, beacon: str | None = None) -> None:
    """Ours: loop on ``ctx.checkpoint()`` + sleep until stopped."""
    mark = _marker(beacon)
    while True:
        mark()
        ctx.checkpoint()
        time.sleep(PERIOD_S)


def event_loop(stop: Any, entered: Any, beacon: str | None = None) -> None:
    """Baseline: the same loop on a bare Event (threading or multiprocessing)."""
    mark = _marker(beacon)
    entered.set()
    while True:
        mark()
        if stop.is_set():
            return
        time.sleep(PERIOD_S)
