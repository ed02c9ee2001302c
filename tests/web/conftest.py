"""Fixtures of the dashboard tests: a store (SQLite or PostgreSQL), a holder, an app.

The *holder* is a controller in this process under another owner name than the
dashboard: it runs the tasks, and the dashboard controls them the way it controls a
worker's tasks, through commands in the store that the holder's poller applies.

Browser tests are marked ``browser``: without Debian's chromium at ``/usr/bin/chromium``
they are skipped locally and fail in CI (``CI`` set), like ``external_service`` tests.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("jinja2")

from starlette.testclient import TestClient

from chongming_task import Controller
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.web import create_app

TOKEN = "test-token-0123456789abcdefGHIJKL"
USER = "alice"
CHROMIUM = "/usr/bin/chromium"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
#: Two more users' tokens (strong enough: 32+ characters, 10+ distinct, two kinds).
ANN = "ann-token-0123456789abcdefGHIJKLMN"
BOB = "bob-token-0123456789abcdefGHIJKLMN"


def require_chromium() -> str:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(
                f"{CHROMIUM} must exist in CI (.ci/run installs it); "
                "browser tests may not be skipped"
            )
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    return CHROMIUM


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.external_service)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TaskStore]:
    if request.param == "sqlite":
        from chongming_task.stores._sqlite import SqliteTaskStore

        opened: TaskStore = SqliteTaskStore(str(tmp_path / "tasks.db"))
    else:
        from chongming_task.stores._postgres import PostgresTaskStore

        opened = PostgresTaskStore(request.getfixturevalue("postgres_dsn"))
    try:
        yield opened
    finally:
        opened.close()


class Holder:
    """A controller that runs tasks, and a way to wait for their transitions."""

    def __init__(self, store: TaskStore) -> None:
        self.controller = Controller(
            store, owner="holder-1", command_poll_interval=0.05, lease_ttl=30
        )
        self.release = threading.Event()
        self._changed = threading.Condition()
        self.controller.subscribe(self._on_transition, inline=True)
        self.controller.register("spin", self._spin, tags={"demo"})
        self.controller.register("fail", self._fail)
        self.controller.register("quick", self._quick, tags={"fast"})

    def _spin(self, ctx: Any, rounds: int = 1_000_000) -> int:
        done = 0
        for done in range(1, rounds + 1):
            ctx.checkpoint()
            ctx.progress(done, total=rounds, unit="rounds")
            if self.release.wait(0.01):
                break
        return done

    @staticmethod
    def _fail(ctx: Any, message: str = "boom") -> None:
        raise RuntimeError(message)

    @staticmethod
    def _quick(ctx: Any) -> str:
        return "done"

    def _on_transition(self, transition: Any, snapshot: Any) -> None:
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, task_id: str, *statuses: TaskStatus, timeout: float = 15.0) -> Any:
        """Block until the stored task is in one of ``statuses`` (woken by transitions)."""
        wanted = set(statuses)
        store = self.controller.store
        with self._changed:
            ok = self._changed.wait_for(
                lambda: (s := store.get(task_id)) is not None and s.status in wanted,
                timeout=timeout,
            )
        snapshot = store.get(task_id)
        assert ok, f"{task_id} is {snapshot.status if snapshot else None}, wanted {wanted}"
        return snapshot

    def close(self) -> None:
        self.release.set()
        self.controller.close(timeout=10)


@pytest.fixture
def holder(store: TaskStore) -> Iterator[Holder]:
    h = Holder(store)
    try:
        yield h
    finally:
        h.close()


@pytest.fixture
def make_client(store: TaskStore) -> Iterator[Callable[..., TestClient]]:
    clients: list[TestClient] = []

    def make(**options: Any) -> TestClient:
        options.setdefault("token", TOKEN)
        options.setdefault("user", USER)
        client = TestClient(create_app(store, **options), base_url="http://127.0.0.1")
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()


def login(client: TestClient, token: str = TOKEN) -> str:
    """Log in through the form; returns the CSRF token of the session."""
    response = client.post("/login", data={"token": token, "next": "/"}, follow_redirects=False)
    assert response.status_code == 303
    page = client.get("/tasks")
    assert page.status_code == 200
    marker = 'name="csrf" value="'
    start = page.text.index(marker) + len(marker)
    return page.text[start : page.text.index('"', start)]
