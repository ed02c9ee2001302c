"""W3 scheduler lateness: a 1 s interval and a per-second cron schedule.

Lateness is (task body start - scheduled time). Both schedules run together for
``w3_seconds_per_round`` seconds per round; over the default 5 rounds that is 20 s of
firings per side. Ours fires through the store's exactly-once claim (``claim_firing``)
on every firing, so the figure includes that write; APScheduler 3 claims nothing.
The run also counts firings, so a missed or doubled firing shows up next to the
percentiles instead of hiding in them.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Mapping
from typing import Any

from harness import ours
from harness.core import Metric, Settings, Target, Variant, Workload
from harness.stats import latency_metrics
from peers.aps_peer import measure_lateness

SCHEDULER = "chongming_task.schedule._scheduler:Scheduler"


class Lateness(Workload):
    """W3."""

    key = "W3"
    title = "Scheduler lateness: 1 s interval + per-second cron"
    description = (
        "Two schedules (interval 1 s, cron every second) run together; lateness = "
        "body start - scheduled time, interval and cron samples pooled per round."
    )
    ratio_metrics = ("p50_ms", "p99_ms", "max_ms")
    metrics = (
        Metric("p50_ms", "ms", False, "p50"),
        Metric("p99_ms", "ms", False, "p99"),
        Metric("max_ms", "ms", False, "max"),
        Metric("fired", "firings", True),
        Metric("expected", "firings", True),
    )
    targets = (
        Target(
            "W3 p99 lateness <= 5 ms (SQLite, exactly-once claim)", "ours-sqlite", "p99_ms", "<=", 5
        ),
    )

    def rounds(self, settings: Settings) -> int:
        return settings.w3_rounds

    def warmup(self, settings: Settings) -> int:
        # Nothing fires before the first aligned second, so a round has no cold start
        # to discard; a warm-up round would only add 4 s per side.
        return 0

    def variants(self, settings: Settings) -> list[Variant]:
        seconds = settings.w3_seconds_per_round
        out = []
        for kind in ("memory", "sqlite"):
            reason = ours.probe(SCHEDULER) or ours.store_probe(kind, settings.postgres_dsn)
            out.append(
                Variant(
                    f"ours-{kind}",
                    f"chongming-task scheduler, {kind} store",
                    lambda kind=kind: _ours(kind, seconds),
                    unavailable=reason,
                )
            )
        out.append(
            Variant(
                "apscheduler",
                "APScheduler 3 BackgroundScheduler (memory job store)",
                lambda: _aps(seconds),
                baseline=True,
            )
        )
        return out


def _summarise(samples: Mapping[str, list[float]], seconds: float) -> dict[str, float]:
    pooled = [s for values in samples.values() for s in values]
    if not pooled:
        raise RuntimeError("no firing observed")
    metrics = latency_metrics(pooled)
    for kind, values in samples.items():  # per schedule, JSON only: which one is late
        if values:
            metrics.update(latency_metrics(values, f"{kind}_"))
    metrics["fired"] = float(len(pooled))
    metrics["expected"] = float(2 * round(seconds))
    return metrics


def _aps(seconds: float) -> Mapping[str, float]:
    return _summarise(measure_lateness(seconds), seconds)


def run_schedules(ctl: Any, scheduler_cls: Any, task: str, begin: float, end: float) -> None:
    """W3's two schedules of ``task`` on ``ctl``, from ``begin`` until ``end`` (epoch s).

    A 1 s interval anchored at ``begin`` and a per-second cron, so both fire at every
    whole second; returns once the scheduler is closed and the runs have ended. Also
    used by ``bench/anatomy.py``, which times the same instants step by step.
    """
    scheduler = scheduler_cls(ctl)
    anchor = dt.datetime.fromtimestamp(begin, dt.UTC)
    scheduler.every(f"{task}-interval", task, 1, anchor=anchor)
    scheduler.cron(f"{task}-cron", task, "* * * * * *")
    scheduler.start()
    try:
        time.sleep(max(0.0, end - time.time()) + 0.3)
    finally:
        scheduler.close()
    ctl.wait_all(timeout=10)


def _ours(kind: str, seconds: float) -> Mapping[str, float]:
    scheduler_cls = ours.require(*SCHEDULER.split(":"))
    starts: dict[str, float] = {}

    def body(ctx: Any) -> None:
        starts[ctx.task_id] = time.time()

    begin = math.floor(time.time()) + 1.0
    end = begin + seconds
    with ours.open_store(kind) as store:
        ctl = ours.controller(store, max_parallel=4, owner="w3-scheduler")
        try:
            ctl.register("w3", body)
            run_schedules(ctl, scheduler_cls, "w3", begin, end)
            samples: dict[str, list[float]] = {"interval": [], "cron": []}
            for task_id, started in starts.items():
                snap = store.get(task_id)
                scheduled = dt.datetime.fromisoformat(snap.metadata["scheduled_at"]).timestamp()
                kind_key = "interval" if snap.metadata["schedule"] == "w3-interval" else "cron"
                if begin <= scheduled < end:
                    samples[kind_key].append(started - scheduled)
        finally:
            ours.close_controller(ctl)
    return _summarise(samples, seconds)
