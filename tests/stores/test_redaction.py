"""Secrets never reach a store: reasons, failure text, commands and schedule records.

Each kind of text is redacted where it is recorded (a transition's reason in the
model, a command's reason/error in ``Command``, a schedule's reason in its control
record), so every backend stores the same redacted text. These cases run on the
memory, SQLite and PostgreSQL stores and look at what the store hands back, and, for
the SQL stores, at the raw rows.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chongming_task import Controller, TaskContext
from chongming_task._model import Failure, FailureKind, Transition
from chongming_task.controller._control import control_task
from chongming_task.core.state_machine import StateMachine
from chongming_task.schedule import CronTrigger, Schedule, ScheduleControl
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.stores._records import Command
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing import FakeClock

pytestmark = pytest.mark.timeout(60)

S = TaskStatus
NOW = datetime(2026, 3, 1, tzinfo=UTC)

#: One secret of each kind; none of them may be found in anything a store keeps.
SECRETS = {
    "pw1": "password=hunter2pw",
    "url": "postgresql://app:S3cretPw@db/x",
    "aws": "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENG",
    "basic": "Authorization: Basic dXNlcjpodW50ZXIy",
    "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
}
LEAKS = ("hunter2pw", "S3cretPw", "wJalrXUtnFEMIK7MDENG", "dXNlcjpodW50ZXIy", "MIIEpAIBAAKCAQEA")
ALL = " | ".join(SECRETS.values())


def assert_clean(value: object) -> None:
    text = repr(value)
    for leak in LEAKS:
        assert leak not in text, f"{leak!r} leaked into {text}"


@pytest.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.external_service)]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, TaskStore]]:
    made: TaskStore
    if request.param == "memory":
        made = InMemoryTaskStore()
    elif request.param == "sqlite":
        made = SqliteTaskStore(tmp_path / "tasks.db")
    else:
        from chongming_task.stores._postgres import PostgresTaskStore

        made = PostgresTaskStore(request.getfixturevalue("postgres_dsn"))
    with made:
        yield request.param, made


@pytest.fixture
def store(backend: tuple[str, TaskStore]) -> TaskStore:
    return backend[1]


def raw_rows(kind: str, store: TaskStore, tmp_path: Path) -> str:
    """Every row of every table as text (``""`` for the memory store)."""
    if kind == "sqlite":
        conn = sqlite3.connect(tmp_path / "tasks.db")
        try:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            return repr([conn.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables])
        finally:
            conn.close()
    if kind == "postgres":
        rows: list[Any] = []

        def read(cur: Any) -> None:
            cur.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            )
            for (table,) in cur.fetchall():
                cur.execute(f'SELECT * FROM "{table}"')
                rows.append(cur.fetchall())

        store._run(read, write=False)  # type: ignore[attr-defined]
        return repr(rows)
    return ""


def test_every_reason_the_state_machine_records_is_redacted(
    backend: tuple[str, TaskStore], tmp_path: Path
) -> None:
    kind, store = backend
    clock = FakeClock()
    # stop (pending -> stopped: the failure is made from the reason)
    stopped = StateMachine.create("stopped", "job", clock=clock)
    stopped.request_stop(actor="ops", reason=f"stop: {ALL}")
    # stop of a running task (-> stopping), then the runtime's stop
    running = StateMachine.create("running", "job", clock=clock)
    running.mark_queued(reason=SECRETS["url"])
    running.mark_starting()
    running.mark_running()
    running.request_stop(actor="ops", reason=SECRETS["aws"])
    running.mark_stopped(reason=SECRETS["basic"])
    # pause, a forced move, skip, cancel and lost
    paused = StateMachine.create("paused", "job", clock=clock)
    paused.mark_queued()
    paused.request_pause(actor="ops", reason=SECRETS["pem"])
    paused.force_transition(S.FAILED, actor="ops", reason=f"checked by hand, {SECRETS['pw1']}")
    skipped = StateMachine.create("skipped", "job", clock=clock)
    skipped.mark_skipped(reason=ALL)
    cancelled = StateMachine.create("cancelled", "job", clock=clock)
    cancelled.mark_cancelled(reason=ALL)
    lost = StateMachine.create("lost", "job", clock=clock)
    lost.mark_queued()
    lost.mark_starting()
    lost.mark_lost(reason=ALL)
    machines = [stopped, running, paused, skipped, cancelled, lost]
    for machine in machines:
        store.create(machine.snapshot, machine.transitions)
    # a transition made by hand and appended
    store.append(
        Transition(
            task_id="lost",
            from_status=S.LOST,
            to_status=S.LOST,
            trigger="ops:note",
            version=lost.snapshot.status_version,
            at=NOW,
            reason=ALL,
        )
    )

    for machine in machines:
        snapshot = store.get(machine.task_id)
        assert snapshot is not None
        assert_clean(snapshot)
        history = store.history(machine.task_id)
        assert_clean(history)
        assert any(t.reason and "[REDACTED]" in t.reason for t in history), machine.task_id
    snapshot = store.get("stopped")
    assert snapshot is not None
    assert snapshot.failure is not None
    assert snapshot.failure.message.startswith("stop: password=[REDACTED] | ")
    assert "postgresql://app:[REDACTED]@db/x" in snapshot.failure.message
    assert_clean(raw_rows(kind, store, tmp_path))


def test_failure_text_of_a_run_is_redacted(store: TaskStore) -> None:
    controller = Controller(store=store, max_parallel=2)

    def leaky(ctx: TaskContext) -> None:
        raise ConnectionError(f"cannot connect: {ALL}")

    def held(ctx: TaskContext) -> None:
        release.wait(10)
        ctx.checkpoint()

    release = threading.Event()
    controller.register("leaky", leaky)
    controller.register("held", held)
    try:
        failed = controller.submit("leaky", task_id="f1")
        controller.wait(failed.task_id, timeout=20)
        blocked = controller.submit("held", task_id="h1")
        assert controller.stop(blocked.task_id, reason=f"ops: {SECRETS['url']}")
        release.set()
        controller.wait(blocked.task_id, timeout=20)
    finally:
        release.set()
        controller.close(close_store=False)
    snapshot = store.get("f1")
    assert snapshot is not None
    assert snapshot.failure is not None
    assert snapshot.status is S.FAILED
    assert "password=[REDACTED]" in snapshot.failure.message
    assert snapshot.failure.traceback is not None
    assert_clean(snapshot)
    assert_clean(store.history("f1"))
    stopped = store.get("h1")
    assert stopped is not None
    assert stopped.status is S.STOPPED
    assert_clean(stopped)
    history = store.history("h1")
    assert_clean(history)
    assert "ops: postgresql://app:[REDACTED]@db/x" in [t.reason for t in history]


def test_commands_for_other_processes_are_redacted(
    backend: tuple[str, TaskStore], tmp_path: Path
) -> None:
    kind, store = backend
    clock = FakeClock()
    machine = StateMachine.create("remote", "job", owner="node-b", clock=clock)
    machine.mark_queued()
    store.create(machine.snapshot, machine.transitions)
    snapshot = store.get("remote")
    assert snapshot is not None
    sent = control_task(store, "remote", "stop", actor="cli", clock=clock, reason=ALL)
    assert sent.outcome == "requested"
    [command] = store.claim_commands("node-b", lease=30)  # looked at, then handed back
    assert_clean(command)
    assert command.claim_token is not None
    store.release_command(command.command_id, command.claim_token)
    stored = store.get_command(command.command_id)
    assert stored is not None
    assert_clean(stored)
    assert str(stored.payload["reason"]).startswith("password=[REDACTED] | ")
    # A command made by hand is redacted all the same.
    by_hand = store.submit_command(
        Command.new(
            kind="schedule",
            target="nightly",
            action="run",
            issued_by="cli",
            issued_at=clock.now(),
            payload={"reason": SECRETS["aws"], "operator": "ops"},
        )
    )
    assert by_hand.payload == {"reason": "AWS_SECRET_ACCESS_KEY=[REDACTED]", "operator": "ops"}
    # What a claimant writes back.
    claimed = store.claim_commands("node-b", lease=30)
    assert claimed
    for claim in claimed:
        assert claim.claim_token is not None
        store.complete_command(
            claim.command_id, claim.claim_token, {"applied": False, "error": ALL}
        )
        done = store.get_command(claim.command_id)
        assert done is not None
        assert done.status == "completed"
        assert isinstance(done.result, dict)
        assert done.result["applied"] is False
        assert "[REDACTED]" in done.result["error"]
        assert_clean(done)
    assert_clean(raw_rows(kind, store, tmp_path))


def test_schedule_records_keep_no_secret(backend: tuple[str, TaskStore], tmp_path: Path) -> None:
    kind, store = backend
    control = ScheduleControl.register(
        Schedule(name="nightly", task="job", trigger=CronTrigger("0 3 * * *")), now=NOW
    )
    paused = control.with_paused(actor="ops", now=NOW, reason=f"maintenance {SECRETS['url']}")
    assert paused.status_reason == "maintenance postgresql://app:[REDACTED]@db/x"
    failed = paused.with_result("t1", S.FAILED, finished_at=NOW, error=ALL)
    assert_clean(failed)
    record = store.put_schedule("nightly", failed.to_dict(), expect_revision=None)
    assert_clean(record)
    back = store.get_schedule("nightly")
    assert back is not None
    assert_clean(back)
    assert_clean(ScheduleControl.from_dict("nightly", back.data, back.revision))
    assert_clean(raw_rows(kind, store, tmp_path))


def test_failures_read_back_are_as_stored() -> None:
    """Redaction is on the way in: a stored failure is not changed when it is read."""
    failure = Failure(kind=FailureKind.EXCEPTION, message="token=[REDACTED]")
    assert Failure.from_dict(failure.to_dict()) == failure
