"""Batched write-through: order kept, terminal states stored before anyone hears of them."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from chongming_task import Controller, StoreError, TaskContext
from chongming_task.controller.writequeue import WriteQueue
from chongming_task.errors import ConcurrencyConflict
from chongming_task.model import TaskSnapshot, Transition
from chongming_task.states import TaskStatus
from chongming_task.stores.base import SnapshotWrite
from chongming_task.stores.sqlite import SqliteTaskStore
from chongming_task.testing import wait_until

pytestmark = pytest.mark.timeout(60)

S = TaskStatus
PATIENCE = 10.0
HAPPY = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]


class CountingStore(SqliteTaskStore):
    """Counts batches and can fail the next ones on purpose."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.batches: list[int] = []
        self.fail_next = 0
        self._count_lock = threading.Lock()

    def save_many(
        self, writes: Sequence[SnapshotWrite]
    ) -> list[ConcurrencyConflict | StoreError | None]:
        with self._count_lock:
            self.batches.append(len(writes))
            if self.fail_next:
                self.fail_next -= 1
                raise StoreError("injected: database is locked")
        return super().save_many(writes)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CountingStore]:
    store = CountingStore(str(tmp_path / "tasks.db"))
    yield store
    store.close()


def test_wait_never_returns_before_the_store_has_the_terminal_state(
    store: CountingStore,
) -> None:
    controller = Controller(store=store, max_parallel=2)
    controller.register("noop", lambda ctx, n: n)
    seen_terminal: list[bool] = []
    for n in range(30):
        run = controller.submit("noop", n, task_id=f"t{n}")
        run.add_done_callback(
            lambda r: seen_terminal.append(store.get(r.task_id).status is S.SUCCEEDED)  # type: ignore[union-attr]
        )
    for n in range(30):
        outcome = controller.wait(f"t{n}", timeout=PATIENCE)
        stored = store.get(f"t{n}")
        assert stored is not None
        assert stored.status is S.SUCCEEDED  # no wait_until: it must already be there
        assert stored.outcome == n == outcome.value
        assert [t.to_status for t in store.history(f"t{n}")] == HAPPY
        assert [t.version for t in store.history(f"t{n}")] == [0, 1, 2, 3, 4]
    assert seen_terminal == [True] * 30
    controller.close()


def test_submit_returns_with_the_store_showing_the_task_queued(store: CountingStore) -> None:
    gate = threading.Event()

    def hold(ctx: TaskContext) -> None:
        while not gate.is_set():
            ctx.checkpoint()
            gate.wait(0.005)

    controller = Controller(store=store, max_parallel=1)
    controller.register("hold", hold)
    first = controller.submit("hold", task_id="first")
    second = controller.submit("hold", task_id="second")
    assert store.get("second").status is S.QUEUED  # type: ignore[union-attr]
    # Deferred writes (starting, running) still reach the store without a terminal one.
    wait_until(lambda: store.get("first").status is S.RUNNING, timeout=PATIENCE)  # type: ignore[union-attr]
    gate.set()
    assert first.wait(PATIENCE).ok
    assert second.wait(PATIENCE).ok
    controller.close()
    for task_id in ("first", "second"):
        assert [t.to_status for t in store.history(task_id)] == HAPPY


def test_the_store_shows_starting_before_a_body_runs(store: CountingStore) -> None:
    # Otherwise a crash could leave a task that ran looking "queued", and reconcile
    # would call it adoptable (safe to run again) instead of lost.
    seen: list[TaskStatus | None] = []

    def body(ctx: TaskContext) -> None:
        stored = store.get(ctx.task_id)
        seen.append(None if stored is None else stored.status)

    controller = Controller(store=store, max_parallel=2)
    controller.register("body", body)
    for n in range(20):
        controller.submit("body", task_id=f"b{n}")
    controller.wait_all(timeout=PATIENCE)
    controller.close()
    assert len(seen) == 20
    assert set(seen) <= {S.STARTING, S.RUNNING}


def test_concurrent_transitions_share_commits(store: CountingStore) -> None:
    controller = Controller(store=store, max_parallel=4)
    controller.register("noop", lambda ctx: None)
    runs = [controller.submit("noop", task_id=f"c{n}") for n in range(200)]
    controller.wait_all(timeout=PATIENCE * 3)
    controller.close()
    # Creation and the queued edge are one write by submit(); of the three later
    # transitions, running is coalesced with the terminal one (starting is durable).
    assert sum(store.batches) < 200 * 3
    for run in runs:
        assert [t.to_status for t in store.history(run.task_id)] == HAPPY


def test_a_failed_batch_heals_with_the_next_write(store: CountingStore) -> None:
    gate = threading.Event()

    def hold(ctx: TaskContext) -> str:
        while not gate.is_set():
            ctx.checkpoint()
            gate.wait(0.005)
        return "done"

    controller = Controller(store=store, max_parallel=1)
    controller.register("hold", hold)
    store.fail_next = 1_000  # every batch fails while the task starts and runs
    run = controller.submit("hold", task_id="heal")
    wait_until(lambda: store.batches, timeout=PATIENCE)
    wait_until(lambda: run.status is S.RUNNING, timeout=PATIENCE)
    store.fail_next = 0
    gate.set()
    assert run.wait(PATIENCE).ok
    stored = store.get("heal")
    assert stored is not None
    assert stored.status is S.SUCCEEDED
    assert [t.to_status for t in store.history("heal")] == HAPPY  # nothing lost
    failures = list(controller.persist_failures)
    assert failures
    assert all(f.operation == "save" and f.task_id == "heal" for f in failures)
    assert "injected" in failures[0].error
    controller.close()


def test_subscribers_hear_deferred_writes_in_order_after_they_are_stored(
    store: CountingStore,
) -> None:
    controller = Controller(store=store, max_parallel=3)
    controller.register("noop", lambda ctx, n: n)
    heard: dict[str, list[int]] = defaultdict(list)
    stored_first: list[bool] = []
    lock = threading.Lock()

    def subscriber(transition: Transition, snapshot: TaskSnapshot) -> None:
        found = store.get(transition.task_id)
        with lock:
            heard[transition.task_id].append(transition.version)
            stored_first.append(found is not None and found.status_version >= transition.version)

    controller.subscribe(subscriber)
    for n in range(40):
        controller.submit("noop", n, task_id=f"s{n}")
    controller.wait_all(timeout=PATIENCE)
    controller.close()
    assert all(versions == [0, 1, 2, 3, 4] for versions in heard.values())
    assert len(heard) == 40
    assert all(stored_first)


def test_write_queue_keeps_order_and_durable_puts_wait_for_their_flush() -> None:
    flushed: list[int] = []
    lock = threading.Lock()

    def flush(batch: list[int]) -> None:
        with lock:
            flushed.extend(batch)

    queue: WriteQueue[int] = WriteQueue(flush, name="test-writes")
    for n in range(50):
        queue.put(n, durable=False)
    queue.put(50, durable=True)
    with lock:
        assert flushed == list(range(51))  # the durable write came after all deferred ones
    queue.put(51, durable=False)
    wait_until(lambda: len(flushed) == 52, timeout=PATIENCE)  # the flusher thread took it
    queue.close()
    queue.put(52, durable=False)  # after close: flushed by the caller
    assert flushed == list(range(53))


def test_a_held_flusher_is_not_woken_and_the_caller_drains_for_it() -> None:
    flushed: list[tuple[int, str]] = []
    name = "test-writes-held"

    def flush(batch: list[int]) -> None:
        flushed.extend((n, threading.current_thread().name) for n in batch)

    def flusher_started() -> bool:
        return any(thread.name == name for thread in threading.enumerate())

    queue: WriteQueue[int] = WriteQueue(flush, name=name, window=0)
    queue.hold_flusher()
    queue.put(1, durable=False)
    queue.put(2, durable=False)
    assert not flusher_started()  # unheld, the first deferred put starts (wakes) it
    assert queue.pending == 2
    queue.drain()  # what release_many's group start does
    caller = threading.current_thread().name
    assert flushed == [(1, caller), (2, caller)]
    queue.resume_flusher()
    assert not flusher_started()  # nothing left for it

    queue.hold_flusher()
    queue.put(3, durable=False)
    queue.resume_flusher()  # a write nobody drained: the flusher takes it now
    wait_until(lambda: len(flushed) == 3, timeout=PATIENCE)
    assert flushed[2] == (3, name)
    queue.close()


def test_a_write_put_along_rides_on_the_next_durable_write_and_settles_without_a_flush() -> None:
    batches: list[list[int]] = []
    name = "test-writes-along"

    queue: WriteQueue[int] = WriteQueue(batches.append, name=name)
    ticket = queue.put_along(1)
    assert batches == []  # queued only: no flush, and no flusher woken for it
    assert not any(thread.name == name for thread in threading.enumerate())
    queue.put(2, durable=True)  # the durable write of the next run takes it along
    assert batches == [[1, 2]]
    queue.settle(ticket)  # already stored: returns without another flush
    assert batches == [[1, 2]]
    alone = queue.put_along(3)
    queue.settle(alone)  # nothing took it along: settling flushes it
    assert batches == [[1, 2], [3]]
    queue.close()


def test_the_flusher_can_be_started_ahead_of_the_first_deferred_write() -> None:
    name = "test-writes-ahead"

    def flusher_running() -> bool:
        return any(thread.name == name for thread in threading.enumerate())

    queue: WriteQueue[int] = WriteQueue(lambda batch: None, name=name)
    assert not flusher_running()  # lazily started, normally by the first deferred put
    queue.start_flusher()
    assert flusher_running()
    queue.start_flusher()  # idempotent
    assert sum(thread.name == name for thread in threading.enumerate()) == 1
    queue.close()
    wait_until(lambda: not flusher_running(), timeout=PATIENCE, message="flusher stopped")


def test_preparing_a_release_starts_the_write_flusher(tmp_path: Path) -> None:
    store = SqliteTaskStore(str(tmp_path / "tasks.db"))
    name = "chongming-writes[prepare-flusher]"
    with Controller(store, owner="prepare-flusher") as controller:
        controller.register("t", lambda ctx: None)
        run = controller.submit("t", task_id="armed", blocked="armed")
        assert not any(thread.name == name for thread in threading.enumerate())
        controller.prepare_release([run.task_id])
        assert any(thread.name == name for thread in threading.enumerate())
        controller.release_many([run.task_id], trigger="schedule:due")
        assert run.wait(PATIENCE).ok
    store.close()


class _CountingCondition:
    """Wraps the queue's ``_wake`` condition to count the notifications it sends."""

    def __init__(self, inner: threading.Condition) -> None:
        self._inner = inner
        self.notified = 0

    def notify(self, n: int = 1) -> None:
        self.notified += 1
        self._inner.notify(n)

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def test_an_armed_flusher_is_not_woken_by_later_deferred_writes() -> None:
    # Waking the flusher for every deferred write cost W2 a thread hand-off per task.
    flushed: list[tuple[list[int], str]] = []
    name = "test-writes-armed"
    queue: WriteQueue[int] = WriteQueue(
        lambda batch: flushed.append((list(batch), threading.current_thread().name)),
        name=name,
        window=0.5,
    )
    wake = _CountingCondition(queue._wake)
    queue._wake = wake  # type: ignore[assignment]
    queue.put(0, durable=False)  # wakes the idle flusher, which arms itself
    wait_until(lambda: queue._armed, timeout=PATIENCE, message="flusher armed")
    assert wake.notified == 1
    for n in range(1, 20):
        queue.put(n, durable=False)
    assert wake.notified == 1  # none of these woke it
    wait_until(lambda: flushed, timeout=PATIENCE, message="the flusher's flush")
    assert flushed == [(list(range(20)), name)]  # all in one batch, by the flusher
    queue.close()


def test_the_flusher_lets_a_deferred_write_wait_its_whole_window() -> None:
    # So a task's terminal write can still take its -> running along, even when the
    # flusher's previous sleep happens to end just after that put.
    window = 0.05
    put_at: dict[int, float] = {}
    flushed_at: dict[int, float] = {}

    def flush(batch: list[int]) -> None:
        now = time.monotonic()
        for n in batch:
            flushed_at[n] = now

    queue: WriteQueue[int] = WriteQueue(flush, name="test-writes-whole-window", window=window)
    for n in range(3):
        put_at[n] = time.monotonic()
        queue.put(n, durable=False)
        wait_until(lambda n=n: n in flushed_at, timeout=PATIENCE, message=f"write {n} flushed")
    assert all(flushed_at[n] - put_at[n] >= window for n in range(3))
    queue.close()


def test_a_durable_write_takes_the_deferred_ones_along_before_the_window_ends() -> None:
    batches: list[list[int]] = []
    queue: WriteQueue[int] = WriteQueue(batches.append, name="test-writes-along", window=5.0)
    queue.put(1, durable=False)
    queue.put(2, durable=False)
    queue.put(3, durable=True)  # returns once written, with 1 and 2 in the same batch
    assert batches == [[1, 2, 3]]
    queue.close()
    assert batches == [[1, 2, 3]]  # nothing left for the flusher
