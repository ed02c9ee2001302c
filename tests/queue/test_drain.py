"""Issue 35, "deploys lose nothing": SIGTERM drains a ``chongming-task worker``.

Real worker processes on SQLite and PostgreSQL. The worker stops claiming at once,
lets running tasks finish for up to ``--drain-timeout``, then stops what is left at its
next checkpoint: an idempotent task (or any queue task under ``--requeue-on-shutdown``)
goes back to the queue, unheld, and succeeds on a second worker; another ends
``stopped`` with the reason "worker shutdown", named in the exit summary; an
operator-paused task is handed back still paused; a second SIGTERM stops at once.
Each test asserts the stored trajectory.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _workers import on_path, spawn_worker, stop_workers
from chongming_task import Client, TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.testing import wait_until

HERE = Path(__file__).parent
TASKS = str(HERE / "drtasks.py")
DEADLINE = 30.0

S = TaskStatus


@pytest.fixture(autouse=True)
def _tasks_on_path() -> Iterator[None]:
    with on_path(HERE):
        yield


class Fleet:
    """Worker processes on one store, their logs in ``tmp_path/logs``."""

    def __init__(self, db: str, tmp_path: Path) -> None:
        self.db = db
        self.logs = tmp_path / "logs"
        self.logs.mkdir()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, owner: str, *options: str) -> subprocess.Popen[bytes]:
        proc = spawn_worker(
            self.db,
            self.logs / f"{owner}.log",
            options=["--owner", owner],
            worker=["--tasks", TASKS, "--max-parallel", "2", "--poll-interval", "0.1", *options],
        )
        self.procs[owner] = proc
        wait_until(lambda: "ready; stop with" in self.log(owner), timeout=DEADLINE)
        return proc

    def log(self, owner: str) -> str:
        path = self.logs / f"{owner}.log"
        return path.read_text() if path.exists() else ""

    def term(self, owner: str) -> None:
        self.procs[owner].send_signal(signal.SIGTERM)

    def exit_code(self, owner: str) -> int:
        return self.procs[owner].wait(DEADLINE)

    def close(self) -> None:
        stop_workers(self.procs.values(), self.logs)


@pytest.fixture
def gates(tmp_path: Path) -> Path:
    path = tmp_path / "gates"
    path.mkdir()
    return path


@pytest.fixture
def fleet(shared_store: tuple[TaskStore, str], tmp_path: Path) -> Iterator[Fleet]:
    fleet = Fleet(shared_store[1], tmp_path)
    try:
        yield fleet
    finally:
        fleet.close()


def _client(store: TaskStore) -> Client:
    import drtasks

    return Client(store, tasks=[drtasks.idem, drtasks.plain])


def _started(gates: Path, task_id: str, attempt: int = 1) -> bool:
    return (gates / f"started-{task_id}-{attempt}").exists()


def _path(store: TaskStore, task_id: str) -> list[tuple[str | None, str, str, str | None]]:
    """The stored trajectory: (from, to, trigger, actor) per transition."""
    return [
        (t.from_status.value if t.from_status else None, t.to_status.value, t.trigger, t.actor)
        for t in store.history(task_id)
    ]


def _edges(store: TaskStore, task_id: str) -> list[tuple[str | None, str]]:
    return [(source, target) for source, target, _, _ in _path(store, task_id)]


RUN = [(None, "pending"), ("pending", "queued"), ("queued", "starting"), ("starting", "running")]


def test_sigterm_lets_a_running_task_succeed_and_claims_nothing_new(
    shared_store: tuple[TaskStore, str], fleet: Fleet, gates: Path
) -> None:
    store = shared_store[0]
    client = _client(store)
    fleet.start("w1", "--drain-timeout", "60")
    first = client.enqueue("plain", str(gates), task_id="first")
    wait_until(lambda: _started(gates, "first"), timeout=DEADLINE)
    fleet.term("w1")
    wait_until(lambda: "draining: 1 task(s) running" in fleet.log("w1"), timeout=DEADLINE)
    # Draining: a free slot, yet the worker claims nothing new.
    second = client.enqueue("plain", str(gates), task_id="second")
    time.sleep(1.0)  # a window for a wrong claim (the worker polls every 0.1 s)
    assert second.status is S.QUEUED
    assert store.get("second").owner is None  # type: ignore[union-attr]
    (gates / "release").write_text("go")
    assert first.wait(DEADLINE).status is S.SUCCEEDED
    assert fleet.exit_code("w1") == 0, fleet.log("w1")
    assert _edges(store, "first") == [*RUN, ("running", "succeeded")]
    assert "finished 1, handed back 0, stopped 0, lost 0" in fleet.log("w1")
    assert second.status is S.QUEUED  # never claimed by the draining worker
    fleet.start("w2")
    assert second.wait(DEADLINE).status is S.SUCCEEDED
    assert store.get("second").owner == "w2"  # type: ignore[union-attr]


def test_at_the_drain_deadline_an_idempotent_task_is_requeued_and_succeeds_elsewhere(
    shared_store: tuple[TaskStore, str], fleet: Fleet, gates: Path
) -> None:
    store = shared_store[0]
    client = _client(store)
    fleet.start("w1", "--drain-timeout", "1")
    handle = client.enqueue("idem", str(gates), task_id="idem-1")
    wait_until(lambda: _started(gates, "idem-1"), timeout=DEADLINE)
    fleet.term("w1")
    assert fleet.exit_code("w1") == 0, fleet.log("w1")
    log = fleet.log("w1")
    assert "handed back 1, stopped 0, lost 0" in log
    assert "handed back to the queue: idem-1 (idem)" in log
    snapshot = store.get("idem-1")
    assert snapshot is not None
    assert (snapshot.status, snapshot.owner, snapshot.lease_owner) == (S.QUEUED, None, None)
    assert _path(store, "idem-1")[-2:] == [
        ("running", "stopping", "control:stop_requested", "w1"),
        ("stopping", "queued", "worker:shutdown_requeue", "w1"),
    ]
    (gates / "release").write_text("go")
    fleet.start("w2")
    outcome = handle.wait(DEADLINE)
    assert outcome.status is S.SUCCEEDED
    assert _started(gates, "idem-1", attempt=2)
    assert outcome.snapshot.owner == "w2"
    assert _edges(store, "idem-1")[len(RUN) + 2 :] == [
        ("queued", "starting"),
        ("starting", "running"),
        ("running", "succeeded"),
    ]


def test_at_the_drain_deadline_a_task_that_is_not_idempotent_ends_stopped(
    shared_store: tuple[TaskStore, str], fleet: Fleet, gates: Path
) -> None:
    store = shared_store[0]
    client = _client(store)
    fleet.start("w1", "--drain-timeout", "1")
    handle = client.enqueue("plain", str(gates), task_id="plain-1")
    wait_until(lambda: _started(gates, "plain-1"), timeout=DEADLINE)
    fleet.term("w1")
    assert fleet.exit_code("w1") == 0, fleet.log("w1")
    log = fleet.log("w1")
    assert "handed back 0, stopped 1, lost 0" in log
    assert "not enqueued through the queue): plain-1 (plain)" in log
    assert handle.status is S.STOPPED
    path = _path(store, "plain-1")
    assert [(a, b) for a, b, _, _ in path] == [
        *RUN,
        ("running", "stopping"),
        ("stopping", "stopped"),
    ]
    stopping = store.history("plain-1")[-2]
    assert stopping.actor == "w1"
    assert stopping.reason is not None
    assert "worker shutdown" in stopping.reason
    failure = handle.snapshot.failure
    assert failure is not None
    assert "worker shutdown" in failure.message


def test_requeue_on_shutdown_hands_back_a_task_that_is_not_idempotent(
    shared_store: tuple[TaskStore, str], fleet: Fleet, gates: Path
) -> None:
    store = shared_store[0]
    client = _client(store)
    fleet.start("w1", "--drain-timeout", "0.5", "--requeue-on-shutdown")
    handle = client.enqueue("plain", str(gates), task_id="plain-2")
    wait_until(lambda: _started(gates, "plain-2"), timeout=DEADLINE)
    fleet.term("w1")
    assert fleet.exit_code("w1") == 0, fleet.log("w1")
    assert "handed back 1, stopped 0, lost 0" in fleet.log("w1")
    assert _edges(store, "plain-2")[-2:] == [("running", "stopping"), ("stopping", "queued")]
    (gates / "release").write_text("go")
    fleet.start("w2")
    assert handle.wait(DEADLINE).status is S.SUCCEEDED


def test_an_operator_paused_task_is_handed_back_still_paused(
    shared_store: tuple[TaskStore, str], fleet: Fleet, gates: Path
) -> None:
    store = shared_store[0]
    client = _client(store)
    fleet.start("w1", "--drain-timeout", "60")
    handle = client.enqueue("idem", str(gates), task_id="paused-1")
    wait_until(lambda: _started(gates, "paused-1"), timeout=DEADLINE)
    handle.pause()  # a command for w1, which holds it (False: not confirmed from here)
    wait_until(lambda: handle.status is S.PAUSED, timeout=DEADLINE)
    fleet.term("w1")
    # Nothing runs, so the drain has nothing to wait for: it ends at once.
    assert fleet.exit_code("w1") == 0, fleet.log("w1")
    snapshot = store.get("paused-1")
    assert snapshot is not None
    assert (snapshot.status, snapshot.owner, snapshot.lease_owner) == (S.PAUSED, None, None)
    assert _path(store, "paused-1")[-2:] == [
        ("paused", "queued", "worker:shutdown_requeue", "w1"),
        ("queued", "paused", "worker:shutdown_paused", "w1"),
    ]
    fleet.start("w2")
    time.sleep(1.0)  # a window for a wrong claim: a paused task is nobody's to run
    assert handle.status is S.PAUSED
    assert not _started(gates, "paused-1", attempt=2)
    (gates / "release").write_text("go")
    assert handle.resume() is True  # nobody holds it: resumed at once, to the queue
    outcome = handle.wait(DEADLINE)
    assert outcome.status is S.SUCCEEDED
    assert outcome.snapshot.owner == "w2"


def test_a_second_sigterm_stops_at_once(
    shared_store: tuple[TaskStore, str], fleet: Fleet, gates: Path
) -> None:
    store = shared_store[0]
    client = _client(store)
    proc = fleet.start("w1", "--drain-timeout", "120")
    handle = client.enqueue("plain", str(gates), task_id="plain-3")
    wait_until(lambda: _started(gates, "plain-3"), timeout=DEADLINE)
    fleet.term("w1")
    wait_until(lambda: "draining: 1 task(s) running" in fleet.log("w1"), timeout=DEADLINE)
    began = time.monotonic()
    fleet.term("w1")
    assert proc.wait(DEADLINE) == 0, fleet.log("w1")
    assert time.monotonic() - began < 15  # not the 120 s drain
    assert handle.status is S.STOPPED
    assert _edges(store, "plain-3")[-2:] == [("running", "stopping"), ("stopping", "stopped")]
    assert "stopped 1, lost 0" in fleet.log("w1")
