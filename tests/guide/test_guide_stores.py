"""Guide §4.5 (store-backed), §8.6, §8.7, §8.9 samples: the store and cross-process use.

Every test runs on SQLite (``tasks.db`` in a temp cwd) and on PostgreSQL (a fresh
schema; skipped locally without ``CHONGMING_TEST_POSTGRES``). The PostgreSQL variant
rebinds ``SqliteTaskStore`` to open the PostgreSQL database: the one-line swap the
guide promises changes nothing else (§8.7, §8.14).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from _status import status_now
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConcurrencyConflict, ConfigurationError, StoreError
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.testing import wait_until

from .conftest import PATIENCE, Backend, S, Work, path, reach
from .test_guide_control import worker


def stored_path(controller: Any, task_id: str) -> list[S]:
    return [record.to_status for record in controller.history(task_id)]


# ---------------------------------------------------------------- §4.5 (with a store)


def test_s4_5_same_process_start_and_stop(backend: Backend) -> None:
    from chongming_task import Controller

    store = backend.open("tasks.db")

    # 方式一：同进程（需要这个进程一直活着）
    controller = Controller(store=store, owner="node-a")
    controller.register_all(worker)
    run = controller.submit("worker", "kafka://orders", task_id="orders-worker")
    controller.stop("orders-worker", reason="发布窗口")
    outcome = controller.wait("orders-worker", timeout=10)  # → succeeded，value=已处理批数

    # The guide says "-> succeeded": the body answers the stop request and returns its
    # count, whether the stop landed while the run was still `starting` (submit()
    # returns before the carrier begins) or once it was `running`.
    if outcome.status is S.SUCCEEDED:
        assert isinstance(outcome.value, int)
        assert run.logs[-1].message == f"收到停止请求，本次共处理 {outcome.value} 批"
        expected = path(run)
        assert expected in (
            [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.SUCCEEDED],
            [S.PENDING, S.QUEUED, S.STARTING, S.STOPPING, S.SUCCEEDED],
        )
    else:
        # the stop fell between `is_stop_requested` and `checkpoint()` (microseconds)
        assert (outcome.status, outcome.value) == (S.STOPPED, None)
        expected = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED]
    assert path(run) == expected
    wait_until(lambda: stored_path(controller, "orders-worker") == expected, timeout=PATIENCE)
    stored = controller.get("orders-worker")
    assert stored is not None
    assert stored.outcome == outcome.value  # the return value is kept in the store
    # stop is terminal: running again needs a new task id (the store refuses duplicates).
    with pytest.raises(ConfigurationError, match="orders-worker"):
        controller.submit("worker", "kafka://orders", task_id="orders-worker")
    other = Controller(store=backend.open("tasks.db"), owner="node-b")
    other.register_all(worker)
    with pytest.raises(ConfigurationError, match="orders-worker"):
        other.submit("worker", "kafka://orders", task_id="orders-worker")
    other.close()
    controller.close()


def test_s4_5_same_process_stop_once_running_is_succeeded_with_the_count(
    backend: Backend,
) -> None:
    from chongming_task import Controller

    controller = Controller(store=backend.open(), owner="node-a")
    controller.register_all(worker)
    run = controller.submit("worker", "kafka://orders", task_id="orders-worker")
    reach(run, S.RUNNING)
    controller.stop("orders-worker", reason="发布窗口")
    outcome = controller.wait("orders-worker", timeout=10)  # → succeeded，value=已处理批数
    assert outcome.status is S.SUCCEEDED
    assert isinstance(outcome.value, int)
    assert run.logs[-1].message == f"收到停止请求，本次共处理 {outcome.value} 批"
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.SUCCEEDED]
    controller.close()


def test_s4_5_pause_rather_than_stop(backend: Backend) -> None:
    from chongming_task import Controller

    controller = Controller(store=backend.open(), owner="node-a")
    controller.register_all(worker)
    run = controller.submit("worker", "kafka://orders", task_id="orders-worker")
    reach(run, S.RUNNING)

    assert controller.pause("orders-worker") is True  # → True：已确认挂起
    assert run.status is S.PAUSED
    assert controller.active_count == 1  # a paused task keeps its execution slot
    assert controller.resume("orders-worker") is True  # 继续跑
    assert status_now(run) is S.RUNNING
    assert controller.stop("orders-worker", reason="发布窗口") is True  # 彻底结束

    # Right after resume the body may still be inside checkpoint(): then the stop
    # raises there (stopped); otherwise the loop sees is_stop_requested (succeeded).
    outcome = controller.wait("orders-worker", timeout=10)
    assert outcome.status in (S.STOPPED, S.SUCCEEDED)
    assert path(run) == [
        S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.PAUSING, S.PAUSED,
        S.RUNNING, S.STOPPING, outcome.status,
    ]  # fmt: skip
    controller.close()


# ---------------------------------------------------------------- §8.6


def test_s8_6_prune_drops_the_oldest_terminal_tasks(backend: Backend) -> None:
    from chongming_task import Controller

    controller = Controller(store=backend.open(), owner="node-a")
    controller.register("quick", lambda ctx, n: n)
    for n in range(5):
        controller.submit("quick", n, task_id=f"q{n}")
        controller.wait(f"q{n}", timeout=PATIENCE)
    assert controller.prune(keep_terminal=2) == 3
    assert [s.task_id for s in controller.list_tasks()] == ["q3", "q4"]
    assert controller.history("q0") == []
    controller.close()


# ---------------------------------------------------------------- §8.7


def make_snapshots() -> tuple[Any, Any]:
    """``snapshot`` (new, pending) and ``next_snapshot`` (the same task, running)."""
    machine = StateMachine.create("job-1", "抽取", tags={"io"})
    snapshot = machine.snapshot
    machine.mark_queued()
    machine.mark_starting(executor="thread")
    machine.mark_running()
    return snapshot, machine.snapshot


def check_store_sample(store: Any, snapshot: Any, next_snapshot: Any) -> None:
    """The claims §8.7 makes about the five calls of its sample."""
    from chongming_task import Progress, TaskQuery, TaskStatus

    stored = store.get("job-1")
    assert stored.status is TaskStatus.RUNNING
    assert stored.status_version == next_snapshot.status_version
    assert stored.progress == Progress(done=120, total=500)  # touch wrote progress...
    assert stored.status_version == 3  # ...without a new version (high-frequency side channel)
    assert [
        s.task_id for s in store.query(TaskQuery(statuses=frozenset({TaskStatus.RUNNING})))
    ] == ["job-1"]
    assert store.query(TaskQuery(tag="other")) == []
    # Optimistic concurrency: a writer holding the old version loses.
    with pytest.raises(ConcurrencyConflict):
        store.save(next_snapshot, expect_version=snapshot.status_version)
    with pytest.raises(ConfigurationError, match="job-1"):
        store.create(snapshot)  # duplicate id


def test_s8_7_sqlite_store_sample(backend: Backend) -> None:
    snapshot, next_snapshot = make_snapshots()

    from chongming_task import Progress, SqliteTaskStore, TaskQuery, TaskStatus

    if backend.kind == "postgres":
        SqliteTaskStore = backend.open  # type: ignore[assignment,misc]  # noqa: N806

    store = SqliteTaskStore("tasks.db")
    store.create(snapshot)
    store.save(next_snapshot, expect_version=snapshot.status_version)  # 乐观并发
    found = store.query(TaskQuery(statuses=frozenset({TaskStatus.RUNNING}), tag="io"))
    assert store.touch("job-1", progress=Progress(done=120, total=500)) is True

    assert [s.task_id for s in found] == ["job-1"]
    check_store_sample(store, snapshot, next_snapshot)
    store.close()


@pytest.mark.external_service
def test_s8_7_postgres_store_sample(postgres_dsn: str) -> None:
    snapshot, next_snapshot = make_snapshots()

    from chongming_task import PostgresTaskStore  # pip install "chongming-task[postgres]"

    store = PostgresTaskStore(postgres_dsn)  # "postgresql://user:pw@db.internal:5432/chongming"

    from chongming_task import Progress, TaskQuery, TaskStatus

    store.create(snapshot)
    store.save(next_snapshot, expect_version=snapshot.status_version)  # 乐观并发
    store.query(TaskQuery(statuses=frozenset({TaskStatus.RUNNING}), tag="io"))
    store.touch("job-1", progress=Progress(done=120, total=500))
    check_store_sample(store, snapshot, next_snapshot)
    # Tables already exist now: a second connection just uses them.
    again = PostgresTaskStore(postgres_dsn)
    assert again.get("job-1") is not None
    again.close()
    store.close()


def test_s8_7_four_kinds_of_data(backend: Backend) -> None:
    from chongming_task import Progress
    from chongming_task.stores import Command

    snapshot, next_snapshot = make_snapshots()
    store = backend.open()
    store.create(snapshot, [])
    # The audit trail is append-only and idempotent on (task, version).
    history = StateMachine.create("job-1", "抽取").transitions
    store.append(history[0])
    store.append(history[0])
    assert len(store.history("job-1")) == 1
    # touch never changes status_version.
    assert store.touch("job-1", progress=Progress(done=1, total=2))
    assert store.get("job-1").status_version == snapshot.status_version  # type: ignore[union-attr]
    # A claimed command whose lease ran out can be claimed again (crash of the claimant).
    issued = store.submit_command(
        Command.new(
            kind="task",
            target="job-1",
            action="stop",
            issued_by="ops",
            issued_at=store.clock.now(),
            payload={},
            target_owner=None,
        )
    )
    first = store.claim_commands("node-a", lease=0.2)
    assert [c.command_id for c in first] == [issued.command_id]
    assert store.claim_commands("node-b", lease=0.2) == []  # leased: not handed out twice
    second = wait_until(lambda: store.claim_commands("node-b", lease=5), timeout=PATIENCE)
    assert [c.command_id for c in second] == [issued.command_id]
    assert second[0].claim_token != first[0].claim_token
    assert second[0].claim_token is not None
    store.complete_command(issued.command_id, second[0].claim_token, result="done")
    assert store.get_command(issued.command_id).status == "completed"  # type: ignore[union-attr]
    assert next_snapshot is not None


# ---------------------------------------------------------------- §8.9


def test_s8_9_one_process_runs_another_watches_and_controls(backend: Backend, work: Work) -> None:
    sync_tenant = work.sync_tenant

    from chongming_task import Controller, SqliteTaskStore

    if backend.kind == "postgres":  # the one-line backend swap of §8.14
        SqliteTaskStore = backend.open  # type: ignore[assignment,misc]  # noqa: N806

    worker_ = Controller(store=SqliteTaskStore("tasks.db"), max_parallel=2, owner="worker-1")
    worker_.register("sync", sync_tenant)
    worker_.submit("sync", "租户A", task_id="job-1", bucket_key="tenant-A")

    run = worker_.run("job-1")
    assert run is not None
    reach(run, S.RUNNING)
    wait_until(
        lambda: (s := worker_.get("job-1")) is not None and s.status is S.RUNNING,
        timeout=PATIENCE,
    )

    # 另一个进程（同一个 SQLite 文件，各自一条连接）
    console = Controller(store=SqliteTaskStore("tasks.db"), owner="ops-console")
    seen = console.list_tasks()  # 看得到 job-1，尽管它并不持有
    # Read through the store before the stop: once it is accepted, the holder may
    # apply it at any moment, and the task stops counting as running.
    running = console.stats().running
    buckets = console.bucket_counts()
    assert console.stop("job-1", reason="运维停止") is True  # 写成一条指令（已受理）

    assert [s.task_id for s in seen] == ["job-1"]
    assert console.run("job-1") is None  # it does not hold it
    assert running == 1
    assert buckets == {worker_.bucket_policy.bucket_for("tenant-A"): 1}
    outcome = worker_.wait("job-1", timeout=PATIENCE)
    assert outcome.status is S.STOPPED
    expected = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED]
    assert path(run) == expected
    wait_until(lambda: stored_path(console, "job-1") == expected, timeout=PATIENCE)
    stopping = console.history("job-1")[4]
    assert stopping.reason == "运维停止"
    assert stopping.actor == "ops-console"  # who pressed stop, readable afterwards
    assert console.wait("job-1", timeout=PATIENCE).status is S.STOPPED
    console.close(close_store=True)
    worker_.close(close_store=True)


def test_s8_9_three_behaviours_pause_is_unconfirmed_across_processes(
    backend: Backend, work: Work
) -> None:
    from chongming_task import Controller

    holder = Controller(store=backend.open(), owner="worker-1")
    holder.register("sync", work.sync_tenant)
    run = holder.submit("sync", "A", task_id="job-1")
    reach(run, S.RUNNING)
    console = Controller(store=backend.open(), owner="ops-console")
    # 1. A remote pause cannot be confirmed: False means "unconfirmed", not "failed".
    assert console.pause("job-1") is False
    wait_until(
        lambda: (s := console.get("job-1")) is not None and s.status is S.PAUSED,
        timeout=PATIENCE,
    )
    assert console.resume("job-1") is True  # "accepted"
    wait_until(
        lambda: (s := console.get("job-1")) is not None and s.status is S.RUNNING,
        timeout=PATIENCE,
    )
    assert console.stop("nobody-has-this", reason="x") is False
    work.release.set()
    assert holder.wait("job-1", timeout=PATIENCE).ok
    assert path(run) == [
        S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.PAUSING, S.PAUSED, S.RUNNING, S.SUCCEEDED,
    ]  # fmt: skip
    # stop_all only acts on tasks this process holds.
    assert console.stop_all(reason="everything") == 0
    console.close()
    holder.close()


def test_s8_9_three_behaviours_a_query_client_never_takes_commands(
    backend: Backend, work: Work
) -> None:
    from chongming_task import Controller
    from chongming_task.stores import Command

    store = backend.open()
    issued: list[Any] = []
    submit_command = store.submit_command

    def recording(command: Any) -> Any:
        issued.append(submit_command(command))
        return issued[-1]

    store.submit_command = recording  # type: ignore[method-assign]
    console = Controller(store=store, owner="ops-console")
    console.list_tasks()
    holder = Controller(store=backend.open(), owner="worker-1")
    holder.register("sync", work.sync_tenant)
    run = holder.submit("sync", "A", task_id="job-1")
    reach(run, S.RUNNING)
    assert console.stop("job-1", reason="from the console") is True
    holder.wait("job-1", timeout=PATIENCE)
    assert len(issued) == 1, "the stop was written as one command"
    command = wait_until(
        lambda: (c := store.get_command(issued[0].command_id)) and c.status == "completed" and c,
        timeout=PATIENCE,
    )
    assert isinstance(command, Command)
    assert (command.action, command.target, command.issued_by) == ("stop", "job-1", "ops-console")
    assert command.claimed_by == "worker-1"  # the holder applied it, not the console
    assert not any("ops-console" in t.name for t in threading.enumerate())  # no poller
    console.close()
    holder.close()


def completed(store: Any, command_id: str) -> Any:
    command = store.get_command(command_id)
    return command if command is not None and command.status == "completed" else None


def test_s8_9_a_command_addressed_to_nobody_reaches_the_holder(
    backend: Backend, work: Work
) -> None:
    """Older versions addressed some commands to nobody: whichever poller claims one
    settles it once through the one control path, which forwards it to the holder."""
    from chongming_task import Controller
    from chongming_task.stores import Command

    holder = Controller(store=backend.open(), owner="worker-1", command_poll_interval=0.2)
    bystander = Controller(store=backend.open(), owner="worker-2", command_poll_interval=0.02)
    holder.register("sync", work.sync_tenant)
    bystander.register("sync", work.sync_tenant)
    run = holder.submit("sync", "A", task_id="job-1")
    bystander.submit("sync", "B", task_id="job-2")  # so that it polls too
    reach(run, S.RUNNING)
    store = backend.open()
    # Addressed to nobody in particular: either poller may claim it first.
    for _ in range(5):
        command = store.submit_command(
            Command.new(
                kind="task",
                target="job-1",
                action="pause",
                issued_by="ops",
                issued_at=store.clock.now(),
                payload={},
                target_owner=None,
            )
        )
        done = wait_until(
            lambda c=command: (  # type: ignore[misc]  # mypy infers no lambda with a default
                (x := store.get_command(c.command_id)) and x.status == "completed" and x
            ),
            timeout=PATIENCE,
        )
        assert isinstance(done, Command)
        assert done.claims == 1, "settled by its first claimant, never handed back"
        if done.claimed_by == "worker-1":
            assert done.result == {"applied": True}, run.transitions[-3:]
        else:  # the bystander forwarded it to the holder
            assert done.result == {"applied": False, "outcome": "requested"}
        reach(run, S.PAUSED)
        assert [t.actor for t in run.transitions if t.to_status is S.PAUSING][-1] == "ops"
        assert holder.resume("job-1"), run.transitions[-3:]
    work.release.set()
    holder.wait_all(timeout=PATIENCE)
    bystander.wait_all(timeout=PATIENCE)
    bystander.close()
    holder.close()


class FlakyStore(InMemoryTaskStore):
    """A store whose snapshot writes fail while ``broken`` is set."""

    broken = False

    def save(self, snapshot: Any, *, expect_version: int, transitions: Any = ()) -> None:
        if self.broken:
            raise StoreError("disk full")
        super().save(snapshot, expect_version=expect_version, transitions=transitions)


def test_s8_9_three_behaviours_store_failures_never_fail_a_task() -> None:
    from chongming_task import Controller

    store = FlakyStore()
    controller = Controller(store=store, owner="worker-1")
    controller.register("quick", lambda ctx, n: n)
    store.broken = True
    for n in range(25):
        controller.submit("quick", n, task_id=f"q{n}")
    outcomes = controller.wait_all(timeout=PATIENCE)
    assert all(o.ok for o in outcomes)  # the tasks are fine
    assert len(controller.persist_failures) == 20  # the last 20, never silent
    assert controller.persist_failure_count > 20
    failure = controller.persist_failures[-1]
    assert failure.operation == "save"
    assert "disk full" in failure.error
    controller.close(close_store=True)


def test_s8_9_usage_notes(backend: Backend) -> None:
    import os
    import socket

    from chongming_task import Controller

    store = backend.open()
    controller = Controller(store=store)
    assert controller.owner == f"{socket.gethostname()}:{os.getpid()}"
    controller.close(close_store=True)
    with pytest.raises(StoreError):
        store.get("anything")  # closed for real
