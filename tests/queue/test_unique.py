"""Unique work: ``enqueue(..., unique_key=K)`` creates nothing while a task with K stands.

On every store, with a ``FakeClock``: what the *store* holds is asserted (how many
tasks carry the key, which one the handle names, ``created``). Tasks are moved through
their states by a ``StateMachine`` on the stored snapshot, as a worker would. The race
tests start real processes that enqueue one key at the same moment, round after round,
and count what the store created.
"""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_task import AsyncClient, Client, TaskStatus
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError, DuplicateTaskId
from chongming_task.queue import AsyncTaskHandle
from chongming_task.stores._base import TaskQuery, TaskStore
from chongming_task.testing import FakeClock

S = TaskStatus
RACER = Path(__file__).with_name("unique_racer.py")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store_clock(clock: FakeClock) -> FakeClock:
    """The clock of the ``store`` fixture's stores (tests/conftest.py: every backend)."""
    return clock


@pytest.fixture
def client(store: TaskStore) -> Client:
    return Client(store)


def keyed(store: TaskStore, key: str) -> list[tuple[str, TaskStatus]]:
    """Every stored task whose metadata carries ``key``, oldest first."""
    return [
        (s.task_id, s.status)
        for s in store.query(TaskQuery(order="created"))
        if s.metadata.get("unique_key") == key
    ]


def advance(store: TaskStore, clock: FakeClock, task_id: str, *steps: str) -> None:
    """Move the stored task along ``steps`` (``start``, ``run``, ``succeed``) and save."""
    stored = store.get(task_id)
    assert stored is not None
    machine = StateMachine(stored, clock=clock)
    moves: dict[str, Callable[[], None]] = {
        "start": machine.mark_starting,
        "run": machine.mark_running,
        "succeed": machine.mark_succeeded,
    }
    for name in steps:
        moves[name]()
    store.save(
        machine.snapshot, expect_version=stored.status_version, transitions=machine.transitions
    )


def test_a_second_enqueue_returns_the_queued_task(client: Client, store: TaskStore) -> None:
    first = client.enqueue("job", 1, unique_key="report:42")
    second = client.enqueue("job", 2, unique_key="report:42")
    assert first.created
    assert not second.created
    assert second.task_id == first.task_id
    assert keyed(store, "report:42") == [(first.task_id, S.QUEUED)]
    stored = store.get(first.task_id)
    assert stored is not None
    assert stored.metadata["unique_key"] == "report:42"  # visible on the task
    assert stored.metadata["recipe"]["args"] == [1]  # the second call's arguments are dropped
    other = client.enqueue("job", 3, unique_key="report:43")  # another key: its own task
    assert other.created
    assert other.task_id != first.task_id


def test_a_running_task_keeps_its_key(client: Client, store: TaskStore, clock: FakeClock) -> None:
    first = client.enqueue("job", unique_key="k")
    advance(store, clock, first.task_id, "start", "run")
    again = client.enqueue("job", unique_key="k")
    assert (again.task_id, again.created) == (first.task_id, False)
    assert keyed(store, "k") == [(first.task_id, S.RUNNING)]


def test_a_finished_task_frees_its_key(client: Client, store: TaskStore, clock: FakeClock) -> None:
    stopped = client.enqueue("job", unique_key="k")
    assert client.stop(stopped.task_id)
    second = client.enqueue("job", unique_key="k")
    assert second.created
    assert second.task_id != stopped.task_id
    advance(store, clock, second.task_id, "start", "run", "succeed")
    third = client.enqueue("job", unique_key="k")
    assert third.created
    assert keyed(store, "k") == [
        (stopped.task_id, S.STOPPED),
        (second.task_id, S.SUCCEEDED),
        (third.task_id, S.QUEUED),
    ]


@pytest.mark.parametrize("window", [60, 60.0, timedelta(minutes=1)])
def test_unique_for_counts_tasks_finished_within_the_window(
    client: Client, store: TaskStore, clock: FakeClock, window: float | timedelta
) -> None:
    first = client.enqueue("job", unique_key="k")
    clock.advance(5)
    advance(store, clock, first.task_id, "start", "run", "succeed")  # finished at t=5
    clock.advance(59)  # 59 s after it finished
    inside = client.enqueue("job", unique_key="k", unique_for=window)
    assert (inside.task_id, inside.created) == (first.task_id, False)
    without = client.enqueue("job", unique_key="k2", unique_for=window)  # nothing with k2
    assert without.created
    clock.advance(1)  # exactly 60 s: the window still holds it
    assert not client.enqueue("job", unique_key="k", unique_for=window).created
    clock.advance(0.001)
    after = client.enqueue("job", unique_key="k", unique_for=window)
    assert after.created
    assert after.task_id != first.task_id
    # Without a window only an unfinished task counts: the new one, queued.
    assert client.enqueue("job", unique_key="k").task_id == after.task_id
    assert [status for _, status in keyed(store, "k")] == [S.SUCCEEDED, S.QUEUED]


def test_the_window_returns_the_task_that_finished_last(
    client: Client, store: TaskStore, clock: FakeClock
) -> None:
    ids = []
    for _ in range(3):
        handle = client.enqueue("job", unique_key="k")
        assert handle.created
        advance(store, clock, handle.task_id, "start", "run", "succeed")
        clock.advance(10)
        ids.append(handle.task_id)
    found = client.enqueue("job", unique_key="k", unique_for=3600)
    assert (found.task_id, found.created) == (ids[-1], False)


def test_enqueue_many_dedupes_within_the_batch_and_against_the_store(
    client: Client, store: TaskStore
) -> None:
    existing = client.enqueue("job", 0, unique_key="a")
    handles = client.enqueue_many(
        "job",
        [(1,), (2,), (3,), (4,), (5,)],
        unique_keys=["a", "b", "b", None, "c"],
    )
    assert [h.created for h in handles] == [False, True, False, True, True]
    assert handles[0].task_id == existing.task_id
    assert handles[2].task_id == handles[1].task_id
    assert len({h.task_id for h in handles}) == 4
    assert keyed(store, "b") == [(handles[1].task_id, S.QUEUED)]
    b = store.get(handles[1].task_id)
    assert b is not None
    assert b.metadata["recipe"]["args"] == [2]
    assert len(store.query()) == 4  # existing + b + the unkeyed one + c
    # A batch whose every key stands creates nothing.
    again = client.enqueue_many("job", [(9,), (9,)], unique_keys=["a", "c"])
    assert [h.created for h in again] == [False, False]
    assert len(store.query()) == 4


def test_a_taken_id_in_a_unique_batch_stores_nothing(client: Client, store: TaskStore) -> None:
    client.enqueue("job", task_id="taken")
    with pytest.raises(DuplicateTaskId, match="taken"):
        client.enqueue_many(
            "job", [(1,), (2,)], task_ids=["fresh", "taken"], unique_keys=["x", "y"]
        )
    assert [s.task_id for s in store.query()] == ["taken"]
    with pytest.raises(DuplicateTaskId):
        client.enqueue("job", task_id="taken", unique_key="z")
    # The id is checked only when a task is to be created: a standing key wins first.
    holder = client.enqueue("job", task_id="holder", unique_key="h")
    assert client.enqueue("job", task_id="holder", unique_key="h").created is False
    assert holder.created


def test_a_retry_may_not_give_a_key_a_second_unfinished_task(
    client: Client, store: TaskStore, clock: FakeClock
) -> None:
    first = client.enqueue("job", unique_key="k")
    assert client.stop(first.task_id)
    second = client.enqueue("job", unique_key="k")
    stored = store.get(first.task_id)
    assert stored is not None
    machine = StateMachine(stored, clock=clock)
    machine.retry()
    with pytest.raises(ConfigurationError, match="unique_key 'k' is not finished"):
        store.save(
            machine.snapshot, expect_version=stored.status_version, transitions=machine.transitions
        )
    assert store.get(first.task_id) == stored  # unchanged
    assert client.stop(second.task_id)
    store.save(
        machine.snapshot, expect_version=stored.status_version, transitions=machine.transitions
    )  # the key is free again: the retry is written
    assert keyed(store, "k") == [(first.task_id, S.QUEUED), (second.task_id, S.STOPPED)]


BAD: list[tuple[dict[str, Any], str]] = [
    ({"unique_key": ""}, "unique_key must be a non-empty string"),
    ({"unique_key": 42}, "unique_key must be a non-empty string"),
    ({"unique_key": "a\nb"}, "control characters"),
    ({"unique_key": "k" * 257}, "at most 256 characters"),
    ({"unique_key": "k", "unique_for": 0}, "unique_for must be > 0 seconds"),
    ({"unique_key": "k", "unique_for": -1}, "unique_for must be > 0 seconds"),
    ({"unique_key": "k", "unique_for": timedelta(0)}, "unique_for must be > 0 seconds"),
    ({"unique_key": "k", "unique_for": math.nan}, "finite"),
    ({"unique_key": "k", "unique_for": math.inf}, "finite"),
    ({"unique_key": "k", "unique_for": True}, "number of seconds"),
    ({"unique_key": "k", "unique_for": "60"}, "number of seconds"),
    ({"unique_key": "k", "unique_for": 1e12}, "at most"),
    ({"unique_for": 60}, "needs a unique_key"),
    ({"metadata": {"unique_key": "k"}}, "reserved"),
]


@pytest.mark.parametrize(("options", "message"), BAD)
def test_bad_unique_options_are_refused_and_store_nothing(
    client: Client, store: TaskStore, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        client.enqueue("job", **options)
    assert store.query() == []


def test_enqueue_many_refuses_bad_unique_options(client: Client, store: TaskStore) -> None:
    with pytest.raises(ConfigurationError, match="call 1: unique_key must be a non-empty"):
        client.enqueue_many("job", [(1,), (2,)], unique_keys=["a", ""])
    with pytest.raises(ConfigurationError, match="needs a unique_key"):
        client.enqueue_many("job", [(1,)], unique_for=60)
    with pytest.raises(ConfigurationError, match="call 0: unique_for must be > 0"):
        client.enqueue_many("job", [(1,)], unique_keys=["a"], unique_for=-5)
    with pytest.raises(ConfigurationError, match="one entry per call"):
        client.enqueue_many("job", [(1,), (2,)], unique_keys=["a"])
    assert store.query() == []


def test_the_async_client_takes_unique_keys(store: TaskStore) -> None:
    async def both() -> tuple[AsyncTaskHandle, AsyncTaskHandle]:
        client = AsyncClient(store)
        first = await client.enqueue("job", unique_key="k")
        return first, await client.enqueue("job", unique_key="k")

    first, second = asyncio.run(both())
    assert (first.created, second.created) == (True, False)
    assert second.task_id == first.task_id


# ------------------------------------------------------------ racing processes


class Racer:
    """A ``unique_racer.py`` process: enqueues each key it reads, prints id and created."""

    def __init__(self, spec: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(RACER), spec],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.read() == "ready"

    def read(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line:
            assert self.process.stderr is not None
            raise AssertionError(f"racer died: {self.process.stderr.read()[-3000:]}")
        return line

    def send(self, key: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(key + "\n")
        self.process.stdin.flush()

    def close(self) -> int:
        """End the racer (its stdin closes); its exit code."""
        process = self.process
        if process.stdin is not None:
            process.stdin.close()
        code = process.wait(30)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        return code


@pytest.mark.timeout(120)
def test_processes_racing_one_key_create_one_task(store_spec: str) -> None:
    """Four processes, each with a warm client, wait on a barrier (their stdin) and
    enqueue the same key at once; round after round, the store holds one task per key."""
    from _store_spec import open_store as open_spec

    racers = [Racer(store_spec) for _ in range(4)]
    try:
        for round_ in range(8):
            key = f"race:{round_}"
            for racer in racers:  # every racer is blocked in readline: this is the barrier
                racer.send(key)
            answers = [racer.read().split() for racer in racers]
            ids = {task_id for task_id, _ in answers}
            assert len(ids) == 1, answers
            assert sorted(created for _, created in answers) == ["0", "0", "0", "1"], answers
            with open_spec(store_spec) as store:
                assert keyed(store, key) == [(ids.pop(), S.QUEUED)]
    finally:
        codes = [racer.close() for racer in racers]
    assert codes == [0, 0, 0, 0]
