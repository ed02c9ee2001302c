"""Prometheus exporter: counters from transitions, fleet gauges from the store, isolation."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from chongming_task._model import TaskSnapshot, Transition
from chongming_task.controller import Controller
from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.observability import PrometheusExporter, StoreCollector, install_prometheus
from chongming_task.policies import FixedBackoff, RetryPolicy, Timeout
from chongming_task.runtime._context import TaskContext
from chongming_task.states import TaskStatus
from chongming_task.stores._base import Command, TaskQuery
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.testing import wait_until

from .conftest import Gate

S = TaskStatus


def value(registry: CollectorRegistry, metric: str, /, **labels: str) -> float | None:
    return registry.get_sample_value(metric, labels)


def fails_first_attempt(ctx: TaskContext) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
    return "ok"


def always_fails(ctx: TaskContext) -> None:
    raise ValueError("token=abc123 rejected")


@pytest.fixture
def exporter(controller: Controller) -> Iterator[PrometheusExporter]:
    exporter = install_prometheus(controller)
    yield exporter
    exporter.close()


def finished_runs(exporter: PrometheusExporter, expected: int) -> None:
    def total() -> float:
        return sum(  # type: ignore[no-any-return]
            sample.value
            for metric in exporter.registry.collect()
            if metric.name == "chongming_task_runs"
            for sample in metric.samples
            if sample.name.endswith("_total")
        )

    wait_until(lambda: total() == expected, message=f"{expected} finished runs counted")


def test_counters_follow_a_known_workload(
    controller: Controller, exporter: PrometheusExporter, gate: Gate
) -> None:
    retry = RetryPolicy(max_attempts=2, backoff=FixedBackoff(0))
    controller.register("ok", lambda ctx: 1)
    controller.register("flaky", fails_first_attempt, retry=retry)
    controller.register("broken", always_fails)
    controller.register("slow", gate.hold, timeout=Timeout(per_attempt=0.05))
    controller.register("held", gate.hold)
    runs = [controller.submit("ok") for _ in range(3)]
    runs += [controller.submit("flaky"), controller.submit("broken"), controller.submit("slow")]
    held = controller.submit("held")
    for run in runs:
        run.wait(5)
    wait_until(lambda: held.status is S.RUNNING, message="held is running")
    controller.stop(held.task_id, reason="enough")
    assert held.wait(5).status is S.STOPPED
    finished_runs(exporter, 7)

    reg = exporter.registry
    assert value(reg, "chongming_task_runs_total", name="ok", final_status="succeeded") == 3
    assert value(reg, "chongming_task_runs_total", name="flaky", final_status="succeeded") == 1
    assert value(reg, "chongming_task_runs_total", name="broken", final_status="failed") == 1
    assert value(reg, "chongming_task_runs_total", name="slow", final_status="failed") == 1
    assert value(reg, "chongming_task_runs_total", name="held", final_status="stopped") == 1
    assert value(reg, "chongming_task_attempts_total", name="flaky") == 2
    assert value(reg, "chongming_task_attempts_total", name="ok") == 3
    assert value(reg, "chongming_task_retries_total", name="flaky") == 1
    assert value(reg, "chongming_task_retries_total", name="ok") is None
    assert value(reg, "chongming_task_timeouts_total", name="slow", scope="attempt") == 1
    edge = {"name": "flaky", "from": "running", "to": "retry_wait"}
    assert value(reg, "chongming_task_transitions_total", **edge) == 1
    created = {"name": "ok", "from": "none", "to": "pending"}
    assert value(reg, "chongming_task_transitions_total", **created) == 3
    duration = {"name": "ok", "final_status": "succeeded"}
    assert value(reg, "chongming_task_run_duration_seconds_count", **duration) == 3
    assert value(reg, "chongming_task_queue_wait_seconds_count", name="ok") == 3
    assert value(reg, "chongming_store_up") == 1
    counts = controller.store.count_by_status()
    for status in TaskStatus:
        assert value(reg, "chongming_tasks", status=status.value) == counts.get(status, 0)
    assert value(reg, "chongming_tasks", status="succeeded") == 4
    assert value(reg, "chongming_controller_active_tasks") == 0
    assert value(reg, "chongming_subscriber_errors_total") == 0
    assert value(reg, "chongming_persist_failures_total") == 0

    task_ids = {run.task_id for run in [*runs, held]}
    for metric in reg.collect():
        for sample in metric.samples:
            assert not task_ids & set(sample.labels.values()), sample


def test_a_console_sees_the_fleet_from_the_store(controller: Controller) -> None:
    controller.register("ok", lambda ctx: 1)
    for _ in range(2):
        controller.submit("ok").wait(5)
    console = PrometheusExporter(store=controller.store)  # no controller of its own
    assert value(console.registry, "chongming_tasks", status="succeeded") == 2
    assert value(console.registry, "chongming_task_runs_total", name="ok") is None


class FlakyStore(InMemoryTaskStore):
    """A store whose reads or writes can be made to fail."""

    fail_reads = False
    fail_saves = False

    def count_by_status(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        if self.fail_reads:
            raise StoreError("database is down")
        return super().count_by_status(query)

    def save(
        self,
        snapshot: TaskSnapshot,
        *,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        if self.fail_saves:
            raise StoreError("disk full")
        super().save(snapshot, expect_version=expect_version, transitions=transitions)


def test_a_dead_store_does_not_break_the_scrape() -> None:
    with FlakyStore() as store:
        collector_registry = CollectorRegistry()
        collector = StoreCollector(store)
        collector_registry.register(collector)
        assert value(collector_registry, "chongming_store_up") == 1
        store.fail_reads = True
        scrape = {  # one scrape
            sample.name: sample.value
            for metric in collector_registry.collect()
            for sample in metric.samples
        }
        assert scrape["chongming_store_up"] == 0
        assert scrape["chongming_scrape_errors_total"] == 1
        assert "chongming_tasks" not in scrape  # absent, not a misleading zero
        store.fail_reads = False
        assert value(collector_registry, "chongming_tasks", status="queued") == 0


def test_persist_failures_are_counted() -> None:
    store = FlakyStore()
    with Controller(store) as controller:
        exporter = install_prometheus(controller)
        controller.register("ok", lambda ctx: 1)
        store.fail_saves = True
        run = controller.submit("ok")
        assert run.wait(5).ok  # a store failure never fails the task
        # running, succeeded (a free slot: the task is created already starting)
        assert len(controller.persist_failures) == 2
        assert value(exporter.registry, "chongming_persist_failures_total") == 2
        assert value(exporter.registry, "chongming_persist_failures_total") == 2  # no recount
        store.fail_saves = False
        controller.submit("ok").wait(5)
        assert value(exporter.registry, "chongming_persist_failures_total") == 2
        exporter.close()
    store.close()


def test_reconcile_lost_is_counted() -> None:
    from chongming_task.core.state_machine import StateMachine
    from chongming_task.testing import FakeClock

    clock = FakeClock()
    with InMemoryTaskStore(clock=clock) as store:
        machine = StateMachine.create("orphan", "job", owner="dead-node", clock=clock)
        machine.mark_queued()
        machine.mark_starting()
        machine.mark_running()
        expired = clock.now() - timedelta(seconds=1)
        snapshot = machine.snapshot.replace(lease_owner="dead-node", lease_until=expired)
        store.create(snapshot, machine.transitions)
        with Controller(store, clock=clock) as controller:
            exporter = install_prometheus(controller)
            assert controller.reconcile().lost == ("orphan",)
            finished_runs(exporter, 1)
            reg = exporter.registry
            assert value(reg, "chongming_task_lost_total", name="job") == 1
            assert value(reg, "chongming_task_runs_total", name="job", final_status="lost") == 1
            assert value(reg, "chongming_tasks", status="lost") == 1
            exporter.close()


def test_command_latency_histogram() -> None:
    exporter = PrometheusExporter()
    command = Command.new(
        kind="task",
        target="t1",
        action="stop",
        issued_by="console",
        issued_at=InMemoryTaskStore().clock.now(),
        payload={},
        target_owner="worker",
    )
    exporter.observe_command(command, command.issued_at + timedelta(seconds=0.3))
    labels = {"kind": "task", "action": "stop"}
    reg = exporter.registry
    assert value(reg, "chongming_command_latency_seconds_count", **labels) == 1
    assert value(reg, "chongming_command_latency_seconds_sum", **labels) == pytest.approx(0.3)
    assert value(reg, "chongming_command_latency_seconds_bucket", le="0.25", **labels) == 0
    assert value(reg, "chongming_command_latency_seconds_bucket", le="0.5", **labels) == 1


def test_command_latency_is_wired_when_the_controller_offers_a_hook() -> None:
    class WithCommandHook(Controller):
        """A controller with the (proposed) ``subscribe_commands`` hook."""

        listeners: list[Callable[[Command, datetime], None]]

        def subscribe_commands(self, fn: Callable[[Command, datetime], None]) -> Callable[[], None]:
            self.listeners = [*getattr(self, "listeners", []), fn]
            return lambda: self.listeners.remove(fn)

    controller = WithCommandHook()
    try:
        exporter = install_prometheus(controller)
        (listener,) = controller.listeners
        command = Command.new(
            kind="task",
            target="t1",
            action="pause",
            issued_by="console",
            issued_at=controller.clock.now(),
            payload={},
            target_owner=controller.owner,
        )
        listener(command, command.issued_at + timedelta(seconds=2))
        labels = {"kind": "task", "action": "pause"}
        reg = exporter.registry
        assert value(reg, "chongming_command_latency_seconds_sum", **labels) == pytest.approx(2)
        exporter.close()
        assert controller.listeners == []
    finally:
        controller.close()


def test_exporters_have_isolated_registries(controller: Controller) -> None:
    controller.register("ok", lambda ctx: 1)
    first = install_prometheus(controller)
    second = install_prometheus(controller)
    controller.submit("ok").wait(5)
    finished_runs(first, 1)
    finished_runs(second, 1)
    first.close()
    controller.submit("ok").wait(5)
    finished_runs(second, 2)
    assert value(first.registry, "chongming_task_runs_total", name="ok", final_status="succeeded")
    assert value(first.registry, "chongming_tasks", status="succeeded") is None  # unregistered
    second.close()


def test_missing_prometheus_client_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(ConfigurationError, match=r"chongming-task\[prometheus\]"):
        PrometheusExporter()


def test_an_abandoned_run_counts_as_lost(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    from chongming_task.observability import install_tracing

    release = threading.Event()

    def ignores_stop(ctx: TaskContext) -> None:
        ctx.checkpoint()
        release.wait(10)  # never reaches another checkpoint until released

    provider, span_exporter = spans
    with Controller(graceful_stop=0.05) as controller:
        controller.register("stubborn", ignores_stop)
        exporter = install_prometheus(controller)
        tracing = install_tracing(controller, provider)
        run = controller.submit("stubborn")
        wait_until(lambda: run.status is S.RUNNING, message="running")
        controller.stop(run.task_id)
        try:
            assert run.wait(5).status is S.LOST
        finally:
            release.set()
        assert [t.to_status.value for t in run.transitions] == [
            "pending", "queued", "starting", "running", "stopping", "lost",
        ]  # fmt: skip
        finished_runs(exporter, 1)
        assert value(exporter.registry, "chongming_task_lost_total", name="stubborn") == 1
        wait_until(lambda: len(span_exporter.get_finished_spans()) == 2)
        (root,) = [s for s in span_exporter.get_finished_spans() if s.name == "task.stubborn"]
        assert root.status.status_code.name == "ERROR"
        tracing.close()
        exporter.close()


def test_queue_gauges_from_the_store() -> None:
    """Depth, oldest queued age and orphaned per bucket, workers up/dead: exact, FakeClock."""
    from chongming_task import Client
    from chongming_task.stores._queue_records import WorkerRecord
    from chongming_task.testing import FakeClock

    clock = FakeClock()
    store = InMemoryTaskStore(clock=clock)
    client = Client(store)
    owned, orphan = client.bucket_policy.bucket_for("a"), client.bucket_policy.bucket_for("b")
    assert owned != orphan
    client.enqueue("job", bucket_key="a")
    clock.advance(30)
    client.enqueue("job", bucket_key="a")
    client.enqueue("job", bucket_key="b")
    client.enqueue("job")  # no bucket
    client.enqueue("job", bucket_key="b").stop("not needed")  # stopped: not queued
    clock.advance(10)

    def worker(worker_id: str, buckets: tuple[int, ...], beat: datetime) -> WorkerRecord:
        return WorkerRecord(
            worker_id=worker_id, host="h", pid=1, version="v", buckets=buckets, slots=2,
            started_at=beat, heartbeat_at=beat,
        )  # fmt: skip

    store.put_worker(worker("live", (owned,), clock.now()))
    store.put_worker(worker("dead", (orphan,), clock.now() - timedelta(seconds=60)))
    registry = CollectorRegistry()
    registry.register(StoreCollector(store))
    a, b = str(owned), str(orphan)
    assert value(registry, "chongming_tasks", status="queued") == 4
    assert value(registry, "chongming_queue_depth", bucket=a) == 2
    assert value(registry, "chongming_queue_depth", bucket=b) == 1
    assert value(registry, "chongming_queue_depth", bucket="-") == 1
    assert value(registry, "chongming_queue_oldest_age_seconds", bucket=a) == 40
    assert value(registry, "chongming_queue_oldest_age_seconds", bucket=b) == 10
    assert value(registry, "chongming_queue_bucket_orphaned", bucket=a) == 0
    assert value(registry, "chongming_queue_bucket_orphaned", bucket=b) == 1
    assert value(registry, "chongming_queue_bucket_orphaned", bucket="-") == 1  # nobody owns all
    assert value(registry, "chongming_workers_up") == 1
    assert value(registry, "chongming_workers_dead") == 1
    assert value(registry, "chongming_lease_expired_tasks") == 0
    # A claim takes the task out of the depth at the next scrape.
    until = clock.now() + timedelta(seconds=30)
    store.claim_queued("live", buckets=[owned], limit=1, lease_until=until)
    assert value(registry, "chongming_queue_depth", bucket=a) == 1
    assert value(registry, "chongming_queue_oldest_age_seconds", bucket=a) == 10
    assert value(registry, "chongming_tasks", status="queued") == 4  # claimed, not started
    # Without the queue families, nothing of them is exported.
    bare = CollectorRegistry()
    bare.register(StoreCollector(store, queue=False))
    assert value(bare, "chongming_workers_up") is None
    assert value(bare, "chongming_tasks", status="queued") == 4
