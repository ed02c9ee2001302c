"""What the CLI shows of a task is redacted and safe for a terminal, and is the
dashboard's view: one JSON document, one redaction rule, one sanitiser (issue 34).

Driven in-process (``main(argv)``) against SQLite and PostgreSQL. Tasks run through
the CLI itself; rows "written by an older or foreign writer" (escape sequences and
secrets the library would not store today) are planted with SQL, since every reader
must hold for them too.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chongming_task.cli._logs import TextLogFormatter
from chongming_task.stores._base import TaskStore

from .conftest import TASKS, Result

Invoke = Callable[..., Result]

pytestmark = pytest.mark.timeout(120)

SECRET = "hunter2"
#: Escape sequences a task's text must never deliver to a terminal: an OSC 52
#: clipboard write, a screen clear, a colour, a window title, the 8-bit CSI.
OSC52 = "\x1b]52;c;aGVsbG8=\x07"
CLEAR = "\x1b[2J"
TERMINAL_BYTES = ("\x1b", "\x07", "\x9b", "\x9d")


def open_store(db: str) -> TaskStore:
    if db.startswith("postgresql://"):
        from chongming_task.stores._postgres import PostgresTaskStore

        return PostgresTaskStore(db, max_connections=1)
    from chongming_task.stores._sqlite import SqliteTaskStore

    return SqliteTaskStore(db)


@pytest.fixture
def store_of(db: str) -> Iterator[Callable[[], TaskStore]]:
    opened: list[TaskStore] = []

    def make() -> TaskStore:
        opened.append(open_store(db))
        return opened[-1]

    yield make
    for store in opened:
        store.close()


def plant(db: str, task_id: str, *, progress: dict[str, Any], **doc: Any) -> None:
    """Overwrite a stored row's progress and document fields, as a foreign writer would."""
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db) as conn:
            row = conn.execute("SELECT doc FROM ct_tasks WHERE task_id = %s", (task_id,)).fetchone()
            assert row is not None
            data = row[0] if isinstance(row[0], dict) else json.loads(row[0])
            data.update(doc)
            conn.execute(
                "UPDATE ct_tasks SET doc = %s::json, progress = %s::json WHERE task_id = %s",
                (json.dumps(data), json.dumps(progress), task_id),
            )
        return
    lite = sqlite3.connect(db)
    try:
        (text,) = lite.execute("SELECT doc FROM ct_tasks WHERE task_id = ?", (task_id,)).fetchone()
        data = json.loads(text)
        data.update(doc)
        lite.execute(
            "UPDATE ct_tasks SET doc = ?, progress = ? WHERE task_id = ?",
            (json.dumps(data), json.dumps(progress), task_id),
        )
        lite.commit()
    finally:
        lite.close()


def assert_clean(result: Result, *, secret: str = SECRET) -> None:
    assert result.code in (0, 3), result
    for stream in (result.out, result.err):
        assert secret not in stream, stream
        for byte in TERMINAL_BYTES:
            assert byte not in stream, (byte, stream)


def status_lines(text: str) -> dict[str, str]:
    """``status``'s ``field: value`` lines as a mapping."""
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def every_view(invoke: Invoke, db: str, task_id: str) -> list[Result]:
    return [
        invoke("--db", db, *argv)
        for argv in (
            ["status", task_id],
            ["status", task_id, "--json"],
            ["history", task_id],
            ["history", task_id, "--json"],
            ["explain", task_id],
            ["explain", task_id, "--json"],
            ["ps"],
            ["ps", "--json"],
        )
    ]


def test_a_glued_key_in_a_failure_reaches_neither_store_nor_output(
    db: str, invoke: Invoke, store_of: Callable[[], TaskStore]
) -> None:
    """``PGPASSWORD=hunter2`` in a worker failure: redacted in the store and every view."""
    message = f"connect failed: PGPASSWORD={SECRET} clientsecret={SECRET}x"
    run = invoke(
        "--db", db, "run", "fail", "--tasks", TASKS, "--task-id", "t-fail", "--arg",
        f"message={message}",
    )  # fmt: skip
    assert run.code == 3, run
    assert_clean(run)
    store = store_of()
    snapshot = store.get("t-fail")
    assert snapshot is not None
    assert snapshot.failure is not None
    assert SECRET not in snapshot.failure.message
    assert "PGPASSWORD=[REDACTED]" in snapshot.failure.message
    assert SECRET not in (snapshot.failure.traceback or "")
    assert all(SECRET not in (t.reason or "") for t in store.history("t-fail"))
    for result in every_view(invoke, db, "t-fail"):
        assert_clean(result)


def test_progress_outcome_and_arguments_are_redacted_in_every_view(db: str, invoke: Invoke) -> None:
    """``status`` and ``ps --json`` printed the progress message, the outcome and the
    enqueued arguments as stored; now they are redacted as the dashboard does."""
    token = "ghp_" + "A1b2" * 9
    run = invoke(
        "--db", db, "run", "echo", "--tasks", TASKS, "--task-id", "t-echo",
        "--arg", f"password={SECRET}", "--arg", f"note=token {token}",
    )  # fmt: skip
    assert run.code == 0, run
    plant(
        db,
        "t-echo",
        progress={"done": 1, "total": 2, "unit": "rows", "message": f"DB_PASSWORD={SECRET}"},
    )
    submitted = invoke(
        "--db", db, "submit", "echo", "--tasks", TASKS, "--task-id", "t-queued",
        "--arg", f"api_key={SECRET}", "--arg", f"dsn=postgresql://app:{SECRET}@db/x",
    )  # fmt: skip
    assert submitted.code == 0, submitted
    for task_id in ("t-echo", "t-queued"):
        for result in every_view(invoke, db, task_id):
            assert_clean(result)
            assert token not in result.out
    status = invoke("--db", db, "status", "t-echo", "--json").json()["task"]
    assert status["progress"]["message"] == "DB_PASSWORD=[REDACTED]"
    assert status["outcome"]["password"] == ["[REDACTED]", "[REDACTED]"]
    queued = invoke("--db", db, "ps", "--json").json()["tasks"]
    recipe = next(t for t in queued if t["task_id"] == "t-queued")["metadata"]["recipe"]
    assert json.dumps(recipe).count("[REDACTED]") == 2, recipe
    lines = status_lines(invoke("--db", db, "status", "t-echo").out)
    assert lines["message"] == "DB_PASSWORD=[REDACTED]"
    assert "'password': ['[REDACTED]', '[REDACTED]']" in lines["outcome"]


def test_status_prints_no_escape_sequence_of_a_task(db: str, invoke: Invoke) -> None:
    """A progress message, unit and label with OSC 52 / ESC[2J: ``status`` printed them
    raw (``ps`` stripped them); now no view prints an ESC, and JSON keeps the text."""
    run = invoke("--db", db, "run", "add", "--tasks", TASKS, "--task-id", "t-esc", "--arg", "a=1")
    assert run.code == 0, run
    label = f"nightly{CLEAR}\x1b]0;pwned\x07\x9b31m"
    plant(
        db,
        "t-esc",
        progress={"done": 1, "total": 2, "unit": f"rows{CLEAR}", "message": f"copy {OSC52}me"},
        label=label,
        failure=None,
    )
    for result in every_view(invoke, db, "t-esc"):
        assert_clean(result)
    lines = status_lines(invoke("--db", db, "status", "t-esc").out)
    assert lines["name"] == "add (nightly)"
    assert lines["message"] == "copy me"
    assert lines["progress"] == "1/2 rows (50%)"
    document = invoke("--db", db, "status", "t-esc", "--json").json()["task"]
    assert document["label"] == label  # JSON escapes what a terminal would act on, keeps it


@pytest.mark.parametrize("plain", [True, False])
def test_ps_on_a_terminal_shows_text_not_markup_or_escapes(
    db: str, invoke: Invoke, plain: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rich table (a terminal) shows the label as text: no ESC, no rich markup."""
    run = invoke("--db", db, "run", "add", "--tasks", TASKS, "--task-id", "t-rich", "--arg", "a=1")
    assert run.code == 0, run
    plant(db, "t-rich", progress={"done": 1, "total": 1}, label=f"[bold]x[/]{CLEAR}")
    from chongming_task.cli import _render

    if not plain:
        monkeypatch.setattr(_render, "_is_terminal", lambda stream: True)
        monkeypatch.setenv("COLUMNS", "200")
    result = invoke("--db", db, "ps")
    assert result.code == 0, result
    if plain:
        assert_clean(result)
    else:  # rich styles its own header; nothing the task wrote drives the terminal
        for planted in (CLEAR, "\x9b", "\x1b]"):
            assert planted not in result.out
    assert "[bold]x[/]" in result.out


def test_cli_json_and_dashboard_api_are_one_document(
    db: str, invoke: Invoke, store_of: Callable[[], TaskStore]
) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from chongming_task.web import create_app

    invoke("--db", db, "run", "fail", "--tasks", TASKS, "--task-id", "t-one", "--arg",
           f"message=token: {SECRET}")  # fmt: skip
    plant(db, "t-one", progress={"done": 3, "unit": "x", "message": f"secret={SECRET}"})
    cli = invoke("--db", db, "status", "t-one", "--json").json()["task"]
    token = "t" * 32
    with TestClient(create_app(store_of(), token=token), base_url="http://127.0.0.1") as client:
        response = client.get("/api/tasks/t-one", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200, response.text
        web = response.json()["task"]
    assert cli == web
    assert SECRET not in json.dumps(cli)
    assert cli["progress"]["message"] == "secret=[REDACTED]"


def test_worker_log_lines_are_redacted_and_printable() -> None:
    record = logging.LogRecord(
        "chongming_task.task.t1", logging.INFO, __file__, 1,
        f"connecting {CLEAR}with PGPASSWORD={SECRET} {OSC52}", None, None,
    )  # fmt: skip
    line = TextLogFormatter().format(record)
    assert SECRET not in line
    assert "PGPASSWORD=[REDACTED]" in line
    assert not any(byte in line for byte in TERMINAL_BYTES)
