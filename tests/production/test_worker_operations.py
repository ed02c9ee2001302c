"""Worker operations: logging, executor, shutdown honesty, health, tracing, bad modules,
argument checks against annotations, retention and read-only access."""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from _workers import Pump
from chongming_task._retention import RetentionLoop, compact_history, parse_age, prune_older_than
from chongming_task.cli import main
from chongming_task.states import TaskStatus
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing import FakeClock, wait_until

from .conftest import EPOCH, Seed, finished

MODULES = Path(__file__).resolve().parent / "modules"
CLI_TASKS = str(Path(__file__).resolve().parents[1] / "cli" / "modules" / "cli_tasks.py")
TIMESTAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (INFO|WARNING|DEBUG|ERROR) ")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CHONGMING_", "OTEL_"))}
    base["NO_COLOR"] = "1"
    base.update(extra)
    return base


class Worker:
    """A worker subprocess; stdout and stderr kept apart."""

    def __init__(self, db: str, *args: str, tasks: str = CLI_TASKS, **environ: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "chongming_task.cli", "--db", db, "worker", "--tasks", tasks,
             "--poll-interval", "0.1", *args],
            env=env(**environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.pumps = [Pump(self.process.stderr), Pump(self.process.stdout, keepends=True)]
        self.err, self.out = self.pumps[0].lines, self.pumps[1].lines
        self.ready = self.pumps[0].ready
        assert self.ready.wait(30), "\n".join(self.err)

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        self._close()
        return code, "".join(self.out)

    def _close(self) -> None:
        for pump in self.pumps:
            pump.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=60)
        self._close()


def submit(db: str, *argv: str) -> tuple[int, str, str]:
    return run("--db", db, "submit", *argv, "--tasks", CLI_TASKS)


def status_of(db: str, task_id: str) -> str:
    code, out, err = run("--db", db, "status", task_id, "--json")
    assert code == 0, err
    return str(json.loads(out)["task"]["status"])


# ------------------------------------------------------------ logging, executor, lost


def test_worker_logs_timestamped_lines_on_stderr_and_loses_an_abandoned_task(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "w.db")
    worker = Worker(db, "--shutdown-timeout", "0.5", "--drain-timeout", "0")
    try:
        assert submit(db, "stubborn", "--task-id", "s1")[0] == 0
        wait_until(lambda: status_of(db, "s1") == "running", timeout=20)
        code, out = worker.stop()
    finally:
        worker.kill()
    assert out == ""  # nothing on stdout: a daemon logs to stderr
    assert worker.err
    assert all(TIMESTAMPED.match(line) for line in worker.err), worker.err
    text = "\n".join(worker.err)
    assert code == 1, text  # a task was lost: not a clean shutdown
    assert "s1 (stubborn): running -> lost" in text or "lost: abandoned at worker shutdown" in text
    assert "stopped 0, lost 1" in text
    assert status_of(db, "s1") == "lost"


def test_worker_log_format_json_and_level(tmp_path: Path) -> None:
    db = str(tmp_path / "j.db")
    worker = Worker(db, "--log-format", "json", "--log-level", "info")
    try:
        code, _ = worker.stop()
    finally:
        worker.kill()
    assert code == 0
    records = [json.loads(line) for line in worker.err]
    assert {record["level"] for record in records} == {"INFO"}
    assert all({"ts", "level", "logger", "message"} <= set(record) for record in records)
    assert any(record["message"].startswith("ready;") for record in records)


def test_bad_log_level_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run(
        "--db", str(tmp_path / "x.db"), "worker", "--tasks", CLI_TASKS, "--log-level", "loud"
    )
    assert code == 2
    assert "--log-level" in err


def test_worker_process_executor_runs_tasks_in_a_child(tmp_path: Path) -> None:
    db = str(tmp_path / "p.db")
    worker = Worker(db, "--executor", "process")
    try:
        code, out, err = submit(db, "add", "--arg", "a=2", "--wait", "--timeout", "60")
        assert (code, err) == (0, ""), out
        assert "executor process" in "\n".join(worker.err)
    finally:
        assert worker.stop()[0] == 0
        worker.kill()


def test_bad_executor_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run(
        "--db", str(tmp_path / "x.db"), "worker", "--tasks", CLI_TASKS, "--executor", "fiber"
    )
    assert code == 2
    assert "--executor" in err


# ------------------------------------------------------------ /healthz


def test_healthz_reflects_the_worker_and_unknown_paths_are_404(tmp_path: Path) -> None:
    db = str(tmp_path / "h.db")
    worker = Worker(db, "--metrics-port", "0")
    try:
        url = re.search(r"health: (http://\S+/healthz)", "\n".join(worker.err))
        assert url is not None, worker.err
        with urllib.request.urlopen(url.group(1), timeout=5) as response:
            assert response.status == 200
            body = json.loads(response.read())
        assert body["status"] == "ok"
        assert body["intake_alive"] is True
        base = url.group(1).rsplit("/", 1)[0]
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(base + "/nope", timeout=5)
        assert missing.value.code == 404
        missing.value.close()
        with urllib.request.urlopen(base + "/metrics", timeout=5) as response:
            assert b"chongming" in response.read()
    finally:
        worker.stop()
        worker.kill()


def test_healthz_is_503_when_the_worker_is_unhealthy() -> None:
    from chongming_task.observability._server import routed_app

    statuses: list[str] = []
    app = routed_app(lambda e, s: [b""], lambda: (False, {"status": "unhealthy"}))
    body = b"".join(app({"PATH_INFO": "/healthz"}, lambda status, headers: statuses.append(status)))
    assert statuses == ["503 Service Unavailable"]
    assert json.loads(body) == {"status": "unhealthy"}


def test_worker_health_says_when_it_is_shutting_down(tmp_path: Path) -> None:
    from chongming_task.controller import Controller
    from chongming_task.worker import Worker as LibraryWorker

    store = SqliteTaskStore(str(tmp_path / "l.db"))
    controller = Controller(store=store)
    worker = LibraryWorker(controller, poll_interval=0.05)
    assert worker.health()[0] is False  # not started
    worker.start()
    assert worker.health()[0] is True
    worker.request_shutdown()
    healthy, details = worker.health()
    assert (healthy, details["shutting_down"]) == (False, True)
    worker.shutdown(timeout=5)
    store.close()


# ------------------------------------------------------------ OpenTelemetry, traceparent

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_otel_env_exports_spans_whose_parent_is_the_submitted_traceparent(
    tmp_path: Path,
) -> None:
    pytest.importorskip("opentelemetry.sdk")
    db = str(tmp_path / "o.db")
    worker = Worker(db, OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="ct-test")
    try:
        code, _, err = submit(db, "add", "--arg", "a=1", "--traceparent", TRACE, "--wait")
        assert (code, err) == (0, "")
        code, out = worker.stop()
    finally:
        worker.kill()
    assert code == 0
    assert "tracing: OpenTelemetry spans exported with console" in "\n".join(worker.err)
    assert '"name": "task.add"' in out
    assert "0x0af7651916cd43dd8448eb211c80319c" in out  # the caller's trace id
    assert "ct-test" in out


def test_submit_refuses_a_malformed_traceparent(tmp_path: Path) -> None:
    code, _, err = submit(str(tmp_path / "t.db"), "add", "--arg", "a=1", "--traceparent", "x")
    assert code == 2
    assert "W3C traceparent" in err


def test_submit_carries_traceparent_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "e.db")
    monkeypatch.setenv("TRACEPARENT", TRACE)
    assert submit(db, "add", "--arg", "a=1", "--task-id", "e1")[0] == 0
    store = SqliteTaskStore(db)
    try:
        task = store.get("e1")  # queued at once, the trace in its metadata
        assert task is not None
        assert task.status.value == "queued"
        assert task.metadata["traceparent"] == TRACE
    finally:
        store.close()


def test_no_otel_variables_no_tracing() -> None:
    from chongming_task.observability._otel_env import wants_tracing

    assert not wants_tracing({})
    assert wants_tracing({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert not wants_tracing({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"})


# ------------------------------------------------------------ bad task modules


def test_a_module_calling_sys_exit_at_import_is_an_error(tmp_path: Path) -> None:
    spec = str(MODULES / "exits_at_import.py")
    for command in ("worker", "tasks"):
        code, _, err = run("--db", str(tmp_path / "x.db"), command, "--tasks", spec)
        assert code == 1, command
        assert "called sys.exit(0) while being imported" in err


def test_duplicate_schedule_names_are_an_error(tmp_path: Path) -> None:
    spec = str(MODULES / "duplicate_schedules.py")
    code, _, err = run("--db", str(tmp_path / "x.db"), "worker", "--tasks", spec)
    assert code == 1
    assert "two schedules are named 'nightly'" in err


# ------------------------------------------------------------ --arg against annotations


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--arg", "a=abc"], "--arg a=\"abc\": task 'add' takes a: int, and a string is not"),
        (["--arg", "a=1.5"], "a: int, and a number is not that"),
        (["--arg", "a=true"], "a: int, and a boolean is not that"),
    ],
)
def test_arg_values_are_checked_against_annotations(
    tmp_path: Path, args: list[str], message: str
) -> None:
    for command in ("submit", "run"):
        code, _, err = run("--db", str(tmp_path / "a.db"), command, "add", "--tasks", CLI_TASKS,
                           *args)  # fmt: skip
        assert code == 2, (command, err)
        assert message in err


def test_non_finite_float_arguments_are_refused(tmp_path: Path) -> None:
    code, _, err = run("--db", str(tmp_path / "a.db"), "submit", "loop", "--tasks", CLI_TASKS,
                       "--arg", "delay=1e999")  # fmt: skip
    assert code == 2
    assert "delay: float" in err


def test_fitting_arguments_still_pass(tmp_path: Path) -> None:
    code, out, err = run("--db", str(tmp_path / "a.db"), "run", "add", "--tasks", CLI_TASKS,
                         "--arg", "a=2", "--arg", "b=3")  # fmt: skip
    assert (code, err) == (0, "")
    assert "outcome 5" in out


# ------------------------------------------------------------ retention


def test_parse_age() -> None:
    assert parse_age("7d") == timedelta(days=7)
    assert parse_age("90s") == timedelta(seconds=90)
    assert parse_age("2w") == timedelta(weeks=2)
    for bad in ("nan", "-1d", "7 days", "0d", "", "inf"):
        with pytest.raises(ValueError, match="age"):
            parse_age(bad)


def test_prune_older_than_dry_run_status_and_delete(seed: Seed) -> None:
    db = seed(3, age=timedelta(days=30))
    seed(2, age=timedelta(days=30), status=TaskStatus.FAILED, prefix="f")
    seed(4, age=timedelta(hours=1), prefix="new")
    code, out, _ = run("--db", db, "prune", "--older-than", "7d", "--dry-run")
    assert code == 0
    assert out.startswith("would prune 5 finished task(s) older than 7d")
    code, out, _ = run("--db", db, "prune", "--older-than", "7d", "--status", "failed", "--json")
    document = json.loads(out)
    assert (document["matched"], document["removed"], document["dry_run"]) == (2, 2, False)
    code, out, _ = run("--db", db, "prune", "--older-than", "7d")
    assert out.strip() == "pruned 3 finished task(s) older than 7d"
    code, out, _ = run("--db", db, "ps", "--json", "--all")
    assert sorted(task["task_id"] for task in json.loads(out)["tasks"]) == [
        f"new{n:04d}" for n in range(6, 10)
    ]


def test_prune_refuses_unfinished_statuses_and_bad_ages(seed: Seed) -> None:
    db = seed(1)
    assert run("--db", db, "prune", "--older-than", "7d", "--status", "running")[0] == 2
    assert run("--db", db, "prune", "--older-than", "nan")[0] == 2
    assert run("--db", db, "prune")[0] == 2
    assert run("--db", db, "prune", "--keep-terminal", "1", "--dry-run")[0] == 2


def test_prune_pages_through_more_than_one_page(tmp_path: Path) -> None:
    from chongming_task import _retention as retention

    store = SqliteTaskStore(str(tmp_path / "pages.db"))
    clock = FakeClock(start=EPOCH + timedelta(days=100))
    try:
        for n in range(retention.PAGE + 7):
            snapshot, transitions = finished(f"p{n}", EPOCH + timedelta(seconds=n))
            store.create(snapshot, transitions)
        dry = prune_older_than(store, timedelta(days=1), clock=clock, dry_run=True)
        assert (dry.matched, dry.removed) == (retention.PAGE + 7, 0)
        done = prune_older_than(store, timedelta(days=1), clock=clock)
        assert done.removed == retention.PAGE + 7
        assert store.query() == []
    finally:
        store.close()


def test_retention_loop_prunes_on_the_injected_clock(tmp_path: Path) -> None:
    store = SqliteTaskStore(str(tmp_path / "loop.db"))
    clock = FakeClock(start=EPOCH + timedelta(days=1))
    snapshot, transitions = finished("old", EPOCH)
    store.create(snapshot, transitions)
    snapshot, transitions = finished("young", EPOCH + timedelta(days=1))
    store.create(snapshot, transitions)
    loop = RetentionLoop(store, timedelta(days=2), clock=clock, interval=3600)
    try:
        clock.wait_for_sleepers(1)
        assert {s.task_id for s in store.query()} == {"old", "young"}  # 1 day old: kept
        clock.advance(86400 + 1)  # a day later, "old" is over 2 days old
        wait_until(lambda: {s.task_id for s in store.query()} == {"young"}, timeout=5)
        assert loop.passes >= 2
    finally:
        loop.close()
        store.close()


def test_worker_keep_finished_for_prunes(seed: Seed) -> None:
    db = seed(3, age=timedelta(days=30))
    worker = Worker(db, "--keep-finished-for", "7d")
    try:
        wait_until(lambda: json.loads(run("--db", db, "ps", "--json")[1])["total"] == 0, timeout=10)
        assert "retention: pruned 3 finished task(s)" in "\n".join(worker.err)
    finally:
        worker.stop()
        worker.kill()


def test_compact_history_keeps_first_last_and_failures(tmp_path: Path) -> None:
    from chongming_task._model import Transition

    store = SqliteTaskStore(str(tmp_path / "c.db"))
    clock = FakeClock(start=EPOCH + timedelta(days=30))
    try:
        snapshot, _ = finished("c1", EPOCH, TaskStatus.SUCCEEDED)
        path = [None, "pending", "running", "retry_wait", "running", "paused", "running",
                "succeeded"]  # fmt: skip
        transitions = [
            Transition(task_id="c1", from_status=None if a is None else TaskStatus(a),
                       to_status=TaskStatus(b),  # type: ignore[arg-type]  # only path[0] is None
                       version=v, at=EPOCH, trigger="test")
            for v, (a, b) in enumerate(itertools.pairwise(path), start=1)
        ]  # fmt: skip
        store.create(snapshot.replace(status_version=len(transitions)), transitions)
        assert compact_history(store, timedelta(days=7), clock=clock) == 4
        kept = [(t.version, t.to_status.value) for t in store.history("c1")]
        assert kept == [(1, "pending"), (3, "retry_wait"), (7, "succeeded")]
        assert compact_history(store, timedelta(days=7), clock=clock) == 0
    finally:
        store.close()


# ------------------------------------------------------------ read-only access


def test_read_commands_work_on_a_read_only_sqlite_file(seed: Seed) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes to read-only files; mode=ro is still what is tested below")
    db = seed(2)
    os.chmod(db, stat.S_IRUSR)
    for argv in (["ps"], ["status", "t0001"], ["history", "t0001"], ["stats"]):
        code, _, err = run("--db", db, *argv)
        assert (code, err) == (0, ""), argv


def test_read_commands_open_sqlite_mode_ro(seed: Seed, monkeypatch: pytest.MonkeyPatch) -> None:
    db = seed(2)
    opened: list[str] = []
    real = sqlite3.connect

    def spy(path: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", spy)
    before = Path(db).read_bytes()
    for argv in (["ps"], ["status", "t0001"], ["history", "t0001"]):
        assert run("--db", db, *argv)[0] == 0
    assert opened
    assert all(path.endswith("?mode=ro") for path in opened)
    assert Path(db).read_bytes() == before


def test_read_commands_never_create_the_schema_in_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    sqlite3.connect(db).close()  # an empty database file
    code, _, err = run("--db", str(db), "ps")
    assert code == 1
    assert "no chongming-task schema here" in err
    with closing(sqlite3.connect(db)) as conn:
        tables = conn.execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == []


@pytest.mark.external_service
def test_read_commands_never_run_ddl_on_postgres(postgres_dsn: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    name = f"ct_empty_{os.getpid()}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    try:
        dsn = postgres_dsn.rsplit("/", 1)[0] + f"/{name}"
        for argv in (["ps"], ["status", "x"], ["history", "x"], ["stats"]):
            code, _, err = run("--db", dsn, *argv)
            assert code == 1, argv
            assert "no chongming-task schema here" in err
        with psycopg.connect(dsn, autocommit=True) as conn:
            found = conn.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
            ).fetchone()
        assert found == (0,)
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name}")
