"""``workers --forget`` / ``--forget-stale``: records of gone workers can be deleted,
a live worker's never, on SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chongming_task.cli import main
from chongming_task.stores import QueueStore
from chongming_task.stores._base import TaskStore
from chongming_task.stores._queue_records import WorkerRecord
from chongming_task.stores._sqlite import SqliteTaskStore


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.external_service)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, TaskStore]]:
    store: TaskStore
    if request.param == "sqlite":
        db = str(tmp_path / "w.db")
        store = SqliteTaskStore(db)
    else:
        from chongming_task.stores._postgres import PostgresTaskStore

        db = request.getfixturevalue("postgres_dsn")
        store = PostgresTaskStore(db)
    with store:
        yield db, store


def _worker(worker_id: str, *, heartbeat: datetime, stopped: bool = False) -> WorkerRecord:
    return WorkerRecord(
        worker_id=worker_id,
        host="h",
        pid=7,
        version="1",
        buckets=None,
        slots=1,
        started_at=heartbeat - timedelta(hours=1),
        heartbeat_at=heartbeat,
        stopped_at=heartbeat if stopped else None,
    )


def _cli(db: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--db", db, "workers", *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_forget_deletes_gone_workers_and_refuses_a_live_one(
    target: tuple[str, TaskStore],
) -> None:
    db, store = target
    assert isinstance(store, QueueStore)  # the worker registry
    now = datetime.now(UTC)
    store.put_worker(_worker("live", heartbeat=now))
    store.put_worker(_worker("dead", heartbeat=now - timedelta(hours=2)))
    store.put_worker(_worker("gone", heartbeat=now - timedelta(minutes=5), stopped=True))
    store.put_worker(_worker("old", heartbeat=now - timedelta(days=3), stopped=True))

    code, out, err = _cli(db, "--forget", "live")
    assert code == 1
    assert "worker 'live' is live" in err
    assert "stop it first" in err
    code, out, err = _cli(db, "--forget", "nobody")
    assert (code, "no worker 'nobody' is registered" in err) == (1, True)
    assert {w.worker_id for w in store.list_workers()} == {"live", "dead", "gone", "old"}

    code, out, err = _cli(db, "--forget", "dead")
    assert code == 0, err
    assert out.startswith("forgot worker dead (dead, heartbeat 7200")
    code, out, err = _cli(db, "--forget-stale", "3600", "--json")
    assert code == 0, err
    assert json.loads(out)["forgotten"] == ["old"]  # "gone" stopped 5 minutes ago
    assert {w.worker_id for w in store.list_workers()} == {"live", "gone"}
    code, out, err = _cli(db, "--forget-stale", "3600")
    assert (code, out.strip()) == (0, "no worker record to forget")


def test_forget_stale_refuses_a_bad_duration(target: tuple[str, TaskStore]) -> None:
    db, _ = target
    for bad in ("nan", "-1", "inf", "soon"):
        code, _, err = _cli(db, "--forget-stale", bad)
        assert code == 2, bad
        assert "--forget-stale" in err
