"""Guide §8.11 (reconcile) and §8.14 (node bucket ownership), as written.

The §8.11 sample runs after a real crash: a worker process is killed with SIGKILL
while it holds a running and a queued task. The reconcile table is then checked row
by row on snapshots written the way a dead process leaves them. Both run on SQLite
and PostgreSQL.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_task._model import Failure, FailureKind
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError
from chongming_task.states import OCCUPYING, TaskStatus
from chongming_task.testing import wait_until

from .conftest import PATIENCE, Backend, S, Work, reach

CRASH_WORKER = Path(__file__).with_name("crash_worker.py")
log = logging.getLogger("guide.sample")


def crashed_worker(backend: Backend) -> None:
    """Start the crash worker, wait until its task runs, then SIGKILL it."""
    process = subprocess.Popen(
        [sys.executable, str(CRASH_WORKER), backend.url, "worker-1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(PATIENCE)
        if process.stdout is not None:
            process.stdout.close()


def test_s8_11_reconcile_after_a_crash(backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    crashed_worker(backend)
    SqliteTaskStore = backend.open  # noqa: N806 - the backend swap of §8.14

    controller = Controller_(store=SqliteTaskStore("tasks.db"), owner="worker-2")
    # The dead worker's lease (0.5 s) must run out first: until then it may be alive.
    early = controller.reconcile(dry_run=True)
    wait_until(
        lambda: (r := controller.reconcile(dry_run=True)).lost and r.adoptable, timeout=PATIENCE
    )
    assert controller.get("job-crash").status is S.RUNNING  # dry runs wrote nothing

    with caplog.at_level(logging.WARNING, logger="guide.sample"):
        report = controller.reconcile()
        if report.lost:
            log.warning("上次有 %d 个任务失去监督者", len(report.lost))

    assert early.dry_run is True
    assert report.lost == ("job-crash",)
    assert report.adoptable == ("job-queued",)
    assert report.skipped == ()
    # Only the sample's own logger: other threads' library warnings are not the sample's.
    sample_messages = [r.getMessage() for r in caplog.records if r.name == "guide.sample"]
    assert sample_messages == ["上次有 1 个任务失去监督者"]
    lost = controller.get("job-crash")
    assert lost is not None
    assert lost.status is S.LOST
    assert lost.failure is not None
    assert lost.failure.kind is FailureKind.LOST
    history = controller.history("job-crash")
    assert [t.to_status for t in history] == [
        S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.LOST,
    ]  # fmt: skip
    assert history[-1].actor == "worker-2"
    queued = controller.get("job-queued")
    assert queued is not None
    assert queued.status is S.QUEUED  # not touched: it holds no resources
    assert controller.lease_ttl == 30  # 默认 30 秒，可调
    # It never re-executes: a second pass has nothing new to mark.
    again = controller.reconcile()
    assert again.lost == ()
    assert again.adoptable == ("job-queued",)
    controller.close()


def Controller_(**kwargs: Any) -> Any:
    from chongming_task import Controller

    return Controller(**kwargs)


# ---------------------------------------------------------------- the §8.11 table


def dead_snapshot(
    task_id: str, status: TaskStatus, *, lease: timedelta, bucket_key: str = "tenant-A"
) -> tuple[Any, Any]:
    """A snapshot in ``status`` as left by ``worker-1``, lease ending ``now + lease``."""
    from chongming_task import BucketPolicy

    machine = StateMachine.create(
        task_id,
        "sync",
        owner="worker-1",
        bucket=BucketPolicy().bucket_for(bucket_key),
        bucket_key=bucket_key,
    )
    steps = {
        S.QUEUED: ["mark_queued"],
        S.RUNNING: ["mark_queued", "mark_starting", "mark_running"],
        S.STARTING: ["mark_queued", "mark_starting"],
        S.PAUSED: ["mark_queued", "request_pause"],
        S.STOPPING: ["mark_queued", "mark_starting", "mark_running", "request_stop"],
        S.PAUSING: ["mark_queued", "mark_starting", "mark_running", "request_pause"],
    }[status]
    for step in steps:
        getattr(machine, step)()
    assert machine.status is status
    # An old heartbeat: the body stopped checkpointing long ago (a long computation).
    machine.update(
        lease_owner="worker-1",
        lease_until=datetime.now(UTC) + lease,
        last_heartbeat_at=datetime.now(UTC) - timedelta(hours=1),
    )
    return machine.snapshot, machine.transitions


EXPIRED = timedelta(minutes=-5)
VALID = timedelta(minutes=5)


def test_s8_11_table(backend: Backend) -> None:
    from chongming_task import Controller

    store = backend.open()
    rows = {
        "alive-running": (S.RUNNING, VALID),  # lease valid: untouched, old heartbeat or not
        "dead-starting": (S.STARTING, EXPIRED),
        "dead-running": (S.RUNNING, EXPIRED),
        "dead-pausing": (S.PAUSING, EXPIRED),
        "dead-stopping": (S.STOPPING, EXPIRED),
        "dead-queued": (S.QUEUED, EXPIRED),
        "dead-paused": (S.PAUSED, EXPIRED),
    }
    for task_id, (status, lease) in rows.items():
        store.create(*dead_snapshot(task_id, status, lease=lease))
    controller = Controller(store=backend.open(), owner="worker-2")

    dry = controller.reconcile(dry_run=True)  # 先看一眼，不写任何状态
    assert sorted(dry.lost) == ["dead-pausing", "dead-running", "dead-starting", "dead-stopping"]
    assert sorted(dry.adoptable) == ["dead-paused", "dead-queued"]
    assert {t: store.get(t).status for t in rows} == {t: s for t, (s, _) in rows.items()}  # type: ignore[union-attr]

    report = controller.reconcile()
    assert sorted(report.lost) == sorted(dry.lost)
    assert sorted(report.adoptable) == sorted(dry.adoptable)
    for task_id, (status, _) in rows.items():
        expected = S.LOST if task_id in report.lost else status
        assert store.get(task_id).status is expected, task_id  # type: ignore[union-attr]
    assert {store.get(t).status for t in dry.lost} == {S.LOST}  # type: ignore[union-attr]
    assert {rows[t][0] for t in dry.lost} <= OCCUPYING
    controller.close()


def test_s8_11_table_retry_wait_is_adoptable(backend: Backend) -> None:
    from chongming_task import Controller

    machine = StateMachine.create("dead-retry", "sync", owner="worker-1", max_attempts=3)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    machine.mark_retry_wait(Failure(kind=FailureKind.EXCEPTION, message="boom", retryable=True))
    machine.update(lease_owner="worker-1", lease_until=datetime.now(UTC) + EXPIRED)
    store = backend.open()
    store.create(machine.snapshot, machine.transitions)
    controller = Controller(store=store, owner="worker-2")
    assert controller.reconcile().adoptable == ("dead-retry",)
    assert store.get("dead-retry").status is S.RETRY_WAIT  # type: ignore[union-attr]
    controller.close()


def test_s8_11_table_the_holder_wrote_first_is_skipped(backend: Backend) -> None:
    from chongming_task import Controller

    store = backend.open()
    snapshot, transitions = dead_snapshot("slow-holder", S.RUNNING, lease=EXPIRED)
    store.create(snapshot, transitions)
    holder = backend.open()
    query = store.query_heads

    def query_then_holder_writes(*args: Any, **kwargs: Any) -> Any:
        found = query(*args, **kwargs)
        # The original supervisor comes back and writes between reconcile's judgement
        # and its write (SQLite's write re-reads and writes a page in one transaction).
        current = holder.get("slow-holder")
        assert current is not None
        renewed = current.replace(lease_until=datetime.now(UTC) + VALID)
        machine = StateMachine(renewed)
        machine.mark_succeeded(outcome=1)
        holder.save(
            machine.snapshot,
            expect_version=current.status_version,
            transitions=machine.transitions[-1:],
        )
        return found

    store.query_heads = query_then_holder_writes  # type: ignore[method-assign]
    controller = Controller(store=store, owner="worker-2")
    report = controller.reconcile()
    assert report.skipped == ("slow-holder",)
    assert report.lost == ()
    assert holder.get("slow-holder").status is S.SUCCEEDED  # type: ignore[union-attr]  # the holder's write stands
    controller.close()


def test_s8_11_reconcile_leaves_live_tasks_of_a_live_controller(
    backend: Backend, work: Work
) -> None:
    from chongming_task import Controller

    node = Controller(store=backend.open(), owner="worker-1", lease_ttl=30)
    node.register("sync", work.sync_tenant)
    run = node.submit("sync", "A", task_id="healthy")
    reach(run, S.RUNNING)
    wait_until(lambda: (s := node.get("healthy")) and s.lease_until is not None, timeout=PATIENCE)
    other = Controller(store=backend.open(), owner="worker-2")
    report = other.reconcile()
    assert report.clean
    assert node.reconcile().clean  # its own runs are never touched
    work.release.set()
    assert node.wait("healthy", timeout=PATIENCE).ok
    other.close()
    node.close()


# ---------------------------------------------------------------- §8.14


def test_s8_14_owned_buckets(backend: Backend, work: Work) -> None:
    sync_tenant = work.sync_tenant
    SqliteTaskStore = backend.open  # noqa: N806 - the backend swap of §8.14
    from chongming_task import Controller

    controller = Controller(
        store=SqliteTaskStore("tasks.db"),
        owner="node-a",
        owned_buckets=range(0, 16),  # 本节点负责 0..15 号桶（按业务划分，可多于一个）
    )
    controller.register("sync", sync_tenant)

    bucket_b = controller.bucket_policy.bucket_for("tenant-B")
    assert bucket_b not in range(16)
    with pytest.raises(ConfigurationError) as caught:
        controller.submit("sync", bucket_key="tenant-B")
    # ConfigurationError: 桶 42（来自 bucket_key='tenant-B'）不属于本节点；
    # 本节点负责 [0, 1, ..., 15]。任务若写进别人的桶，不会有任何节点执行它。
    assert str(caught.value) == (
        f"bucket {bucket_b} (from bucket_key='tenant-B') is not owned by this node; "
        "this node owns [0, 1, ..., 15]. A task written into another node's bucket "
        "would never be run by any node."
    )
    assert controller.list_tasks() == []  # nothing was written
    with pytest.raises(ConfigurationError, match="bucket_key"):
        controller.submit("sync")  # no bucket: no node would claim it
    assert controller.owns_all_buckets is False
    assert controller.owns_bucket(3) is True
    assert controller.owns_bucket(bucket_b) is False
    assert controller.owned_buckets == frozenset(range(16))
    run = controller.submit("sync", bucket_key="tenant-A")  # bucket 7: ours
    reach(run, S.RUNNING)
    work.release.set()
    assert run.wait(PATIENCE).ok
    controller.close()


def test_s8_14_covering_every_bucket_is_no_partition(backend: Backend) -> None:
    from chongming_task import Controller

    controller = Controller(store=backend.open(), owner="node-a", owned_buckets=range(0, 64))
    controller.register("quick", lambda ctx: 1)
    assert controller.owns_all_buckets is True
    assert controller.submit("quick").wait(PATIENCE).ok  # no bucket_key needed
    controller.close()


@pytest.mark.parametrize("owned", [range(60, 70), [-1], []])
def test_s8_14_bucket_range_is_checked_at_construction(owned: Any) -> None:
    from chongming_task import Controller

    with pytest.raises(ConfigurationError):
        Controller(owner="node-a", owned_buckets=owned)


def test_s8_14_reconcile_only_cleans_its_own_buckets(backend: Backend) -> None:
    from chongming_task import BucketPolicy, Controller

    policy = BucketPolicy()
    mine, theirs = "tenant-A", "tenant-B"
    assert policy.bucket_for(mine) < 16 <= policy.bucket_for(theirs)
    store = backend.open()
    store.create(*dead_snapshot("mine", S.RUNNING, lease=EXPIRED, bucket_key=mine))
    store.create(*dead_snapshot("theirs", S.RUNNING, lease=EXPIRED, bucket_key=theirs))
    node = Controller(store=backend.open(), owner="node-a", owned_buckets=range(0, 16))
    report = node.reconcile()
    assert report.lost == ("mine",)
    assert store.get("theirs").status is S.RUNNING  # type: ignore[union-attr]  # another node's business
    node.close()


def test_s8_14_a_node_with_buckets_serves_commands_from_construction(
    backend: Backend,
) -> None:
    from chongming_task import Controller

    store = backend.open()
    snapshot, transitions = dead_snapshot("queued-a", S.QUEUED, lease=VALID)
    store.create(snapshot.replace(owner="node-a", lease_owner="node-a"), transitions)
    node = Controller(store=backend.open(), owner="node-a", owned_buckets=range(0, 16))
    issued: list[Any] = []
    console_store = backend.open()
    submit_command = console_store.submit_command

    def recording(command: Any) -> Any:
        issued.append(submit_command(command))
        return issued[-1]

    console_store.submit_command = recording  # type: ignore[method-assign]
    console = Controller(store=console_store, owner="ops-console")
    assert console.stop("queued-a", reason="before any submission") is True
    # node-a never submitted anything, yet its poller takes the command at once.
    wait_until(
        lambda: (c := console_store.get_command(issued[0].command_id)) and c.status != "pending",
        timeout=PATIENCE,
    )
    console.close()
    node.close()
