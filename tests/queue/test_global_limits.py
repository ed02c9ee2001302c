"""Limits across workers: two worker processes never run more than N tasks of a limit.

The bound is read from the store's history (each task's ``running`` and terminal
transition instants), not from timing: a slot is taken in the claim, before
``running``, and given back after the terminal transition is stored, so at no instant
do more than N tasks of the limit sit between the two. The bodies wait for each other
until N run at once, then linger for an N+1st, so the bound is reached and a broken
limit shows up as more than N at once. SQLite and
PostgreSQL; a SIGKILLed holder's slot comes back once its lease has passed.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _workers import cli, on_path, spawn_worker, stop_workers
from chongming_task import Client, Controller, SqliteTaskStore, TaskStatus
from chongming_task.errors import ConfigurationError
from chongming_task.stores import QueueStore
from chongming_task.stores._base import TaskStore
from chongming_task.testing import wait_until
from chongming_task.worker import Worker

HERE = Path(__file__).parent
TASKS = str(HERE / "limtasks.py")
DEADLINE = 60.0
LIMIT = 2
LINGER = 1.0  # how long a pair at the limit leaves room for a third to show up


def _worker(db: str, owner: str, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    return spawn_worker(
        db,
        log,
        options=["--owner", owner],
        worker=["--tasks", TASKS, "--poll-interval", "0.1", *extra],
    )


def _client(store: TaskStore, tmp_path: Path) -> tuple[Client, Path, Path]:
    """A client of the limit tasks on ``store``, and new folders for the gates and logs."""
    gates, logs = tmp_path / "gates", tmp_path / "logs"
    gates.mkdir()
    logs.mkdir()
    return Client(store, tasks=__import__("limtasks")), gates, logs


def max_overlap(store: TaskStore, task_ids: list[str]) -> int:
    """The most tasks between their ``running`` and terminal transition at one instant."""
    events: list[tuple[Any, int]] = []
    for task_id in task_ids:
        history = store.history(task_id)
        starts = [t.at for t in history if t.to_status is TaskStatus.RUNNING]
        ends = [t.at for t in history if t.to_status.is_terminal]
        assert len(starts) == 1, (task_id, history)
        assert len(ends) == 1, (task_id, history)
        events += [(starts[0], 1), (ends[0], -1)]
    now = peak = 0
    for _, step in sorted(events):  # at one instant, an end (-1) sorts before a start
        now += step
        peak = max(peak, now)
    return peak


def two_workers_never_exceed_the_limit(store: TaskStore, db: str, tmp_path: Path) -> None:
    assert isinstance(store, QueueStore)  # the lease-backed slots live there
    client, gates, logs = _client(store, tmp_path)
    limited = [
        client.enqueue("meet", str(gates), LIMIT, LINGER, task_id=f"db-{i}").task_id
        for i in range(6)
    ]
    plain = [client.enqueue("free", task_id=f"free-{i}").task_id for i in range(3)]
    assert all(store.get(t).tags == frozenset({"db"}) for t in limited)  # type: ignore[union-attr]
    args = ("--max-parallel", "3", "--global-limit", f"db={LIMIT}")
    procs = [_worker(db, f"w{i}", logs / f"w{i}.log", *args) for i in (1, 2)]
    try:
        for task_id in limited + plain:
            outcome = client.wait(task_id, DEADLINE)
            assert outcome.status is TaskStatus.SUCCEEDED, (task_id, outcome)
    finally:
        stop_workers(procs, logs)
    # Without the limit six slots would let all six meet at once; with it, exactly two.
    assert max_overlap(store, limited) == LIMIT
    assert store.list_global_slots() == []  # every slot given back at the end
    owners = {store.get(t).owner for t in limited + plain}  # type: ignore[union-attr]
    assert owners <= {"w1", "w2"}


def a_killed_holders_slot_comes_back(store: TaskStore, db: str, tmp_path: Path) -> None:
    assert isinstance(store, QueueStore)  # the lease-backed slots live there
    client, gates, logs = _client(store, tmp_path)
    args = ("--max-parallel", "2", "--global-limit", "db=1", "--lease-ttl", "3")
    first = client.enqueue("hold", str(gates), task_id="first")
    holder = _worker(db, "holder", logs / "holder.log", *args)
    procs = [holder]
    try:
        wait_until((gates / "started-first").exists, timeout=DEADLINE)
        second = client.enqueue("hold", str(gates), task_id="second")
        procs.append(_worker(db, "other", logs / "other.log", *args))

        def beats(worker_id: str) -> list[Any]:
            return [w.heartbeat_at for w in store.list_workers() if w.worker_id == worker_id]

        wait_until(lambda: beats("other"), timeout=DEADLINE)
        seen = beats("other")[0]
        wait_until(lambda: beats("other")[0] > seen, timeout=DEADLINE)  # it has polled
        # The slot is held: the second waits queued and unheld, visible as such.
        snapshot = store.get("second")
        assert snapshot is not None
        assert (snapshot.status, snapshot.owner) == (TaskStatus.QUEUED, None)
        assert [(s.task_id, s.owner) for s in store.list_global_slots()] == [("first", "holder")]

        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        (slot,) = store.list_global_slots()  # no one renews it any more
        wait_until(lambda: first.status is TaskStatus.LOST, timeout=DEADLINE)
        wait_until((gates / "started-second").exists, timeout=DEADLINE)
        started = [t.at for t in second.transitions if t.to_status is TaskStatus.RUNNING]
        assert started[0] >= slot.lease_until  # only once the dead holder's lease passed
        assert store.get("second").owner == "other"  # type: ignore[union-attr]
        (gates / "release").write_text("go")
        assert second.wait(DEADLINE).status is TaskStatus.SUCCEEDED
    finally:
        stop_workers(procs, logs)
    assert first.status is TaskStatus.LOST
    assert store.list_global_slots() == []


@pytest.fixture(autouse=True)
def _tasks_on_path() -> Iterator[None]:
    with on_path(HERE):
        yield


def test_two_workers_never_exceed_the_limit(
    shared_store: tuple[TaskStore, str], tmp_path: Path
) -> None:
    two_workers_never_exceed_the_limit(*shared_store, tmp_path)


def test_a_killed_holders_slot_comes_back(
    shared_store: tuple[TaskStore, str], tmp_path: Path
) -> None:
    a_killed_holders_slot_comes_back(*shared_store, tmp_path)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"db": 0}, r"global_limits\['db'\] must be >= 1, got 0"),
        ({"db": -3}, r"must be >= 1, got -3"),
        ({"db": True}, r"must be an integer, got True"),
        ({"db": float("nan")}, r"must be an integer, got nan"),
        ({"db": 2.0}, r"must be an integer, got 2.0"),
        ({1: 2}, r"keys must be tag names \(strings\), got 1"),
        ({"": 2}, r"name must be a non-empty string"),
        ("db", r"must map a tag to a number of slots"),
    ],
)
def test_bad_global_limits_are_refused(limits: Any, message: str, tmp_path: Path) -> None:
    with SqliteTaskStore(str(tmp_path / "bad.db")) as store, Controller(store=store) as ctl:
        with pytest.raises(ConfigurationError, match=message):
            Worker(ctl, global_limits=limits)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("db=0", "must be >= 1, got 0"),
        ("db=-1", "must be >= 1, got -1"),
        ("db=nan", "must be TAG=N"),
        ("db", "must be TAG=N"),
        ("=3", "must be TAG=N"),
    ],
)
def test_the_cli_refuses_bad_global_limits(value: str, message: str, tmp_path: Path) -> None:
    done = cli(str(tmp_path / "cli.db"), "worker", "--tasks", TASKS, "--global-limit", value)
    assert done.returncode == 2, done
    assert message in done.stderr
    assert "Traceback" not in done.stderr
