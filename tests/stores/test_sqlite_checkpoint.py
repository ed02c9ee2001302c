"""SQLite's WAL checkpoints run on their own thread, never inside a commit."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from store_builders import snap, step

from chongming_task.states import TaskStatus
from chongming_task.stores._sqlbase import Cursor
from chongming_task.stores._sqlite_checkpoint import SAFETY_PAGES, Checkpointer
from chongming_task.stores._sqlite_group import _Operation
from chongming_task.stores._sqlrows import task_params
from chongming_task.stores.sqlite import SqliteTaskStore


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "tasks.db")


@pytest.fixture
def store(path: str) -> Iterator[SqliteTaskStore]:
    with SqliteTaskStore(path) as opened:
        yield opened


def wal_frames(path: str) -> tuple[int, int]:
    """(frames in the log, frames already copied into the database), without copying any."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        # A checkpoint that cannot take the checkpoint lock copies nothing; a passive
        # one with nothing left to copy only reports. Both report the counts.
        _busy, log, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(log), int(copied)
    finally:
        conn.close()


def test_the_writer_leaves_checkpoints_to_the_thread(store: SqliteTaskStore) -> None:
    found = store._writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
    assert found == SAFETY_PAGES  # far beyond SQLite's 1,000: a safety net only
    assert store._checkpointer is not None


def test_with_synchronous_full_the_writer_keeps_its_own_checkpoints(path: str) -> None:
    # Every FULL commit syncs the log; a log that grows instead of being reused would
    # make each of those syncs dearer than the checkpoints saved.
    with SqliteTaskStore(path, synchronous="FULL") as store:
        assert store._checkpointer is None
        assert store._writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000


def test_enough_commits_run_a_checkpoint_on_the_thread(store: SqliteTaskStore, path: str) -> None:
    checkpointer = store._checkpointer
    assert checkpointer is not None
    every = checkpointer._every
    for index in range(every - 1):
        store.create(snap(f"t{index}"), [step(f"t{index}", 0, TaskStatus.PENDING)])
    assert checkpointer._thread is None  # not yet due: no thread at all
    store.create(snap("last"), [step("last", 0, TaskStatus.PENDING)])
    assert checkpointer.wait_for(1, timeout=10)
    assert checkpointer.last is not None
    _busy, frames, copied = checkpointer.last
    assert frames > 0
    assert copied == frames  # everything committed so far reached the database file
    assert wal_frames(path) == (frames, frames)  # and the writer did not checkpoint itself


def test_a_checkpoint_never_runs_in_the_committing_thread(path: str) -> None:
    opened: list[str] = []

    def connect() -> sqlite3.Connection:
        opened.append(threading.current_thread().name)
        return sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    checkpointer = Checkpointer(connect, lambda conn: conn.close(), name="ckpt-test", every=2)
    try:
        checkpointer.committed()
        checkpointer.committed()
        assert checkpointer.wait_for(1, timeout=10)
        assert opened == ["ckpt-test"]
        checkpointer.committed()
        checkpointer.committed()
        assert checkpointer.wait_for(2, timeout=10)
        assert opened == ["ckpt-test"]  # one connection, kept between checkpoints
    finally:
        checkpointer.close()


def test_a_failing_checkpoint_leaves_the_thread_running(path: str) -> None:
    attempts: list[int] = []

    def connect() -> sqlite3.Connection:
        attempts.append(1)
        if len(attempts) == 1:
            raise sqlite3.OperationalError("unable to open database file")
        return sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    checkpointer = Checkpointer(connect, lambda conn: conn.close(), name="ckpt-test", every=1)
    try:
        checkpointer.committed()
        assert checkpointer.wait_for(1, timeout=10)
        checkpointer.committed()
        assert checkpointer.wait_for(2, timeout=10)
        assert len(attempts) == 2
    finally:
        checkpointer.close()


def test_close_stops_the_thread_and_closes_its_connection(path: str) -> None:
    store = SqliteTaskStore(path)
    checkpointer = store._checkpointer
    assert checkpointer is not None
    checkpointer.committed(checkpointer._every)
    assert checkpointer.wait_for(1, timeout=10)
    assert store.open_connections == 2  # the writer and the checkpointer's
    store.close()
    assert store.open_connections == 0
    assert checkpointer._thread is not None
    assert not checkpointer._thread.is_alive()
    assert not Path(f"{path}-wal").exists()  # the last close checkpointed and removed it


def test_memory_databases_have_no_checkpointer() -> None:
    with SqliteTaskStore(":memory:") as store:
        assert store._checkpointer is None
        store.create(snap("t1"))
        assert store.get("t1") == snap("t1")


# ---------------------------------------------------------------- group commit


def test_a_failed_statement_in_a_group_undoes_only_itself(store: SqliteTaskStore) -> None:
    """Non-atomic writes share the group's transaction without a savepoint each."""
    group = store._group

    def write(task_id: str) -> Callable[[Cursor], int]:
        return lambda cur: store._write_task(
            cur, "insert_task", task_params(snap(task_id), store._instant, store._array), []
        )

    def half_then_fail(cur: Cursor) -> None:
        write("half")(cur)
        raise RuntimeError("after one statement")

    store.create(snap("taken"))
    batch = [
        _Operation(write("a"), False),
        _Operation(write("taken"), False),  # UNIQUE: SQLite undoes this statement alone
        _Operation(write("b"), False),
        _Operation(half_then_fail, True),  # atomic: its savepoint undoes its first write
    ]
    group._execute(batch)
    a, taken, b, half = batch
    assert a.error is None
    assert b.error is None
    assert taken.error is not None
    assert "UNIQUE" in str(taken.error)
    assert isinstance(half.error, RuntimeError)
    assert store.get("a") == snap("a")
    assert store.get("b") == snap("b")
    assert store.get("half") is None
    assert store.get("taken") == snap("taken")
