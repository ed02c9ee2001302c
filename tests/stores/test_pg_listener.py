"""The LISTEN thread through a PostgreSQL outage: a bounded backoff and a few log lines
(one WARNING when the connection goes, at most one line per 30 s while it stays
away, one INFO when it is back), never a WARNING every half second; and a quick
re-connect once PostgreSQL answers again.

A fake clock times the backoff and a controllable connect function plays the
database, so ten minutes of outage take no real time."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from chongming_task.stores._pg_listener import REPORT_EVERY, RETRY_MAX, CommandListener
from chongming_task.stores._signal import CommandSignal
from chongming_task.testing import FakeClock, wait_until

psycopg = pytest.importorskip("psycopg")

LOGGER = "chongming_task.stores.postgres"
DSN = "postgresql://app:S3cretPw@db.example/prod"


class FakeDatabase:
    """Connections that work while ``up``; a drop breaks the open one at once."""

    def __init__(self) -> None:
        self.up = True
        self.attempts = 0
        self._changed = threading.Condition()
        self._down = threading.Event()

    def connect(self) -> Any:
        with self._changed:
            self.attempts += 1
            self._changed.notify_all()
            if not self.up:
                raise psycopg.OperationalError(f"connection to {DSN} refused")
        return FakeConnection(self)

    def go_down(self) -> None:
        self.up = False
        self._down.set()

    def come_back(self) -> None:
        self._down.clear()
        self.up = True

    def wait_attempts(self, count: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self.attempts >= count, timeout=10)

    def notifies(self, timeout: float) -> Iterator[Any]:
        if self._down.wait(timeout):
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return iter(())


class FakeConnection:
    def __init__(self, db: FakeDatabase) -> None:
        self.db = db

    def notifies(self, *, timeout: float, stop_after: int) -> Iterator[Any]:
        return self.db.notifies(timeout)

    def close(self) -> None:
        pass


@pytest.fixture
def outage(caplog: pytest.LogCaptureFixture) -> Iterator[tuple[FakeClock, FakeDatabase, Any]]:
    clock, db, signal = FakeClock(), FakeDatabase(), CommandSignal()
    listener = CommandListener(DSN, "chan", signal, {}, clock=clock, connect=db.connect)
    try:
        assert listener.wait_ready(10)
        caplog.set_level(logging.INFO, logger=LOGGER)
        yield clock, db, (listener, signal)
    finally:
        db.come_back()
        listener.close()


def _next_attempt(clock: FakeClock, db: FakeDatabase, delay: float) -> None:
    """Let the backoff of ``delay`` pass and wait until the thread tried and waits again."""
    attempts = db.attempts
    clock.advance(delay)
    db.wait_attempts(attempts + 1)
    clock.wait_for_sleepers(1)


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


def test_an_outage_backs_off_and_logs_a_few_lines(
    outage: tuple[FakeClock, FakeDatabase, Any], caplog: pytest.LogCaptureFixture
) -> None:
    clock, db, (listener, signal) = outage
    db.go_down()
    clock.wait_for_sleepers(1)  # the dropped connection was reported, the thread waits
    delays: list[float] = []
    elapsed = 0.0
    while elapsed < 600:  # ten minutes of outage
        delay = listener.retry_delay
        delays.append(delay)
        _next_attempt(clock, db, delay)
        elapsed += delay
    assert delays[:8] == [0.5, 1, 2, 4, 8, 16, RETRY_MAX, RETRY_MAX]
    assert max(delays) == RETRY_MAX
    lines = _lines(caplog)
    assert all(r.levelno == logging.WARNING for r in lines)
    assert "has no connection" in lines[0].getMessage()
    assert all("still re-connecting" in r.getMessage() for r in lines[1:])
    # One line, then one per 30 s at most: 21 at most in 10 min (the old code: 1,200).
    assert 2 <= len(lines) <= 1 + elapsed // REPORT_EVERY
    assert not any("S3cretPw" in r.getMessage() for r in lines)

    caplog.clear()
    seen = signal.generation
    db.come_back()
    clock.advance(listener.retry_delay)
    wait_until(lambda: listener.connected, message="re-connected")
    lines = _lines(caplog)
    assert [r.levelno for r in lines] == [logging.INFO]
    assert "recovered after" in lines[0].getMessage()
    assert signal.generation > seen  # the waiters were woken: a NOTIFY may have been missed
    assert listener.retry_delay is None


def test_a_second_outage_logs_its_own_lost_line_and_backs_off_from_the_start(
    outage: tuple[FakeClock, FakeDatabase, Any], caplog: pytest.LogCaptureFixture
) -> None:
    clock, db, (listener, _) = outage
    for _ in range(2):
        caplog.clear()
        db.go_down()
        clock.wait_for_sleepers(1)
        assert listener.retry_delay == 0.5
        _next_attempt(clock, db, 0.5)
        db.come_back()
        clock.advance(listener.retry_delay)
        wait_until(lambda: listener.connected, message="re-connected")
        assert [r.levelno for r in _lines(caplog)] == [logging.WARNING, logging.INFO]


def test_retry_now_reconnects_without_waiting_out_the_backoff(
    outage: tuple[FakeClock, FakeDatabase, Any],
) -> None:
    clock, db, (listener, _) = outage
    db.go_down()
    clock.wait_for_sleepers(1)
    while listener.retry_delay < RETRY_MAX:
        _next_attempt(clock, db, listener.retry_delay)
    attempts = db.attempts
    listener.retry_now()  # too soon after the last attempt: nothing happens
    db.come_back()
    clock.advance(1.0)  # 29 s of the backoff remain
    assert db.attempts == attempts
    assert not listener.connected
    listener.retry_now()  # what a wait after a claim that got through does
    wait_until(lambda: listener.connected, message="re-connected at once")
    assert db.attempts == attempts + 1


@pytest.mark.external_service
def test_a_dropped_listen_connection_logs_one_warning_and_recovers(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    from chongming_task.stores._postgres import PostgresTaskStore

    caplog.set_level(logging.INFO, logger=LOGGER)
    app = f"ct-listen-{uuid.uuid4().hex[:8]}"
    with PostgresTaskStore(postgres_dsn, application_name=app) as store:
        store.wait_for_commands(0.0)  # starts LISTEN
        listener = store._dialect._listener
        assert listener is not None
        assert listener.connected
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND query ILIKE 'LISTEN%%'",
                (app,),
            )
        wait_until(lambda: any(r.levelno == logging.INFO for r in _lines(caplog)), timeout=15)
        assert listener.connected
    assert [r.levelno for r in _lines(caplog)] == [logging.WARNING, logging.INFO]
