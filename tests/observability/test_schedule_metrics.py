"""Per-schedule gauges from the control records (the Go scheduler's JobSucceeded/JobFailed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from chongming_task.controller import Controller
from chongming_task.observability import PrometheusExporter, install_prometheus
from chongming_task.runtime._context import TaskContext
from chongming_task.schedule._scheduler import Scheduler
from chongming_task.testing import wait_until


def value(registry: CollectorRegistry, metric: str, /, **labels: str) -> float | None:
    return registry.get_sample_value(metric, labels)


class Switch:
    """A task body that fails while ``failing`` is set."""

    def __init__(self) -> None:
        self.failing = False

    def __call__(self, ctx: TaskContext) -> str:
        if self.failing:
            raise RuntimeError("password=hunter2 refused")
        return "done"


@pytest.fixture
def scheduler(controller: Controller) -> Iterator[Scheduler]:
    scheduler = Scheduler(controller)  # never started: the tests tick and run by hand
    yield scheduler
    scheduler.close()


def run_now(scheduler: Scheduler, name: str, runs: int) -> None:
    outcome = scheduler.run_now(name).wait(5)
    assert outcome.status.is_terminal
    wait_until(lambda: scheduler.get(name).runs == runs, message=f"{name} counted {runs} run(s)")


def test_schedule_gauges_follow_the_control_records(
    controller: Controller, scheduler: Scheduler
) -> None:
    switch = Switch()
    controller.register("job", switch)
    scheduler.cron("nightly", "job", "0 3 * * *")
    scheduler.cron("hourly", "job", "0 * * * *")
    scheduler.tick()  # plans the next firings
    exporter = install_prometheus(controller, scheduler=scheduler)
    reg = exporter.registry

    run_now(scheduler, "nightly", 1)
    nightly = scheduler.get("nightly")
    assert nightly.last_status == "succeeded"
    assert nightly.last_run_at is not None
    assert nightly.next_run_at is not None
    assert value(reg, "chongming_schedule_last_success_timestamp_seconds", schedule="nightly") == (
        nightly.last_run_at.timestamp()
    )
    assert value(reg, "chongming_schedule_consecutive_failures", schedule="nightly") == 0
    assert value(reg, "chongming_schedule_next_run_timestamp_seconds", schedule="nightly") == (
        nightly.next_run_at.timestamp()
    )
    assert value(reg, "chongming_schedule_paused", schedule="nightly") == 0

    # Two failures after the success: the success time now comes from the store's runs.
    switch.failing = True
    run_now(scheduler, "nightly", 2)
    run_now(scheduler, "nightly", 3)
    assert value(reg, "chongming_schedule_consecutive_failures", schedule="nightly") == 2
    assert value(reg, "chongming_schedule_last_success_timestamp_seconds", schedule="nightly") == (
        nightly.last_run_at.timestamp()
    )
    assert value(reg, "chongming_schedule_runs_total", schedule="nightly", result="error") == 2
    assert value(reg, "chongming_schedule_runs_total", schedule="nightly", result="other") == 1

    # Never succeeded: no last-success sample at all (rather than a misleading 0).
    run_now(scheduler, "hourly", 1)
    assert value(reg, "chongming_schedule_consecutive_failures", schedule="hourly") == 1
    assert (
        value(reg, "chongming_schedule_last_success_timestamp_seconds", schedule="hourly") is None
    )

    scheduler.pause("hourly", reason="maintenance")
    assert value(reg, "chongming_schedule_paused", schedule="hourly") == 1
    assert value(reg, "chongming_schedule_next_run_timestamp_seconds", schedule="hourly") is None

    assert value(reg, "chongming_scheduler_last_tick_timestamp_seconds") == (
        scheduler.last_tick_at.timestamp()  # type: ignore[union-attr]
    )
    assert value(reg, "chongming_scheduler_store_errors") == 0
    assert value(reg, "chongming_scheduler_claims_total", result="won") == 0
    exporter.close()


def test_a_console_sees_the_schedules_of_the_fleet(
    controller: Controller, scheduler: Scheduler
) -> None:
    controller.register("job", Switch())
    scheduler.cron("nightly", "job", "0 3 * * *")
    run_now(scheduler, "nightly", 1)
    console = PrometheusExporter(store=controller.store)
    assert (
        value(console.registry, "chongming_schedule_consecutive_failures", schedule="nightly") == 0
    )
    assert value(
        console.registry, "chongming_schedule_last_success_timestamp_seconds", schedule="nightly"
    )
