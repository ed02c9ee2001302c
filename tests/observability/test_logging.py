"""JsonLogFormatter and TransitionLogger: structured fields, nothing secret."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from chongming_task.controller import Controller
from chongming_task.observability import JsonLogFormatter, TransitionLogger
from chongming_task.policies import FixedBackoff, RetryPolicy
from chongming_task.runtime._context import TaskContext
from chongming_task.testing import wait_until


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonLogFormatter())
    logger = logging.getLogger("chongming_task.tests.observability")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, stream
    logger.removeHandler(handler)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_one_json_object_per_record_with_the_extras(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured
    logger.info(
        "took %s",
        "etl-1",
        extra={"task_id": "etl-1", "task_name": "etl", "attempt": 2, "schedule": "nightly",
               "shape": {"rows": 3}, "odd": object()},
    )  # fmt: skip
    (record,) = lines(stream)
    assert record["message"] == "took etl-1"
    assert record["level"] == "INFO"
    assert record["logger"] == "chongming_task.tests.observability"
    assert record["ts"].endswith("+00:00")
    assert {k: record[k] for k in ("task_id", "task_name", "attempt", "schedule")} == {
        "task_id": "etl-1",
        "task_name": "etl",
        "attempt": 2,
        "schedule": "nightly",
    }
    assert record["shape"] == {"rows": 3}
    assert record["odd"].startswith("<object object")
    assert "args" not in record
    assert "levelno" not in record


def test_secrets_in_messages_and_tracebacks_are_redacted(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured
    try:
        raise ConnectionError("login failed: password=hunter2")
    except ConnectionError:
        logger.exception("connect with token=abc123 failed")
    (record,) = lines(stream)
    assert "abc123" not in record["message"]
    assert "[REDACTED]" in record["message"]
    assert "hunter2" not in record["exception"]
    assert "ConnectionError" in record["exception"]


def test_fields_restricts_the_extras() -> None:
    formatter = JsonLogFormatter(fields={"task_id"})
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hi", None, None)
    record.task_id = "t"
    record.secret_thing = "nope"
    data = json.loads(formatter.format(record))
    assert data["task_id"] == "t"
    assert "secret_thing" not in data


def fails_first_attempt(ctx: TaskContext) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("dsn=postgres://u:pw@h password=hunter2")
    return "ok"


def test_transition_logger_records_every_transition(
    controller: Controller, captured: tuple[logging.Logger, io.StringIO]
) -> None:
    logger, stream = captured
    controller.register(
        "flaky", fails_first_attempt, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0))
    )
    observer = TransitionLogger(logger)
    observer.attach(controller)
    run = controller.submit("flaky", metadata={"schedule": "nightly"})
    assert run.wait(5).ok
    wait_until(lambda: len(lines(stream)) == len(run.transitions), message="all logged")
    records = lines(stream)
    assert [r["to_status"] for r in records] == [t.to_status.value for t in run.transitions]
    assert all(r["task_id"] == run.task_id and r["schedule"] == "nightly" for r in records)
    retry = next(r for r in records if r["to_status"] == "retry_wait")
    assert retry["attempt"] == 1
    assert retry["failure_kind"] == "exception"
    assert retry["level"] == "INFO"
    assert "hunter2" not in stream.getvalue()
    assert [r["level"] for r in records if r["to_status"] == "pending"] == ["DEBUG"]
    observer.detach()
