"""``schedules``, ``schedule ...`` and ``health`` against a worker that fires schedules."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from chongming_task.testing import wait_until

from .conftest import MODULES, Result, WorkerProcess

Cli = Callable[..., Result]
Invoke = Callable[..., Result]
StartWorker = Callable[..., WorkerProcess]

SCHEDULED = str(MODULES / "scheduled_tasks.py")


def _schedule(cli: Cli, db: str, name: str) -> dict[str, object]:
    document = cli("--db", db, "schedule", "show", name, "--json").json()
    assert document["schema"] == "chongming-task.schedule.v1"
    return dict(document)


def test_operating_schedules_of_a_running_worker(
    cli: Cli, db: str, start_worker: StartWorker
) -> None:
    worker = start_worker(db, tasks=SCHEDULED)
    assert "schedules: by-hand, every-second, nightly" in worker.output

    listed = wait_until(
        lambda: (
            (doc := cli("--db", db, "schedules", "--json").json())["schedules"]
            and doc["schedules"][1]["runs"] >= 1
            and doc
        ),
        timeout=20,
        message="a firing of every-second",
    )
    assert [s["name"] for s in listed["schedules"]] == ["by-hand", "every-second", "nightly"]
    assert listed["schedules"][2]["timezone"] == "Asia/Shanghai"

    paused = cli("--db", db, "schedule", "pause", "every-second", "--reason", "maint", "--json")
    assert paused.code == 0, paused.err
    assert paused.json()["schedule"]["status"] == "paused"
    skipped = wait_until(
        lambda: [
            run
            for run in _schedule(cli, db, "every-second")["runs"]  # type: ignore[attr-defined]
            if run["status"] == "skipped"
        ],
        timeout=20,
        message="a skipped firing of the paused schedule",
    )
    assert "is paused: maint" in skipped[0]["error"]
    assert cli("--db", db, "schedule", "resume", "every-second").code == 0

    overridden = cli(
        "--db", db, "schedule", "set", "nightly", "30 3 * * *", "--timezone", "UTC", "--json"
    ).json()["schedule"]
    assert (overridden["pattern"], overridden["timezone"], overridden["overridden"]) == (
        "30 3 * * *",
        "UTC",
        True,
    )
    assert "(set)" in cli("--db", db, "schedules").out
    reset = cli("--db", db, "schedule", "reset", "nightly", "--json").json()["schedule"]
    assert (reset["pattern"], reset["timezone"], reset["overridden"]) == (
        "0 2 * * *",
        "Asia/Shanghai",
        False,
    )

    ok = cli("--db", db, "schedule", "run", "nightly", "--wait", "20", "--reason", "backfill")
    assert ok.code == 0, ok.err
    assert ok.out.startswith("nightly: run nightly@manual-")
    assert ok.out.rstrip().endswith("succeeded")
    failed = cli("--db", db, "schedule", "run", "by-hand", "--wait", "20", "--json")
    assert failed.code == 3
    result = failed.json()["result"]
    assert (result["status"], result["ok"]) == ("failed", False)
    assert "scheduled failure" in result["error"]
    task = cli("--db", db, "status", result["task_id"], "--json").json()["task"]
    assert task["metadata"]["trigger_type"] == "manual"
    assert task["metadata"]["schedule"] == "by-hand"
    backfill = ok.out.split()[2]
    metadata = cli("--db", db, "status", backfill, "--json").json()["task"]["metadata"]
    assert (metadata["trigger_type"], metadata["trigger"]["reason"]) == ("manual", "backfill")

    health = cli("--db", db, "health", "--json")
    assert health.code == 0  # degraded is still healthy: firings happen
    assert health.json()["status"] == "degraded"
    assert health.json()["failing"] == ["by-hand"]

    assert worker.terminate() == 0


def test_schedule_errors(cli: Cli, db: str, start_worker: StartWorker) -> None:
    start_worker(db, tasks=SCHEDULED).terminate()
    unknown = cli("--db", db, "schedule", "show", "nosuch")
    assert (unknown.code, len(unknown.err_lines)) == (1, 1)
    assert "no schedule named 'nosuch'" in unknown.err
    bad = cli("--db", db, "schedule", "set", "nightly", "not a pattern")
    assert (bad.code, len(bad.err_lines)) == (2, 1)
    assert "cron expression" in bad.err
    assert cli("--db", db, "schedule").code == 2
    assert cli("--db", db, "schedule", "run", "nightly", "--wait", "-1").code == 2


def test_health_is_unhealthy_when_a_schedule_is_overdue(invoke: Invoke, tmp_path: Path) -> None:
    from chongming_task.schedule import Schedule
    from chongming_task.schedule._admin import ScheduleAdmin
    from chongming_task.stores._sqlite import SqliteTaskStore

    db = str(tmp_path / "h.db")
    with SqliteTaskStore(db) as store:
        admin = ScheduleAdmin(store)
        # A string trigger is a UTC cron (Schedule.trigger's type does not say so yet).
        admin.register(Schedule(name="hourly", task="tick", trigger="0 * * * *"))  # type: ignore[arg-type]
        past = admin.clock.now() - timedelta(hours=2)
        admin.update("hourly", lambda c: dataclasses.replace(c, next_run_at=past))
    result = invoke("--db", db, "health")
    assert result.code == 1
    assert result.out.startswith("unhealthy: 1 schedule(s)")
    assert "schedule 'hourly' is overdue" in result.out
    assert invoke("--db", db, "schedules").out.splitlines()[2].split()[:2] == ["hourly", "tick"]
