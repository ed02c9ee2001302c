"""``chongming_task.worker`` used from Python: queued work, refusals, buckets, shutdown.

Work reaches a worker through the store's work queue only (``Client.enqueue``, the
CLI's ``submit``): these tests enqueue as users do and read the store.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from _custom_example import example
from chongming_task.controller import Controller
from chongming_task.core._clock import SystemClock
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError
from chongming_task.policies import BucketPolicy
from chongming_task.queue import Client
from chongming_task.states import TaskStatus
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing import wait_until
from chongming_task.worker import Worker

from .conftest import Result

Invoke = Callable[..., Result]


def add(ctx: Any, a: int, b: int = 1) -> int:
    return a + b


def spin(ctx: Any, steps: int = 100_000) -> int:
    import time

    for _ in range(steps):
        ctx.checkpoint()
        time.sleep(0.005)
    return steps


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteTaskStore]:
    with SqliteTaskStore(tmp_path / "w.db") as opened:
        yield opened


def _worker(store: SqliteTaskStore, **options: Any) -> tuple[Controller, Worker]:
    max_parallel = options.pop("max_parallel", 2)
    controller = Controller(store, owner="w1", max_parallel=max_parallel, **options)
    controller.register("add", add)
    controller.register("spin", spin)
    worker = Worker(controller, max_parallel=max_parallel, poll_interval=0.05)
    return controller, worker


def _status(store: SqliteTaskStore, task_id: str) -> str | None:
    snapshot = store.get(task_id)
    return None if snapshot is None else snapshot.status.value


def _started(controller: Controller) -> list[str]:
    """The ids of the tasks ``controller`` runs, in the order they reach ``running``."""
    started: list[str] = []
    controller.subscribe(
        lambda transition, _snapshot: (
            started.append(transition.task_id)
            if transition.to_status is TaskStatus.RUNNING
            else None
        )
    )
    return started


def test_enqueue_stores_the_task_queued_under_its_id_and_refuses_a_taken_one(
    store: SqliteTaskStore, invoke: Invoke, tmp_path: Path
) -> None:
    client = Client(store, actor="me")
    handle = client.enqueue("add", a=2, task_id="t1", tags=["x"], priority=3)
    assert (handle.task_id, handle.created) == ("t1", True)
    stored = store.get("t1")
    assert stored is not None
    assert (stored.status, stored.owner, stored.tags, stored.priority) == (
        TaskStatus.QUEUED,
        None,
        frozenset({"x"}),
        3,
    )
    status = invoke("--db", str(tmp_path / "w.db"), "status", "t1")
    assert status.code == 0
    assert "queued" in status.out
    with pytest.raises(ConfigurationError, match="already exists"):
        client.enqueue("add", a=3, task_id="t1")
    with pytest.raises(ConfigurationError, match="only JSON crosses the store"):
        client.enqueue("add", a=object(), task_id="t2")
    assert store.get("t2") is None
    assert [t.to_status.value for t in store.history("t1")] == ["pending", "queued"]


def test_worker_runs_queued_tasks_and_reports_shutdown(store: SqliteTaskStore) -> None:
    controller, worker = _worker(store)
    report = worker.start()
    assert report.clean
    client = Client(store, actor="me")
    client.enqueue("add", a=40, b=2, task_id="ok")
    client.enqueue("spin", task_id="long")
    wait_until(lambda: _status(store, "ok") == "succeeded")
    wait_until(lambda: _status(store, "long") == "running")
    snapshot = store.get("ok")
    assert snapshot is not None
    assert (snapshot.outcome, snapshot.owner) == (42, "w1")

    shutdown = worker.shutdown(reason="test over", timeout=10, drain_timeout=0)
    assert shutdown.clean
    assert [(t.task_id, t.before, t.after) for t in shutdown.tasks] == [
        ("long", "running", "stopped")
    ]
    assert [(t.from_status, t.to_status) for t in store.history("long")][-2:] == [
        ("running", "stopping"),
        ("stopping", "stopped"),
    ]
    assert worker.claimed == 2
    assert controller.closed


def test_worker_fails_what_it_cannot_run(
    store: SqliteTaskStore, invoke: Invoke, tmp_path: Path
) -> None:
    # Enqueued without tasks=: unchecked, so the worker is the one to refuse them.
    _controller, worker = _worker(store)
    worker.start()
    try:
        client = Client(store, actor="me")
        client.enqueue("nosuch", task_id="r1")
        client.enqueue("add", zzz=1, task_id="r2")
        for task_id in ("r1", "r2"):
            wait_until(
                # mypy infers no type for a lambda with a default argument:
                lambda task_id=task_id: _status(store, task_id) == "failed"  # type: ignore[misc]
            )
    finally:
        worker.shutdown(timeout=5)
    refused = store.get("r1")
    assert refused is not None
    assert refused.failure is not None
    assert "not registered" in refused.failure.message
    assert [t.to_status.value for t in store.history("r1")] == [
        "pending",
        "queued",
        "starting",
        "failed",
    ]
    status = invoke("--db", str(tmp_path / "w.db"), "status", "r1")
    assert status.code == 0
    assert "failed" in status.out
    assert "not registered" in status.out


def test_worker_takes_only_its_buckets_and_only_free_slots(store: SqliteTaskStore) -> None:
    policy = BucketPolicy(num_buckets=4)
    mine = next(f"k{i}" for i in range(100) if policy.bucket_for(f"k{i}") == 0)
    theirs = next(f"k{i}" for i in range(100) if policy.bucket_for(f"k{i}") == 3)
    controller, worker = _worker(store, max_parallel=1, num_buckets=4, owned_buckets=[0, 1])
    worker.start()
    try:
        client = Client(store, num_buckets=4)
        client.enqueue("spin", task_id="a", bucket_key=mine)
        client.enqueue("spin", task_id="b", bucket_key=mine)
        client.enqueue("add", a=1, task_id="c", bucket_key=theirs)
        # "a" takes the only slot, strictly in order.
        wait_until(lambda: _status(store, "a") == "running")
        assert worker.free_slots() == 0
        # Full: "b" waits queued, unheld; "c" belongs to another node's bucket.
        for waiting in ("b", "c"):
            snapshot = store.get(waiting)
            assert snapshot is not None
            assert (snapshot.status, snapshot.owner) == (TaskStatus.QUEUED, None)
        controller.stop("a", reason="make room")
        wait_until(lambda: _status(store, "b") == "running")
        c = store.get("c")
        assert c is not None
        assert (c.status, c.owner) == (TaskStatus.QUEUED, None)
    finally:
        shutdown = worker.shutdown(timeout=10, drain_timeout=0)
    assert {t.task_id for t in shutdown.tasks} == {"b"}


def test_one_free_slot_takes_the_oldest_queued_task_first(store: SqliteTaskStore) -> None:
    # "a" is queued before "b", both of one priority, and the worker has one slot: it
    # must run "a" first, then "b", whatever the controller's own poller does.
    controller, worker = _worker(store, max_parallel=1)
    started = _started(controller)
    client = Client(store)
    client.enqueue("add", a=1, task_id="a")
    client.enqueue("add", a=2, task_id="b")
    worker.start()
    try:
        wait_until(lambda: _status(store, "a") == _status(store, "b") == "succeeded")
    finally:
        assert worker.shutdown(timeout=10).clean
    assert started == ["a", "b"], f"the worker took {started}, not the oldest first"
    first, second = store.get("a"), store.get("b")
    assert first is not None
    assert second is not None
    assert first.finished_at is not None
    assert second.started_at is not None
    assert first.finished_at <= second.started_at


def test_worker_needs_a_sane_configuration() -> None:
    controller = Controller()
    try:
        with pytest.raises(ConfigurationError, match="max_parallel"):
            Worker(controller, max_parallel=0)
    finally:
        controller.close()


def test_a_store_without_a_work_queue_takes_no_work_from_another_process() -> None:
    """The queue is the one way work crosses processes: a store that keeps none (the
    example backend implements commands and schedules, not ``QueueStore``) is refused
    by the worker and by ``Client.enqueue`` with a message naming the missing part,
    before anything is written."""
    store = example.DictTaskStore()
    controller = Controller(store, owner="w1")
    try:
        controller.register("add", add)
        with pytest.raises(ConfigurationError, match=r"a Worker .* implements QueueStore"):
            Worker(controller)
        with pytest.raises(ConfigurationError, match=r"Client.enqueue .* implements QueueStore"):
            Client(store).enqueue("add", a=1, task_id="t1")
        assert store.get("t1") is None
        # In its own process the store runs tasks as ever.
        assert controller.submit("add", 1, task_id="local").wait(10).value == 2
    finally:
        controller.close()
        store.close()


def test_rich_output_paths(invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal: live progress for run, rich tables for ps (and --watch)."""
    from chongming_task.cli import main

    from .conftest import TASKS

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    db = str(tmp_path / "tty.db")
    out = Tty()
    code = main(
        [
            "--db",
            db,
            "run",
            "loop",
            "--tasks",
            TASKS,
            "--arg",
            "steps=3",
            "--arg",
            "delay=0.05",
            "--task-id",
            "t1",
        ],
        stdout=out,
        stderr=io.StringIO(),
    )
    assert code == 0
    assert "t1: succeeded, outcome 3" in out.getvalue()
    assert "\x1b[" in out.getvalue()
    for argv in (["ps"], ["ps", "--watch", "--count", "2", "--interval", "0.01"], ["stats"]):
        out = Tty()
        assert main(["--db", db, *argv], stdout=out, stderr=io.StringIO()) == 0
        assert "succeeded" in out.getvalue()


def test_a_worker_with_keep_finished_forgets_old_runs_not_tasks(store: SqliteTaskStore) -> None:
    controller, worker = _worker(store, keep_finished=1)
    worker.start()
    try:
        client = Client(store)
        for n in range(4):
            client.enqueue("add", a=n, task_id=f"k{n}")
        wait_until(lambda: all(_status(store, f"k{n}") == "succeeded" for n in range(4)))
        wait_until(lambda: len(controller.runs()) == 1)
        for n in range(4):
            assert [t.to_status.value for t in store.history(f"k{n}")] == [
                "pending",
                "queued",
                "starting",
                "running",
                "succeeded",
            ]
            assert controller.wait(f"k{n}", timeout=5).value == n + 1
    finally:
        assert worker.shutdown(reason="test over", timeout=10).clean


def test_start_logs_each_lost_task_of_a_dead_predecessor(
    store: SqliteTaskStore, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker subscribes before it reconciles: it hears every ``-> lost`` (its log
    line names the task)."""
    clock = SystemClock()
    for i in range(3):
        machine = StateMachine.create(f"old-{i}", f"job-{i}", owner="dead", clock=clock)
        machine.mark_queued()
        machine.mark_starting()
        machine.mark_running()
        expired = clock.now() - timedelta(seconds=5)
        store.create(
            machine.snapshot.replace(lease_owner="dead", lease_until=expired),
            machine.transitions,
        )
    _, worker = _worker(store)
    with caplog.at_level("INFO", logger="chongming_task.worker"):
        report = worker.start()
        assert report.lost == ("old-0", "old-1", "old-2")
        wait_until(lambda: sum("-> lost" in r.getMessage() for r in caplog.records) == 3, timeout=5)
    named = {r.getMessage().split()[0]: getattr(r, "task_name", None) for r in caplog.records}
    assert {k: v for k, v in named.items() if k.startswith("old-")} == {
        "old-0": "job-0",
        "old-1": "job-1",
        "old-2": "job-2",
    }
    worker.shutdown(timeout=5)
    for i in range(3):
        stored = store.get(f"old-{i}")
        assert stored is not None
        assert stored.status.value == "lost"


def _keys(policy: BucketPolicy, bucket: int, count: int) -> list[str]:
    return [f"k{i}" for i in range(1000) if policy.bucket_for(f"k{i}") == bucket][:count]


def test_a_worker_reaches_its_own_tasks_behind_other_nodes_ones(
    store: SqliteTaskStore,
) -> None:
    # Three tasks for a bucket owned by a node that is down are the oldest queued ones,
    # more than this worker has slots: it must take its own behind them.
    policy = BucketPolicy(num_buckets=4)
    theirs, mine = _keys(policy, 3, 3), _keys(policy, 0, 3)
    client = Client(store, num_buckets=4)
    for n, key in enumerate(theirs):
        client.enqueue("add", a=n, task_id=f"f{n}", bucket_key=key)
    for n, key in enumerate(mine):
        client.enqueue("add", a=n, task_id=f"o{n}", bucket_key=key)
    _, worker = _worker(store, max_parallel=2, num_buckets=4, owned_buckets=[0, 1])
    worker.start()
    try:
        wait_until(lambda: all(_status(store, f"o{n}") == "succeeded" for n in range(3)))
    finally:
        assert worker.shutdown(timeout=10).clean
    for n in range(3):
        assert [t.to_status.value for t in store.history(f"o{n}")] == [
            "pending",
            "queued",
            "starting",
            "running",
            "succeeded",
        ]
        foreign = store.get(f"f{n}")
        assert foreign is not None
        assert (foreign.status, foreign.owner) == (TaskStatus.QUEUED, None)  # never claimed
        assert [t.to_status.value for t in store.history(f"f{n}")] == ["pending", "queued"]


def test_a_more_urgent_task_of_another_node_never_holds_up_ours(store: SqliteTaskStore) -> None:
    # Another node's task of priority 5 is first in the claim order; with one slot the
    # worker takes its own, in priority order then oldest first, and leaves that one.
    policy = BucketPolicy(num_buckets=4)
    (theirs,), (low, high, other) = _keys(policy, 3, 1), _keys(policy, 0, 3)
    client = Client(store, num_buckets=4)
    client.enqueue("add", a=0, task_id="f0", bucket_key=theirs, priority=5)
    client.enqueue("add", a=1, task_id="o-low", bucket_key=low)
    client.enqueue("add", a=2, task_id="o-high", bucket_key=high, priority=9)
    client.enqueue("add", a=3, task_id="o-last", bucket_key=other)
    controller, worker = _worker(store, max_parallel=1, num_buckets=4, owned_buckets=[0, 1])
    started = _started(controller)
    worker.start()
    try:
        wait_until(
            lambda: all(_status(store, t) == "succeeded" for t in ("o-low", "o-high", "o-last"))
        )
    finally:
        assert worker.shutdown(timeout=10).clean
    assert started == ["o-high", "o-low", "o-last"]
    assert [store.get(t).outcome for t in started] == [3, 2, 4]  # type: ignore[union-attr]
    foreign = store.get("f0")
    assert foreign is not None
    assert (foreign.status, foreign.owner) == (TaskStatus.QUEUED, None)


def test_a_later_urgent_task_overtakes_older_queued_ones(store: SqliteTaskStore) -> None:
    # One slot, held by "blocker": three tasks wait in the store meanwhile. When the
    # slot frees, the newest one, of the highest priority, must start first; the other
    # two follow by priority, then in the order they were enqueued.
    controller, worker = _worker(store, max_parallel=1)
    started = _started(controller)
    worker.start()
    client = Client(store)
    try:
        client.enqueue("spin", task_id="blocker")
        wait_until(lambda: started == ["blocker"])
        client.enqueue("add", a=1, task_id="old")
        client.enqueue("add", a=2, task_id="older-urgent", priority=3)
        client.enqueue("add", a=3, task_id="urgent", priority=9)
        assert worker.free_slots() == 0
        assert [_status(store, t) for t in ("old", "older-urgent", "urgent")] == ["queued"] * 3
        controller.stop("blocker", reason="make room")
        wait_until(
            lambda: all(_status(store, t) == "succeeded" for t in ("old", "older-urgent", "urgent"))
        )
    finally:
        assert worker.shutdown(timeout=10).clean
    assert started == ["blocker", "urgent", "older-urgent", "old"]
    for task_id, priority in (("urgent", 9), ("older-urgent", 3), ("old", 0)):
        snapshot = store.get(task_id)
        assert snapshot is not None
        assert snapshot.priority == priority
        assert [t.to_status.value for t in store.history(task_id)] == [
            "pending",
            "queued",
            "starting",
            "running",
            "succeeded",
        ]
