"""The code samples of guide §8.1-§8.5, §8.8 and §4.5 as written, in one process."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from chongming_task import ConcurrencyPolicy, Controller, TaskContext, task
from chongming_task.controller import Controller as ControllerFromSubpackage
from chongming_task.controller import render_table
from chongming_task.errors import ConfigurationError
from chongming_task.testing import wait_until

from ._helpers import Gate, S, path

pytestmark = pytest.mark.timeout(60)


def test_8_1_basic_usage_as_written(gate: Gate) -> None:
    def extract(ctx: TaskContext, source: str) -> str:
        return source

    def transform(ctx: TaskContext, n: int) -> int:
        gate.hold(ctx)
        return n + 1

    assert ControllerFromSubpackage is Controller
    controller = Controller(max_parallel=2)  # 最多同时跑 2 个

    controller.register("extract", extract, tags={"io"})  # 先登记，之后只传名字
    controller.register("transform", transform)

    run = controller.submit("transform", 100, task_id="t0", label="转换-1")
    controller.submit("transform", 200, task_id="t1", label="转换-2")

    # Both hold a slot and t0's body runs (a stop while it is still `starting` would
    # be answered by the body without a `running` record: docs/running.md §3).
    wait_until(lambda: controller.active_count == 2 and run.status is S.RUNNING)
    table = render_table(controller.list_tasks())  # 查询
    print(table)
    assert "转换-1" in table
    controller.stop("t0", reason="手工干预")  # 控制
    wait_until(lambda: run.done)  # (the gate would let it finish as succeeded, §4.4)
    gate.open()
    controller.wait_all(timeout=60)  # 等全部落终态

    assert path(run.transitions) == [
        "pending",
        "queued",
        "starting",
        "running",
        "stopping",
        "stopped",
    ]
    stopping = run.transitions[4]
    assert (stopping.reason, stopping.actor) == ("手工干预", controller.owner)
    assert controller.get("t1").status is S.SUCCEEDED  # type: ignore[union-attr]
    assert [t.to_status for t in controller.history("t0")] == [t.to_status for t in run.transitions]
    controller.close()


def test_8_2_queries(gate: Gate) -> None:
    def job(ctx: TaskContext) -> None:
        gate.hold(ctx)

    with Controller(max_parallel=1) as controller:
        controller.register("etl.extract", job, tags={"io"})
        controller.register("etl.load", job)
        controller.register("report", job)
        controller.submit("etl.extract", task_id="a")
        controller.submit("etl.load", task_id="b")
        controller.submit("report", task_id="c", tags=["db"])
        # Admission (active_count) happens at "starting"; "running" follows on the carrier.
        wait_until(lambda: controller.get("a").status is S.RUNNING)  # type: ignore[union-attr]
        assert controller.active_count == 1
        assert controller.get("missing") is None
        assert [s.task_id for s in controller.list_tasks(status="queued")] == ["b", "c"]
        assert [s.task_id for s in controller.list_tasks(status=[S.RUNNING, S.QUEUED])] == [
            "a",
            "b",
            "c",
        ]
        assert [s.task_id for s in controller.list_tasks(name_prefix="etl.")] == ["a", "b"]
        assert [s.task_id for s in controller.list_tasks(tag="io")] == ["a"]
        assert [s.task_id for s in controller.list_tasks(tag="db")] == ["c"]
        assert len(controller.list_tasks(limit=2)) == 2
        with pytest.raises(ConfigurationError, match="unknown status"):
            controller.list_tasks(status="sleeping")
        stats = controller.stats()
        assert (stats.running, stats.queued, stats.unfinished, stats.total) == (1, 2, 3, 3)
        assert stats[S.QUEUED] == 2
        assert stats["running"] == 1
        assert {run.task_id for run in controller.runs()} == {"a", "b", "c"}
        assert (controller.active_count, controller.queued_count) == (1, 2)
        gate.open()
        controller.wait_all(timeout=30)
        stats = controller.stats()
        assert (stats.succeeded, stats.unfinished, stats.finished) == (3, 0, 3)


def test_8_3_control_return_values(gate: Gate) -> None:
    def job(ctx: TaskContext) -> None:
        gate.hold(ctx)

    controller = Controller(max_parallel=2)
    controller.register("job", job)
    for index in range(4):
        controller.submit("job", task_id=f"j{index}")
    wait_until(lambda: controller.active_count == 2)
    wait_until(lambda: controller.run("j0").status is S.RUNNING)  # type: ignore[union-attr]
    assert controller.pause("j0", timeout=5) is True  # confirmed
    assert controller.get("j0").status is S.PAUSED  # type: ignore[union-attr]
    assert controller.active_count == 2  # a pause keeps its slot
    assert controller.resume("j0") is True
    assert controller.resume("j0") is False  # not paused any more
    assert controller.pause("j2", timeout=1) is True  # queued: paused at once, no slot
    assert controller.queued_count == 1
    assert controller.stop("nope") is False
    assert controller.stop_all(reason="end") == 4  # requests issued, not "stopped"
    controller.wait_all(timeout=30)
    assert controller.stop_all() == 0
    runs = {run.task_id: run for run in controller.runs()}
    assert path(runs["j0"].transitions) == [
        "pending",
        "queued",
        "starting",
        "running",
        "pausing",
        "paused",
        "running",
        "stopping",
        "stopped",
    ]
    assert path(runs["j2"].transitions) == ["pending", "queued", "paused", "stopped"]
    assert path(runs["j3"].transitions) == ["pending", "queued", "stopped"]
    assert controller.active_count == 0
    controller.close()


def test_8_3_pause_that_is_not_confirmed_returns_false() -> None:
    release = threading.Event()

    def deaf(ctx: TaskContext) -> None:
        ctx.checkpoint()
        release.wait(10)  # no checkpoint while the pause waits

    controller = Controller()
    controller.register("deaf", deaf)
    run = controller.submit("deaf", task_id="d")
    wait_until(lambda: run.status is S.RUNNING)
    assert controller.pause("d", timeout=0.1) is False
    assert controller.get("d").status is S.RUNNING  # type: ignore[union-attr]
    release.set()
    controller.wait_all(timeout=10)
    assert "pause_aborted" in run.transitions[5].trigger
    controller.close()


def test_8_3_close_never_runs_queued_bodies(gate: Gate) -> None:
    bodies: list[str] = []

    def job(ctx: TaskContext, name: str) -> None:
        bodies.append(name)
        gate.hold(ctx)

    controller = Controller(max_parallel=1)
    controller.register("job", job)
    first = controller.submit("job", "first", task_id="first")
    second = controller.submit("job", "second", task_id="second")
    blocked = controller.submit("job", "third", task_id="third", blocked=True)
    wait_until(lambda: first.status is S.RUNNING)
    assert controller.close(reason="shutdown", timeout=10) == 3
    assert bodies == ["first"]
    assert path(second.transitions) == ["pending", "queued", "stopped"]
    assert path(blocked.transitions) == ["pending", "blocked", "stopped"]
    assert first.status is S.STOPPED
    assert controller.close() == 0  # idempotent
    with pytest.raises(ConfigurationError, match="closed"):
        controller.submit("job", "late")


def test_8_4_named_limits_as_written(gate: Gate) -> None:
    def sync_tenant(ctx: TaskContext, tenant: str) -> str:
        gate.hold(ctx)
        return tenant

    def train_model(ctx: TaskContext, version: str) -> str:
        gate.hold(ctx)
        return version

    controller = Controller(
        concurrency=ConcurrencyPolicy(max_parallel=20, limits={"db": 4, "gpu": 1})
    )
    controller.register("sync", sync_tenant)
    controller.register("train", train_model)

    controller.submit("sync", "tenant-A", tags=["db"])  # 占一个 db 名额
    controller.submit("sync", "tenant-B", tags=["db"])  # 再占一个
    controller.submit("train", "v3", tags=["gpu"])  # 占那个唯一的 gpu 名额

    # Beyond the limits: two more db tasks fit, the fifth waits; a second gpu task waits.
    for tenant in "CDE":
        controller.submit("sync", f"tenant-{tenant}", task_id=f"db-{tenant}", tags=["db"])
    controller.submit("train", "v4", task_id="gpu-2", tags=["gpu"])
    controller.submit("train", "v5", task_id="both", tags=["gpu", "db"])
    wait_until(lambda: controller.active_count == 5)
    assert {s.task_id for s in controller.list_tasks(status="queued")} == {"db-E", "gpu-2", "both"}
    # A paused task keeps its units: pausing a db task frees nothing.
    assert controller.pause("db-C", timeout=5)
    assert controller.queued_count == 3
    assert controller.resume("db-C")
    gate.open()
    controller.wait_all(timeout=30)
    assert controller.active_count == 0
    controller.close()


def test_8_4_priority_as_written(gate: Gate) -> None:
    started: list[str] = []

    def sync_tenant(ctx: TaskContext, tenant: str) -> None:
        started.append(tenant)
        gate.hold(ctx)

    controller = Controller(max_parallel=1)
    controller.register("sync", sync_tenant)
    controller.submit("sync", "blocker")
    wait_until(lambda: started == ["blocker"])
    controller.submit("sync", "tenant-B")  # 默认优先级 0：批量回填
    controller.submit("sync", "tenant-A", priority=10)  # 用户等着的那次同步
    controller.submit("sync", "tenant-C")
    gate.open()
    controller.wait_all(timeout=30)
    assert started == ["blocker", "tenant-A", "tenant-B", "tenant-C"]
    controller.close()


def test_default_priority_comes_from_the_policy() -> None:
    controller = Controller(concurrency=ConcurrencyPolicy(max_parallel=1, priority=3))
    controller.register("noop", lambda ctx: None)
    run = controller.submit("noop")
    assert run.snapshot.priority == 3
    assert controller.submit("noop", priority=-1).snapshot.priority == -1
    with pytest.raises(ConfigurationError, match="priority must be an integer"):
        controller.submit("noop", priority="high")  # type: ignore[call-overload]
    controller.close()


def test_8_5_names_only_and_no_silent_override() -> None:
    def extract(ctx: TaskContext) -> None: ...

    controller = Controller()
    controller.register("extract", extract)
    with pytest.raises(ConfigurationError, match=r"'extrakt' is not registered.*extract"):
        controller.submit("extrakt")
    with pytest.raises(ConfigurationError, match="already registered"):
        controller.register("extract", extract)
    assert controller.task_names() == ["extract"]
    assert controller.registry.get("extract").fn is extract  # type: ignore[union-attr]
    assert controller.stats().total == 0  # nothing was written for the refused submit
    controller.close()


def test_8_13_register_module_and_register_all(tmp_path: Path) -> None:
    module_file = tmp_path / "myapp_tasks_for_test.py"
    module_file.write_text(
        "from chongming_task import task, RetryPolicy, Timeout\n"
        "@task(tags={'io'}, retry=RetryPolicy(max_attempts=3), timeout=Timeout(per_attempt=60))\n"
        "def extract(ctx, source: str) -> list:\n"
        "    '''从 source 读取数据。'''\n"
        "    return [source]\n"
        "@task\n"
        "def load(ctx) -> int:\n"
        "    return 1\n",
        encoding="utf-8",
    )
    import importlib.util

    spec = importlib.util.spec_from_file_location("myapp_tasks_for_test", module_file)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    controller = Controller()
    controller.register_module(module)  # 模块里所有 @task 都被登记
    definition = controller.registry.get("extract")
    assert definition is not None
    assert definition.description == "从 source 读取数据。"
    assert definition.tags == frozenset({"io"})
    run = controller.submit("extract", "s3://x")
    assert run.wait(10).value == ["s3://x"]
    assert run.snapshot.max_attempts == 3
    assert run.snapshot.tags == frozenset({"io"})

    other = Controller()
    other.register_all(module.extract, module.load)  # 或者逐个登记
    assert [d.name for d in other.definitions()] == ["extract", "load"]
    controller.close()
    other.close()


def test_submission_validation() -> None:
    controller = Controller()
    controller.register("noop", lambda ctx, *args, **kwargs: None)
    with pytest.raises(ConfigurationError, match="tags must be"):
        controller.submit("noop", tags="db")
    with pytest.raises(ConfigurationError, match="non-empty strings"):
        controller.submit("noop", tags=[1])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="metadata is not JSON"):
        controller.submit("noop", metadata={"when": object()})
    run = controller.submit("noop", task_id="dup", metadata={"schedule": "nightly"})
    with pytest.raises(ConfigurationError, match="already exists"):
        controller.submit("noop", task_id="dup")
    run.wait(10)
    assert controller.get("dup").metadata == {"schedule": "nightly"}  # type: ignore[union-attr]
    generated = controller.submit("noop", 1, key="value")
    assert generated.task_id.startswith("noop-")
    assert controller.list_tasks(metadata_eq={"schedule": "nightly"})[0].task_id == "dup"
    controller.close()


def test_duplicate_ids_are_refused_by_the_store_across_controllers() -> None:
    from chongming_task.stores._memory import InMemoryTaskStore

    with InMemoryTaskStore() as store:
        first = Controller(store=store, owner="a")
        second = Controller(store=store, owner="b")
        for controller in (first, second):
            controller.register("noop", lambda ctx: None)
        first.submit("noop", task_id="job-1").wait(10)
        with pytest.raises(ConfigurationError, match="already exists"):
            second.submit("noop", task_id="job-1")
        assert second.runs() == []  # the refused run is not held
        first.close()
        second.close()


def test_8_8_buckets_as_written(gate: Gate) -> None:
    def sync_tenant(ctx: TaskContext, tenant: str) -> None:
        gate.hold(ctx)

    controller = Controller(max_parallel=10, max_parallel_per_bucket=1)
    controller.register("sync", sync_tenant)
    controller.submit("sync", "租户A", task_id="a0", bucket_key="tenant-A")
    controller.submit("sync", "租户B", task_id="b0", bucket_key="tenant-B")
    controller.submit("sync", "租户A", task_id="a1", bucket_key="tenant-A")
    wait_until(lambda: controller.active_count == 2)
    bucket_a = controller.bucket_policy.bucket_for("tenant-A")
    bucket_b = controller.bucket_policy.bucket_for("tenant-B")
    assert bucket_a != bucket_b
    snapshot = controller.get("a0")
    assert snapshot is not None
    assert (snapshot.bucket, snapshot.bucket_key) == (bucket_a, "tenant-A")
    assert controller.get("a1").status is S.QUEUED  # type: ignore[union-attr]
    assert controller.active_in_bucket(bucket_a) == 1
    assert controller.active_in_bucket(bucket_b) == 1
    assert [s.task_id for s in controller.list_tasks(bucket=bucket_a)] == ["a0", "a1"]
    assert {s.task_id for s in controller.list_tasks(buckets=[bucket_a, bucket_b])} == {
        "a0",
        "a1",
        "b0",
    }
    assert controller.bucket_counts() == {bucket_a: 2, bucket_b: 1}
    assert controller.bucket_policy.num_buckets == 64
    assert f"  {bucket_a}" in render_table(controller.list_tasks(bucket=bucket_a))
    gate.open()
    controller.wait_all(timeout=30)
    assert controller.active_in_bucket(bucket_a) == 0
    controller.close()


def test_4_5_long_running_worker_as_written() -> None:
    from chongming_task.stores._memory import InMemoryTaskStore

    @task
    def worker(ctx: TaskContext, source: str) -> int:
        processed = 0
        while not ctx.is_stop_requested:  # ← 优雅收尾的写法
            ctx.checkpoint()  # ← 不调用它 = 停不掉
            processed += 1
            ctx.progress(processed, unit="batch")
            time.sleep(0.02)
        ctx.log(f"收到停止请求，本次共处理 {processed} 批")
        return processed  # 正常返回 → 终态 succeeded，返回值保留

    store = InMemoryTaskStore()
    controller = Controller(store=store, owner="node-a")
    controller.register_all(worker)
    run = controller.submit("worker", "kafka://orders", task_id="orders-worker")
    wait_until(lambda: run.snapshot.progress is not None)
    assert controller.pause("orders-worker") is True  # → True：已确认挂起
    assert controller.resume("orders-worker") is True  # 继续跑
    resumed_at = run.snapshot.progress.done  # type: ignore[union-attr]
    wait_until(lambda: run.snapshot.progress.done > resumed_at + 1)  # type: ignore[union-attr]
    controller.stop("orders-worker", reason="发布窗口")  # 彻底结束
    outcome = controller.wait("orders-worker", timeout=10)  # → succeeded，value=已处理批数
    assert outcome.status is S.SUCCEEDED
    assert isinstance(outcome.value, int)
    assert outcome.value > 0
    assert path(run.transitions) == [
        "pending",
        "queued",
        "starting",
        "running",
        "pausing",
        "paused",
        "running",
        "stopping",
        "succeeded",
    ]
    stored = store.get("orders-worker")
    assert stored is not None
    assert stored.outcome == outcome.value
    assert stored.progress is not None
    assert stored.progress.unit == "batch"
    controller.close(close_store=True)


def test_wait_on_an_unknown_task_and_timeouts(gate: Gate) -> None:
    controller = Controller()
    controller.register("hold", gate.hold)
    with pytest.raises(ConfigurationError, match="no task 'ghost'"):
        controller.wait("ghost", timeout=1)
    run = controller.submit("hold", task_id="h")
    with pytest.raises(TimeoutError):
        controller.wait("h", timeout=0.05)
    with pytest.raises(TimeoutError, match="1 task"):
        controller.wait_all(timeout=0.05)
    assert run.status is S.RUNNING  # waiting changed nothing
    gate.open()
    assert controller.wait_all(timeout=10)[0].ok
    controller.close()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_parallel": 3, "concurrency": ConcurrencyPolicy(max_parallel=4)}, "contradicts"),
        ({"max_parallel": 0}, "max_parallel"),
        ({"max_parallel_per_bucket": 0}, "max_parallel_per_bucket"),
        ({"num_buckets": 0}, "num_buckets"),
        ({"owned_buckets": range(60, 70)}, "outside 0..63"),
        ({"owned_buckets": []}, "empty"),
        ({"owned_buckets": "0-15"}, "integers"),
        ({"owner": ""}, "owner"),
        ({"lease_ttl": 0}, "lease_ttl"),
    ],
)
def test_bad_configuration(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        Controller(**kwargs)
