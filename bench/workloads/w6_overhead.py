"""W6 overhead: tasks doing 1 ms of CPU work, ours end-to-end vs a bare thread pool.

The body spins for 1 ms (CPU work holds the GIL, so every microsecond the control
machinery spends in Python shows up in wall time instead of hiding behind a sleep).
N tasks go through 2 slots on each side; the ratio ours ÷ pool of the elapsed time is
what supervision, the state machine and the store cost a user per unit of real work.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from harness import ours
from harness.core import Metric, Settings, Variant, Workload

WORK_S = 0.001
SLOTS = 2
TIMEOUT_S = 120.0


def spin(seconds: float = WORK_S) -> None:
    """Busy-wait ``seconds`` (the 'work')."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def work(ctx: Any) -> None:
    """Our task body: 1 ms of work."""
    spin()


class Overhead(Workload):
    """W6."""

    key = "W6"
    title = "Overhead: 1 ms of CPU work per task, ours end-to-end vs bare thread pool"
    description = (
        "N tasks of 1 ms busy work through 2 slots; elapsed time from first submit to "
        "last result, and per task."
    )
    ratio_metrics = ("seconds",)
    metrics = (Metric("seconds", "s", False), Metric("us_per_task", "µs/task", False, "per task"))

    def variants(self, settings: Settings) -> list[Variant]:
        n = settings.w6_tasks
        out = []
        for kind in ("memory", "sqlite"):
            reason = ours.probe(ours.CONTROLLER) or ours.store_probe(kind, settings.postgres_dsn)
            out.append(
                Variant(
                    f"ours-{kind}",
                    f"chongming-task Controller, {kind} store",
                    lambda kind=kind: _ours(kind, n),
                    unavailable=reason,
                )
            )
        out.append(
            Variant(
                "threadpool", "ThreadPoolExecutor(2), same body", lambda: _pool(n), baseline=True
            )
        )
        return out


def _metrics(n: int, elapsed: float) -> Mapping[str, float]:
    return {"seconds": elapsed, "us_per_task": elapsed / n * 1e6}


def _ours(kind: str, n: int) -> Mapping[str, float]:
    with ours.open_store(kind) as store:
        ctl = ours.controller(store, max_parallel=SLOTS)
        try:
            ctl.register("work", work)
            t0 = time.perf_counter()
            for i in range(n):
                ctl.submit("work", task_id=f"w6-{i}")
            ctl.wait_all(timeout=TIMEOUT_S)
            elapsed = time.perf_counter() - t0
        finally:
            ours.close_controller(ctl)
    return _metrics(n, elapsed)


def _pool(n: int) -> Mapping[str, float]:
    with ThreadPoolExecutor(SLOTS) as pool:
        t0 = time.perf_counter()
        wait([pool.submit(spin) for _ in range(n)])
        elapsed = time.perf_counter() - t0
    return _metrics(n, elapsed)
