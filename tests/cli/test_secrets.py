"""No CLI output shows a DSN's password: the worker banner, errors, notices, ``--json``.

Driven in-process through ``main(argv)``. A DSN's password is shown as ``***``
(``mask_dsn``); reasons given on the command line are stored redacted.
"""

from __future__ import annotations

import io
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from chongming_task.cli import main
from chongming_task.core.state_machine import StateMachine
from chongming_task.stores._sqlite import SqliteTaskStore

from .conftest import TASKS, Result

Invoke = Callable[..., Result]

PASSWORD = "S3cretPw"

pytestmark = pytest.mark.timeout(60)


def with_password(dsn: str) -> str:
    """``dsn`` (``postgresql://user@host...``) with ``PASSWORD`` in its user info."""
    scheme, rest = dsn.split("://", 1)
    userinfo, host = rest.split("@", 1)
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:{PASSWORD}@{host}"


def assert_masked(result: Result) -> None:
    assert PASSWORD not in result.out
    assert PASSWORD not in result.err


@pytest.mark.external_service
def test_worker_banner_and_outputs_mask_the_password(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for key in list(os.environ):
        if key.startswith("CHONGMING_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    dsn = with_password(postgres_dsn)
    out, err = io.StringIO(), io.StringIO()

    def stop_when_ready() -> None:
        deadline = time.monotonic() + 30
        while "ready; stop with" not in err.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)  # the worker's handler: a clean shutdown

    stopper = threading.Thread(target=stop_when_ready, daemon=True)
    stopper.start()
    code = main(
        ["--dsn", dsn, "worker", "--tasks", TASKS, "--poll-interval", "0.05", "--owner", "w1"],
        stdout=out,
        stderr=err,
    )
    stopper.join(5)
    worker = Result(code, out.getvalue(), err.getvalue())
    assert worker.code == 0, worker
    banner = next(line for line in worker.err.splitlines() if " worker w1 on " in line)
    masked = dsn.replace(PASSWORD, "***")
    assert f" worker w1 on {masked}: tasks " in banner  # a log line on stderr
    assert_masked(worker)

    # Every other command against the same database, text and --json.
    for argv in (
        ["ps"],
        ["ps", "--json"],
        ["stats", "--json"],
        ["buckets", "--json"],
        ["schedules", "--json"],
        ["inspect", "nope"],
        ["stop", "nope", "--json"],
    ):
        out, err = io.StringIO(), io.StringIO()
        code = main(["--db", dsn, *argv], stdout=out, stderr=err)
        assert_masked(Result(code, out.getvalue(), err.getvalue()))


def test_errors_that_name_the_database_mask_the_password(invoke: Invoke, tmp_path: Path) -> None:
    # Not a PostgreSQL URL: refused, and the refusal shows it masked.
    refused = invoke("--dsn", f"mysql://app:{PASSWORD}@db/x", "ps")
    assert refused.code == 2
    assert "mysql://app:***@db/x" in refused.err
    assert_masked(refused)
    # Nothing listens on port 1: the connection error names no password.
    unreachable = invoke("--db", f"postgresql://app:{PASSWORD}@127.0.0.1:1/x", "ps", "--json")
    assert unreachable.code == 1
    assert unreachable.err.startswith("chongming-task: error: database error")
    assert_masked(unreachable)
    # A malformed DSN the driver quotes back.
    malformed = invoke("--db", f"postgresql://app:{PASSWORD}@127.0.0.1:5432/x?bogus=1", "ps")
    assert malformed.code == 1
    assert_masked(malformed)
    # A URL of another kind is no SQLite path either: refused, masked.
    missing = invoke("--db", f"sqlite://u:{PASSWORD}@h", "ps")
    assert missing.code == 2
    assert "sqlite://u:***@h" in missing.err
    assert_masked(missing)


def test_stop_reason_is_stored_redacted(invoke: Invoke, tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    with SqliteTaskStore(db) as store:
        machine = StateMachine.create("t1", "loop", owner="node-b")
        machine.mark_queued()
        store.create(machine.snapshot.replace(lease_owner="node-b"), machine.transitions)
    reason = f"rotating postgresql://app:{PASSWORD}@db/x, token=abc123"
    stopped = invoke("--db", db, "stop", "t1", "--reason", reason, "--json")
    assert stopped.code == 0, stopped.err
    assert_masked(stopped)
    with SqliteTaskStore(db) as store:
        claimed = store.claim_commands("node-b", lease=30)
    assert [command.action for command in claimed] == ["stop"]
    assert claimed[0].payload["reason"] == (
        "rotating postgresql://app:[REDACTED]@db/x, token=[REDACTED]"
    )
    history = invoke("--db", db, "history", "t1", "--json")
    assert_masked(history)
