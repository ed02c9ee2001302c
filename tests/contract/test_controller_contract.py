"""The controller contract suite on the four built-in stores.

In-memory, a SQLite WAL file (a second connection and other processes on the same
file), a private SQLite ``:memory:`` database, and PostgreSQL (a fresh schema per test,
see tests/conftest.py; ``external_service``: skipped locally without
``CHONGMING_TEST_POSTGRES``, an error in CI). The crash cases skip for the two
in-process stores.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chongming_task.stores._base import TaskStore
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing.controller_contract import ControllerContract


class TestInMemoryController(ControllerContract):
    def make_store(self) -> InMemoryTaskStore:
        return InMemoryTaskStore()


class TestSqliteFileController(ControllerContract):
    def setup_method(self, method: object = None) -> None:
        super().setup_method(method)
        self.directory = Path(tempfile.mkdtemp(prefix="ct-controller-"))
        self.path = str(self.directory / "tasks.db")

    def teardown_method(self, method: object = None) -> None:
        try:
            super().teardown_method(method)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def make_store(self) -> SqliteTaskStore:
        return SqliteTaskStore(self.path)

    def make_second_store(self) -> SqliteTaskStore:
        return SqliteTaskStore(self.path)

    def store_factory(self) -> Callable[[], TaskStore]:
        return functools.partial(SqliteTaskStore, self.path)


class TestSqliteMemoryController(ControllerContract):
    def make_store(self) -> SqliteTaskStore:
        return SqliteTaskStore(":memory:")


@pytest.mark.external_service
class TestPostgresController(ControllerContract):
    @pytest.fixture(autouse=True)
    def _schema(self, postgres_dsn: str) -> Iterator[None]:
        self.dsn = postgres_dsn
        yield
        self.close_all()  # before postgres_dsn drops the schema under the controllers

    def make_store(self) -> TaskStore:
        from chongming_task.stores._postgres import PostgresTaskStore

        return PostgresTaskStore(self.dsn)

    def make_second_store(self) -> TaskStore:
        from chongming_task.stores._postgres import PostgresTaskStore

        return PostgresTaskStore(self.dsn)

    def store_factory(self) -> Callable[[], TaskStore]:
        from chongming_task.stores._postgres import PostgresTaskStore

        return functools.partial(PostgresTaskStore, self.dsn)
