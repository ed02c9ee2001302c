"""A worker's claim and heartbeat never wait on its event loop (issue 36).

A real ``chongming-task worker`` process runs an ``async def`` task that blocks the
loop (``time.sleep`` in a loop, until the test releases it). Meanwhile the worker
goes on: it claims and runs a ``def`` task (a thread), claims and starts an ``async
def`` task (stored ``starting``, its body waiting for the loop), and its heartbeat
in the store's worker registry moves on; the loop-lag watch reports the block while
it lasts, naming the task. Once released, the blocked task's stored checkpoint-gap
profile counts the loop block, and the waiting task runs. SQLite and PostgreSQL.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from _workers import on_path, spawn_worker, stop_workers
from chongming_task import Client, TaskStatus
from chongming_task.stores._base import QueueStore, TaskStore
from chongming_task.testing import wait_until

HERE = Path(__file__).parent
TASKS = str(HERE / "asynctasks.py")
DEADLINE = 30.0
OWNER = "w-async"


@pytest.fixture(autouse=True)
def _tasks_on_path() -> Iterator[None]:
    with on_path(HERE):
        yield


def _heartbeat(store: TaskStore) -> datetime | None:
    assert isinstance(store, QueueStore)
    for record in store.list_workers():
        if record.worker_id == OWNER:
            return record.heartbeat_at
    return None


def _status(store: TaskStore, task_id: str) -> TaskStatus | None:
    snapshot = store.get(task_id)
    return None if snapshot is None else snapshot.status


def test_claim_and_heartbeat_go_on_while_the_loop_is_blocked(
    shared_store: tuple[TaskStore, str], tmp_path: Path
) -> None:
    store, db = shared_store
    gates, logs = tmp_path / "gates", tmp_path / "logs"
    gates.mkdir()
    logs.mkdir()
    log = logs / "worker.log"
    client = Client(store, tasks=__import__("asynctasks"))
    worker = spawn_worker(
        db,
        log,
        options=["--owner", OWNER],
        worker=["--tasks", TASKS, "--max-parallel", "4", "--poll-interval", "0.1"],
    )
    try:
        hog = client.enqueue("hog", str(gates))
        wait_until((gates / f"started-{hog.task_id}").exists, timeout=DEADLINE)
        blocked_at = time.monotonic()  # the worker's loop is blocked from here on
        beat = _heartbeat(store)
        assert beat is not None

        plain = client.enqueue("plain")
        assert plain.wait(DEADLINE).value == "thread"  # claimed and run on a thread
        polite = client.enqueue("polite")
        wait_until(
            lambda: _status(store, polite.task_id) is TaskStatus.STARTING,
            timeout=DEADLINE,
            message="the async task to be claimed and started",
        )
        stored = store.get(polite.task_id)
        assert stored is not None
        assert stored.owner == OWNER
        wait_until(
            lambda: (_heartbeat(store) or beat) > beat,
            timeout=DEADLINE,
            message="a heartbeat while the loop is blocked",
        )
        wait_until(
            lambda: f"({hog.task_id}) is blocking the event loop" in log.read_text(),
            timeout=DEADLINE,
            message="the watch to report the block",
        )
        assert _status(store, hog.task_id) is TaskStatus.RUNNING
        assert _status(store, polite.task_id) is TaskStatus.STARTING  # its body waits
        (gates / "release").write_text("go")
        held = time.monotonic() - blocked_at

        assert hog.wait(DEADLINE).value == "released"
        assert polite.wait(DEADLINE).value == "loop"
        snapshot = store.get(hog.task_id)
        assert snapshot is not None
        assert snapshot.checkpoint_gaps is not None
        assert snapshot.checkpoint_gaps.loop_blocks == 1
        assert snapshot.checkpoint_gaps.loop_block_max >= held
        polite_gaps = store.get(polite.task_id).checkpoint_gaps  # type: ignore[union-attr]
        assert polite_gaps is None or polite_gaps.loop_blocks == 0
        wait_until(
            lambda: f"({hog.task_id}) blocked the event loop for" in log.read_text(),
            timeout=DEADLINE,
        )
    finally:
        stop_workers([worker], logs)
