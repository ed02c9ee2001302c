"""The store fails, the task does not (guide §8.9) -- and the store catches up.

A locked SQLite file (another connection holds ``BEGIN EXCLUSIVE``) and a full disk
(a small tmpfs, mounted when the suite runs as root): tasks keep running, their
writes are kept and retried, and once the fault is gone the store holds every task's
whole, legal trajectory; a fresh reconcile finds nothing lost.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chongming_task import Controller, TaskContext
from chongming_task.states import TaskStatus
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing import FakeClock, wait_until

from ._checks import check_store, integrity_ok
from .conftest import SCALE, record

pytestmark = pytest.mark.timeout(180)

S = TaskStatus
FULL = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]


def _scenario(db: Path, fault: Callable[[], contextlib.AbstractContextManager[None]]) -> None:
    """Tasks before and during the fault; every one converges to ``succeeded``."""
    tasks = 10 * SCALE
    gate = threading.Event()

    def job(ctx: TaskContext, n: int) -> int:
        while not gate.is_set():
            ctx.checkpoint()
            gate.wait(0.01)
        return n

    store = SqliteTaskStore(db, timeout=0.05)
    controller = Controller(store=store, max_parallel=tasks * 2, owner="outage")
    controller.register("job", job)
    before = [controller.submit("job", n, task_id=f"before-{n}") for n in range(tasks)]
    wait_until(lambda: all(store.get(r.task_id).status is S.RUNNING for r in before))  # type: ignore[union-attr]
    with fault():
        during = [controller.submit("job", n, task_id=f"during-{n}") for n in range(tasks)]
        gate.set()
        for run in before + during:
            assert run.wait(30).ok  # the tasks are fine
        pending = controller.pending_writes
        assert pending, "the fault made no write fail"
        # Memory is the truth meanwhile: get() never shows the stale record.
        assert {controller.get(r.task_id).status for r in before + during} == {S.SUCCEEDED}  # type: ignore[union-attr]
    wait_until(lambda: not controller.pending_writes, timeout=60, message="writes converge")
    ids = [r.task_id for r in before + during]
    statuses = check_store(store, ids)
    assert statuses == dict.fromkeys(ids, S.SUCCEEDED)
    for task_id in ids:
        assert [t.to_status for t in store.history(task_id)] == FULL
    controller.close()
    store.close()
    integrity_ok(db)
    with SqliteTaskStore(db) as fresh:
        later = FakeClock(start=datetime.now(UTC) + timedelta(hours=1))
        reconciler = Controller(store=fresh, clock=later, owner="reconciler")
        assert reconciler.reconcile().clean
        reconciler.close()
    record(
        outage_tasks=len(ids),
        outage_pending_writes=len(pending),
        transitions_checked=sum(len(FULL) for _ in ids),
        data_lost=0,
    )


def test_a_locked_sqlite_file_then_convergence(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"

    @contextlib.contextmanager
    def locked() -> Iterator[None]:
        locker = sqlite3.connect(db, timeout=0, isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")  # another process holds the file
        try:
            yield
        finally:
            locker.execute("ROLLBACK")
            locker.close()

    _scenario(db, locked)
    record(locked_file_runs=1)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_then_convergence(small_disk: Path) -> None:
    db = small_disk / "tasks.db"
    filler = small_disk / "filler"

    @contextlib.contextmanager
    def full() -> Iterator[None]:
        with filler.open("wb") as out:
            block = b"\0" * 65536
            with contextlib.suppress(OSError):  # ENOSPC: the disk is full
                while True:
                    out.write(block)
                    out.flush()
        try:
            yield
        finally:
            filler.unlink()

    _scenario(db, full)
    record(full_disk_runs=1)
