"""Shared scaffolding of the guide conformance tests: waiting, trajectories, stores.

The guide's samples leave out the names around them (``rows``, ``process``,
``sync_tenant``, a ``store``...). These helpers supply only those, so each test can
quote its sample verbatim. ``store_kind`` runs the store-backed samples once on SQLite
and once on PostgreSQL (the latter skipped locally without ``CHONGMING_TEST_POSTGRES``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chongming_task.run import TaskRun
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
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


class Work:
    """Registered task bodies that run until ``release`` (each records its start)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started: list[Any] = []
        self.lock = threading.Lock()

    def _hold(self, ctx: Any, value: Any) -> Any:
        with self.lock:
            self.started.append(value)
        while not self.release.wait(0.002):
            ctx.checkpoint()
        ctx.checkpoint()
        return value

    def extract(self, ctx: Any, source: str = "s3://x") -> str:
        return str(self._hold(ctx, source))

    def transform(self, ctx: Any, n: int) -> int:
        return int(self._hold(ctx, n))

    def sync_tenant(self, ctx: Any, tenant: str = "all") -> str:
        return str(self._hold(ctx, tenant))

    def train_model(self, ctx: Any, version: str) -> str:
        return str(self._hold(ctx, version))


@pytest.fixture
def work() -> Iterator[Work]:
    w = Work()
    yield w
    w.release.set()


class Backend:
    """One shared database per test: an SQLite file ``tasks.db`` or a PostgreSQL schema.

    The samples write ``SqliteTaskStore("tasks.db")``. The guide says that moving to
    PostgreSQL means replacing exactly that call (§8.7, §8.14), so the PostgreSQL
    variant of a sample rebinds the name ``SqliteTaskStore`` to :meth:`open` and
    changes nothing else. Every store opened here is closed after the test.
    """

    def __init__(self, kind: str, dsn: str | None, directory: Path) -> None:
        self.kind = kind
        self.dsn = dsn
        self.directory = directory
        self.opened: list[TaskStore] = []

    @property
    def url(self) -> str:
        """What ``--db`` takes for this database."""
        return self.dsn if self.dsn is not None else str(self.directory / "tasks.db")

    def open(self, path: str = "tasks.db") -> TaskStore:
        """A new connection to the shared database (like another process's)."""
        store: TaskStore
        if self.dsn is not None:
            from chongming_task import PostgresTaskStore

            store = PostgresTaskStore(self.dsn)
        else:
            from chongming_task import SqliteTaskStore

            store = SqliteTaskStore(str(self.directory / path))
        self.opened.append(store)
        return store

    def close(self) -> None:
        for store in self.opened:
            store.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.external_service)])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    """Each store sample once on SQLite and once on PostgreSQL; cwd is a temp dir."""
    monkeypatch.chdir(tmp_path)
    dsn = request.getfixturevalue("postgres_dsn") if request.param == "postgres" else None
    b = Backend(str(request.param), dsn, tmp_path)
    yield b
    b.close()
