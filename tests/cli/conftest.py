"""Fixtures of the CLI tests: the real console script, in-process ``main``, backends.

``cli`` runs the installed ``chongming-task`` script in a subprocess (what users run);
``invoke`` calls ``main(argv)`` in-process (fast, for the many small cases). Both
return a :class:`Result`. ``db`` is parametrised over SQLite and PostgreSQL, and
``store_dump`` reads a whole database so a test can prove a refused command wrote
nothing.
"""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from _workers import Pump
from chongming_task.cli import main

MODULES = Path(__file__).resolve().parent / "modules"
TASKS = str(MODULES / "cli_tasks.py")
SCRIPT = Path(sys.executable).with_name("chongming-task")


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return self.err.splitlines()

    def json(self) -> Any:
        import json

        try:
            return json.loads(self.out)
        except ValueError:
            raise AssertionError(
                f"not JSON (exit code {self.code}): {self.out!r}; stderr: {self.err!r}"
            ) from None


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: no CHONGMING_* leaking in, no colour."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("CHONGMING_")}
    env["NO_COLOR"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(MODULES), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def cli_argv(*args: str) -> list[str]:
    if SCRIPT.exists():
        return [str(SCRIPT), *args]
    return [sys.executable, "-m", "chongming_task.cli", *args]


@pytest.fixture
def cli(tmp_path: Path) -> Callable[..., Result]:
    """Run the console script in a subprocess and return its exit code and output."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Result:
        completed = subprocess.run(
            cli_argv(*args),
            cwd=tmp_path,
            env=cli_env(**(env or {})),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Result(completed.returncode, completed.stdout, completed.stderr)

    return run


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., Result]:
    """Call ``main(argv)`` in this process with captured streams."""
    for key in list(os.environ):
        if key.startswith("CHONGMING_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> Result:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(args), stdout=out, stderr=err)
        return Result(code, out.getvalue(), err.getvalue())

    return run


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.external_service)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database argument for ``--db``: a SQLite file path or a PostgreSQL URL."""
    if request.param == "sqlite":
        yield str(tmp_path / "tasks.db")
        return
    dsn: str = request.getfixturevalue("postgres_dsn")
    yield dsn
    close_peekers()  # before postgres_dsn (set up earlier, torn down later) drops the schema


def store_dump(db: str) -> Any:
    """Every row of every table, or ``None`` for a SQLite file that does not exist."""
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db) as conn:
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = current_schema() ORDER BY table_name"
                )
            ]
            return {
                table: sorted(map(repr, conn.execute(f'SELECT * FROM "{table}"').fetchall()))
                for table in tables
            }
    if not Path(db).exists():
        return None
    lite = sqlite3.connect(db)
    try:
        tables = [
            row[0]
            for row in lite.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY 1")
        ]
        return {
            table: sorted(map(repr, lite.execute(f'SELECT * FROM "{table}"').fetchall()))
            for table in tables
        }
    finally:
        lite.close()


_PEEKERS: dict[str, Any] = {}


def peek_status(db: str, task_id: str) -> str | None:
    """The task's status read directly from the store (for polling without a subprocess).

    Stores are opened once per database and closed by the ``_close_peekers`` fixture.
    """
    store = _PEEKERS.get(db)
    if store is None:
        if not db.startswith("postgresql://") and not Path(db).exists():
            return None
        if db.startswith("postgresql://"):
            from chongming_task.stores._postgres import PostgresTaskStore

            store = PostgresTaskStore(db, max_connections=1)
        else:
            from chongming_task.stores._sqlite import SqliteTaskStore

            store = SqliteTaskStore(db)
        _PEEKERS[db] = store
    snapshot = store.get(task_id)
    return None if snapshot is None else str(snapshot.status.value)


def close_peekers() -> None:
    while _PEEKERS:
        _PEEKERS.popitem()[1].close()


@pytest.fixture(autouse=True)
def _close_peekers() -> Iterator[None]:
    yield
    close_peekers()


@dataclass
class WorkerProcess:
    """A ``chongming-task worker`` subprocess and the lines it printed so far."""

    process: subprocess.Popen[str]
    pump: Pump = field(init=False)

    def __post_init__(self) -> None:
        self.pump = Pump(self.process.stdout)

    @property
    def lines(self) -> list[str]:
        return self.pump.lines

    @property
    def ready(self) -> threading.Event:
        return self.pump.ready

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(timeout=timeout)
        self.pump.close(timeout=5)
        return code

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start worker subprocesses (killed at teardown if a test left one running)."""
    started: list[WorkerProcess] = []

    def start(db: str, *args: str, tasks: str = TASKS) -> WorkerProcess:
        process = subprocess.Popen(
            cli_argv("--db", db, "worker", "--tasks", tasks, "--poll-interval", "0.1", *args),
            cwd=tmp_path,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        worker = WorkerProcess(process)
        started.append(worker)
        assert worker.ready.wait(30), f"worker not ready:\n{worker.output}"
        return worker

    yield start
    for worker in started:
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait(timeout=10)
        if worker.process.stdout is not None:
            worker.process.stdout.close()
