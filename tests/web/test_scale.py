"""The dashboard at scale: totals from the store's counts, oldest first, id-prefix and
argument search, filter-wide bulk actions in pages, failure groups, the timeline by
attempt, and the layout fixes (404 navigation, no doubled failure text, no checkpoint
gaps for a task that never ran)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.testclient import TestClient

from chongming_task._checkpoint_gaps import BOUNDS, CheckpointGaps
from chongming_task._model import Failure, FailureKind, TaskSnapshot, Transition
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskQuery, TaskStore
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.stores._queue_records import RECIPE_KEY, Recipe
from chongming_task.testing import FakeClock
from chongming_task.web import create_app
from chongming_task.web._app import BULK_PAGE
from chongming_task.web._views import fingerprint

from .conftest import BEARER, TOKEN, login

START = datetime(2030, 1, 1, tzinfo=UTC)


def _task(task_id: str, at: datetime, **fields: Any) -> TaskSnapshot:
    args = fields.pop("args", None)
    kwargs = fields.pop("kwargs", None)
    metadata = fields.pop("metadata", {})
    if args is not None or kwargs is not None:
        metadata = {**metadata, RECIPE_KEY: Recipe(args=args or (), kwargs=kwargs).to_dict()}
    status = fields.pop("status", TaskStatus.QUEUED)
    terminal = status.is_terminal
    return TaskSnapshot(
        task_id=task_id,
        name=fields.pop("name", "job.import"),
        status=status,
        status_version=fields.pop("status_version", 1),
        created_at=at,
        updated_at=at,
        queued_at=at,
        finished_at=at if terminal else None,
        metadata=metadata,
        **fields,
    )


def _app(store: TaskStore, clock: FakeClock) -> TestClient:
    store.clock = clock
    return TestClient(create_app(store, token=TOKEN, clock=clock), base_url="http://127.0.0.1")


def _seed(store: TaskStore, n: int, *, status: TaskStatus = TaskStatus.QUEUED) -> list[str]:
    ids = [f"job-{i:04d}" for i in range(n)]
    store.create_many(
        _task(task_id, START + timedelta(seconds=i), status=status, args=(i,))
        for i, task_id in enumerate(ids)
    )
    return ids


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


# ---------------------------------------------------------------- counts and order


def test_the_total_is_the_stores_count_and_oldest_first_reaches_the_oldest(
    store: TaskStore,
) -> None:
    clock = FakeClock(START + timedelta(hours=1))
    ids = _seed(store, 130)
    store.create_many(
        [_task(f"done-{i}", START, status=TaskStatus.SUCCEEDED, name="other") for i in range(7)]
    )
    client = _app(store, clock)
    api = client.get("/api/tasks", params={"status": "queued", "limit": 50}, headers=BEARER)
    counted = store.count_by_status(TaskQuery(statuses=frozenset({TaskStatus.QUEUED})))
    assert api.json()["total"] == counted[TaskStatus.QUEUED] == 130
    page = client.get("/tasks", params={"status": "queued"}, headers=BEARER)
    assert "1–50 of 130 task(s)" in _text(page.text)
    everything = client.get("/tasks", headers=BEARER)
    assert "of 137 task(s)" in _text(everything.text)

    oldest = client.get(
        "/api/tasks", params={"status": "queued", "sort": "oldest", "limit": 50}, headers=BEARER
    ).json()
    assert [t["task_id"] for t in oldest["tasks"]] == ids[:50]
    second = client.get(
        "/api/tasks",
        params={"status": "queued", "sort": "oldest", "limit": 50, "cursor": oldest["next_cursor"]},
        headers=BEARER,
    ).json()
    assert [t["task_id"] for t in second["tasks"]] == ids[50:100]
    assert second["position"] == 50
    assert client.get("/tasks", params={"sort": "sideways"}, headers=BEARER).status_code == 400


# ---------------------------------------------------------------- search


def test_id_prefix_and_argument_search(store: TaskStore) -> None:
    clock = FakeClock(START + timedelta(hours=1))
    store.create_many(
        [
            _task("order-17", START, args=(17,), kwargs={"customer": "acme"}),
            _task("order-170", START + timedelta(seconds=1), kwargs={"customer": "globex"}),
            _task("order-2", START + timedelta(seconds=2), args=("naïve", 99)),
            _task("invoice-17", START + timedelta(seconds=3), kwargs={"customer": "acme"}),
            _task("plain", START + timedelta(seconds=4)),
        ]
    )
    client = _app(store, clock)

    def found(**params: str) -> list[str]:
        response = client.get("/api/tasks", params=params, headers=BEARER)
        assert response.status_code == 200, response.text
        return sorted(t["task_id"] for t in response.json()["tasks"])

    assert found(q="order-17") == ["order-17", "order-170"]
    assert found(q="order-") == ["order-17", "order-170", "order-2"]
    assert found(q="nothing") == []
    assert found(arg='"customer":"acme"') == ["invoice-17", "order-17"]
    assert found(arg="acme", q="order") == ["order-17"]
    assert found(arg="naïve") == ["order-2"]
    assert found(arg="17") == ["order-17"]  # the id is not an argument
    total = client.get("/api/tasks", params={"arg": "acme"}, headers=BEARER).json()["total"]
    assert total == 2
    page = client.get("/tasks", params={"q": "order-1"}, headers=BEARER)
    assert 'value="order-1"' in page.text
    assert "of 2 task(s)" in _text(page.text)


def test_the_memory_store_searches_like_the_sql_ones() -> None:
    memory = InMemoryTaskStore()
    memory.create_many(
        [
            _task("a-1", START, kwargs={"k": "v1"}),
            _task("a-2", START, args=("x", 2)),
            _task("b-1", START),
        ]
    )
    heads = memory.query_heads(TaskQuery(id_prefix="a-", order="id"))
    assert [h.task_id for h in heads] == ["a-1", "a-2"]
    assert [s.task_id for s in memory.query(TaskQuery(argument='"v1"'))] == ["a-1"]
    assert [h.task_id for h in memory.query_heads(TaskQuery(id_after="a-1", order="id"))] == [
        "a-2",
        "b-1",
    ]


# ---------------------------------------------------------------- bulk over the filter


def _run_filter_bulk(client: TestClient, csrf: str, action: str, query: str) -> str:
    """Confirm, then follow the pages as the browser does; returns the last page."""
    confirm = client.post(
        "/tasks/bulk",
        data={
            "csrf": csrf,
            "action": action,
            "reason": "incident 7",
            "scope": "filter",
            "back": query,
        },
    )
    assert confirm.status_code == 200, confirm.text
    assert 'data-testid="bulk-confirm"' in confirm.text
    page = confirm.text
    for _ in range(50):
        form = re.search(r'<form method="post" action="/tasks/bulk"[^>]*>(.*?)</form>', page, re.S)
        if form is None:
            return page
        fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form[1]))
        fields = {k: v.replace("&amp;", "&").replace("&#34;", '"') for k, v in fields.items()}
        response = client.post("/tasks/bulk", data=fields)
        assert response.status_code == 200, response.text
        page = response.text
    raise AssertionError("the bulk action never finished")


def test_filter_wide_stop_over_several_pages_reaches_every_matching_task(
    store: TaskStore,
) -> None:
    clock = FakeClock(START + timedelta(hours=1))
    n = BULK_PAGE * 2 + 17
    ids = _seed(store, n)
    store.create_many([_task(f"keep-{i}", START, name="other") for i in range(5)])
    client = _app(store, clock)
    csrf = login(client)
    confirm = client.post(
        "/tasks/bulk",
        data={
            "csrf": csrf,
            "action": "stop",
            "reason": "incident 7",
            "scope": "filter",
            "back": "name=job.import&status=queued",
        },
    )
    assert f'data-testid="bulk-count">{n:,}<' in confirm.text
    first = store.get(ids[0])
    assert first is not None
    assert first.status is TaskStatus.QUEUED  # nothing is done before the confirmation
    last = _run_filter_bulk(client, csrf, "stop", "name=job.import&status=queued")
    assert 'data-testid="bulk-done"' in last
    assert f"{n:,} of {n:,} processed" in _text(last)
    stopped = store.count_by_status(TaskQuery(name_prefix="job.import"))
    assert stopped == {TaskStatus.STOPPED: n}
    assert store.count_by_status(TaskQuery(name_prefix="other")) == {TaskStatus.QUEUED: 5}
    history = store.history(ids[-1])
    assert history[-1].actor == "dashboard"
    assert history[-1].reason == "incident 7"


def test_filter_wide_retry_and_delete_through_the_json_api(store: TaskStore) -> None:
    clock = FakeClock(START + timedelta(hours=1))
    n = BULK_PAGE + 30
    failure = Failure(kind=FailureKind.EXCEPTION, message="boom", exception_type="RuntimeError")
    store.create_many(
        _task(f"f-{i:04d}", START, status=TaskStatus.FAILED, args=(i,), failure=failure)
        for i in range(n)
    )
    store.create_many([_task(f"s-{i}", START, status=TaskStatus.SUCCEEDED) for i in range(3)])
    client = _app(store, clock)
    body: dict[str, Any] = {
        "action": "retry",
        "reason": "fixed the bug",
        "scope": "filter",
        "filter": {"status": "failed"},
    }
    confirm = client.post("/api/tasks/bulk", json=body, headers=BEARER).json()
    assert confirm["stage"] == "confirm"
    assert confirm["eligible"] == n
    step = {**body, "as_of": confirm["as_of"], "confirm": confirm["confirm"]}
    pages = 0
    while True:
        done = client.post("/api/tasks/bulk", json=step, headers=BEARER)
        assert done.status_code == 202, done.text
        doc = done.json()
        pages += 1
        step.update({k: doc[k] for k in ("after", "processed", "applied", "requested", "refused")})
        if doc["stage"] == "done":
            break
    assert pages == 2
    assert doc["applied"] == n
    assert doc["processed"] == n
    assert store.count_by_status(TaskQuery(name_prefix="job")) == {
        TaskStatus.QUEUED: n,
        TaskStatus.SUCCEEDED: 3,
    }
    # Delete finished: only the three succeeded tasks go, with their history.
    delete = {"action": "delete", "reason": "cleanup", "scope": "filter", "filter": {}}
    confirm = client.post("/api/tasks/bulk", json=delete, headers=BEARER).json()
    assert confirm["eligible"] == 3
    assert confirm["matched"] == n + 3
    step = {**delete, "as_of": confirm["as_of"], "confirm": confirm["confirm"]}
    doc = client.post("/api/tasks/bulk", json=step, headers=BEARER).json()
    assert doc["stage"] == "done"
    assert doc["applied"] == 3
    assert store.count_by_status() == {TaskStatus.QUEUED: n}


def test_the_bulk_bar_is_above_the_table_and_says_the_count(store: TaskStore) -> None:
    _seed(store, 3)
    client = _app(store, FakeClock(START + timedelta(hours=1)))
    html = client.get("/tasks", headers=BEARER).text
    assert html.index('data-testid="bulk-bar"') < html.index('<table class="tasks">')
    assert 'class="bulk card sticky"' in html
    assert "all 3 matching the filter" in _text(html)
    bad = client.post(
        "/api/tasks/bulk",
        json={"action": "explode", "reason": "x", "scope": "filter"},
        headers=BEARER,
    )
    assert bad.status_code == 400


# ---------------------------------------------------------------- failures and timeline


def test_failures_are_grouped_by_type_and_fingerprint_and_a_group_retries(
    store: TaskStore,
) -> None:
    clock = FakeClock(START + timedelta(hours=1))

    def failed(task_id: str, message: str, kind: str = "KeyError") -> TaskSnapshot:
        failure = Failure(kind=FailureKind.EXCEPTION, message=message, exception_type=kind)
        return _task(task_id, START, status=TaskStatus.FAILED, args=(1,), failure=failure)

    store.create_many(
        [failed(f"a-{i}", f"order {1000 + i} not found") for i in range(6)]
        + [failed(f"b-{i}", f"order {i} not found", kind="ValueError") for i in range(2)]
        + [failed("c-1", "disk full")]
    )
    assert fingerprint("order 1234 not found") == fingerprint("order 7 not found")
    client = _app(store, clock)
    groups = client.get("/api/failures", headers=BEARER).json()["groups"]
    assert [(g["error"], g["count"]) for g in groups] == [
        ("KeyError", 6),
        ("ValueError", 2),
        ("KeyError", 1),
    ]
    assert groups[0]["fingerprint"] == "order <n> not found"
    page = client.get("/failures", headers=BEARER)
    assert page.status_code == 200
    assert page.text.count("data-group=") == 3
    csrf = login(client)
    retried = client.post(
        "/failures/retry",
        data={"csrf": csrf, "group": groups[0]["key"], "reason": "fixed"},
        follow_redirects=False,
    )
    assert retried.status_code == 303
    assert store.count_by_status(TaskQuery(id_prefix="a-")) == {TaskStatus.QUEUED: 6}
    assert store.count_by_status(TaskQuery(id_prefix="b-")) == {TaskStatus.FAILED: 2}
    flash = client.get(retried.headers["location"])
    assert "retried 6 task(s)" in flash.text
    gone = client.post("/failures/retry", data={"csrf": csrf, "group": "nope", "reason": "x"})
    assert gone.status_code == 404


def test_the_timeline_is_grouped_by_attempt(store: TaskStore) -> None:
    clock = FakeClock(START + timedelta(hours=1))
    snapshot = _task("multi", START, status=TaskStatus.RUNNING, status_version=7, attempt=3)
    steps = [
        (None, TaskStatus.QUEUED, 0),
        (TaskStatus.QUEUED, TaskStatus.RUNNING, 1),
        (TaskStatus.RUNNING, TaskStatus.RETRY_WAIT, 1),
        (TaskStatus.RETRY_WAIT, TaskStatus.RUNNING, 2),
        (TaskStatus.RUNNING, TaskStatus.RETRY_WAIT, 2),
        (TaskStatus.RETRY_WAIT, TaskStatus.RUNNING, 3),
    ]
    store.create(
        snapshot,
        [
            Transition(
                task_id="multi",
                from_status=old,
                to_status=new,
                trigger="test:step",
                version=v + 1,
                at=START + timedelta(seconds=v),
                attempt=attempt,
            )
            for v, (old, new, attempt) in enumerate(steps)
        ],
    )
    html = _app(store, clock).get("/tasks/multi", headers=BEARER).text
    groups = re.findall(r'<tbody class="attempt" data-attempt="(\d+)">', html)
    assert groups == ["0", "1", "2", "3"]
    assert "Attempt 2" in html
    assert "Before the first attempt" in html


# ---------------------------------------------------------------- layout


def test_the_404_page_keeps_the_navigation(store: TaskStore) -> None:
    client = _app(store, FakeClock(START))
    missing = client.get("/no/such/page", headers=BEARER)
    assert missing.status_code == 404
    assert "<nav>" in missing.text
    assert 'href="/tasks"' in missing.text
    no_task = client.get("/tasks/nothing-here", headers=BEARER)
    assert no_task.status_code == 404
    assert "<nav>" in no_task.text


def test_failed_and_lost_pages_say_the_message_once(store: TaskStore) -> None:
    store.create_many(
        [
            _task(
                "f1",
                START,
                status=TaskStatus.FAILED,
                failure=Failure(
                    kind=FailureKind.EXCEPTION, message="boom 42", exception_type="RuntimeError"
                ),
            ),
            _task(
                "l1",
                START,
                status=TaskStatus.LOST,
                failure=Failure(kind=FailureKind.LOST, message="worker w-9 went away"),
            ),
        ]
    )
    client = _app(store, FakeClock(START + timedelta(minutes=5)))
    for task_id, message in (("f1", "boom 42"), ("l1", "worker w-9 went away")):
        html = client.get(f"/tasks/{task_id}", headers=BEARER).text
        main = html[html.index("<main") :]
        assert main.count(message) == 1, task_id


def test_a_task_that_never_ran_shows_no_checkpoint_gaps(store: TaskStore) -> None:
    counts = [0] * (len(BOUNDS) + 1)
    counts[3] = 5
    gaps = CheckpointGaps(counts=tuple(counts), max=2.0)
    ran = _task(
        "ran",
        START,
        status=TaskStatus.SUCCEEDED,
        name="job.gappy",
        started_at=START,
        checkpoint_gaps=gaps,
    )
    store.create_many([ran, _task("never", START + timedelta(seconds=1), name="job.gappy")])
    client = _app(store, FakeClock(START + timedelta(minutes=5)))
    assert "checkpoint gaps" in client.get("/tasks/ran", headers=BEARER).text
    assert "checkpoint gaps" not in client.get("/tasks/never", headers=BEARER).text


def test_the_running_table_scrolls_inside_its_card_and_times_are_relative(
    store: TaskStore,
) -> None:
    running = _task("r1", START, status=TaskStatus.RUNNING, started_at=START, owner="w-1")
    store.create_many([running])
    client = _app(store, FakeClock(START + timedelta(minutes=3)))
    overview = client.get("/", headers=BEARER).text
    assert '<div class="scroll" data-testid="running"><table>' in overview
    css = client.get("/static/style.css").text
    assert ".grid > * { min-width: 0; }" in css
    assert ".scroll { overflow-x: auto; }" in css
    tasks = client.get("/tasks", headers=BEARER).text
    stamp = START.isoformat()
    assert (
        f'<time datetime="{stamp}" title="{START.isoformat(timespec="seconds")}">3 min ago</time>'
        in tasks
    )
    assert 'data-testid="attempts">0/1<' in tasks
    assert 'data-testid="duration">3 min<' in tasks
