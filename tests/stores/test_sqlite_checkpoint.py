"""WAL checkpoints run on the store's checkpoint thread, not inside a writer's commit."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_builders import snap

from chongming_task.states import TaskStatus
from chongming_task.stores import _sqlite_checkpoint
from chongming_task.stores._sqlite_checkpoint import BACKSTOP_FACTOR, FRAMES, Checkpointer
from chongming_task.stores.sqlite import SqliteTaskStore
from chongming_task.testing import wait_until

pytestmark = pytest.mark.timeout(60)

PATIENCE = 10.0
#: A WAL frame: a 24-byte header and one 4 KiB page.
FRAME_BYTES = 24 + 4096


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "tasks.db")


@pytest.fixture
def store(path: str) -> Iterator[SqliteTaskStore]:
    with SqliteTaskStore(path) as opened:
        yield opened


def checkpointer(store: SqliteTaskStore) -> Checkpointer:
    found = store._checkpointer
    assert found is not None
    return found


def fill(store: SqliteTaskStore, count: int, prefix: str = "t") -> None:
    """Create ``count`` tasks, one commit each (a creation writes ~7 WAL frames)."""
    for n in range(count):
        store.create(snap(f"{prefix}{n}"))


def fill_until(store: SqliteTaskStore, checkpoints: int) -> None:
    """Create tasks until the checkpoint thread has completed ``checkpoints``."""
    ckpt = checkpointer(store)
    for n in range(20_000):
        if ckpt.checkpoints >= checkpoints:
            return
        store.create(snap(f"u{n}"))
    raise AssertionError(f"{ckpt.checkpoints} checkpoints after 20,000 creations")


def wal_frames(path: str) -> int:
    return os.path.getsize(path + "-wal") // FRAME_BYTES


def wal_salt(ckpt: Checkpointer) -> bytes:
    """The WAL's salt (wal-index header): SQLite draws a new one at each restart."""
    header = _sqlite_checkpoint._read_header(ckpt._shm_fd)
    assert header is not None
    return header[32:40]


def test_a_full_wal_is_checkpointed_by_the_thread_and_starts_over(
    store: SqliteTaskStore,
) -> None:
    ckpt = checkpointer(store)
    store._writer.execute("PRAGMA wal_autocheckpoint=0")  # no backstop: only the thread
    salts = {wal_salt(ckpt)}
    for n in range(20_000):
        if ckpt.checkpoints >= 3:
            break
        store.create(snap(f"u{n}"))
        salts.add(wal_salt(ckpt))
    wait_until(lambda: not ckpt._wanted, timeout=PATIENCE, message="checkpoint over")
    store.create(snap("last"))  # runs the last phase if it was handed over
    salts.add(wal_salt(ckpt))
    assert ckpt.checkpoints >= 3
    assert ckpt.failures == 0
    # The last pass copied everything (under the write lock), so a later commit
    # started the log over: the file is reused instead of growing. How far past FRAMES
    # it got meanwhile depends on how fast this loop writes and the disk syncs.
    assert len(salts) >= 3
    assert ckpt.pending() < FRAMES


def test_the_writer_keeps_its_own_checkpoint_only_as_a_backstop(store: SqliteTaskStore) -> None:
    found = store._writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
    assert found == FRAMES * BACKSTOP_FACTOR


def test_checkpointed_writes_are_all_there_after_reopening(path: str) -> None:
    with SqliteTaskStore(path) as store:
        fill_until(store, 1)
        fill(store, 50, prefix="late")
        created = sum(store.count_by_status().values())
    with SqliteTaskStore(path) as reopened:
        assert sum(reopened.count_by_status().values()) == created
        stored = reopened.get("late49")
        assert stored is not None
        assert stored.status is TaskStatus.PENDING


def test_close_during_a_checkpoint_stops_the_thread_and_every_connection(path: str) -> None:
    store = SqliteTaskStore(path)
    ckpt = checkpointer(store)
    fill_until(store, 1)
    fill(store, 150, prefix="more")  # likely mid-checkpoint when close() comes
    store.close()
    assert store.open_connections == 0
    assert not ckpt._thread.is_alive()
    assert ckpt.pending() == 0  # unmapped: reads as nothing pending, never faults


def test_an_in_memory_store_has_no_checkpoint_thread() -> None:
    with SqliteTaskStore(":memory:") as store:
        assert store._checkpointer is None
        fill(store, 10)


def test_without_a_readable_wal_index_sqlite_checkpoints_as_usual(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sqlite_checkpoint, "_find_fd", lambda shm_path: None)
    with SqliteTaskStore(path) as store:
        assert store._checkpointer is None
        assert store._writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == FRAMES
        fill(store, 200)
        assert wal_frames(path) < 2 * FRAMES  # the writer's own checkpoints restart it


def test_a_wal_index_of_an_unknown_layout_is_not_read(tmp_path: Path) -> None:
    shm = tmp_path / "other.db-shm"
    shm.write_bytes(b"\x01" * 32768)
    fd = os.open(shm, os.O_RDONLY)  # open in this process, as SQLite's would be
    try:
        assert _sqlite_checkpoint._find_fd(str(shm)) is None
    finally:
        os.close(fd)
    assert _sqlite_checkpoint._find_fd(str(tmp_path / "missing.db-shm")) is None


def test_the_wal_index_is_read_through_sqlites_own_descriptor(
    store: SqliteTaskStore, path: str
) -> None:
    # Opening and closing a descriptor of our own would drop SQLite's POSIX locks on
    # the file: other processes would then take the wal-index for unused.
    fd = checkpointer(store)._shm_fd
    assert os.path.samefile(f"/proc/self/fd/{fd}", path + "-shm")
    before = sorted(os.listdir("/proc/self/fd"))
    fill(store, 20)
    assert checkpointer(store).pending() > 0
    assert sorted(os.listdir("/proc/self/fd")) == before


def test_a_failed_checkpoint_is_counted_and_the_thread_carries_on(path: str) -> None:
    opened: list[sqlite3.Connection] = []
    refuse = threading.Event()
    refuse.set()

    def connect() -> sqlite3.Connection:
        if refuse.is_set():
            raise sqlite3.OperationalError("injected: cannot open")
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        opened.append(conn)
        return conn

    with SqliteTaskStore(path) as store:
        ckpt = checkpointer(store)
        ckpt._connect = connect
        fill(store, 200)
        wait_until(lambda: ckpt.failures >= 1, timeout=PATIENCE, message="a failed checkpoint")
        refuse.clear()
        fill_until(store, 1)
    for conn in opened:
        conn.close()


def test_the_last_phase_is_left_to_the_next_writer_when_the_lock_stays_busy(
    store: SqliteTaskStore,
) -> None:
    # A Python lock is not fair: under a stream of commits the thread could wait for
    # it indefinitely, and the WAL would grow to the writer's backstop meanwhile.
    ckpt = checkpointer(store)
    fill(store, 50)  # well below the trigger: the thread stays idle
    with store._write_lock:
        ckpt._checkpoint()  # phase 1 runs beside the "writer"; phase 2 cannot have the lock
    assert ckpt._catch_up
    store.create(snap("next"))  # commits, then copies what is left itself
    assert not ckpt._catch_up
    assert ckpt.pending() == 0  # its own frames included
    store.create(snap("after"))  # an ordinary write again: its frames wait
    assert ckpt.pending() > 0


def test_a_checkpoint_held_up_by_a_reader_is_not_retried_at_every_commit(
    store: SqliteTaskStore, path: str
) -> None:
    # Another process's reader keeps an old snapshot: the frames after it cannot be
    # copied, and retrying at each commit would wake the thread at each commit.
    fill(store, 5)
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM ct_tasks").fetchone()  # holds its snapshot
        ckpt = checkpointer(store)
        fill_until(store, 1)
        wait_until(lambda: not ckpt._wanted, timeout=PATIENCE, message="checkpoint over")
        assert ckpt.pending() >= FRAMES  # held up by the reader
        fill(store, 100, prefix="more")  # ~700 frames: under the raised threshold
        assert ckpt.checkpoints == 1
    finally:
        reader.close()
