"""Shared scaffolding of the guide conformance tests: waiting, trajectories, stores.

The guide's samples leave out the names around them (``rows``, ``process``,
``sync_tenant``, a ``store``...). These helpers supply only those, so each test can
quote its sample verbatim. ``store_kind`` runs the store-backed samples once on SQLite
and once on PostgreSQL (the latter skipped locally without ``CHONGMING_TEST_POSTGRES``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chongming_task.run import TaskRun
from chongming_task.states import TaskStatus
from chongming_task.stores.base import TaskStore
from chongming_task.testing import wait_until

S = TaskStatus

#: Real seconds a test waits for something that should take milliseconds.
PATIENCE = 10.0

#: The trajectory of a run that simply succeeds (guide §1.1).
HAPPY = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]


def path(run: TaskRun) -> list[TaskStatus]:
    """Every ``to_status`` of the run's transitions, oldest first."""
    return [record.to_status for record in run.transitions]


def triggers(run: TaskRun) -> list[str]:
    return [record.trigger for record in run.transitions]


def reach(run: TaskRun, *statuses: TaskStatus) -> None:
    """Wait (real time, with a deadline) until ``run`` is in one of ``statuses``."""
    wait_until(
        lambda: run.status in statuses,
        timeout=PATIENCE,
        message=f"{run.task_id} to reach {[s.value for s in statuses]} (is {run.status})",
    )


class Gate:
    """A body that checkpoints until released: ``entered`` tells it is running."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, ctx: Any, *args: Any, **kwargs: Any) -> str:
        self.entered.set()
        while not self.release.wait(0.002):
            ctx.checkpoint()
        ctx.checkpoint()
        return "released"

    def wait_entered(self) -> None:
        assert self.entered.wait(PATIENCE), "the body never started"


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.release.set()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.external_service)])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[], TaskStore]]:
    """Open a new connection to one shared database per call (like another process)."""
    opened: list[TaskStore] = []
    if store_kind == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")

        def factory() -> TaskStore:
            from chongming_task import PostgresTaskStore

            store = PostgresTaskStore(dsn)
            opened.append(store)
            return store

    else:

        def factory() -> TaskStore:
            from chongming_task import SqliteTaskStore

            store = SqliteTaskStore(str(tmp_path / "tasks.db"))
            opened.append(store)
            return store

    yield factory
    for store in opened:
        store.close()
