"""Prometheus on a store with the task part only: the store is up, schedules are absent.

A tasks-only backend keeps no schedules, so a scrape leaves the schedule families
out (as ``schedules=False`` does) instead of calling the store down.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pytest
from prometheus_client import CollectorRegistry

from _tasks_only import TasksOnlyStore
from chongming_task.controller import Controller
from chongming_task.observability import StoreCollector, install_prometheus
from chongming_task.runtime._context import TaskContext
from chongming_task.stores._base import TaskStore


def _add(ctx: TaskContext, a: int, b: int) -> int:
    return a + b


@pytest.fixture
def controller() -> Iterator[Controller]:
    store = TasksOnlyStore()
    # Typed TaskStore where the controller takes one; at runtime only the task part is there.
    with Controller(store=cast(TaskStore, store), owner="node-a") as controller:
        controller.register("add", _add)
        yield controller
    store.close()


def test_a_scrape_reads_the_tasks_and_leaves_the_schedules_out(controller: Controller) -> None:
    assert controller.submit("add", 1, 2).wait(10).value == 3
    registry = CollectorRegistry()
    collector = StoreCollector(controller.store)
    registry.register(collector)
    assert registry.get_sample_value("chongming_store_up") == 1
    assert registry.get_sample_value("chongming_tasks", {"status": "succeeded"}) == 1
    assert registry.get_sample_value("chongming_workers_up") == 0  # no registry: none
    names = {metric.name for metric in registry.collect()}
    assert not {name for name in names if name.startswith("chongming_schedule_")}
    assert collector.scrape_errors == 0


def test_the_exporter_of_a_controller_on_it_scrapes_clean(controller: Controller) -> None:
    exporter = install_prometheus(controller)
    try:
        assert exporter.registry.get_sample_value("chongming_store_up") == 1
        assert exporter.registry.get_sample_value("chongming_scrape_errors_total") == 0
    finally:
        exporter.close()
