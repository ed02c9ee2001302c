"""Pause intake: a paused queue (a task name or a bucket) takes nothing, then runs.

A real ``chongming-task worker`` process shares the store (SQLite, PostgreSQL; the
memory store runs the same with an in-process worker). While a queue is paused the
store is polled for a deliberate observation window of three seconds: its tasks stay
``queued`` and unheld while a task of another queue runs meanwhile. After the resume
they run. The pause is set from this process (``Client``) and from another one (the
CLI), and ``explain``, ``ps`` and ``health`` (other processes) show it.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from _workers import cli, on_path, spawn_worker, stop_workers
from chongming_task import AsyncClient, Client, Controller, InMemoryTaskStore, TaskStatus
from chongming_task.errors import ConfigurationError
from chongming_task.stores import QueueStore
from chongming_task.stores._base import TaskStore
from chongming_task.testing import FakeClock, wait_until
from chongming_task.worker import Worker

HERE = Path(__file__).parent
TASKS = str(HERE / "pausetasks.py")
DEADLINE = 60.0
#: The observation window: a paused queue takes nothing for this long.
WINDOW = 3.0
#: Two bucket keys in different buckets of the default 64.
RED, BLUE = "red", "blue"


@pytest.fixture(autouse=True)
def _tasks_on_path() -> Iterator[None]:
    with on_path(HERE):
        yield


def _client(store: TaskStore, actor: str = "ops") -> Client:
    return Client(store, tasks=__import__("pausetasks"), actor=actor, poll_interval=0.02)


def _worker(db: str, tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    proc = spawn_worker(
        db,
        logs / "w1.log",
        options=["--owner", "w1"],
        worker=["--tasks", TASKS, "--poll-interval", "0.05", "--max-parallel", "4"],
    )
    return proc, logs


def stays_queued(store: TaskStore, task_ids: Iterable[str], seconds: float = WINDOW) -> int:
    """Poll the store for ``seconds``: every task stays queued and held by nobody.

    A task claimed between two polls cannot come back to ``queued`` unheld (its run
    moves it on), so the last poll also covers the moments between polls. Returns
    how many polls were made.
    """
    ids = list(task_ids)
    tick = threading.Event()
    polls = 0
    end = time.monotonic() + seconds
    while True:
        for task_id in ids:
            stored = store.get(task_id)
            assert stored is not None
            assert (stored.status, stored.owner) == (TaskStatus.QUEUED, None), stored
        polls += 1
        if time.monotonic() >= end:
            return polls
        tick.wait(0.05)


def _succeeds(client: Client, task_ids: Iterable[str]) -> None:
    for task_id in task_ids:
        assert client.wait(task_id, DEADLINE).status is TaskStatus.SUCCEEDED, task_id


def test_a_paused_name_takes_nothing_for_3s_and_runs_after_resume(
    shared_store: tuple[TaskStore, str], tmp_path: Path
) -> None:
    store, db = shared_store
    client = _client(store)
    gates = tmp_path / "gates"
    gates.mkdir()
    proc, logs = _worker(db, tmp_path)
    try:
        running = client.enqueue("noop", str(gates), task_id="running").task_id
        wait_until((gates / "started-running").exists, timeout=DEADLINE)
        pause = client.pause_queue(name="noop", reason="deploy 42")
        paused = [client.enqueue("noop", task_id=f"paused-{i}").task_id for i in range(3)]
        other = client.enqueue("other", task_id="other-1").task_id
        _succeeds(client, [other])  # the worker claims meanwhile: only 'noop' is paused
        assert stays_queued(store, paused) > 20
        assert store.get(running).status is TaskStatus.RUNNING  # type: ignore[union-attr]
        (gates / "release").write_text("go")  # a running task is not touched by the pause
        _succeeds(client, [running])
        stays_queued(store, paused, seconds=0)
        text = cli(db, "explain", "paused-0")
        assert text.returncode == 0, text.stderr
        assert f"waiting: {pause.describe()}" in text.stdout
        assert re.search(
            r"waiting: queue 'noop' paused by ops at \d{4}-\d\d-\d\dT[^ ]+: deploy 42", text.stdout
        )
        assert client.resume_queue(name="noop") is True
        _succeeds(client, paused)
        assert client.queue_pauses() == []
    finally:
        stop_workers([proc], logs)


def test_a_bucket_paused_from_the_cli_is_obeyed_by_a_running_worker(
    shared_store: tuple[TaskStore, str], tmp_path: Path
) -> None:
    store, db = shared_store
    client = _client(store)
    red = client.bucket_policy.bucket_for(RED)
    assert red != client.bucket_policy.bucket_for(BLUE)
    proc, logs = _worker(db, tmp_path)
    try:
        # The worker runs (and has claimed from the red bucket) before the pause.
        _succeeds(client, [client.enqueue("noop", bucket_key=RED).task_id])
        done = cli(
            db, "--owner", "oncall", "queue", "pause", "--bucket", str(red), "--reason", "disk full"
        )
        assert done.returncode == 0, done.stderr
        assert f"intake paused: bucket {red} paused by oncall at " in done.stdout
        paused = [client.enqueue("noop", bucket_key=RED).task_id for _ in range(2)]
        paused.append(client.enqueue("other", bucket_key=RED).task_id)
        blue = client.enqueue("noop", bucket_key=BLUE).task_id
        _succeeds(client, [blue])  # same name, another bucket: runs meanwhile
        assert stays_queued(store, paused) > 20

        explained = json.loads(cli(db, "explain", paused[0], "--json").stdout)
        (reason,) = [r for r in explained["reasons"] if r["kind"] == "queue_paused"]
        assert explained["reasons"][0] == reason  # the decisive reason comes first
        assert (reason["bucket"], reason["name"], reason["actor"]) == (red, None, "oncall")
        assert reason["reason"] == "disk full"
        assert reason["message"].startswith(f"waiting: bucket {red} paused by oncall at ")

        ps = cli(db, "ps")
        assert ps.returncode == 0, ps.stderr
        assert f"intake paused: bucket {red} paused by oncall at " in ps.stderr
        assert paused[0] in ps.stdout
        listed = json.loads(cli(db, "ps", "--json").stdout)["paused_queues"]
        assert [(p["bucket"], p["actor"], p["reason"]) for p in listed] == [
            (red, "oncall", "disk full")
        ]
        health = cli(db, "health")
        assert health.returncode == 0, health.stdout  # paused is reported, not unhealthy
        assert f"queue: intake paused: bucket {red} paused by oncall at " in health.stdout
        assert "problem:" not in health.stdout
        report = json.loads(cli(db, "health", "--json").stdout)
        assert report["healthy"] is True
        assert [p["bucket"] for p in report["queue"]["paused"]] == [red]

        resumed = cli(db, "queue", "resume", "--bucket", str(red))
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.strip() == f"intake resumed: bucket {red}"
        _succeeds(client, paused)
        assert json.loads(cli(db, "queue", "--json").stdout)["pauses"] == []
    finally:
        stop_workers([proc], logs)


class InProcessWorker:
    """A :class:`Worker` on its own controller sharing a memory store."""

    def __init__(self, store: TaskStore) -> None:
        import pausetasks

        self.controller = Controller(store=store, owner="w1", max_parallel=4)
        for name in ("noop", "other"):
            self.controller.register(name, getattr(pausetasks, name))
        self.worker = Worker(self.controller, max_parallel=4, poll_interval=0.02)

    def __enter__(self) -> Worker:
        self.worker.start()
        return self.worker

    def __exit__(self, *exc: object) -> None:
        self.worker.shutdown(timeout=10)


def test_pauses_on_the_memory_store_by_name_and_by_bucket() -> None:
    store = InMemoryTaskStore()
    client = _client(store)
    red = client.bucket_policy.bucket_for(RED)
    with InProcessWorker(store):
        client.pause_queue(name="noop", reason="by name")
        client.pause_queue(bucket=red, reason="by bucket")
        by_name = client.enqueue("noop", bucket_key=BLUE).task_id
        by_bucket = client.enqueue("other", bucket_key=RED).task_id
        free = client.enqueue("other", bucket_key=BLUE).task_id
        _succeeds(client, [free])
        assert stays_queued(store, [by_name, by_bucket]) > 20
        assert [p.label for p in client.queue_pauses()] == ["queue 'noop'", f"bucket {red}"]
        assert client.resume_queue(name="noop") is True
        _succeeds(client, [by_name])
        stays_queued(store, [by_bucket], seconds=0)
        assert client.resume_queue(bucket=red) is True
        assert client.resume_queue(bucket=red) is False
        _succeeds(client, [by_bucket])


@pytest.fixture
def store_clock() -> FakeClock:
    """The ``store`` fixture's stores (memory, SQLite, PostgreSQL) read a fake clock."""
    return FakeClock()


def test_a_pause_records_who_why_and_when_and_a_second_pause_replaces_it(
    store: TaskStore,
) -> None:
    clock = store.clock
    assert isinstance(clock, FakeClock)
    client = _client(store, actor="alice")
    first = client.pause_queue(name="noop", reason="  first  ")
    assert (first.actor, first.reason, first.name, first.bucket) == ("alice", "first", "noop", None)
    assert first.paused_at == clock.now()
    assert client.queue_pauses() == [first]
    clock.advance(60)
    second = _client(store, actor="bob").pause_queue(name="noop", reason="second")
    assert client.queue_pauses() == [second]
    assert second.paused_at == first.paused_at + timedelta(seconds=60)
    client.pause_queue(bucket=3, reason="b")
    assert [p.scope for p in client.queue_pauses()] == ["name:noop", "bucket:3"]


@pytest.mark.parametrize("with_limits", [False, True])
def test_the_claim_passes_over_paused_queues_with_and_without_buckets(
    store: TaskStore, with_limits: bool
) -> None:
    assert isinstance(store, QueueStore)
    client = _client(store)
    red, blue = (client.bucket_policy.bucket_for(k) for k in (RED, BLUE))
    if with_limits:  # the claim's other path: limits read inside its transaction
        client.set_limit("tenant:*", concurrency=5)
    client.pause_queue(name="noop", reason="r")
    client.pause_queue(bucket=red, reason="r")
    by_name = client.enqueue("noop", bucket_key=BLUE, priority=9).task_id
    by_bucket = client.enqueue("other", bucket_key=RED, priority=9).task_id
    free = [client.enqueue("other", bucket_key=BLUE, concurrency_key="tenant:1").task_id]
    free.append(client.enqueue("other").task_id)  # no bucket: a bucket pause is not its
    until = store.clock.now() + timedelta(seconds=30)
    for buckets in ([red, blue], None):
        taken = store.claim_queued("w1", buckets=buckets, limit=10, lease_until=until)
        assert [t.task_id for t in taken] == ([free[0]] if buckets else [free[1]])
    assert store.claim_queued("w1", buckets=None, limit=10, lease_until=until) == []
    assert client.resume_queue(bucket=red) is True
    taken = store.claim_queued("w1", buckets=[red, blue], limit=10, lease_until=until)
    assert [t.task_id for t in taken] == [by_bucket]
    assert client.resume_queue(name="noop") is True
    taken = store.claim_queued("w1", buckets=None, limit=10, lease_until=until)
    assert [t.task_id for t in taken] == [by_name]


def test_explain_from_the_store_names_the_pause_of_an_unheld_task(store: TaskStore) -> None:
    from chongming_task._explain import explain
    from chongming_task.controller._explaining import store_facts

    client = _client(store, actor="ops")
    handle = client.enqueue("noop", bucket_key=RED)
    pause = client.pause_queue(bucket=handle.snapshot.bucket, reason="disk full")
    client.pause_queue(name="noop", reason="deploy")
    facts = store_facts(store, handle.snapshot, now=store.clock.now())
    reasons = explain(facts).reasons
    assert reasons[0].kind == "queue_paused"
    assert reasons[0].message == (
        f"waiting: queue 'noop' paused by ops at {pause.paused_at.isoformat()}: deploy"
    )
    client.resume_queue(name="noop")
    reasons = explain(store_facts(store, handle.snapshot, now=store.clock.now())).reasons
    assert reasons[0].message == f"waiting: {pause.describe()}"
    client.resume_queue(bucket=handle.snapshot.bucket)
    reasons = explain(store_facts(store, handle.snapshot, now=store.clock.now())).reasons
    assert all(r.kind != "queue_paused" for r in reasons)


def test_the_async_client_pauses_and_resumes() -> None:
    store = InMemoryTaskStore()

    async def scenario() -> None:
        client = AsyncClient(store, actor="async")
        pause = await client.pause_queue(bucket=5, reason="r")
        assert pause.actor == "async"
        assert [p.bucket for p in await client.queue_pauses()] == [5]
        assert await client.resume_queue(bucket=5) is True
        assert await client.queue_pauses() == []

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"reason": "r"}, "give a task name (name=...) or a bucket number (bucket=N), not neither"),
        ({"name": "noop", "bucket": 1, "reason": "r"}, "not both"),
        ({"bucket": 64, "reason": "r"}, "bucket 64 is outside 0..63"),
        ({"bucket": -1, "reason": "r"}, "bucket must be >= 0"),
        ({"bucket": True, "reason": "r"}, "bucket must be an integer"),
        ({"bucket": "3", "reason": "r"}, "bucket must be an integer"),
        ({"name": "", "reason": "r"}, "must be a non-empty string"),
        ({"name": "nope", "reason": "r"}, "nope"),
        ({"name": "noop", "reason": ""}, "a reason is required to pause a queue"),
        ({"name": "noop", "reason": "   "}, "a reason is required to pause a queue"),
        ({"name": "noop", "reason": None}, "a reason is required to pause a queue"),
        ({"name": "noop", "reason": "a\nb"}, "must not contain control characters"),
        ({"name": "noop", "reason": "x" * 513}, "at most 512 characters"),
    ],
)
def test_bad_pauses_are_refused_and_change_nothing(options: dict[str, Any], message: str) -> None:
    store = InMemoryTaskStore()
    client = _client(store)
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        client.pause_queue(**options)
    assert client.queue_pauses() == []
    with pytest.raises(ConfigurationError, match="not both"):
        client.resume_queue(name="noop", bucket=1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pause", "--name", "noop"], "the following arguments are required: --reason"),
        (["pause", "--name", "noop", "--reason", " "], "a reason is required to pause a queue"),
        (["pause", "--reason", "r"], "one of the arguments --name --bucket is required"),
        (["pause", "--name", "noop", "--bucket", "1", "--reason", "r"], "not allowed with"),
        (["pause", "--bucket", "64", "--reason", "r"], "bucket 64 is outside 0..63"),
        (["pause", "--bucket", "x", "--reason", "r"], "--bucket"),
        (["pause", "--bucket", "-1", "--reason", "r"], "bucket must be >= 0"),
        (["pause", "--name", "a\tb", "--reason", "r"], "must not contain control characters"),
        (["pause", "--name", "nope", "--reason", "r", "--tasks", TASKS], "nope"),
        (["resume"], "one of the arguments --name --bucket is required"),
    ],
)
def test_the_cli_refuses_bad_pauses_with_one_line(
    args: list[str], message: str, tmp_path: Path
) -> None:
    db = str(tmp_path / "cli.db")
    done = cli(db, "queue", *args)
    assert done.returncode == 2, done
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    if Path(db).exists():  # nothing was stored
        assert json.loads(cli(db, "queue", "--json").stdout)["pauses"] == []


def test_the_cli_lists_pauses_and_resuming_what_is_not_paused_fails(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    done = cli(db, "--owner", "ops", "queue", "pause", "--name", "noop", "--reason", "deploy")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"intake paused: queue 'noop' paused by ops at \S+: deploy\n", done.stdout)
    listed = cli(db, "queue", "list")
    assert listed.stdout == done.stdout
    (pause,) = json.loads(cli(db, "queue", "--json").stdout)["pauses"]
    assert (pause["name"], pause["bucket"], pause["actor"], pause["reason"]) == (
        "noop",
        None,
        "ops",
        "deploy",
    )
    assert cli(db, "queue", "resume", "--name", "noop").returncode == 0
    again = cli(db, "queue", "resume", "--name", "noop")
    assert again.returncode == 1
    assert "queue 'noop' is not paused" in again.stderr
    assert cli(db, "queue").stdout.strip() == "no queue is paused"
