"""The dashboard says what the store and the CLI say: the worker registry, the health
verdict, bucket ownership, live elapsed times, "stuck" and due times."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.testclient import TestClient

from chongming_task._model import TaskSnapshot
from chongming_task.buckets._health import fleet_health
from chongming_task.cli import main
from chongming_task.schedule._admin import ScheduleAdmin
from chongming_task.states import TaskStatus
from chongming_task.stores._base import QueueStore, TaskStore
from chongming_task.stores._queue_records import RECIPE_KEY, Recipe, WorkerRecord
from chongming_task.testing import FakeClock
from chongming_task.web import create_app

from .conftest import BEARER, TOKEN, USER


def _worker(store: TaskStore, worker_id: str, *, beat: datetime, **fields: Any) -> None:
    assert isinstance(store, QueueStore)
    store.put_worker(
        WorkerRecord(
            worker_id=worker_id,
            host="node-1",
            pid=fields.pop("pid", 4242),
            version=fields.pop("version", "9.9.9"),
            buckets=fields.pop("buckets", None),
            slots=fields.pop("slots", 4),
            started_at=beat - timedelta(hours=1),
            heartbeat_at=beat,
            heartbeat_interval=1.0,
            lease_until=beat + timedelta(seconds=30),
            num_buckets=8,
            **fields,
        )
    )


def _task(task_id: str, at: datetime, **fields: Any) -> TaskSnapshot:
    status = fields.pop("status", TaskStatus.QUEUED)
    return TaskSnapshot(
        task_id=task_id,
        name=fields.pop("name", "job.import"),
        status=status,
        status_version=1,
        created_at=fields.pop("created_at", at),
        updated_at=fields.pop("updated_at", at),
        queued_at=at,
        **fields,
    )


def _queued_work(task_id: str, at: datetime, bucket: int, **recipe: Any) -> TaskSnapshot:
    """A task the work queue enqueued (with a recipe), unclaimed."""
    return _task(task_id, at, bucket=bucket, metadata={RECIPE_KEY: Recipe(**recipe).to_dict()})


def _fleet(store: TaskStore) -> datetime:
    """Three registered workers as `chongming-task workers` shows them: live, dead, stopped."""
    now = datetime.now(UTC)
    _worker(store, "w-live", beat=now, buckets=(0, 1), slots=3, version="1.2.3")
    _worker(store, "w-dead", beat=now - timedelta(hours=1), buckets=(2,))
    _worker(store, "w-gone", beat=now - timedelta(hours=2), stopped_at=now - timedelta(hours=2))
    return now


def test_the_workers_page_lists_the_registry_live_dead_and_stopped(
    store: TaskStore, client: TestClient
) -> None:
    now = _fleet(store)
    store.create_many(
        [
            _task(
                "held-1",
                now,
                status=TaskStatus.RUNNING,
                started_at=now,
                owner="w-live",
                lease_owner="w-live",
                lease_until=now + timedelta(minutes=5),
                bucket=0,
            )
        ]
    )
    page = client.get("/workers", headers=BEARER)
    assert "no worker registry" not in page.text
    for worker_id, state in (("w-live", "live"), ("w-dead", "dead"), ("w-gone", "stopped")):
        assert f'data-worker="{worker_id}" data-state="{state}"' in page.text
    api = client.get("/api/workers", headers=BEARER).json()
    assert api["source"] == "registry"
    by_name = {w["name"]: w for w in api["workers"]}
    assert {n: w["state"] for n, w in by_name.items()} == {
        "w-live": "live",
        "w-dead": "dead",
        "w-gone": "stopped",
    }
    assert by_name["w-live"]["tasks"] == 1
    assert by_name["w-live"]["slots"] == 3
    assert by_name["w-live"]["buckets"] == [0, 1]
    overview = client.get("/", headers=BEARER).text
    assert 'href="/workers/w-dead"' in overview


def test_the_overview_opens_with_the_verdict_of_health(
    store: TaskStore, client: TestClient
) -> None:
    _fleet(store)
    ScheduleAdmin(store)  # a store with schedules part but no schedule: still judged
    doc = client.get("/api/overview", headers=BEARER).json()
    verdict = fleet_health(store, ScheduleAdmin(store))
    assert doc["health"]["status"] == verdict.status == "unhealthy"
    assert doc["health"]["healthy"] is False
    assert "worker w-dead stopped heart-beating" in doc["health"]["problems"]
    assert doc["health"]["problems"] == list(verdict.problems)
    page = client.get("/", headers=BEARER).text
    first = page.index('data-testid="health"')
    assert first < page.index('data-testid="total"')  # the first thing on the page
    assert "worker w-dead stopped heart-beating" in page
    if hasattr(store, "path"):  # SQLite: the CLI over the same file says the same
        out, err = io.StringIO(), io.StringIO()
        code = main(["--db", str(store.path), "health", "--json"], stdout=out, stderr=err)
        assert code == 1
        cli = json.loads(out.getvalue())
        assert cli["status"] == doc["health"]["status"]
        assert cli["problems"] == doc["health"]["problems"]


def test_a_worker_page_shows_its_tasks_slots_buckets_heartbeat_and_version(
    store: TaskStore, client: TestClient
) -> None:
    now = _fleet(store)
    store.create_many(
        [
            _task(
                "mine",
                now,
                status=TaskStatus.RUNNING,
                started_at=now - timedelta(seconds=30),
                owner="w-live",
                lease_owner="w-live",
                lease_until=now + timedelta(minutes=5),
            ),
            _task("not-mine", now, owner="w-dead"),
            _task("done", now, status=TaskStatus.SUCCEEDED, owner="w-live"),
        ]
    )
    page = client.get("/workers/w-live", headers=BEARER)
    assert page.status_code == 200
    assert 'data-testid="version">1.2.3<' in page.text
    assert 'data-testid="slots">3<' in page.text
    assert 'data-testid="buckets">0, 1<' in page.text
    assert " ago" in page.text.split('data-testid="heartbeat">', 1)[1].split("</dd>", 1)[0]
    assert 'data-task="mine"' in page.text
    assert 'data-task="not-mine"' not in page.text
    assert 'data-task="done"' not in page.text
    api = client.get("/api/workers/w-live", headers=BEARER).json()
    assert api["worker"]["state"] == "live"
    assert api["worker"]["version"] == "1.2.3"
    assert 0 <= api["worker"]["heartbeat_age"] < 60
    assert [t["task_id"] for t in api["tasks"]] == ["mine"]
    assert client.get("/workers/nobody", headers=BEARER).status_code == 404
    assert client.get("/api/workers/nobody", headers=BEARER).status_code == 404


def test_a_bucket_with_queued_work_and_no_live_owner_is_orphaned_not_idle(
    store: TaskStore, client: TestClient
) -> None:
    now = _fleet(store)  # w-live owns 0-1, w-dead (dead) declared 2
    store.create_many(
        [_queued_work(f"q{i}", now, bucket=2) for i in range(3)]
        + [_queued_work("q-owned", now, bucket=1)]
        + [_task("old", now, status=TaskStatus.SUCCEEDED, bucket=5)]
    )
    rows = {b["bucket"]: b for b in client.get("/api/buckets", headers=BEARER).json()["buckets"]}
    assert rows[2]["state"] == "orphaned"
    assert rows[2]["queued"] == 3
    assert rows[2]["owners"] == []
    assert rows[1]["state"] == "owned"
    assert rows[1]["owners"] == ["w-live"]
    assert rows[5]["state"] == "idle"
    page = client.get("/buckets", headers=BEARER).text
    assert 'data-bucket="2" data-state="orphaned"' in page


def test_elapsed_is_live_for_an_unfinished_task(store: TaskStore) -> None:
    started = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    clock = FakeClock(started + timedelta(seconds=58))
    store.create_many(
        [
            _task(
                "busy",
                started,
                status=TaskStatus.RUNNING,
                started_at=started,
                updated_at=started + timedelta(milliseconds=4),
            ),
            _task(
                "over",
                started,
                status=TaskStatus.SUCCEEDED,
                started_at=started,
                finished_at=started + timedelta(seconds=2),
                updated_at=started + timedelta(seconds=2),
            ),
        ]
    )
    with TestClient(create_app(store, token=TOKEN, user=USER, clock=clock)) as client:
        assert client.get("/api/tasks/busy", headers=BEARER).json()["task"]["elapsed"] == 58.0
        assert client.get("/api/tasks/over", headers=BEARER).json()["task"]["elapsed"] == 2.0
        assert 'data-testid="elapsed">58.0 s<' in client.get("/tasks/busy", headers=BEARER).text
        clock.advance(2)
        listed = client.get("/api/tasks", headers=BEARER).json()["tasks"]
        assert {t["task_id"]: t["elapsed"] for t in listed} == {"busy": 60.0, "over": 2.0}


def test_a_paused_task_never_looks_stuck(store: TaskStore) -> None:
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    clock = FakeClock(start + timedelta(hours=1))
    lease = {"lease_owner": "w", "lease_until": start + timedelta(hours=2)}
    quiet = {"started_at": start, "last_heartbeat_at": start, "owner": "w", **lease}
    store.create_many(
        [
            _task("silent", start, status=TaskStatus.RUNNING, **quiet),
            _task("parked", start, status=TaskStatus.PAUSED, **quiet),
        ]
    )
    app = create_app(store, token=TOKEN, user=USER, clock=clock, idle_after=60)
    with TestClient(app) as client:
        stuck = client.get("/api/overview", headers=BEARER).json()["stuck"]
    assert [s["task"]["task_id"] for s in stuck] == ["silent"]
    assert "no heartbeat" in stuck[0]["why"]


def test_oldest_queued_counts_due_tasks_and_the_due_time_is_shown(
    store: TaskStore,
) -> None:
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    clock = FakeClock(start + timedelta(minutes=10))
    later = start + timedelta(hours=2)
    store.create_many(
        [
            _queued_work("delayed", start, bucket=0, not_before=later),
            _queued_work("ready", start + timedelta(minutes=4), bucket=0),
        ]
    )
    with TestClient(create_app(store, token=TOKEN, user=USER, clock=clock)) as client:
        doc = client.get("/api/overview", headers=BEARER).json()
        assert doc["oldest_queued"] == "ready"
        assert doc["oldest_queued_age"] == 360.0
        task = client.get("/api/tasks/delayed", headers=BEARER).json()["task"]
        assert task["due_at"] == later.isoformat()
        page = client.get("/tasks/delayed", headers=BEARER).text
        assert f'data-testid="due">{later.isoformat(timespec="seconds")}<' in page
        listed = client.get("/tasks", headers=BEARER).text
        # The list says it relatively, with the exact time on hover.
        assert f'data-testid="due"><time datetime="{later.isoformat()}"' in listed
        assert f'title="{later.isoformat(timespec="seconds")}">in 110 min</time>' in listed
        clock.advance(3 * 3600)  # now both are due: the older one is the oldest
        assert client.get("/api/overview", headers=BEARER).json()["oldest_queued"] == "delayed"
