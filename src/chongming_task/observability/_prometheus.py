"""Prometheus metrics for a controller: an ordinary transition subscriber plus collectors.

Wiring (the worker's ``--metrics-port`` does exactly this)::

    from chongming_task.observability import install_prometheus, serve_metrics

    exporter = install_prometheus(controller, scheduler=scheduler)
    server = serve_metrics(exporter.registry, port=9464)   # 127.0.0.1 by default
    ...
    server.close(); exporter.close()

Two kinds of numbers, kept apart on purpose:

- **This process** (counters and histograms fed by the transitions this controller
  made): transitions, attempts, retries, timeouts, lost runs, run durations, command
  latency, persist failures. Sum them over instances.
- **The fleet** (gauges read from the store at scrape time, see ``collectors``):
  tasks by status and the schedules' last success / failures / next run. Every
  instance reports the same fleet; aggregate them with ``max``, never ``sum``.

Labels are bounded: task names come from the controller's whitelist, schedules from
the store's control records, statuses and scopes from fixed sets. Task ids never
become labels. Each exporter has its own ``CollectorRegistry`` (not the global
default), so two controllers in one process, or two tests, never share a metric.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from chongming_task._model import TaskSnapshot, Transition
from chongming_task._public import public
from chongming_task.observability._collectors import (
    ControllerCollector,
    SchedulerCollector,
    StoreCollector,
    require_prometheus,
)
from chongming_task.observability._events import TransitionObserver
from chongming_task.observability._ownership import BucketOwnershipCollector
from chongming_task.states import TaskStatus

if TYPE_CHECKING:
    from chongming_task.controller import Controller
    from chongming_task.observability._server import MetricsServer
    from chongming_task.schedule import Scheduler
    from chongming_task.stores._base import Command, TaskStore

__all__ = [
    "COMMAND_BUCKETS",
    "DURATION_BUCKETS",
    "PrometheusExporter",
    "install_prometheus",
]

#: Run durations go from sub-second to a day.
DURATION_BUCKETS: Final = (
    0.1, 0.5, 1, 5, 15, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400, float("inf"),
)  # fmt: skip
#: A command is applied within a poll interval (0.2 s by default) unless something is wrong.
COMMAND_BUCKETS: Final = (
    0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, float("inf"),
)  # fmt: skip


class PrometheusExporter(TransitionObserver):
    """Counts one controller's transitions into Prometheus metrics in its own registry.

    Args:
        registry: Where the metrics live (default: a new ``CollectorRegistry``).
        store: Adds the fleet-wide gauges read from this store at scrape time.
        controller: Adds this controller's health gauges (persist failures...).
        scheduler: Adds the scheduler loop's gauges (last tick, claims).

    Raises:
        ConfigurationError: ``prometheus_client`` is not installed (the message says
            ``pip install "chongming-task[prometheus]"``).
    """

    def __init__(
        self,
        *,
        registry: Any | None = None,
        store: TaskStore | None = None,
        controller: Controller | None = None,
        scheduler: Scheduler | None = None,
    ) -> None:
        super().__init__()
        core = require_prometheus()
        self.registry: Any = core.CollectorRegistry() if registry is None else registry
        self.store = store
        counter = functools.partial(core.Counter, registry=self.registry)
        histogram = functools.partial(core.Histogram, registry=self.registry)
        self.transitions = counter(
            "chongming_task_transitions",
            "Accepted transitions by task name and edge.",
            ["name", "from", "to"],
        )
        self.runs = counter(
            "chongming_task_runs",
            "Runs that reached a terminal status, by task name and final status.",
            ["name", "final_status"],
        )
        self.run_duration = histogram(
            "chongming_task_run_duration_seconds",
            "First start to finish of runs that started, by task name and final status.",
            ["name", "final_status"],
            buckets=DURATION_BUCKETS,
        )
        self.queue_wait = histogram(
            "chongming_task_queue_wait_seconds",
            "Queued to first start, by task name (time spent waiting for a slot).",
            ["name"],
            buckets=DURATION_BUCKETS,
        )
        self.attempts = counter(
            "chongming_task_attempts", "Attempts started, by task name.", ["name"]
        )
        self.retries = counter(
            "chongming_task_retries",
            "Failed attempts followed by a retry (-> retry_wait), by task name.",
            ["name"],
        )
        self.timeouts = counter(
            "chongming_task_timeouts",
            "Timeouts that ended an attempt or a run, by task name and scope.",
            ["name", "scope"],
        )
        self.lost = counter(
            "chongming_task_lost",
            "Runs that ended lost (abandoned carrier, or found by reconcile).",
            ["name"],
        )
        self.command_latency = histogram(
            "chongming_command_latency_seconds",
            "From a command's issued_at to its application by the holder.",
            ["kind", "action"],
            buckets=COMMAND_BUCKETS,
        )
        self.collectors: list[Any] = []
        self._detach_commands: Callable[[], None] | None = None
        if store is not None:
            self._register(StoreCollector(store))
            self._register(BucketOwnershipCollector(store))
        if controller is not None:
            self._register(ControllerCollector(controller))
        if scheduler is not None:
            self._register(SchedulerCollector(scheduler))

    # ------------------------------------------------------------ hooks

    def on_transition(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        source = "none" if transition.from_status is None else transition.from_status.value
        self.transitions.labels(snapshot.name, source, transition.to_status.value).inc()

    def on_attempt_started(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        self.attempts.labels(snapshot.name).inc()
        if transition.from_status is TaskStatus.QUEUED and snapshot.attempt == 1:
            queued, started = snapshot.queued_at, snapshot.started_at
            if queued is not None and started is not None:
                self.queue_wait.labels(snapshot.name).observe(_seconds(queued, started))

    def on_retry_scheduled(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        self.retries.labels(snapshot.name).inc()

    def on_timeout(self, transition: Transition, snapshot: TaskSnapshot, scope: str) -> None:
        self.timeouts.labels(snapshot.name, scope).inc()

    def on_run_finished(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        status = snapshot.status.value
        self.runs.labels(snapshot.name, status).inc()
        elapsed = snapshot.elapsed
        if elapsed is not None:
            self.run_duration.labels(snapshot.name, status).observe(elapsed)
        if snapshot.status is TaskStatus.LOST:
            self.lost.labels(snapshot.name).inc()

    # ------------------------------------------------------------ other sources

    def observe_command(self, command: Command, applied_at: datetime) -> None:
        """Record how long ``command`` took from being issued to being applied."""
        self.command_latency.labels(command.kind, command.action).observe(
            _seconds(command.issued_at, applied_at)
        )

    # ------------------------------------------------------------ lifecycle

    def attach(self, controller: Controller, *, inline: bool = False) -> Callable[[], None]:
        """Subscribe to transitions, and to applied commands where the controller offers it.

        Command latency needs ``controller.subscribe_commands(fn(command, applied_at))``;
        a controller without that hook leaves the histogram to :meth:`observe_command`.
        """
        detach = super().attach(controller, inline=inline)
        subscribe_commands = getattr(controller, "subscribe_commands", None)
        if callable(subscribe_commands):
            self._detach_commands = subscribe_commands(self.observe_command)
        return detach

    def detach(self) -> None:
        super().detach()
        detach_commands, self._detach_commands = self._detach_commands, None
        if detach_commands is not None:
            detach_commands()

    def serve(self, port: int, host: str = "127.0.0.1") -> MetricsServer:
        """Serve this exporter's registry on ``http://host:port/metrics``."""
        from chongming_task.observability._server import serve_metrics

        return serve_metrics(self.registry, port, host=host)

    def close(self) -> None:
        """Stop listening to the controller and drop the scrape-time collectors."""
        self.detach()
        for collector in self.collectors:
            with contextlib.suppress(KeyError):
                self.registry.unregister(collector)
        self.collectors.clear()

    def _register(self, collector: Any) -> None:
        self.registry.register(collector)
        self.collectors.append(collector)


@public
def install_prometheus(
    controller: Controller, registry: Any | None = None, scheduler: Scheduler | None = None
) -> PrometheusExporter:
    """Attach a :class:`PrometheusExporter` to ``controller`` (store, controller, scheduler).

    Raises:
        ConfigurationError: ``prometheus_client`` is not installed.
    """
    exporter = PrometheusExporter(
        registry=registry, store=controller.store, controller=controller, scheduler=scheduler
    )
    exporter.attach(controller)
    return exporter


def _seconds(start: datetime, end: datetime) -> float:
    return max(0.0, (end - start).total_seconds())
