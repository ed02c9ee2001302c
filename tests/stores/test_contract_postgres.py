"""The contract suite against PostgreSQL (a fresh schema per test, see tests/conftest.py)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest

from chongming_task.core._clock import Clock
from chongming_task.stores._base import TaskStore
from chongming_task.stores._postgres import PostgresTaskStore
from chongming_task.testing.store_contract import StoreContract

pytestmark = pytest.mark.external_service


class TestPostgresStore(StoreContract):
    @pytest.fixture(autouse=True)
    def _schema(self, postgres_dsn: str) -> None:
        self.dsn = postgres_dsn

    def make_store(self, clock: Clock) -> PostgresTaskStore:
        return PostgresTaskStore(self.dsn, clock=clock, max_connections=6)

    def make_second_store(self, clock: Clock) -> PostgresTaskStore:
        return PostgresTaskStore(self.dsn, clock=clock, max_connections=6)

    def store_factory(self) -> Callable[[], TaskStore]:
        return functools.partial(PostgresTaskStore, self.dsn)

    def corrupt_status(self, store: TaskStore, task_id: str) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE ct_tasks SET status = 'exploded',"
                " doc = jsonb_set(doc::jsonb, '{status}', '\"exploded\"')::json"
                " WHERE task_id = %s",
                (task_id,),
            )
