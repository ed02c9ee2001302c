"""Fixtures for pipeline tests on a real controller."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from chongming_task.controller import Controller

from . import tasks


@pytest.fixture(autouse=True)
def _fresh_gates() -> Iterator[None]:
    tasks.GATES.clear()
    yield
    for event in tasks.GATES.values():
        event.set()  # never leave a body waiting after a failed test
    tasks.GATES.clear()


def make_controller(**options: object) -> Controller:
    controller = Controller(**options)  # type: ignore[arg-type]
    for name, fn in tasks.TASKS.items():
        controller.register(name, fn)
    return controller


def open_store(spec: str, clock: Any = None) -> Any:
    """A store from a spec: ``sqlite:<path>`` or a PostgreSQL DSN."""
    if spec.startswith("sqlite:"):
        from chongming_task.stores._sqlite import SqliteTaskStore

        return SqliteTaskStore(spec.removeprefix("sqlite:"), clock=clock)
    from chongming_task.stores._postgres import PostgresTaskStore

    return PostgresTaskStore(spec, clock=clock)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.external_service)])
def store_spec(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """Where a test's stored tasks go: a fresh SQLite file or a fresh Postgres schema."""
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'tasks.db'}"
    dsn: str = request.getfixturevalue("postgres_dsn")
    return dsn


@pytest.fixture
def controller() -> Iterator[Controller]:
    with make_controller(max_parallel=4) as ctl:
        yield ctl
