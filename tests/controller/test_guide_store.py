"""The code samples of guide §8.6, §8.7, §8.9, §8.11 and §8.14 as written (on a SQLite file)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from chongming_task import Controller, SqliteTaskStore, TaskContext
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.testing import wait_until

from ._helpers import Gate, S, path

pytestmark = pytest.mark.timeout(60)

log = logging.getLogger("test")


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the samples write "tasks.db" in the working directory


def test_8_6_prune_keeps_the_newest_terminal_tasks() -> None:
    controller = Controller(store=SqliteTaskStore("tasks.db"))
    controller.register("noop", lambda ctx, n: n)
    for index in range(10):
        controller.submit("noop", index, task_id=f"n{index}").wait(10)
    assert controller.prune(keep_terminal=3) == 7
    assert [s.task_id for s in controller.list_tasks()] == ["n7", "n8", "n9"]
    assert [run.task_id for run in controller.runs()] == ["n7", "n8", "n9"]
    assert controller.history("n0") == []
    controller.close(close_store=True)


def test_8_7_store_sample_as_written() -> None:
    from chongming_task import Progress, SqliteTaskStore, TaskQuery, TaskStatus

    machine = StateMachine.create("job-1", "抽取", tags={"io"})
    snapshot = machine.snapshot
    machine.mark_queued()
    machine.mark_starting(executor="thread")
    machine.mark_running()
    next_snapshot = machine.snapshot

    store = SqliteTaskStore("tasks.db")
    store.create(snapshot)
    store.save(next_snapshot, expect_version=snapshot.status_version)  # 乐观并发
    found = store.query(TaskQuery(statuses=frozenset({TaskStatus.RUNNING}), tag="io"))
    store.touch("job-1", progress=Progress(done=120, total=500))
    assert [s.task_id for s in found] == ["job-1"]
    assert store.get("job-1").progress == Progress(done=120, total=500)  # type: ignore[union-attr]

    # "已经接线": Controller(store=...) reads what is in the store.
    controller = Controller(store=store)
    assert controller.get("job-1").status is S.RUNNING  # type: ignore[union-attr]
    controller.close(close_store=True)


def test_8_9_sample_as_written(gate: Gate) -> None:
    def sync_tenant(ctx: TaskContext, tenant: str) -> None:
        gate.hold(ctx)

    worker = Controller(store=SqliteTaskStore("tasks.db"), max_parallel=2, owner="worker-1")
    worker.register("sync", sync_tenant)
    worker.submit("sync", "租户A", task_id="job-1", bucket_key="tenant-A")
    wait_until(lambda: worker.get("job-1").status is S.RUNNING)  # type: ignore[union-attr]

    # 另一个进程（同一个 SQLite 文件，各自一条连接）-- here a second connection
    console = Controller(store=SqliteTaskStore("tasks.db"), owner="ops-console")
    console.list_tasks()  # 看得到 job-1，尽管它并不持有
    assert [s.task_id for s in console.list_tasks()] == ["job-1"]
    assert console.run("job-1") is None
    console.stop("job-1", reason="运维停止")  # 写成一条指令

    outcome = worker.wait("job-1", timeout=10)
    assert outcome.status is S.STOPPED
    assert path(console.history("job-1")) == [
        "pending",
        "queued",
        "starting",
        "running",
        "stopping",
        "stopped",
    ]
    assert console.wait("job-1", timeout=5).status is S.STOPPED  # a remote wait reads the store
    worker.close(close_store=True)
    console.close(close_store=True)


def test_8_9_store_failures_never_fail_a_task() -> None:
    store = SqliteTaskStore("tasks.db")
    controller = Controller(store=store)
    controller.register("noop", lambda ctx: 42)
    original, original_many = store.save, store.save_many

    def locked(*args: object, **kwargs: object) -> None:
        raise StoreError("database is locked")

    store.save = locked  # type: ignore[method-assign]
    store.save_many = locked  # type: ignore[assignment]  # the write-through batches saves
    run = controller.submit("noop", task_id="t")
    outcome = run.wait(10)
    assert outcome.ok  # the task is fine; only its visibility is broken
    assert outcome.value == 42
    failures = list(controller.persist_failures)
    assert failures
    assert failures[0].task_id == "t"
    assert failures[0].operation == "save"
    assert "database is locked" in failures[0].error
    assert len(controller.persist_failures) <= 20
    # A free slot at submission: created already starting (one write with the
    # creation, queued and starting records); every later write failed and is pending.
    assert store.get("t").status is S.STARTING  # type: ignore[union-attr]
    assert [(p.task_id, p.status) for p in controller.pending_writes] == [("t", "succeeded")]
    assert controller.get("t").status is S.SUCCEEDED  # type: ignore[union-attr]  # the truth
    store.save, store.save_many = original, original_many  # type: ignore[method-assign]
    # The write converges: retried until the store takes it, every record in order.
    wait_until(lambda: store.get("t").status is S.SUCCEEDED, message="the retried write")  # type: ignore[union-attr]
    assert [t.to_status for t in controller.history("t")] == [
        S.PENDING,
        S.QUEUED,
        S.STARTING,
        S.RUNNING,
        S.SUCCEEDED,
    ]
    wait_until(lambda: not controller.pending_writes, message="nothing pending")
    controller.close(close_store=True)


def test_8_11_reconcile_sample_as_written(caplog: pytest.LogCaptureFixture) -> None:
    controller = Controller(store=SqliteTaskStore("tasks.db"), owner="worker-2")
    report = controller.reconcile()
    if report.lost:
        log.warning("上次有 %d 个任务失去监督者", len(report.lost))
    assert report.lost == ()

    report = controller.reconcile(dry_run=True)  # 先看一眼，不写任何状态
    assert report.lost == ()  # 会被（或已被）判为丢失的
    assert report.adoptable == ()  # 需要重新提交的
    assert report.skipped == ()  # 有人正在写、被跳过的
    assert controller.lease_ttl == 30.0
    controller.close(close_store=True)


def test_8_14_owned_buckets_sample_as_written(gate: Gate) -> None:
    def sync_tenant(ctx: TaskContext, tenant: str = "x") -> None:
        gate.hold(ctx)

    controller = Controller(
        store=SqliteTaskStore("tasks.db"),
        owner="node-a",
        owned_buckets=range(0, 16),  # 本节点负责 0..15 号桶（按业务划分，可多于一个）
    )
    controller.register("sync", sync_tenant)
    bucket = controller.bucket_policy.bucket_for("tenant-B")
    assert bucket not in range(16)
    with pytest.raises(ConfigurationError) as refused:
        controller.submit("sync", bucket_key="tenant-B")
    assert str(refused.value) == (
        f"bucket {bucket} (from bucket_key='tenant-B') is not owned by this node; this node "
        "owns [0, 1, ..., 15]. A task written into another node's bucket would never be run "
        "by any node."
    )
    with pytest.raises(ConfigurationError, match=re.escape("needs a bucket_key")):
        controller.submit("sync")
    assert controller.stats().total == 0  # nothing written for refused submissions
    assert not controller.owns_all_buckets
    assert controller.owns_bucket(3)
    assert not controller.owns_bucket(bucket)
    own_key = next(
        k
        for k in (f"k{i}" for i in range(1000))
        if controller.owns_bucket(controller.bucket_policy.bucket_for(k))
    )
    run = controller.submit("sync", task_id="mine", bucket_key=own_key)
    wait_until(lambda: run.status is S.RUNNING)
    gate.open()
    run.wait(10)
    controller.close(close_store=True)


def test_8_14_covering_every_bucket_is_no_partition() -> None:
    controller = Controller(num_buckets=8, owned_buckets=range(8))
    assert controller.owns_all_buckets
    controller.register("noop", lambda ctx: None)
    controller.submit("noop").wait(10)  # no bucket_key needed
    controller.close()
    with pytest.raises(ConfigurationError, match=r"outside 0\.\.7"):
        Controller(num_buckets=8, owned_buckets=[7, 8])
    unrestricted = Controller(owned_buckets=None)
    assert unrestricted.owns_all_buckets
    unrestricted.close()
