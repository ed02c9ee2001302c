"""Writes converge (guide §8.9): a write the store refused is kept and retried until
the store takes it, so the store never ends up showing a finished task as running."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chongming_task import Controller
from chongming_task.errors import StoreError
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing import FakeClock, wait_until

from ._helpers import S, path

FULL = ["pending", "queued", "starting", "running", "succeeded"]


def _later(hours: float = 1.0) -> FakeClock:
    """A clock for a reconciler in "another process", long after every lease expired."""
    return FakeClock(start=datetime.now(UTC) + timedelta(hours=hours))


def test_terminal_write_during_an_exclusive_lock_reaches_the_store(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    store = SqliteTaskStore(db, timeout=0.1)
    release = threading.Event()
    controller = Controller(store=store, owner="worker")
    controller.register("job", lambda ctx: release.wait(10) and 7)
    run = controller.submit("job", task_id="t")
    wait_until(lambda: store.get("t").status is S.RUNNING, message="running")  # type: ignore[union-attr]
    locker = sqlite3.connect(db, timeout=0, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")  # another process holds the file
    try:
        release.set()
        assert run.wait(10).value == 7
        assert [(p.task_id, p.status) for p in controller.pending_writes] == [("t", "succeeded")]
        assert controller.get("t").status is S.SUCCEEDED  # type: ignore[union-attr]
        assert any(f.task_id == "t" for f in controller.persist_failures)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    wait_until(lambda: not controller.pending_writes, message="the pending write stored")
    assert store.get("t").status is S.SUCCEEDED  # type: ignore[union-attr]
    assert path(store.history("t")) == FULL
    controller.close()
    # A fresh process, long after the lease: nothing to call lost.
    with SqliteTaskStore(db) as other_store:
        other = Controller(store=other_store, clock=_later(), owner="reconciler")
        assert other.reconcile().clean
        assert other_store.get("t").status is S.SUCCEEDED  # type: ignore[union-attr]
        other.close()
    store.close()


def test_a_failed_creation_is_created_once_the_store_works(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    original, original_batch = store.create, store.create_batch
    broken = threading.Event()
    broken.set()

    def create(*args: object, **kwargs: object) -> None:
        if broken.is_set():
            raise StoreError("disk I/O error (full)")
        original(*args, **kwargs)  # type: ignore[arg-type]

    def create_batch(*args: object, **kwargs: object) -> None:
        if broken.is_set():
            raise StoreError("disk I/O error (full)")
        original_batch(*args, **kwargs)  # type: ignore[arg-type]

    store.create = create  # type: ignore[method-assign]
    store.create_batch = create_batch  # type: ignore[method-assign]
    controller = Controller(store=store)
    controller.register("job", lambda ctx: 1)
    assert controller.submit("job", task_id="a").wait(10).ok
    assert store.get("a") is None
    assert [p.stored_version for p in controller.pending_writes] == [None]
    assert controller.get("a").status is S.SUCCEEDED  # type: ignore[union-attr]
    broken.clear()
    wait_until(lambda: store.get("a") is not None, message="the late creation")
    assert store.get("a").status is S.SUCCEEDED  # type: ignore[union-attr]
    assert path(store.history("a")) == FULL
    controller.close(close_store=True)


def test_a_pending_write_keeps_the_lease_and_is_never_called_lost(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    store = SqliteTaskStore(db)
    renewed: list[str] = []
    original_renew = store.renew_leases

    def renew(owner: str, task_ids: Collection[str], lease_until: datetime) -> int:
        renewed.extend(task_ids)
        return original_renew(owner, task_ids, lease_until)

    def fail(*args: object, **kwargs: object) -> None:
        raise StoreError("database is locked")

    store.renew_leases = renew  # type: ignore[method-assign]
    original_save = store.save
    store.save = fail  # type: ignore[method-assign]
    controller = Controller(store=store, lease_ttl=0.6, owner="worker")
    controller.register("job", lambda ctx: 1)
    assert controller.submit("job", task_id="t").wait(10).ok
    assert store.get("t").status is S.STARTING  # type: ignore[union-attr]
    # Its lease is renewed while the write is pending, beyond the lease's length.
    count = renewed.count("t")
    wait_until(lambda: renewed.count("t") >= count + 4, message="renewals of a pending task")
    with SqliteTaskStore(db) as other_store:
        lease = other_store.get("t").lease_until  # type: ignore[union-attr]
        assert lease is not None
        assert lease > datetime.now(UTC)
    store.save = original_save  # type: ignore[method-assign]
    wait_until(lambda: not controller.pending_writes, message="stored")
    assert store.get("t").status is S.SUCCEEDED  # type: ignore[union-attr]
    controller.close(close_store=True)


def test_close_flushes_for_a_bounded_time_and_says_what_it_could_not_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")

    def fail(*args: object, **kwargs: object) -> None:
        raise StoreError("disk full")

    store.save = fail  # type: ignore[method-assign]
    controller = Controller(store=store)
    controller.register("job", lambda ctx: 1)
    assert controller.submit("job", task_id="t").wait(10).ok
    with caplog.at_level(logging.ERROR, logger="chongming_task.controller"):
        controller.close(flush_timeout=0.3)
    assert [(p.task_id, p.status) for p in controller.pending_writes] == [("t", "succeeded")]
    assert any(
        "close(): task t is succeeded" in record.getMessage() and "reconcile" in record.getMessage()
        for record in caplog.records
    )
    store.close()


def test_close_flushes_what_the_store_takes_again(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    original_save = store.save
    calls = {"n": 0}

    def flaky(*args: object, **kwargs: object) -> None:
        calls["n"] += 1
        if calls["n"] <= 3:
            raise StoreError("database is locked")
        original_save(*args, **kwargs)  # type: ignore[arg-type]

    store.save = flaky  # type: ignore[method-assign]
    controller = Controller(store=store)
    controller.register("job", lambda ctx: 1)
    controller.submit("job", task_id="t").wait(10)
    controller.close()
    assert controller.pending_writes == []
    assert store.get("t").status is S.SUCCEEDED  # type: ignore[union-attr]
    store.close()


def test_its_own_reconcile_never_calls_a_pending_task_lost(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")

    def fail(*args: object, **kwargs: object) -> None:
        raise StoreError("database is locked")

    store.save = fail  # type: ignore[method-assign]
    store.renew_leases = fail  # type: ignore[method-assign,assignment]
    clock = FakeClock(start=datetime.now(UTC))
    controller = Controller(store=store, clock=clock, owner="worker")
    controller.register("job", lambda ctx: 1)
    assert controller.submit("job", task_id="t").wait(10).ok
    clock.advance(3600)  # the stored lease ran out long ago
    assert controller.reconcile().lost == ()
    assert store.get("t").status is S.STARTING  # type: ignore[union-attr]  # not lost
    assert controller.get("t").status is S.SUCCEEDED  # type: ignore[union-attr]
    controller.close(flush_timeout=0)
    store.close()
