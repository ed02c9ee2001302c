"""The contract suite against SQLite: a WAL file shared by connections and processes,
and a private ``:memory:`` database."""

from __future__ import annotations

import functools
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

from chongming_task.core._clock import Clock
from chongming_task.stores._base import TaskStore
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing.store_contract import StoreContract


def corrupt_sqlite_status(path: str, task_id: str) -> None:
    """Write an unknown status into both the column and the document, behind the API."""
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE ct_tasks SET status = 'exploded', doc = json_set(doc, '$.status', 'exploded')"
            " WHERE task_id = ?",
            (task_id,),
        )
    conn.close()


class TestSqliteFileStore(StoreContract):
    def setup_method(self, method: object = None) -> None:
        super().setup_method(method)
        self.directory = Path(tempfile.mkdtemp(prefix="ct-sqlite-"))
        self.path = str(self.directory / "tasks.db")

    def teardown_method(self, method: object = None) -> None:
        try:
            super().teardown_method(method)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def make_store(self, clock: Clock) -> SqliteTaskStore:
        return SqliteTaskStore(self.path, clock=clock)

    def make_second_store(self, clock: Clock) -> SqliteTaskStore:
        return SqliteTaskStore(self.path, clock=clock)

    def store_factory(self) -> Callable[[], TaskStore]:
        return functools.partial(SqliteTaskStore, self.path)

    def corrupt_status(self, store: TaskStore, task_id: str) -> None:
        corrupt_sqlite_status(self.path, task_id)


class TestSqliteMemoryStore(StoreContract):
    def make_store(self, clock: Clock) -> SqliteTaskStore:
        return SqliteTaskStore(":memory:", clock=clock)

    def corrupt_status(self, store: TaskStore, task_id: str) -> None:
        assert isinstance(store, SqliteTaskStore)
        store._dialect.writer.execute(  # the only connection to a private in-memory database
            "UPDATE ct_tasks SET status = 'exploded', doc = json_set(doc, '$.status', 'exploded')"
            " WHERE task_id = ?",
            (task_id,),
        )
