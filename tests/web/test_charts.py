"""Charts: ``TaskRecordStore.activity`` against the stored history, ``/api/charts``, ``/charts``.

The data set is built through the state machine on a ``FakeClock`` (every transition
at a known instant, each stored with ``save`` as the runtime stores it); the expected
numbers are counted from ``history()`` of every task, the store's own record.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from chongming_task._model import Failure, FailureKind
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError
from chongming_task.stores._activity import CHARTED, percentile
from chongming_task.stores._base import TaskRecordStore, TaskStore
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.testing import FakeClock
from chongming_task.web import create_app
from chongming_task.web._app import CONTENT_SECURITY_POLICY

from .conftest import BEARER, TOKEN

#: The window of the "hour" range at NOW: 60 slots of a minute, [09:01, 10:01).
NOW = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
SINCE = datetime(2026, 3, 2, 9, 1, tzinfo=UTC)
UNTIL = datetime(2026, 3, 2, 10, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


class Builder:
    """Drives tasks through the state machine, storing each step as the runtime does."""

    def __init__(self, store: TaskStore, clock: FakeClock) -> None:
        self.store = store
        self.clock = clock

    def task(self, task_id: str, name: str, *, bucket: int | None = None) -> StateMachine:
        machine = StateMachine.create(
            task_id, name, max_attempts=2, bucket=bucket, clock=self.clock
        )
        self.store.create(machine.snapshot, machine.transitions)
        return machine

    def step(self, machine: StateMachine, *moves: str, seconds: float = 0) -> None:
        for move in moves:
            self.clock.advance(seconds)
            version = machine.snapshot.status_version
            done = len(machine.transitions)
            failure = Failure(kind=FailureKind.EXCEPTION, message="boom")
            if move == "queued":
                machine.mark_queued()
            elif move == "start":
                machine.mark_starting()
                machine.mark_running()
            elif move == "succeed":
                machine.mark_succeeded(outcome=None)
            elif move == "fail":
                machine.mark_failed(failure)
            elif move == "retry":
                machine.mark_retry_wait(failure)
            self.store.save(
                machine.snapshot,
                expect_version=version,
                transitions=machine.transitions_after(done),
            )


def build(store: TaskStore) -> list[str]:
    """A known data set around the hour before NOW; returns every task id."""
    clock = FakeClock(datetime(2026, 3, 2, 8, 50, tzinfo=UTC))
    store.clock = clock
    b = Builder(store, clock)
    ids: list[str] = []
    # Before the window: finished at 08:55 (not charted; its updated_at is too old).
    old = b.task("old", "report")
    b.step(old, "queued", "start", seconds=60)
    b.step(old, "succeed", seconds=120)
    ids.append("old")
    # import: 20 tasks from 09:10, one a minute, running 1..20 s: p50 10 s, p95 19 s.
    clock.set(datetime(2026, 3, 2, 9, 10, tzinfo=UTC))
    for i in range(20):
        m = b.task(f"imp-{i:02d}", "import", bucket=i % 2)
        b.step(m, "queued", "start", seconds=1)
        b.step(m, "succeed", seconds=i + 1)
        clock.set(datetime(2026, 3, 2, 9, 11 + i, tzinfo=UTC))
        ids.append(m.task_id)
    # mail: 3 fail, 2 retried then succeed (two starts each), at 09:40..
    clock.set(datetime(2026, 3, 2, 9, 40, 5, tzinfo=UTC))
    for i in range(5):
        m = b.task(f"mail-{i}", "mail")
        b.step(m, "queued", "start", seconds=2)
        if i < 3:
            b.step(m, "fail", seconds=3)
        else:
            b.step(m, "retry", "queued", seconds=5)
            b.step(m, "start", seconds=30)
            b.step(m, "succeed", seconds=4)
        ids.append(m.task_id)
    # Still running, started at 09:59:50; and queued work in buckets 1 and 3.
    clock.set(datetime(2026, 3, 2, 9, 59, 50, tzinfo=UTC))
    running = b.task("run-1", "import", bucket=1)
    b.step(running, "queued", "start")
    ids.append("run-1")
    for i, bucket in enumerate((1, 1, 3, None)):
        q = b.task(f"q-{i}", "import", bucket=bucket)
        b.step(q, "queued")
        ids.append(q.task_id)
    clock.set(NOW)
    return ids


def expected_counts(store: TaskStore, ids: list[str]) -> Counter[tuple[int, str]]:
    """``(slot, series) -> n`` counted from every task's stored history."""
    counts: Counter[tuple[int, str]] = Counter()
    for task_id in ids:
        for t in store.history(task_id):
            series = CHARTED.get(t.to_status)
            if series is not None and SINCE <= t.at < UNTIL:
                counts[(t.at - SINCE) // MINUTE, series] += 1
    return counts


@pytest.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.external_service)]
)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TaskStore]:
    if request.param == "memory":
        opened: TaskStore = InMemoryTaskStore()
    elif request.param == "sqlite":
        from chongming_task.stores._sqlite import SqliteTaskStore

        opened = SqliteTaskStore(str(tmp_path / "charts.db"))
    else:
        from chongming_task.stores._postgres import PostgresTaskStore

        opened = PostgresTaskStore(request.getfixturevalue("postgres_dsn"))
    try:
        yield opened
    finally:
        opened.close()


def test_activity_matches_the_stored_transitions(any_store: TaskStore) -> None:
    ids = build(any_store)
    activity = any_store.activity(since=SINCE, until=UNTIL, step=MINUTE)
    expected = expected_counts(any_store, ids)
    found = Counter(
        {
            (index, series): getattr(slot, series)
            for index, slot in enumerate(activity.slots)
            for series in ("started", "succeeded", "failed")
            if getattr(slot, series)
        }
    )
    assert found == expected
    # The default a third-party store inherits (history per task) gives the same answer.
    assert TaskRecordStore.activity(any_store, since=SINCE, until=UNTIL, step=MINUTE) == activity
    assert len(activity.slots) == 60
    assert activity.slots[0].start == SINCE
    # By hand: 20 imports + 5 mails (2 retried: 7 starts) + 1 running start.
    assert activity.totals() == {"started": 28, "succeeded": 22, "failed": 3}
    assert activity.slots[9].started == 1  # imp-00 started at 09:10:01
    assert activity.slots[58].started == 1  # run-1 started at 09:59:50
    # Durations: nearest rank over each name's finished tasks in the window.
    by_name = {d.name: d for d in activity.durations}
    assert set(by_name) == {"import", "mail"}
    assert (by_name["import"].count, by_name["import"].p50, by_name["import"].p95) == (20, 10, 19)
    # mail: the failed ran 3 s; the retried ones' last attempt ran 4 s.
    assert (by_name["mail"].count, by_name["mail"].p50, by_name["mail"].p95) == (5, 3, 4)
    assert activity.sampled == 25
    # Queue depth per bucket now: queued, nobody holds (no bucket first).
    assert activity.queued == ((None, 1), (1, 2), (3, 1))


def test_activity_refuses_a_window_no_chart_has(any_store: TaskStore) -> None:
    with pytest.raises(ConfigurationError, match="whole number of steps"):
        any_store.activity(since=SINCE, until=SINCE + timedelta(seconds=90), step=MINUTE)
    with pytest.raises(ConfigurationError, match="after since"):
        any_store.activity(since=UNTIL, until=SINCE, step=MINUTE)
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        any_store.activity(since=SINCE.replace(tzinfo=None), until=UNTIL, step=MINUTE)
    with pytest.raises(ConfigurationError, match="at most 1440"):
        any_store.activity(since=SINCE - timedelta(days=2), until=UNTIL, step=MINUTE)


def test_nearest_rank_percentile() -> None:
    values = [float(v) for v in range(1, 21)]
    assert (percentile(values, 0.5), percentile(values, 0.95)) == (10, 19)
    assert percentile([7.0], 0.95) == 7


def charts_client(store: TaskStore) -> TestClient:
    return TestClient(create_app(store, token=TOKEN, clock=FakeClock(NOW)))


def test_api_charts_returns_the_store_numbers(store: TaskStore) -> None:
    ids = build(store)
    with charts_client(store) as client:
        doc = client.get("/api/charts", headers=BEARER).json()
        assert doc["range"] == "hour"
        assert (doc["since"], doc["until"], doc["step_seconds"]) == (
            SINCE.isoformat(),
            UNTIL.isoformat(),
            60,
        )
        assert doc["totals"] == {"started": 28, "succeeded": 22, "failed": 3}
        expected = expected_counts(store, ids)
        for index, slot in enumerate(doc["slots"]):
            for series in ("started", "succeeded", "failed"):
                assert slot[series] == expected.get((index, series), 0), (index, series)
        assert {d["name"]: (d["p50_seconds"], d["p95_seconds"]) for d in doc["durations"]} == {
            "import": (10, 19),
            "mail": (3, 4),
        }
        assert doc["queued"] == [
            {"bucket": None, "queued": 1},
            {"bucket": 1, "queued": 2},
            {"bucket": 3, "queued": 1},
        ]
        day = client.get("/api/charts?range=day", headers=BEARER).json()
        assert (len(day["slots"]), day["step_seconds"]) == (288, 300)
        assert day["totals"] == {"started": 29, "succeeded": 23, "failed": 3}  # with "old"
        bad = client.get("/api/charts?range=week", headers=BEARER)
        assert bad.status_code == 400
        assert "range must be one of hour, day" in bad.text


def test_charts_page_is_svg_with_text_and_no_inline_script(store: TaskStore) -> None:
    build(store)
    with charts_client(store) as client:
        response = client.get("/charts", headers=BEARER)
    assert response.status_code == 200
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
    html = response.text
    # Five charts, each an image with its title and description, and a table after it.
    assert html.count("<svg ") == 5
    for chart in ("started", "succeeded", "failed", "durations", "queued"):
        assert f'aria-labelledby="chart-{chart}-t" aria-describedby="chart-{chart}-d"' in html
        assert f'<title id="chart-{chart}-t">' in html
    assert '<title id="chart-started-t">Started: 28 in the window, at most' in html
    assert ">p50 10.0 s</text>" in html
    assert ">p95 19.0 s</text>" in html
    assert ">bucket 1</text>" in html
    assert ">no bucket</text>" in html
    assert "09:01</text>" in html
    assert "10:01 UTC</text>" in html
    assert html.count("<table>") == 5
    assert "<td>2026-03-02 09:10</td><td>1</td>" in html
    # CSP: no inline script, no style attribute, no event handler attribute.
    assert all("src=" in tag for tag in re.findall(r"<script[^>]*>", html))
    assert " style=" not in html
    assert not re.search(r"\son[a-z]+=", html)
    assert 'href="/charts"' in html  # in the navigation


def test_charts_page_without_data_says_so(store: TaskStore) -> None:
    with charts_client(store) as client:
        html = client.get("/charts?range=day", headers=BEARER).text
    assert "No task finished in the window." in html
    assert "Nothing is queued." in html
    assert "last day, per 5 minutes" in html
