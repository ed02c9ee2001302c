"""W2 latency: one no-op task, submit -> result, repeated sequentially.

Each round submits ``w2_samples`` tasks one after another, waiting for each result
before the next submit, and reports p50/p99/max of that round. The report's median is
the median of the per-round percentiles.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness import ours
from harness.core import Metric, Settings, Variant, Workload
from harness.stats import latency_metrics
from peers.huey_peer import HueyOnSqlite

TIMEOUT_S = 30.0

SIDES = (
    ("ours-memory", "memory", None),
    ("ours-sqlite", "sqlite", None),
    ("ours-sqlite-full", "sqlite", "FULL"),
    ("ours-postgres", "postgres", None),
)


def noop(ctx: Any) -> None:
    """The task body."""
    return None


def _bare_noop() -> None:
    return None


class Latency(Workload):
    """W2."""

    key = "W2"
    title = "Latency: one no-op task, submit -> result, sequential"
    description = (
        "A no-op task is submitted and its result awaited, N times in a row; "
        "p50/p99/max of submit -> result per round."
    )
    metrics = (
        Metric("p50_ms", "ms", False, "p50"),
        Metric("p99_ms", "ms", False, "p99"),
        Metric("max_ms", "ms", False, "max"),
    )
    # No target: sub-millisecond figures are this shared machine's noise; the ratios
    # to the thread pool and to Huey are reported.
    targets = ()

    def variants(self, settings: Settings) -> list[Variant]:
        n, dsn = settings.w2_samples, settings.postgres_dsn
        out = []
        for key, kind, sync in SIDES:
            reason = ours.probe(ours.CONTROLLER) or ours.store_probe(kind, dsn)
            label = f"chongming-task Controller, {kind} store"
            out.append(
                Variant(
                    key,
                    label + (f" (synchronous={sync})" if sync else ""),
                    lambda kind=kind, sync=sync: _ours(kind, n, dsn, sync),
                    unavailable=reason,
                )
            )
        out.append(
            Variant(
                "ours-run_task",
                "chongming-task run_task (no store, no controller)",
                lambda: _run_task(n),
                unavailable=ours.probe(ours.RUN_TASK),
            )
        )
        out.append(Variant("threadpool", "ThreadPoolExecutor(2)", lambda: _pool(n), baseline=True))
        for key, sync in (("huey-sqlite", "NORMAL"), ("huey-sqlite-full", "FULL")):
            out.append(
                Variant(
                    key,
                    f"Huey, SqliteHuey file, 2 threads (synchronous={sync})",
                    lambda sync=sync: _huey(n, sync),
                    baseline=True,
                )
            )
        return out

    def comparisons(self, variants: Any) -> list[tuple[str, str]]:
        return [
            ("ours-memory", "threadpool"),
            ("ours-run_task", "threadpool"),
            ("ours-sqlite", "huey-sqlite"),
            ("ours-sqlite-full", "huey-sqlite-full"),
            ("ours-postgres", "huey-sqlite-full"),
        ]


def _ours(kind: str, n: int, dsn: str | None, sync: str | None) -> Mapping[str, float]:
    samples: list[float] = []
    options = {"synchronous": sync} if sync else {}
    with ours.open_store(kind, dsn=dsn, **options) as store:
        ctl = ours.controller(store, max_parallel=2)
        try:
            ctl.register("noop", noop)
            for i in range(n):
                t0 = time.perf_counter()
                run = ctl.submit("noop", task_id=f"w2-{i}")
                outcome = run.wait(timeout=TIMEOUT_S)
                samples.append(time.perf_counter() - t0)
                if not outcome.ok:
                    raise RuntimeError(f"task w2-{i} ended {outcome.status}")
        finally:
            ours.close_controller(ctl)
    return latency_metrics(samples)


def _run_task(n: int) -> Mapping[str, float]:
    run_task = ours.require("chongming_task.run", "run_task")
    samples: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        outcome = run_task(noop)
        samples.append(time.perf_counter() - t0)
        if not outcome.ok:
            raise RuntimeError(f"run_task ended {outcome.status}")
    return latency_metrics(samples)


def _pool(n: int) -> Mapping[str, float]:
    samples: list[float] = []
    with ThreadPoolExecutor(2) as pool:
        for _ in range(n):
            t0 = time.perf_counter()
            pool.submit(_bare_noop).result(timeout=TIMEOUT_S)
            samples.append(time.perf_counter() - t0)
    return latency_metrics(samples)


def _huey(n: int, sync: str) -> Mapping[str, float]:
    samples: list[float] = []
    with tempfile.TemporaryDirectory(prefix="ct-bench-huey-") as tmp:
        peer = HueyOnSqlite(Path(tmp) / "huey.db", workers=2, synchronous=sync)
        try:
            for i in range(n):
                t0 = time.perf_counter()
                peer.task()
                peer.wait_completed(i + 1, TIMEOUT_S)
                samples.append(time.perf_counter() - t0)
        finally:
            peer.close()
    return latency_metrics(samples)
