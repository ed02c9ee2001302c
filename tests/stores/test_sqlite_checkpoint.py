"""The SQLite store copies its WAL back on a thread of its own, never inside a commit."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

from store_builders import snap, step

from chongming_task import SqliteTaskStore, TaskStatus
from chongming_task.stores._sqlite_checkpoint import EVERY, VALVE
from chongming_task.testing import wait_until

PATIENCE = 10.0
THREAD = "chongming-sqlite-checkpoint"


def _checkpointers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD and t.is_alive()]


def _fill(store: SqliteTaskStore, count: int, first: int = 0) -> None:
    """``count`` creations, each its own commit."""
    for i in range(first, first + count):
        store.create(snap(f"t{i}"), [step(f"t{i}", 0, TaskStatus.PENDING)])


def _checkpointed(store: SqliteTaskStore) -> int:
    """WAL frames the store's checkpoint thread copied back so far."""
    checkpointer = store._dialect._checkpointer
    assert checkpointer is not None
    return checkpointer.copied


def test_commits_reach_the_database_file_without_sqlites_own_checkpoint(tmp_path: Path) -> None:
    with SqliteTaskStore(tmp_path / "t.db") as store:
        autocheckpoint = store._dialect.writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        assert autocheckpoint == VALVE  # far beyond what these commits fill
        _fill(store, EVERY - 1)
        assert _checkpointed(store) == 0  # not yet: it is woken every EVERY commits
        _fill(store, 1, first=EVERY - 1)
        wait_until(
            lambda: _checkpointed(store) > 0,
            timeout=PATIENCE,
            message="the checkpoint thread copied the WAL into the file",
        )
        assert len(_checkpointers()) >= 1


def test_close_stops_the_thread_and_its_connection(tmp_path: Path) -> None:
    before = set(_checkpointers())
    store = SqliteTaskStore(tmp_path / "t.db")
    _fill(store, EVERY)
    wait_until(lambda: set(_checkpointers()) - before, timeout=PATIENCE, message="it started")
    store.close()
    assert store.open_connections == 0
    assert not set(_checkpointers()) - before


def test_a_store_dropped_without_close_stops_its_thread(tmp_path: Path) -> None:
    before = set(_checkpointers())
    store = SqliteTaskStore(tmp_path / "t.db")
    _fill(store, EVERY)
    checkpointer = store._dialect._checkpointer  # holds no reference to the store
    assert checkpointer is not None
    wait_until(lambda: checkpointer.copied, timeout=PATIENCE, message="a checkpoint ran")
    assert set(_checkpointers()) - before
    del store

    def ended() -> bool:
        gc.collect()  # the store sits in reference cycles: only the collector frees it
        return not set(_checkpointers()) - before

    wait_until(ended, timeout=PATIENCE, message="the collected store's checkpoint thread ended")


def test_an_in_memory_store_has_no_checkpoint_thread() -> None:
    before = set(_checkpointers())
    with SqliteTaskStore(":memory:") as store:
        _fill(store, EVERY)
        assert not set(_checkpointers()) - before
