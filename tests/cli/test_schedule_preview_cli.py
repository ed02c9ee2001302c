"""``schedule preview``, ``schedule cancel-run`` and ``schedule run --input`` in-process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from chongming_task.schedule import CronTrigger, Schedule, ScheduleAdmin
from chongming_task.stores._sqlite import SqliteTaskStore

from .conftest import Result

Invoke = Callable[..., Result]


@pytest.fixture
def dbfile(tmp_path: Path) -> str:
    path = str(tmp_path / "t.db")
    store = SqliteTaskStore(path)
    try:
        ScheduleAdmin(store).register(
            Schedule(
                name="nightly",
                task="report",
                trigger=CronTrigger("30 2 * * *", "America/New_York"),
                dst="vixie",
                display_name="Nightly report",
            )
        )
    finally:
        store.close()
    return path


def test_preview_of_an_expression_needs_no_store(invoke: Invoke) -> None:
    args = ("schedule", "preview", "--cron", "30 2 * * *", "--tz", "America/New_York")
    result = invoke(*args, "--from", "2026-03-08T00:00", "--count", "2")
    assert result.code == 0, result.err
    assert "2026-03-08 07:00:00Z" in result.out
    assert "fired once at the first instant after the gap" in result.out
    document = invoke(*args, "--from", "2026-03-08T00:00", "--count", "2", "--json").json()
    assert document["schema"] == "chongming-task.schedule-preview.v1"
    assert document["dst"] == "default"
    assert document["entries"][0]["dst"] == "gap"
    assert document["entries"][0]["utc"] == "2026-03-08T07:00:00+00:00"
    skip = invoke(*args, "--dst", "skip", "--from", "2026-03-08T00:00", "--count", "1", "--json")
    entries = skip.json()["entries"]
    assert [e["fired"] for e in entries] == [False, True]
    assert entries[0]["wall"] == "2026-03-08T02:30:00"
    assert entries[1]["utc"] == "2026-03-09T06:30:00+00:00"


def test_preview_of_a_stored_schedule_uses_its_policy(invoke: Invoke, dbfile: str) -> None:
    result = invoke("--db", dbfile, "schedule", "preview", "nightly", "--from", "2026-03-08T00:00")
    assert result.code == 0, result.err
    assert "dst=vixie" in result.out
    shown = invoke("--db", dbfile, "schedule", "show", "nightly")
    assert "dst:" in shown.out
    assert "vixie" in shown.out
    assert "Nightly report" in shown.out
    doc = invoke("--db", dbfile, "schedule", "show", "nightly", "--json").json()
    assert (doc["schedule"]["dst"], doc["schedule"]["display_name"]) == ("vixie", "Nightly report")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--count", "nan"), "--count"),
        (("--count", "0"), "--count"),
        (("--count", "2.5"), "--count"),
        (("--from", "not-a-date"), "not ISO 8601"),
        (("--dst", "sometimes"), "dst policy"),
        (("--tz", "Mars/Olympus"), "not a known IANA timezone"),
    ],
)
def test_bad_preview_input_is_a_usage_error(
    invoke: Invoke, extra: tuple[str, ...], message: str
) -> None:
    result = invoke("schedule", "preview", "--cron", "30 2 * * *", *extra)
    assert result.code == 2
    assert message in result.err
    assert "Traceback" not in result.err


def test_preview_needs_exactly_one_of_name_and_cron(invoke: Invoke, dbfile: str) -> None:
    assert invoke("schedule", "preview").code == 2
    both = invoke("--db", dbfile, "schedule", "preview", "nightly", "--cron", "* * * * *")
    assert both.code == 2


def test_run_with_input_and_cancel_it(invoke: Invoke, dbfile: str) -> None:
    requested = invoke(
        "--db", dbfile, "schedule", "run", "nightly", "--input", '{"month": "2026-01"}', "--json"
    )
    assert requested.code == 0, requested.err
    command_id = requested.json()["command_id"]
    store = SqliteTaskStore(dbfile)
    try:
        command = store.get_command(command_id)
        assert command is not None
        assert command.payload["input"] == {"month": "2026-01"}
    finally:
        store.close()
    cancelled = invoke("--db", dbfile, "schedule", "cancel-run", command_id, "--json")
    assert cancelled.code == 0, cancelled.err
    assert cancelled.json()["result"]["cancelled"] is True
    again = invoke("--db", dbfile, "schedule", "cancel-run", command_id)
    assert again.code != 0
    assert "already completed" in again.err


@pytest.mark.parametrize("value", ["{not json", "[1, 2]", "3"])
def test_a_bad_input_is_a_usage_error(invoke: Invoke, dbfile: str, value: str) -> None:
    result = invoke("--db", dbfile, "schedule", "run", "nightly", "--input", value)
    assert result.code == 2
    assert "--input must be a JSON object" in result.err
