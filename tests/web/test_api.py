"""The dashboard through Starlette's TestClient: auth, CSRF, read-only, pages, API, controls."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from chongming_task._model import TaskSnapshot
from chongming_task.schedule import CronTrigger, Schedule
from chongming_task.schedule._admin import ScheduleAdmin
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.web import create_app
from chongming_task.web._app import CONTENT_SECURITY_POLICY

from .conftest import ANN, BEARER, BOB, TOKEN, USER, Holder, login

PAGES = ["/", "/tasks", "/tasks/x", "/schedules", "/schedules/x", "/workers", "/buckets", "/events"]
PAGES.append("/charts")
API = [
    "/api/overview",
    "/api/tasks",
    "/api/tasks/x",
    "/api/schedules",
    "/api/workers",
    "/api/buckets",
    "/api/limits",
    "/api/charts",
]
POSTS = [
    "/tasks/x/stop",
    "/tasks/x/pause",
    "/tasks/x/resume",
    "/tasks/bulk",
    "/schedules/x/pause",
    "/schedules/x/resume",
    "/schedules/x/run",
    "/schedules/x/override",
    "/api/tasks/x/stop",
]


def seed(store: TaskStore, count: int, **fields: Any) -> list[str]:
    """``count`` queued tasks created one second apart (the last is the newest)."""
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=fields.pop("day", 0))
    ids = []
    snapshots = []
    prefix = fields.pop("prefix", "t")
    for i in range(count):
        at = start + timedelta(seconds=i)
        task_id = f"{prefix}{i:04d}"
        ids.append(task_id)
        snapshots.append(
            TaskSnapshot(
                task_id=task_id,
                name=fields.get("name", "job.import"),
                status=fields.get("status", TaskStatus.QUEUED),
                status_version=1,
                created_at=at,
                updated_at=at,
                queued_at=at,
                tags=frozenset(fields.get("tags", ())),
                bucket=fields.get("bucket"),
                owner=fields.get("owner"),
            )
        )
    store.create_many(snapshots)
    return ids


# ---------------------------------------------------------------- authentication


@pytest.mark.parametrize("path", PAGES + API)
def test_every_read_needs_a_token(client: TestClient, path: str) -> None:
    assert client.get(path).status_code == 401
    wrong = {"Authorization": "Bearer " + "w" * 30}
    assert client.get(path, headers=wrong).status_code == 401


@pytest.mark.parametrize("path", POSTS)
def test_every_control_needs_a_token(client: TestClient, path: str) -> None:
    assert client.post(path, data={"reason": "r", "action": "stop", "ids": "x"}).status_code == 401


def test_an_html_request_without_token_gets_the_login_form_with_401(client: TestClient) -> None:
    response = client.get("/tasks?status=running")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert 'name="token"' in response.text
    assert 'value="/tasks?status=running"' in response.text


def test_api_401_is_json(client: TestClient) -> None:
    response = client.get("/api/tasks")
    assert response.status_code == 401
    assert "Bearer" in response.json()["error"]


def test_login_sets_an_httponly_samesite_strict_cookie(client: TestClient) -> None:
    response = client.post(
        "/login", data={"token": TOKEN, "next": "/tasks"}, follow_redirects=False
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/tasks"
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie
    assert "samesite=strict" in cookie
    assert client.get("/").status_code == 200


def test_login_with_a_wrong_token_is_refused(client: TestClient) -> None:
    response = client.post("/login", data={"token": "nope" * 5})
    assert response.status_code == 401
    assert "not valid" in response.text
    assert client.get("/").status_code == 401


def test_login_never_redirects_off_site(client: TestClient) -> None:
    for target in ("//evil.example/", "https://evil.example/", "\\\\evil", "/\t/evil.example/"):
        response = client.post(
            "/login", data={"token": TOKEN, "next": target}, follow_redirects=False
        )
        assert response.headers["location"] == "/"


def test_a_forged_cookie_is_refused(client: TestClient) -> None:
    client.cookies.set("chongming_dashboard", "YWxpY2U.nonce.deadbeef")
    assert client.get("/").status_code == 401


def test_logout_needs_csrf_and_ends_the_session(client: TestClient) -> None:
    csrf = login(client)
    assert client.post("/logout", data={}).status_code == 403
    assert client.post("/logout", data={"csrf": csrf}, follow_redirects=False).status_code == 303
    client.cookies.clear()
    assert client.get("/").status_code == 401


def test_several_users_each_with_a_label(make_client: Any) -> None:
    client = make_client(token=None, user="x", tokens={"ann": ANN, "bob": BOB})
    page = client.get("/", headers={"Authorization": "Bearer " + BOB})
    assert page.status_code == 200
    assert '<span class="user">bob</span>' in page.text


def test_no_token_given_means_a_generated_one(store: TaskStore) -> None:
    app = create_app(store)
    token = app.state.dashboard.generated_token
    assert token
    assert len(token) >= 32
    with TestClient(app) as client:
        assert client.get("/").status_code == 401
        assert client.get("/", headers={"Authorization": f"Bearer {token}"}).status_code == 200


def test_short_tokens_are_refused(store: TaskStore) -> None:
    from chongming_task.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="at least 32"):
        create_app(store, token="short")


# ---------------------------------------------------------------- headers, escaping


def test_every_response_carries_a_strict_csp(client: TestClient) -> None:
    for response in (
        client.get("/"),
        client.get("/", headers=BEARER),
        client.get("/static/app.js"),
    ):
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert response.headers["x-frame-options"] == "DENY"
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert "unsafe-eval" not in CONTENT_SECURITY_POLICY


def test_static_files_are_served_without_auth(client: TestClient) -> None:
    assert client.get("/static/htmx.min.js").status_code == 200
    assert client.get("/static/style.css").status_code == 200


def test_no_inline_script_in_any_page(client: TestClient, store: TaskStore) -> None:
    seed(store, 3)
    for path in ["/", "/tasks", "/tasks/t0001", "/schedules", "/workers", "/buckets", "/login"]:
        text = client.get(path, headers=BEARER).text
        for chunk in text.split("<script")[1:]:
            assert chunk.lstrip().startswith("src="), (path, chunk[:80])
        assert " style=" not in text
        assert " on" + "click=" not in text


def test_task_text_is_escaped_and_secrets_redacted(client: TestClient, holder: Holder) -> None:
    run = holder.controller.submit(
        "fail",
        message="<script>alert(1)</script> password=hunter2",
        metadata={"note": "<img src=x onerror=alert(1)>", "api_key": "sk-123456"},
    )
    holder.wait_for(run.task_id, TaskStatus.FAILED)
    page = client.get(f"/tasks/{run.task_id}", headers=BEARER)
    assert page.status_code == 200
    assert "<script>alert" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "<img src=x" not in page.text
    assert "hunter2" not in page.text
    assert "sk-123456" not in page.text
    api = client.get(f"/api/tasks/{run.task_id}", headers=BEARER).json()
    assert "hunter2" not in str(api)
    assert api["task"]["metadata"]["api_key"] == "[REDACTED]"
    assert api["task"]["failure"]["traceback"]


# ---------------------------------------------------------------- pages and API


def test_pages_render(client: TestClient, holder: Holder, store: TaskStore) -> None:
    run = holder.controller.submit("spin", bucket_key="k")
    holder.wait_for(run.task_id, TaskStatus.RUNNING)
    ScheduleAdmin(store).register(
        Schedule(name="nightly", task="quick", trigger=CronTrigger("0 3 * * *", "UTC"))
    )
    for path in [
        "/",
        "/tasks",
        f"/tasks/{run.task_id}",
        "/schedules",
        "/schedules/nightly",
        "/workers",
        "/buckets",
    ]:
        response = client.get(path, headers=BEARER)
        assert response.status_code == 200, (path, response.text[:500])
        assert response.headers["cache-control"] == "no-store"
    overview = client.get("/api/overview", headers=BEARER).json()
    assert overview["counts"]["running"] == 1
    assert [t["task_id"] for t in overview["running"]] == [run.task_id]
    assert overview["schedules"]["schedules"] == 1
    workers = client.get("/api/workers", headers=BEARER).json()
    assert workers["source"] == "leases"
    assert [w["name"] for w in workers["workers"]] == ["holder-1"]
    assert workers["workers"][0]["up"] is True
    buckets = client.get("/api/buckets", headers=BEARER).json()["buckets"]
    assert [(b["state"], b["holders"]) for b in buckets] == [("owned", ["holder-1"])]
    assert buckets[0]["tasks"] == store.count_by_bucket()[buckets[0]["bucket"]]


def test_unknown_task_and_schedule_are_404(client: TestClient) -> None:
    assert client.get("/tasks/nope", headers=BEARER).status_code == 404
    assert client.get("/api/tasks/nope", headers=BEARER).json() == {
        "error": "no task 'nope' in the store"
    }
    assert client.get("/schedules/nope", headers=BEARER).status_code == 404
    assert client.get("/nowhere", headers=BEARER).status_code == 404


def test_overview_counts_queue_and_stuck(client: TestClient, store: TaskStore) -> None:
    seed(store, 4)
    expired = datetime(2026, 1, 1, tzinfo=UTC)
    store.create(
        TaskSnapshot(
            task_id="orphan",
            name="job.import",
            status=TaskStatus.RUNNING,
            status_version=3,
            created_at=expired,
            updated_at=expired,
            started_at=expired,
            lease_owner="gone-host:1",
            lease_until=expired,
        )
    )
    data = client.get("/api/overview", headers=BEARER).json()
    assert data["queue_depth"] == 4
    assert data["oldest_queued"] == "t0000"
    assert data["oldest_queued_age"] > 0
    stuck = {s["task"]["task_id"]: s["why"] for s in data["stuck"]}
    assert "lease of gone-host:1 expired" in stuck["orphan"]
    assert [w["up"] for w in data["workers"] if w["name"] == "gone-host:1"] == [False]
    buckets_page = client.get("/buckets", headers=BEARER)
    assert buckets_page.status_code == 200


def test_pagination_is_newest_first_and_stable(client: TestClient, store: TaskStore) -> None:
    ids = seed(store, 120)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": "50", **({"cursor": cursor} if cursor else {})}
        page = client.get("/api/tasks", params=params, headers=BEARER).json()
        seen += [t["task_id"] for t in page["tasks"]]
        pages += 1
        if pages == 1:
            seed(store, 5, prefix="new", day=1)  # newer, arrives between pages: must not shift them
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == list(reversed(ids))


def test_pagination_links_in_html(client: TestClient, store: TaskStore) -> None:
    seed(store, 60)
    first = client.get("/tasks", headers=BEARER)
    assert 'data-testid="next-page"' in first.text
    assert first.text.count('data-task="') == 50
    start = first.text.index('href="?') + len('href="')
    href = first.text[start : first.text.index('"', start)].replace("&amp;", "&")
    second = client.get("/tasks" + href, headers=BEARER)
    assert second.text.count('data-task="') == 10
    assert 'data-task="t0009"' in second.text
    assert "next-page" not in second.text


def test_bad_cursor_and_limit_are_400(client: TestClient) -> None:
    assert client.get("/api/tasks?cursor=garbage", headers=BEARER).status_code == 400
    assert client.get("/api/tasks?limit=0", headers=BEARER).status_code == 400
    assert client.get("/api/tasks?status=bogus", headers=BEARER).status_code == 400
    assert client.get("/tasks?bucket=x", headers=BEARER).status_code == 400


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"status": "failed"}, {"f0000"}),
        ({"status": "failed,queued"}, {"f0000", "a0000", "a0001", "b0000"}),
        ({"name": "mail."}, {"b0000"}),
        ({"tag": "gpu"}, {"a0000", "a0001"}),
        ({"bucket": "7"}, {"b0000"}),
        ({"owner": "node-a"}, {"a0000", "a0001"}),
        ({"q": "b0000"}, {"b0000"}),
        ({"q": "b0000", "status": "failed"}, set()),
        ({"q": "missing"}, set()),
    ],
)
def test_filters(
    client: TestClient, store: TaskStore, params: dict[str, str], expected: set[str]
) -> None:
    seed(store, 2, prefix="a", tags={"gpu"}, owner="node-a")
    seed(store, 1, prefix="b", name="mail.send", bucket=7)
    seed(store, 1, prefix="f", status=TaskStatus.FAILED)
    page = client.get("/api/tasks", params=params, headers=BEARER).json()
    assert {t["task_id"] for t in page["tasks"]} == expected
    html = client.get("/tasks", params=params, headers=BEARER).text
    assert {
        t for t in ("a0000", "a0001", "b0000", "f0000") if f'data-task="{t}"' in html
    } == expected


# ---------------------------------------------------------------- controls


def commands_for(store: TaskStore, owner: str) -> list[Any]:
    """Commands waiting for ``owner`` (claimed here only to look at them, then released)."""
    claimed = store.claim_commands(owner, lease=5, limit=100)
    for command in claimed:
        store.release_command(command.command_id, command.claim_token or "")
    return claimed


def test_cookie_post_without_csrf_is_403(client: TestClient, store: TaskStore) -> None:
    seed(store, 1)
    csrf = login(client)
    assert client.post("/tasks/t0000/stop", data={"reason": "r"}).status_code == 403
    assert (
        client.post("/tasks/t0000/stop", data={"reason": "r", "csrf": "0" * 64}).status_code == 403
    )
    assert (
        client.post(
            "/tasks/bulk", data={"reason": "r", "action": "stop", "ids": "t0000"}
        ).status_code
        == 403
    )
    assert client.post("/schedules/x/pause", data={"reason": "r"}).status_code == 403
    assert store.get("t0000").status is TaskStatus.QUEUED  # type: ignore[union-attr]
    response = client.post(
        "/tasks/t0000/stop", data={"reason": "r", "csrf": csrf}, follow_redirects=False
    )
    assert response.status_code == 303


def test_csrf_header_works_too(client: TestClient, store: TaskStore) -> None:
    seed(store, 1)
    csrf = login(client)
    response = client.post(
        "/api/tasks/t0000/pause", json={"reason": "x"}, headers={"X-CSRF-Token": csrf}
    )
    assert response.status_code == 200  # nobody held it: paused at once


def test_bearer_needs_no_csrf(client: TestClient, store: TaskStore) -> None:
    seed(store, 1, owner="node-a")
    response = client.post("/api/tasks/t0000/stop", json={"reason": "cleanup"}, headers=BEARER)
    assert response.status_code == 202
    body = response.json()
    assert body["accepted"] is True
    assert body["confirmed"] is False
    [command] = commands_for(store, "node-a")
    assert (command.action, command.issued_by, command.payload["reason"]) == (
        "stop",
        USER,
        "cleanup",
    )


def test_a_reason_is_required(client: TestClient, store: TaskStore) -> None:
    seed(store, 1)
    assert client.post("/api/tasks/t0000/stop", json={}, headers=BEARER).status_code == 400
    assert (
        client.post("/api/tasks/t0000/stop", json={"reason": "  "}, headers=BEARER).status_code
        == 400
    )


def test_illegal_control_is_409_and_writes_nothing(client: TestClient, store: TaskStore) -> None:
    seed(store, 1, owner="node-a")
    response = client.post("/api/tasks/t0000/resume", json={"reason": "x"}, headers=BEARER)
    assert response.status_code == 409
    assert "cannot resume a task that is queued" in response.json()["message"]
    assert commands_for(store, "node-a") == []
    assert (
        client.post("/api/tasks/none/stop", json={"reason": "x"}, headers=BEARER).status_code == 404
    )
    assert (
        client.post("/api/tasks/t0000/explode", json={"reason": "x"}, headers=BEARER).status_code
        == 404
    )


def test_read_only_hides_and_refuses_every_control(make_client: Any, store: TaskStore) -> None:
    seed(store, 1, owner="node-a")
    ScheduleAdmin(store).register(
        Schedule(name="nightly", task="quick", trigger=CronTrigger("0 3 * * *", "UTC"))
    )
    client = make_client(read_only=True)
    for path in ["/tasks", "/tasks/t0000", "/schedules/nightly"]:
        text = client.get(path, headers=BEARER).text
        assert 'name="reason"' not in text, path
        assert "read-only" in text
    for template in POSTS:
        path = template.replace("/x", "/t0000" if "tasks" in template else "/nightly")
        response = client.post(
            path, json={"reason": "r", "action": "stop", "ids": ["t0000"]}, headers=BEARER
        )
        assert response.status_code == 403, path
    csrf = login(client)
    assert client.post("/tasks/t0000/stop", data={"reason": "r", "csrf": csrf}).status_code == 403
    assert commands_for(store, "node-a") == []
    assert ScheduleAdmin(store).get("nightly").status == "active"


def test_controls_reach_the_running_task(
    client: TestClient, holder: Holder, store: TaskStore
) -> None:
    run = holder.controller.submit("spin")
    holder.wait_for(run.task_id, TaskStatus.RUNNING)
    page = client.get(f"/tasks/{run.task_id}", headers=BEARER).text
    assert "/pause" in page
    assert "/stop" in page
    assert "/resume" not in page

    paused = client.post(
        f"/api/tasks/{run.task_id}/pause", json={"reason": "maintenance"}, headers=BEARER
    )
    assert paused.status_code == 202
    assert "not confirmed across processes" in paused.json()["message"]
    holder.wait_for(run.task_id, TaskStatus.PAUSED)
    page = client.get(f"/tasks/{run.task_id}", headers=BEARER).text
    assert "/resume" in page

    assert (
        client.post(
            f"/api/tasks/{run.task_id}/resume", json={"reason": "done"}, headers=BEARER
        ).status_code
        == 202
    )
    holder.wait_for(run.task_id, TaskStatus.RUNNING)

    stopped = client.post(
        f"/api/tasks/{run.task_id}/stop", json={"reason": "operator <b>said</b> so"}, headers=BEARER
    )
    assert stopped.status_code == 202
    holder.wait_for(run.task_id, TaskStatus.STOPPED)

    history = store.history(run.task_id)
    by_target = {t.to_status: t for t in history}
    assert by_target[TaskStatus.PAUSING].actor == USER
    assert by_target[TaskStatus.RUNNING].actor  # resumed
    assert by_target[TaskStatus.STOPPING].actor == USER
    assert by_target[TaskStatus.STOPPING].reason == "operator <b>said</b> so"
    detail = client.get(f"/api/tasks/{run.task_id}", headers=BEARER).json()
    assert [h["version"] for h in detail["history"]] == [t.version for t in history]
    assert [h["to"] for h in detail["history"]] == [t.to_status.value for t in history]
    html = client.get(f"/tasks/{run.task_id}", headers=BEARER).text
    assert "operator &lt;b&gt;said&lt;/b&gt; so" in html
    assert 'name="reason"' not in html  # terminal: no control is legal


def test_html_control_redirects_with_an_honest_message(client: TestClient, holder: Holder) -> None:
    run = holder.controller.submit("spin")
    holder.wait_for(run.task_id, TaskStatus.RUNNING)
    csrf = login(client)
    response = client.post(
        f"/tasks/{run.task_id}/pause", data={"reason": "look", "csrf": csrf}, follow_redirects=False
    )
    assert response.status_code == 303
    page = client.get(response.headers["location"])
    assert "pause requested — not confirmed across processes" in page.text
    holder.wait_for(run.task_id, TaskStatus.PAUSED)


def test_bulk_control(client: TestClient, holder: Holder, store: TaskStore) -> None:
    runs = [holder.controller.submit("spin") for _ in range(2)]
    for run in runs:
        holder.wait_for(run.task_id, TaskStatus.RUNNING)
    seed(store, 1, status=TaskStatus.SUCCEEDED, prefix="done")
    csrf = login(client)
    response = client.post(
        "/tasks/bulk",
        data={
            "csrf": csrf,
            "action": "stop",
            "reason": "bulk stop",
            "ids": [*(r.task_id for r in runs), "done0000"],
        },
        follow_redirects=False,
    )
    assert response.status_code == 303
    assert "requested=2" in response.headers["location"]
    assert "refused=1" in response.headers["location"]
    for run in runs:
        holder.wait_for(run.task_id, TaskStatus.STOPPED)
        stop = [t for t in store.history(run.task_id) if t.to_status is TaskStatus.STOPPING]
        assert (stop[0].actor, stop[0].reason) == (USER, "bulk stop")
    page = client.get(response.headers["location"])
    assert "stop requested for 2 task(s); 1 refused" in page.text


def test_schedule_controls(client: TestClient, store: TaskStore) -> None:
    admin = ScheduleAdmin(store)
    admin.register(Schedule(name="nightly", task="quick", trigger=CronTrigger("0 3 * * *", "UTC")))
    response = client.post(
        "/api/schedules/nightly/pause", json={"reason": "freeze"}, headers=BEARER
    )
    assert response.status_code == 202
    control = admin.get("nightly")
    assert (control.status, control.updated_by, control.status_reason) == ("paused", USER, "freeze")
    assert (
        client.post(
            "/api/schedules/nightly/resume", json={"reason": "thaw"}, headers=BEARER
        ).json()["status"]
        == "active"
    )
    run = client.post("/api/schedules/nightly/run", json={"reason": "now"}, headers=BEARER).json()
    command = store.get_command(run["command_id"])
    assert command is not None
    assert (command.kind, command.action, command.issued_by, command.payload["reason"]) == (
        "schedule",
        "run",
        USER,
        "now",
    )
    assert (
        client.post("/api/schedules/nope/pause", json={"reason": "x"}, headers=BEARER).status_code
        == 404
    )
    detail = client.get("/api/schedules/nightly", headers=BEARER).json()
    assert detail["schedule"]["pattern"] == "0 3 * * *"
    assert detail["statistics"]["runs"] == 0


# ---------------------------------------------------------------- live, mounting


def test_event_stream(client: TestClient) -> None:
    with client.stream("GET", "/events?max_events=1", headers=BEARER) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        text = "".join(response.iter_text())
    assert "event: hello" in text
    assert "event: tick" in text or "event: change" in text


def test_broadcaster_reports_a_change_once(store: TaskStore) -> None:
    import asyncio

    from chongming_task.web._live import Broadcaster
    from chongming_task.web._views import Dashboard

    data = Dashboard(store, clock=store.clock)
    live = Broadcaster(data.fingerprint, interval=60)

    async def scenario() -> list[bool]:
        first = await live.poll_once()
        same = await live.poll_once()
        seed(store, 1)
        changed = await live.poll_once()
        return [first, same, changed]

    assert asyncio.run(scenario()) == [False, False, True]
    assert live.version == 1


def test_mounted_under_a_prefix(store: TaskStore) -> None:
    seed(store, 1)
    outer = Starlette(routes=[Mount("/ops/tasks-ui", app=create_app(store, token=TOKEN))])
    with TestClient(outer) as client:
        page = client.get("/ops/tasks-ui/tasks", headers=BEARER)
        assert page.status_code == 200
        assert 'href="/ops/tasks-ui/tasks/t0000"' in page.text
        assert 'href="/ops/tasks-ui/static/style.css"' in page.text
        assert client.get("/ops/tasks-ui/static/app.js").status_code == 200
        response = client.post(
            "/ops/tasks-ui/login",
            data={"token": TOKEN, "next": "/ops/tasks-ui/tasks"},
            follow_redirects=False,
        )
        assert "path=/ops/tasks-ui/" in response.headers["set-cookie"].lower()


def test_fingerprint_counts_catch_what_the_heads_miss(store: TaskStore) -> None:
    from chongming_task.web._views import FULL_EVERY, Dashboard

    seed(store, 2, day=5)
    data = Dashboard(store, clock=store.clock)
    first = data.fingerprint()
    seed(store, 1, prefix="old")  # older than every head: only the counts can tell
    later = [data.fingerprint() for _ in range(FULL_EVERY)]
    assert later[0] == first
    assert later[-1] != first


def test_the_task_page_says_why_a_task_waits(client: TestClient, store: TaskStore) -> None:
    """The explain reasons, from the store's view, on the page and in the JSON API."""
    from chongming_task import Client

    handle = Client(store).enqueue("quick", bucket_key="nobody-owns-this")
    assert handle.pause() is True
    page = client.get(f"/tasks/{handle.task_id}", headers=BEARER)
    assert page.status_code == 200
    assert 'id="why"' in page.text
    assert 'data-kind="paused"' in page.text
    api = client.get(f"/api/tasks/{handle.task_id}", headers=BEARER).json()
    assert api["explain"]["source"] == "store"
    kinds = [reason["kind"] for reason in api["explain"]["reasons"]]
    assert kinds[0] == "paused"
    assert store.get(handle.task_id).status is TaskStatus.PAUSED  # type: ignore[union-attr]


def test_the_workers_page_and_api_show_the_fleet_limits(
    client: TestClient, store: TaskStore
) -> None:
    from datetime import timedelta as _td

    from chongming_task.queue import Client as QueueClient
    from chongming_task.stores import QueueStore

    assert client.get("/api/limits", headers=BEARER).json() == {"limits": []}
    assert "No limits declared." in client.get("/workers", headers=BEARER).text
    queue = QueueClient(store)
    queue.set_limit("tenant:*", concurrency=1, rate="10/m")
    held = queue.enqueue("job", concurrency_key="tenant:7")
    assert isinstance(store, QueueStore)
    until = store.clock.now() + _td(seconds=30)
    assert store.claim_queued("w1", buckets=None, limit=5, lease_until=until)
    (limit,) = client.get("/api/limits", headers=BEARER).json()["limits"]
    assert (limit["key"], limit["concurrency"], limit["rate"]) == ("tenant:*", 1, "10/m")
    (use,) = limit["in_use"]
    assert use["key"] == "tenant:7"
    assert use["holders"] == [{"task_id": held.task_id, "owner": "w1"}]
    assert use["starts"] == 1
    page = client.get("/workers", headers=BEARER).text
    assert "tenant:*" in page
    assert held.task_id in page
    assert "1/1 held" in page
