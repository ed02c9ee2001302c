"""``Client`` and ``AsyncClient`` on every store: handles, control before start, claiming.

A real :class:`~chongming_task.worker.Worker` runs in this process where a body must
run (``wait`` returns its ``TaskOutcome``); ordering, delays and the claim/cancel race
are driven through ``TaskStore.claim_queued`` directly, with a ``FakeClock``, so they
are deterministic. What the *store* says (status, holder, history) is asserted.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from chongming_task import AsyncClient, Client, InMemoryTaskStore, SqliteTaskStore, TaskStatus
from chongming_task.controller import Controller
from chongming_task.errors import ConcurrencyConflict, ConfigurationError
from chongming_task.stores import QueueStore
from chongming_task.stores._base import TaskStore
from chongming_task.testing import FakeClock, wait_until
from chongming_task.worker import Worker

S = TaskStatus
DEADLINE = 20.0

#: Task ids whose body started, in order (the bodies below append to it).
ran: list[str] = []
GATE = threading.Event()


def add(ctx: Any, a: int, b: int = 0) -> int:
    ran.append(ctx.task_id)
    return a + b


def gated(ctx: Any, n: int) -> int:
    ran.append(ctx.task_id)
    while not GATE.is_set():
        ctx.checkpoint()
        GATE.wait(0.02)
    return n


def boom(ctx: Any) -> None:
    ran.append(ctx.task_id)
    raise ValueError("boom")


TASKS: dict[str, Callable[..., Any]] = {"add": add, "gated": gated, "boom": boom}


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    ran.clear()
    GATE.clear()
    yield
    GATE.set()


def open_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest, **options: Any) -> Any:
    if kind == "memory":
        return InMemoryTaskStore(**options)
    if kind == "sqlite":
        return SqliteTaskStore(tmp_path / "q.db", **options)
    from chongming_task.stores._postgres import PostgresTaskStore

    return PostgresTaskStore(request.getfixturevalue("postgres_dsn"), **options)


STORES = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.external_service)]


@pytest.fixture(params=STORES)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[TaskStore]:
    opened = open_store(kind, tmp_path, request)
    yield opened
    opened.close()


@pytest.fixture
def fake(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """``(store, clock)``: a store whose clock only moves on ``advance``."""
    clock = FakeClock()
    opened = open_store(kind, tmp_path, request, clock=clock)
    yield opened, clock
    opened.close()


def definitions() -> Controller:
    controller = Controller()
    for name, fn in TASKS.items():
        controller.register(name, fn)
    return controller


@pytest.fixture
def client(store: TaskStore) -> Client:
    return Client(store, tasks=definitions(), poll_interval=0.02)


class InProcessWorker:
    """A :class:`Worker` on its own controller sharing ``store``, started and shut down."""

    def __init__(self, store: TaskStore, owner: str = "w1", **controller: Any) -> None:
        self.controller = Controller(store=store, owner=owner, max_parallel=2, **controller)
        for name, fn in TASKS.items():
            self.controller.register(name, fn)
        self.worker = Worker(self.controller, max_parallel=2, poll_interval=0.02)

    def __enter__(self) -> Worker:
        self.worker.start()
        return self.worker

    def __exit__(self, *exc: object) -> None:
        GATE.set()
        self.worker.shutdown(timeout=10)


def edges(transitions: Any) -> list[tuple[S | None, S]]:
    return [(t.from_status, t.to_status) for t in transitions]


# ------------------------------------------------------------ handle, wait, history


def test_handle_reads_the_store_and_wait_returns_the_outcome(
    client: Client, store: TaskStore
) -> None:
    handle = client.enqueue("add", 2, b=3, bucket_key="tenant-a", tags=["math"])
    assert handle.task_id.startswith("add-")
    assert handle.status is S.QUEUED
    stored = store.get(handle.task_id)
    assert stored is not None
    assert (stored.status, stored.owner, stored.bucket_key) == (S.QUEUED, None, "tenant-a")
    assert stored.bucket == client.bucket_policy.bucket_for("tenant-a")
    assert "math" in stored.tags
    assert handle.snapshot.status_version == stored.status_version
    assert edges(handle.transitions) == [(None, S.PENDING), (S.PENDING, S.QUEUED)]
    assert handle.transitions[-1].actor == client.actor
    with pytest.raises(TimeoutError, match="still queued"):
        handle.wait(timeout=0.05)  # no worker yet: waiting does not change it
    assert handle.status is S.QUEUED

    with InProcessWorker(store):
        outcome = handle.wait(DEADLINE)
    assert (outcome.ok, outcome.status, outcome.value, outcome.failure) == (
        True,
        S.SUCCEEDED,
        5,
        None,
    )
    assert outcome.snapshot.owner == "w1"
    assert edges(handle.transitions) == [
        (None, S.PENDING),
        (S.PENDING, S.QUEUED),
        (S.QUEUED, S.STARTING),
        (S.STARTING, S.RUNNING),
        (S.RUNNING, S.SUCCEEDED),
    ]
    versions = [t.version for t in handle.transitions]
    assert versions == sorted(versions)
    assert len(set(versions)) == len(versions)
    assert ran == [handle.task_id]


def test_a_failing_body_is_a_failed_outcome(client: Client, store: TaskStore) -> None:
    handle = client.enqueue("boom")
    with InProcessWorker(store):
        outcome = handle.wait(DEADLINE)
    assert (outcome.ok, outcome.status, outcome.value) == (False, S.FAILED, None)
    assert outcome.failure is not None
    assert "boom" in outcome.failure.message
    assert store.get(handle.task_id).status is S.FAILED  # type: ignore[union-attr]


def test_get_and_list_tasks_filters(client: Client, store: TaskStore) -> None:
    a = client.enqueue("add", 1, task_id="job-a", bucket_key="k1", tags=["x"])
    b = client.enqueue("add", 2, task_id="job-b", bucket_key="k2", priority=5)
    c = client.enqueue("add", 3, task_id="other-c", bucket_key="k1")
    assert c.stop("not needed") is True
    got = client.get("job-a")
    assert got is not None
    assert got.task_id == a.task_id
    assert got.status is S.QUEUED
    assert client.get("missing") is None

    def ids(**filters: Any) -> list[str]:
        return [s.task_id for s in client.list_tasks(**filters)]

    assert ids() == ["job-a", "job-b", "other-c"]
    assert ids(status="queued") == ["job-a", "job-b"]
    assert ids(status=[S.STOPPED]) == ["other-c"]
    assert ids(name_prefix="add") == ["job-a", "job-b", "other-c"]
    assert ids(tag="x") == ["job-a"]
    bucket = client.bucket_policy.bucket_for("k1")
    assert set(ids(bucket=bucket)) == {"job-a", "other-c"}
    assert ids(order="priority", status="queued") == ["job-b", "job-a"]
    assert ids(limit=1) == ["job-a"]
    assert ids(owner="nobody") == []
    assert b.status is S.QUEUED
    with pytest.raises(ConfigurationError):
        client.list_tasks(status="nonsense")


def test_enqueue_many_is_all_or_none(client: Client, store: TaskStore) -> None:
    handles = client.enqueue_many(
        "add",
        [(1,), {"a": 2, "b": 3}],
        task_ids=["m-1", "m-2"],
        bucket_keys=["k1", None],
    )
    assert [h.task_id for h in handles] == ["m-1", "m-2"]
    assert [h.status for h in handles] == [S.QUEUED, S.QUEUED]
    assert store.get("m-2").bucket is None  # type: ignore[union-attr]
    before = sorted(s.task_id for s in store.query())
    # A taken id in the middle of a batch: nothing of the batch is stored.
    with pytest.raises(ConfigurationError):
        client.enqueue_many("add", [(1,), (2,), (3,)], task_ids=["m-3", "m-1", "m-4"])
    assert sorted(s.task_id for s in store.query()) == before
    # A call that does not bind: refused before anything is written.
    with pytest.raises(ConfigurationError, match="call 1"):
        client.enqueue_many("add", [(1,), {"c": 2}])
    with pytest.raises(ConfigurationError, match="one entry per call"):
        client.enqueue_many("add", [(1,)], task_ids=["a", "b"])
    assert sorted(s.task_id for s in store.query()) == before
    with InProcessWorker(store):
        assert [h.wait(DEADLINE).value for h in handles] == [1, 5]


# ------------------------------------------------------------ control before start


def test_cancel_before_start_is_immediate_and_the_body_never_runs(
    client: Client, store: TaskStore
) -> None:
    handle = client.enqueue("add", 1, bucket_key="k")
    assert handle.stop("changed my mind") is True
    stored = store.get(handle.task_id)
    assert stored is not None
    assert stored.status is S.STOPPED
    assert stored.owner is None
    last = handle.transitions[-1]
    assert (last.from_status, last.to_status) == (S.QUEUED, S.STOPPED)
    assert (last.reason, last.actor) == ("changed my mind", client.actor)
    assert edges(handle.transitions) == [
        (None, S.PENDING),
        (S.PENDING, S.QUEUED),
        (S.QUEUED, S.STOPPED),
    ]
    assert handle.wait(0).status is S.STOPPED  # terminal: wait returns at once
    assert handle.stop() is True  # found and finished, like Controller.stop: nothing to do
    assert edges(handle.transitions)[-1] == (S.QUEUED, S.STOPPED)
    # A worker owning the bucket runs what comes later, never the stopped task.
    later = client.enqueue("add", 2, bucket_key="k")
    with InProcessWorker(store):
        assert later.wait(DEADLINE).value == 2
    assert ran == [later.task_id]
    assert store.get(handle.task_id).status is S.STOPPED  # type: ignore[union-attr]
    assert len(store.history(handle.task_id)) == 3


def test_pause_and_resume_of_a_queued_task(client: Client, store: TaskStore) -> None:
    handle = client.enqueue("add", 4)
    assert handle.pause() is True
    assert handle.status is S.PAUSED
    assert handle.pause() is False  # already paused
    sentinel = client.enqueue("add", 0)
    assert sentinel.resume() is False  # queued, not paused: nothing to resume
    assert edges(sentinel.transitions)[-1] == (S.PENDING, S.QUEUED)
    with InProcessWorker(store):
        sentinel.wait(DEADLINE)
        # The worker ran what came after, not the paused task.
        assert handle.status is S.PAUSED
        assert handle.snapshot.owner is None
        assert handle.resume() is True
        assert handle.wait(DEADLINE).value == 4
    assert edges(handle.transitions) == [
        (None, S.PENDING),
        (S.PENDING, S.QUEUED),
        (S.QUEUED, S.PAUSED),
        (S.PAUSED, S.QUEUED),
        (S.QUEUED, S.STARTING),
        (S.STARTING, S.RUNNING),
        (S.RUNNING, S.SUCCEEDED),
    ]
    assert all(t.actor == client.actor for t in handle.transitions[1:4])
    assert ran == [sentinel.task_id, handle.task_id]


def test_stop_of_a_running_task_goes_to_its_worker(client: Client, store: TaskStore) -> None:
    handle = client.enqueue("gated", 7)
    with InProcessWorker(store):
        wait_until(lambda: handle.status is S.RUNNING, timeout=DEADLINE)
        assert handle.snapshot.owner == "w1"
        assert handle.stop("enough") is True  # a command to the holder
        outcome = handle.wait(DEADLINE)
    assert outcome.status is S.STOPPED
    assert (S.RUNNING, S.STOPPING) in edges(handle.transitions)
    assert handle.transitions[-1].to_status is S.STOPPED


def test_a_claim_racing_a_cancel_loses_by_status_version(client: Client, store: TaskStore) -> None:
    assert isinstance(store, QueueStore)  # every built-in store has the work queue
    handle = client.enqueue("add", 1)
    seen = store.get(handle.task_id)  # what a claimer read
    assert seen is not None
    assert handle.stop("cancelled") is True  # the cancel lands first
    # The claim's write, with the version it read, loses cleanly:
    until = store.clock.now() + timedelta(seconds=30)
    with pytest.raises(ConcurrencyConflict):
        store.save_unheld(
            seen.replace(owner="w1", lease_owner="w1", lease_until=until),
            expect_version=seen.status_version,
        )
    assert store.claim_queued("w1", buckets=None, limit=10, lease_until=until) == []
    stored = store.get(handle.task_id)
    assert stored is not None
    assert (stored.status, stored.owner, stored.lease_owner) == (S.STOPPED, None, None)
    assert stored.status_version == seen.status_version + 1
    assert edges(store.history(handle.task_id))[-1] == (S.QUEUED, S.STOPPED)


def test_a_cancel_racing_a_claim_becomes_a_command_to_the_holder(
    client: Client, store: TaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(store, QueueStore)  # every built-in store has the work queue
    handle = client.enqueue("add", 1)
    until = store.clock.now() + timedelta(seconds=30)
    real = store.save_unheld
    claimed: list[str] = []

    def claim_first(snapshot: Any, **kwargs: Any) -> None:
        # The worker's claim lands between the cancel's read and its write.
        if not claimed:
            taken = store.claim_queued("w1", buckets=None, limit=1, lease_until=until)
            claimed.extend(s.task_id for s in taken)
        real(snapshot, **kwargs)

    monkeypatch.setattr(store, "save_unheld", claim_first)
    assert handle.stop("cancelled") is True  # accepted: a command for the holder
    assert claimed == [handle.task_id]
    stored = store.get(handle.task_id)
    assert stored is not None
    # The claim won: still queued (never stopped by the lost write), held by w1.
    assert (stored.status, stored.owner) == (S.QUEUED, "w1")
    assert edges(store.history(handle.task_id))[-1] == (S.PENDING, S.QUEUED)
    pending = store.claim_commands("w1", lease=5, kinds=("task",))
    assert [(c.target, c.action, c.target_owner) for c in pending] == [
        (handle.task_id, "stop", "w1")
    ]


# ------------------------------------------------------------ claim order and delays


def test_claims_highest_priority_first_then_fifo(fake: Any) -> None:
    store, clock = fake
    client = Client(store, tasks=definitions())
    for task_id, priority in [("p0-a", 0), ("p5-a", 5), ("p0-b", 0), ("p5-b", 5), ("p9", 9)]:
        client.enqueue("add", 1, task_id=task_id, priority=priority)
        clock.advance(1)  # distinct creation times
    until = clock.now() + timedelta(seconds=30)
    order = []
    while True:
        taken = store.claim_queued("w1", buckets=None, limit=1, lease_until=until)
        if not taken:
            break
        assert len(taken) == 1
        assert taken[0].owner == "w1"
        assert taken[0].lease_until == until
        assert taken[0].status is S.QUEUED  # the claimer's state machine takes the next edge
        order.append(taken[0].task_id)
    assert order == ["p9", "p5-a", "p5-b", "p0-a", "p0-b"]
    for task_id in order:
        stored = store.get(task_id)
        assert (stored.owner, stored.lease_owner) == ("w1", "w1")


def test_claims_only_owned_buckets(fake: Any) -> None:
    store, clock = fake
    client = Client(store, tasks=definitions())
    mine = client.enqueue("add", 1, bucket_key="mine")
    other = client.enqueue("add", 1, bucket_key="other-tenant-x")
    bucket = client.bucket_policy.bucket_for("mine")
    assert client.bucket_policy.bucket_for("other-tenant-x") != bucket
    until = clock.now() + timedelta(seconds=30)
    taken = store.claim_queued("w1", buckets=[bucket], limit=10, lease_until=until)
    assert [s.task_id for s in taken] == [mine.task_id]
    assert other.snapshot.owner is None
    assert store.claim_queued("w1", buckets=[], limit=10, lease_until=until) == []


def test_delay_and_not_before_are_respected(fake: Any) -> None:
    store, clock = fake
    client = Client(store, tasks=definitions())
    later = client.enqueue("add", 1, task_id="later", delay=60, priority=9)
    # not_before in another offset: compared as an instant, not as text.
    shanghai = timezone(timedelta(hours=8))
    at = (clock.now() + timedelta(seconds=120)).astimezone(shanghai)
    client.enqueue("add", 1, task_id="at", not_before=at)
    now = client.enqueue("add", 1, task_id="now")
    until = clock.now() + timedelta(seconds=600)

    def claim() -> list[str]:
        taken = store.claim_queued("w", buckets=None, limit=10, lease_until=until)
        return [s.task_id for s in taken]

    assert claim() == ["now"]  # the delayed ones are skipped, not blocking it
    assert later.status is S.QUEUED
    assert later.snapshot.owner is None
    clock.advance(59.9)
    assert claim() == []
    clock.advance(0.1)
    assert claim() == ["later"]
    clock.advance(59.9)
    assert claim() == []
    clock.advance(0.2)
    assert claim() == ["at"]
    assert now.snapshot.owner == "w"
    with pytest.raises(ConfigurationError, match="not both"):
        client.enqueue("add", 1, delay=1, not_before=clock.now())


def test_many_delayed_tasks_do_not_hide_a_due_one(fake: Any) -> None:
    store, clock = fake
    client = Client(store, tasks=definitions())
    # 60 older, higher-priority tasks that are not due, then one that is.
    delayed = [client.enqueue("add", i, delay=3600, priority=5) for i in range(60)]
    clock.advance(1)
    client.enqueue("add", 0, task_id="due")
    until = clock.now() + timedelta(seconds=30)
    taken = store.claim_queued("w", buckets=None, limit=1, lease_until=until)
    assert [s.task_id for s in taken] == ["due"]
    assert all(h.snapshot.owner is None for h in delayed)
    clock.advance(3600)
    taken = store.claim_queued("w", buckets=None, limit=100, lease_until=until)
    assert [s.task_id for s in taken] == [h.task_id for h in delayed]


# ------------------------------------------------------------ asyncio


def test_async_client_twin(store: TaskStore) -> None:
    client = AsyncClient(store, tasks=definitions(), poll_interval=0.02)

    async def scenario() -> None:
        handle = await client.enqueue("add", 20, b=1, bucket_key="k")
        assert await handle.status() is S.QUEUED
        assert edges(await handle.transitions()) == [(None, S.PENDING), (S.PENDING, S.QUEUED)]
        cancelled = await client.enqueue("add", 1)
        assert await cancelled.stop("no") is True
        assert (await cancelled.snapshot()).status is S.STOPPED
        paused = await client.enqueue("add", 2)
        assert await paused.pause() is True
        assert await paused.status() is S.PAUSED
        assert await paused.resume() is True
        assert await client.pause(paused.task_id) is True  # the client-level twins
        assert await paused.status() is S.PAUSED
        assert await client.resume(paused.task_id) is True
        assert await client.resume("missing") is False
        many = await client.enqueue_many("add", [(1,), (2,)])
        got = await client.get(handle.task_id)
        assert got is not None
        assert got.task_id == handle.task_id
        assert await client.get("missing") is None
        queued = await client.list_tasks(status="queued")
        assert {s.task_id for s in queued} == {handle.task_id, paused.task_id} | {
            h.task_id for h in many
        }
        with pytest.raises(TimeoutError):
            await handle.wait(timeout=0.05)
        with InProcessWorker(store):
            outcomes = await asyncio.gather(
                handle.wait(DEADLINE), paused.wait(DEADLINE), *(h.wait(DEADLINE) for h in many)
            )
        assert [o.value for o in outcomes] == [21, 2, 1, 2]
        assert cancelled.task_id not in ran
        assert await client.stop("missing") is False  # unknown task

    asyncio.run(scenario())


def test_unclaimed_queued_work_is_waiting_not_adoptable(fake: Any) -> None:
    from chongming_task.controller._reconcile import reconcile
    from chongming_task.stores._queue_health import split_waiting

    store, clock = fake
    client = Client(store, tasks=definitions())
    client.enqueue("add", 2, task_id="claimed")
    clock.advance(1)
    waiting = client.enqueue("add", 1, task_id="waiting")
    taken = store.claim_queued("dead-worker", buckets=None, limit=1, lease_until=clock.now())
    assert [s.task_id for s in taken] == ["claimed"]
    clock.advance(10)  # the claimer's lease expired before it started the task
    report = reconcile(store, clock=clock, actor="ops")
    assert (report.lost, report.adoptable) == ((), ("claimed", "waiting"))
    # What the worker's start-up line and `reconcile` print: a dead claim is adoptable,
    # a task waiting for a worker is not.
    assert split_waiting(store, report.adoptable) == (("waiting",), ("claimed",))
    # A worker's periodic recovery only looks for tasks to mark lost.
    assert reconcile(store, clock=clock, actor="ops", occupying_only=True).adoptable == ()
    assert waiting.status is S.QUEUED
    assert waiting.snapshot.owner is None


def test_a_task_claimed_by_a_worker_that_died_goes_back_to_the_queue_and_runs(
    client: Client, store: TaskStore
) -> None:
    assert isinstance(store, QueueStore)
    orphan = client.enqueue("add", 2, b=3)
    waiting = client.enqueue("add", 1, b=1)
    expired = store.clock.now() - timedelta(seconds=1)
    taken = store.claim_queued("dead-worker", buckets=None, limit=1, lease_until=expired)
    assert [s.task_id for s in taken] == [orphan.task_id]
    # The claimer died before it started the task: queued, claimed, its lease expired.
    assert (orphan.status, orphan.snapshot.owner) == (S.QUEUED, "dead-worker")
    # A worker's periodic recovery (every half lease) hands it back, then runs it.
    with InProcessWorker(store, lease_ttl=1.0):
        for handle, value in ((orphan, 5), (waiting, 2)):
            outcome = handle.wait(DEADLINE)
            assert (outcome.status, outcome.value) == (S.SUCCEEDED, value)
    stored = store.get(orphan.task_id)
    assert stored is not None
    assert stored.owner == "w1"
