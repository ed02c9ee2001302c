"""Prometheus collectors computed at scrape time from the store, a controller, a scheduler.

Counters of transitions only know what *this* process saw. "How many tasks are
queued right now?" and "when did the nightly schedule last succeed?" are questions
about the whole fleet, so they are answered from the store on every scrape: a
console process with nothing but a store sees the same numbers as a worker. A scrape
costs ``count_by_status`` plus ``list_schedules`` plus at most one small query per
schedule whose last run did not succeed, plus the work queue's summary
(:func:`~chongming_task.stores._queue_health.queue_health`: the worker registry, the queued
tasks -- at most ``SCAN_LIMIT`` of them -- and the expired leases), the very numbers
``chongming-task health`` and ``workers`` print.

A store failure during a scrape never fails the scrape: ``chongming_store_up`` drops
to 0, ``chongming_scrape_errors_total`` grows, and the store-derived families are
left out of that scrape (absent, rather than a misleading zero).

``prometheus_client`` is only imported by :func:`require_prometheus`, so importing
this module costs nothing when the extra is not installed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from chongming_task.observability._extras import require_extra
from chongming_task.states import TaskStatus
from chongming_task.stores._base import ScheduleStore, TaskQuery, TaskStore

if TYPE_CHECKING:
    from chongming_task.controller import Controller
    from chongming_task.schedule import ScheduleControl, Scheduler

__all__ = [
    "INSTALL_HINT",
    "ControllerCollector",
    "SchedulerCollector",
    "StoreCollector",
    "require_prometheus",
]

log = logging.getLogger("chongming_task.observability")

INSTALL_HINT: Final = 'pip install "chongming-task[prometheus]"'


def require_prometheus() -> Any:
    """The ``prometheus_client.core`` module, or a ``ConfigurationError`` saying what to install."""
    return require_extra(
        "prometheus_client",
        "core",
        f"Prometheus metrics need the prometheus_client package: {INSTALL_HINT}",
    )


class StoreCollector:
    """Fleet-wide gauges read from ``store`` on every scrape (tasks, schedules).

    A store without the schedule part (a tasks-only backend) has no schedule families:
    they are left out, as with ``schedules=False``, and the store is still up.
    """

    def __init__(self, store: TaskStore, *, schedules: bool = True, queue: bool = True) -> None:
        self._core = require_prometheus()
        self.store = store
        self.schedules = schedules
        self.queue = queue
        self._lock = threading.Lock()
        self.scrape_errors = 0
        """Scrapes in which the store failed (also exported)."""

    def describe(self) -> list[Any]:
        # Nothing up front: registering must not query the store.
        return []

    def collect(self) -> Iterator[Any]:
        core = self._core
        families: list[Any] = []
        up = 1
        try:
            families.append(self._tasks())
            if self.schedules and isinstance(self.store, ScheduleStore):
                families.extend(self._schedules())
            if self.queue:
                families.extend(self._queue())
        except Exception as exc:  # a dead store must not turn the scrape into a 500
            up = 0
            with self._lock:
                self.scrape_errors += 1
            log.warning("metrics scrape: the store failed: %s: %s", type(exc).__name__, exc)
            families = []
        yield from families
        yield core.GaugeMetricFamily(
            "chongming_store_up", "1 if the store answered the last scrape's queries.", value=up
        )
        yield core.CounterMetricFamily(
            "chongming_scrape_errors",
            "Scrapes in which the store failed.",
            value=self.scrape_errors,
        )

    def _tasks(self) -> Any:
        counts = self.store.count_by_status()
        family = self._core.GaugeMetricFamily(
            "chongming_tasks", "Tasks in the store by status (the whole fleet).", labels=["status"]
        )
        for status in TaskStatus:
            family.add_metric([status.value], counts.get(status, 0))
        return family

    def _queue(self) -> list[Any]:
        from chongming_task.stores._queue_health import queue_health

        core = self._core
        health = queue_health(self.store)
        label = ["bucket"]
        depth = core.GaugeMetricFamily(
            "chongming_queue_depth",
            "Queued tasks no worker has claimed yet, by bucket ('-': no bucket).",
            labels=label,
        )
        oldest = core.GaugeMetricFamily(
            "chongming_queue_oldest_age_seconds",
            "How long the oldest unclaimed queued task of the bucket has waited.",
            labels=label,
        )
        orphaned = core.GaugeMetricFamily(
            "chongming_queue_bucket_orphaned",
            "1 if the bucket has queued work and no live worker owns it.",
            labels=label,
        )
        for bucket in sorted(health.depth, key=_bucket_order):
            depth.add_metric([bucket], health.depth[bucket])
            oldest.add_metric([bucket], health.oldest_age.get(bucket, 0.0))
            orphaned.add_metric([bucket], 1 if bucket in health.orphaned else 0)
        return [
            depth,
            oldest,
            orphaned,
            core.GaugeMetricFamily(
                "chongming_workers_up",
                "Registered workers heart-beating now.",
                value=len(health.live),
            ),
            core.GaugeMetricFamily(
                "chongming_workers_dead",
                "Registered workers that stopped heart-beating without a clean shutdown.",
                value=len(health.dead),
            ),
            core.GaugeMetricFamily(
                "chongming_lease_expired_tasks",
                "Occupying tasks whose lease expired (the next reconcile marks them lost).",
                value=len(health.expired),
            ),
        ]

    def _schedules(self) -> list[Any]:
        from chongming_task.schedule import ScheduleControl

        core = self._core
        label = ["schedule"]
        last_success = core.GaugeMetricFamily(
            "chongming_schedule_last_success_timestamp_seconds",
            "Unix time at which the schedule's newest succeeded run finished.",
            labels=label,
        )
        failures = core.GaugeMetricFamily(
            "chongming_schedule_consecutive_failures",
            "Failed or lost runs of the schedule since its last success.",
            labels=label,
        )
        next_run = core.GaugeMetricFamily(
            "chongming_schedule_next_run_timestamp_seconds",
            "Unix time of the schedule's next planned firing.",
            labels=label,
        )
        paused = core.GaugeMetricFamily(
            "chongming_schedule_paused", "1 if an operator paused the schedule.", labels=label
        )
        runs = core.CounterMetricFamily(
            "chongming_schedule_runs",
            "Finished runs of the schedule by result (error = failed or lost).",
            labels=["schedule", "result"],
        )
        for record in self.store.list_schedules():
            try:
                control = ScheduleControl.from_dict(record.name, record.data, record.revision)
            except Exception as exc:  # one corrupt record must not hide the others
                log.warning("metrics scrape: schedule %r is unreadable: %s", record.name, exc)
                continue
            name = control.name
            success = self._last_success(control)
            if success is not None:
                last_success.add_metric([name], success)
            failures.add_metric([name], control.consecutive_failures)
            if control.next_run_at is not None and not control.paused:
                next_run.add_metric([name], control.next_run_at.timestamp())
            paused.add_metric([name], 1 if control.paused else 0)
            other = max(0, control.runs - control.errors - control.skips)
            runs.add_metric([name, "error"], control.errors)
            runs.add_metric([name, "skipped"], control.skips)
            runs.add_metric([name, "other"], other)
        return [last_success, failures, next_run, paused, runs]

    def _last_success(self, control: ScheduleControl) -> float | None:
        if control.last_status == TaskStatus.SUCCEEDED.value and control.last_run_at is not None:
            return control.last_run_at.timestamp()
        query = TaskQuery(
            metadata_eq={"schedule": control.name},
            statuses=frozenset({TaskStatus.SUCCEEDED}),
            order="-updated",
            limit=1,
        )
        for snapshot in self.store.query(query):
            return (snapshot.finished_at or snapshot.updated_at).timestamp()
        return None


def _bucket_order(bucket: str) -> tuple[int, int]:
    """Buckets by number, the no-bucket ``"-"`` last."""
    return (1, 0) if not bucket.isdigit() else (0, int(bucket))


class ControllerCollector:
    """This controller's health: persist failures, subscriber errors, slots in use."""

    def __init__(self, controller: Controller) -> None:
        self._core = require_prometheus()
        self.controller = controller

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        core = self._core
        controller = self.controller
        yield core.CounterMetricFamily(
            "chongming_persist_failures",
            "Store writes of this controller that failed (the tasks were not affected).",
            value=controller.persist_failure_count,
        )
        yield core.CounterMetricFamily(
            "chongming_subscriber_errors",
            "Exceptions raised by transition subscribers of this controller.",
            value=controller.subscriber_errors,
        )
        yield core.GaugeMetricFamily(
            "chongming_controller_active_tasks",
            "Runs of this controller holding an execution slot.",
            value=controller.active_count,
        )
        yield core.GaugeMetricFamily(
            "chongming_controller_queued_tasks",
            "Runs of this controller waiting for a slot.",
            value=controller.queued_count,
        )


class SchedulerCollector:
    """The scheduler loop of this process: last tick, store errors, firing claims."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._core = require_prometheus()
        self.scheduler = scheduler

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        core = self._core
        scheduler = self.scheduler
        if scheduler.last_tick_at is not None:
            yield core.GaugeMetricFamily(
                "chongming_scheduler_last_tick_timestamp_seconds",
                "Unix time of this scheduler's last tick.",
                value=scheduler.last_tick_at.timestamp(),
            )
        yield core.GaugeMetricFamily(
            "chongming_scheduler_store_errors",
            "Store failures since this scheduler's last clean tick (0 when healthy).",
            value=scheduler.store_errors,
        )
        claims = core.CounterMetricFamily(
            "chongming_scheduler_claims",
            "Firing claims of this scheduler: won (it fired) or lost (another node did).",
            labels=["result"],
        )
        claims.add_metric(["won"], scheduler.claims_won)
        claims.add_metric(["lost"], scheduler.claims_lost)
        yield claims
