"""Schema 14 retired the worker submission commands: nothing submitted before is lost.

A database at schema 13 holds submissions written by the retired protocol (``kind=
"task"``, ``action="submit"``, payload ``{name, args, kwargs, task_id, tags, priority,
bucket_key, label, metadata}``, as ``chongming-task submit`` wrote them before). Opened
by this version, each one no worker had stored becomes the queued task
``Client.enqueue`` stores for the same call, and a worker runs it; its command is
completed. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from store_builders import snap

from chongming_task._model import TaskSnapshot, dumps
from chongming_task.controller import Controller
from chongming_task.policies import BucketPolicy
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.stores._postgres import PostgresTaskStore
from chongming_task.stores._sql import SCHEMA_VERSION
from chongming_task.stores._sqlfile import load_sections, split_statements
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.stores._sqlrows import task_params
from chongming_task.testing import wait_until
from chongming_task.worker import Worker

#: The retired protocol's command ids: uuid5 of the task id in this namespace.
_NAMESPACE = uuid.UUID("6f1c0e55-0d1e-4a53-9a43-2f1d8b5c7a10")
_ISSUED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def add(ctx: Any, a: int, b: int = 1) -> int:
    return a + b


@dataclass
class Old:
    """A database at schema 13: run SQL on it, then open it with today's store."""

    execute: Callable[[str, dict[str, Any]], list[tuple[Any, ...]]]
    open: Callable[[], TaskStore]
    instant: Callable[[datetime], Any]

    def submission(self, task_id: str, status: str = "pending", **payload: Any) -> str:
        """A submission command as the retired ``Submission.submit`` wrote it."""
        command_id = uuid.uuid5(_NAMESPACE, task_id).hex
        body: dict[str, Any] = {"name": "add", "args": [], "kwargs": {}, "task_id": task_id}
        body["tags"] = []
        body.update(priority=None, bucket_key=None, label=None, metadata={})
        body.update(payload)
        doc = {"payload": body, "issued_by": "ops@host", "issued_at": _ISSUED.isoformat()}
        priority = body["priority"] if isinstance(body["priority"], int) else 0
        params = {
            "command_id": command_id,
            "kind": "task",
            "target": task_id,
            "action": "submit",
            "target_owner": None,
            "priority": priority,
            "doc": json.dumps(doc),
            "channel": "unheard",
        }
        self.execute(load_sections(self.dialect)["insert_command"], params)
        if status == "claimed":  # by a worker that died before it stored the task
            self.execute(
                "UPDATE ct_commands SET status = 'claimed', claimed_by = 'dead', "
                "claim_token = 'token', claims = 1 WHERE command_id = "
                + (":id" if self.dialect == "sqlite" else "%(id)s"),
                {"id": command_id},
            )
        return command_id

    @property
    def dialect(self) -> str:
        return "sqlite" if self.instant is _micros else "postgres"

    def task(self, snapshot: TaskSnapshot) -> None:
        """A task row as a schema-13 store wrote it (without history)."""
        array: Callable[[Any], Any] = list if self.dialect == "postgres" else _json_list
        params = task_params(snapshot, self.instant, array)
        params.update(transitions="[]", wake=False, channel="")  # no wake-up (PostgreSQL)
        self.execute(load_sections(self.dialect)["insert_task"], params)

    def worker_record(self, worker_id: str, num_buckets: int, beat: datetime) -> None:
        doc = {
            "worker_id": worker_id,
            "host": "h",
            "pid": 1,
            "version": "0.0.9",
            "buckets": None,
            "slots": 1,
            "started_at": beat.isoformat(),
            "heartbeat_at": beat.isoformat(),
            "num_buckets": num_buckets,
        }
        params = {
            "worker_id": worker_id,
            "heartbeat_at": self.instant(beat),
            "doc": json.dumps(doc),
        }
        self.execute(load_sections(self.dialect)["upsert_worker"], params)


def _micros(value: datetime) -> int:
    return int((value - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1))


def _json_list(values: Any) -> str:
    return dumps(list(values))


def _same(value: datetime) -> datetime:
    return value


#: The last schema the retired protocol wrote submissions to.
OLD = 13


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.external_service)])
def old(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Old]:
    if request.param == "sqlite":
        path = str(tmp_path / "old.db")
        sections = load_sections("sqlite")
        with closing(sqlite3.connect(path, isolation_level=None)) as conn:
            for step in range(1, OLD + 1):
                for statement in split_statements(sections[f"migrate_{step}"]):
                    conn.execute(statement)
            conn.execute(sections["set_schema_version"], {"version": OLD})

        def run_sqlite(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
            with closing(sqlite3.connect(path, isolation_level=None)) as conn:
                return conn.execute(sql, params).fetchall()

        yield Old(run_sqlite, lambda: SqliteTaskStore(path), _micros)
        return
    psycopg = pytest.importorskip("psycopg")
    dsn: str = request.getfixturevalue("postgres_dsn")
    sections = load_sections("postgres")

    def run_postgres(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            cursor = conn.execute(sql, params or None)
            return cursor.fetchall() if cursor.description else []

    for step in range(1, OLD + 1):
        run_postgres(sections[f"migrate_{step}"], {})
    run_postgres(
        "INSERT INTO ct_meta (key, value) VALUES ('schema_version', %(v)s)",
        {"v": OLD},
    )
    yield Old(run_postgres, lambda: PostgresTaskStore(dsn), _same)


def _version(old: Old) -> int:
    [(value,)] = old.execute("SELECT value FROM ct_meta WHERE key = 'schema_version'", {})
    return int(value)


def test_a_legacy_pending_submission_survives_the_migration_as_a_queued_task(old: Old) -> None:
    assert SCHEMA_VERSION >= 14  # the migration to 14 is the one under test
    old.worker_record("w-old", 8, _ISSUED - timedelta(days=1))
    old.worker_record("w-last", 16, _ISSUED)  # the last to beat says how keys map
    command_id = old.submission(
        "sum",
        kwargs={"a": 40, "b": 2},
        tags=["billing"],
        priority=7,
        bucket_key="tenant-A",
        label="the answer",
        metadata={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01", "recipe": "x"},
    )
    with old.open() as store:
        assert _version(old) == SCHEMA_VERSION
        task = store.get("sum")
        assert task is not None
        assert (task.name, task.status, task.owner, task.lease_owner) == (
            "add",
            TaskStatus.QUEUED,
            None,
            None,
        )
        assert (task.tags, task.priority, task.label) == (frozenset({"billing"}), 7, "the answer")
        assert (task.bucket_key, task.bucket) == (
            "tenant-A",
            BucketPolicy(num_buckets=16).bucket_for("tenant-A"),
        )
        assert task.created_at == _ISSUED
        assert task.metadata == {
            "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01",
            "recipe": {
                "args": [],
                "kwargs": {"a": 40, "b": 2},
                "not_before": None,
                "enqueued_by": "ops@host",
            },
        }
        history = store.history("sum")
        assert [(t.from_status, t.to_status) for t in history] == [
            (None, TaskStatus.PENDING),
            (TaskStatus.PENDING, TaskStatus.QUEUED),
        ]
        assert (history[1].trigger, history[1].actor, history[1].at) == (
            "queue:migrated",
            "ops@host",
            _ISSUED,
        )
        command = store.get_command(command_id)
        assert command is not None
        assert command.status == "completed"
        assert command.result == {
            "accepted": True,
            "task_id": "sum",
            "worker": "schema-14-migration",
        }
        # A worker (all buckets) claims it from the queue like any enqueued task.
        controller = Controller(store, owner="w1", max_parallel=1, num_buckets=16)
        controller.register("add", add)
        worker = Worker(controller, max_parallel=1, poll_interval=0.05)
        worker.start()
        try:
            wait_until(
                lambda: (s := store.get("sum")) is not None and s.status is TaskStatus.SUCCEEDED,
                timeout=15,
            )
        finally:
            assert worker.shutdown(timeout=10).clean
        done = store.get("sum")
        assert done is not None
        assert (done.outcome, done.owner) == (42, "w1")
        assert [t.to_status for t in store.history("sum")][-3:] == [
            TaskStatus.STARTING,
            TaskStatus.RUNNING,
            TaskStatus.SUCCEEDED,
        ]


def test_the_migration_takes_what_no_worker_stored_and_refuses_what_none_could(
    old: Old,
) -> None:
    # A submission a dead worker had claimed before storing its task; one whose task a
    # worker stored (it stays the worker's to complete); two no worker could accept;
    # and one that reuses an id another submission took.
    orphan = old.submission("orphan", status="claimed", kwargs={"a": 1})
    taken = old.submission("taken", status="claimed", kwargs={"a": 2})
    old.task(snap("taken", name="add", status=TaskStatus.RUNNING, owner="alive"))
    bad = old.submission("bad", priority="high")
    nameless = old.submission("nameless", name="")
    with old.open() as store:
        orphaned = store.get("orphan")
        assert orphaned is not None
        assert (orphaned.status, orphaned.owner) == (TaskStatus.QUEUED, None)
        running = store.get("taken")
        assert running is not None
        assert (running.status, running.owner) == (TaskStatus.RUNNING, "alive")
        assert store.get("bad") is None
        assert store.get("nameless") is None
        commands = {
            command_id: command
            for command_id in (orphan, taken, bad, nameless)
            if (command := store.get_command(command_id)) is not None
        }
    assert len(commands) == 4
    assert (commands[orphan].status, commands[orphan].result) == (
        "completed",
        {"accepted": True, "task_id": "orphan", "worker": "schema-14-migration"},
    )
    assert (commands[taken].status, commands[taken].claimed_by) == ("claimed", "dead")
    for refused, reason in ((bad, "priority"), (nameless, "task name")):
        command = commands[refused]
        assert command.status == "completed"
        assert isinstance(command.result, dict)
        assert command.result["accepted"] is False
        assert reason in command.result["error"]
