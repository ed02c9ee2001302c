"""The dashboard is safe with any id and any visitor: URLs encoded from the raw id,
sessions that expire and end at logout, a login rate limit, strong tokens only."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import pytest
from starlette.testclient import TestClient

from chongming_task._model import TaskSnapshot
from chongming_task.errors import ConfigurationError
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.testing import FakeClock
from chongming_task.web import create_app
from chongming_task.web._urls import task_url

from .conftest import BEARER, TOKEN, USER, login


class AsUvicorn:
    """The app with the request path decoded once from the raw path, as uvicorn does.

    Starlette's TestClient decodes it twice (httpx's ``url.path`` is already decoded,
    then it unquotes again): ``/tasks/job%2541`` would reach the app as ``/tasks/jobA``,
    a request no browser can make through a real server."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.state = app.state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope = {**scope, "path": unquote(scope["raw_path"].decode("ascii"))}
        await self.app(scope, receive, send)


@pytest.fixture
def client(store: TaskStore) -> Iterator[TestClient]:
    with TestClient(
        AsUvicorn(create_app(store, token=TOKEN, user=USER)), base_url="http://127.0.0.1"
    ) as made:
        yield made


#: Ids a path would mangle unless each is encoded from its raw text as one segment.
#: ``job%41`` is next to a real task ``jobA``, ``a/../b`` next to ``b``, ``x/stop`` next
#: to ``x``: a decoded or unencoded URL would show (and control) the neighbour.
TRICKY = [
    "job%41",
    "a/../b",
    "../up",
    "x/stop",
    "sp ace",
    "what?now=1",
    "hash#frag",
    "plus+and&amp",
    "任务-é",
    "100%",
]
DECOYS = ["jobA", "b", "up", "x", "sp", "what", "hash", "plus"]


def _create(store: TaskStore, ids: list[str]) -> None:
    at = datetime.now(UTC)
    store.create_many(
        [
            TaskSnapshot(
                task_id=task_id,
                name="job.tricky",
                status=TaskStatus.QUEUED,
                status_version=1,
                created_at=at,
                updated_at=at,
                queued_at=at,
            )
            for task_id in ids
        ]
    )


def _attr(text: str, pattern: str) -> str:
    found = re.search(pattern, text)
    assert found, pattern
    return html.unescape(found.group(1))


def test_url_helper_encodes_the_raw_id_as_one_segment() -> None:
    assert task_url("", "job%41") == "/tasks/job%2541"
    assert task_url("/ops", "a/../b", "stop") == "/ops/tasks/a%2F..%2Fb/stop"
    assert task_url("", "what?now=1#x") == "/tasks/what%3Fnow%3D1%23x"
    assert task_url("", "任务 é") == "/tasks/%E4%BB%BB%E5%8A%A1%20%C3%A9"


@pytest.mark.parametrize("task_id", TRICKY)
def test_each_page_its_live_refresh_and_its_controls_target_the_right_task(
    store: TaskStore, client: TestClient, task_id: str
) -> None:
    _create(store, [task_id, *DECOYS])
    csrf = login(client)
    url = task_url("", task_id)
    page = client.get(url)
    assert page.status_code == 200
    assert f'<span class="mono">{html.escape(task_id)}</span>' in page.text
    # The live refresh re-reads this task, not a decoded neighbour.
    live = _attr(page.text, r'id="live" hx-get="([^"]+)"')
    assert live == f"{url}?partial=1"
    partial = client.get(live)
    assert partial.status_code == 200
    assert f"chongming-task explain {html.escape(task_id)}</code>" in partial.text
    # The task list links to it the same way.
    listed = client.get("/tasks", params={"q": task_id})
    assert f'href="{html.escape(url)}"' in listed.text
    # The control form (as the live fragment renders it) stops this task, nothing else.
    action = _attr(partial.text, r'formaction="([^"]+/stop)"')
    assert action == f"{url}/stop"
    done = client.post(action, data={"csrf": csrf, "reason": "tricky id"}, follow_redirects=False)
    assert done.status_code == 303
    assert done.headers["location"].startswith(f"{url}?")
    assert client.get(done.headers["location"]).status_code == 200
    stopped = store.get(task_id)
    assert stopped is not None
    assert stopped.status is TaskStatus.STOPPED
    for decoy in DECOYS:
        other = store.get(decoy)
        assert other is not None, decoy
        assert other.status is TaskStatus.QUEUED, decoy


def test_the_json_api_reaches_a_tricky_id(store: TaskStore, client: TestClient) -> None:
    _create(store, ["job%41", "jobA"])
    got = client.get("/api/tasks/job%2541", headers=BEARER)
    assert got.json()["task"]["task_id"] == "job%41"
    done = client.post("/api/tasks/job%2541/pause", json={"reason": "r"}, headers=BEARER)
    assert done.json()["task_id"] == "job%41"
    paused = store.get("job%41")
    assert paused is not None
    assert paused.status is TaskStatus.PAUSED
    other = store.get("jobA")
    assert other is not None
    assert other.status is TaskStatus.QUEUED


def test_login_comes_back_to_the_encoded_page(store: TaskStore, client: TestClient) -> None:
    _create(store, ["job%41", "jobA"])
    form = client.get("/tasks/job%2541")
    assert form.status_code == 401
    assert _attr(form.text, r'name="next" value="([^"]+)"') == "/tasks/job%2541"


# ---------------------------------------------------------------- sessions


def test_logout_revokes_the_session_server_side(client: TestClient) -> None:
    csrf = login(client)
    cookie = client.cookies.get("chongming_dashboard")
    assert cookie
    assert client.post("/logout", data={"csrf": csrf}, follow_redirects=False).status_code == 303
    client.cookies.clear()
    client.cookies.set("chongming_dashboard", cookie)  # a copy kept (or stolen) before
    assert client.get("/").status_code == 401
    assert client.get("/api/tasks").status_code == 401
    login(client)  # a new login works
    assert client.get("/").status_code == 200


def test_sessions_expire(store: TaskStore) -> None:
    clock = FakeClock(datetime.now(UTC))
    app = create_app(store, token=TOKEN, user=USER, clock=clock, session_ttl=600)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        response = client.post("/login", data={"token": TOKEN}, follow_redirects=False)
        assert "max-age=600" in response.headers["set-cookie"].lower()
        assert client.get("/").status_code == 200
        clock.advance(599)
        assert client.get("/").status_code == 200
        clock.advance(2)
        assert client.get("/").status_code == 401
        assert client.get("/", headers=BEARER).status_code == 200  # a bearer never expires


def test_the_default_session_lasts_twelve_hours(store: TaskStore) -> None:
    clock = FakeClock(datetime.now(UTC))
    with TestClient(create_app(store, token=TOKEN, clock=clock)) as client:
        client.post("/login", data={"token": TOKEN}, follow_redirects=False)
        clock.advance(12 * 3600 - 5)
        assert client.get("/").status_code == 200
        clock.advance(10)
        assert client.get("/").status_code == 401


def test_a_tampered_expiry_is_refused(client: TestClient) -> None:
    login(client)
    label, nonce, expires, mac = client.cookies["chongming_dashboard"].split(".")
    client.cookies.clear()
    client.cookies.set("chongming_dashboard", f"{label}.{nonce}.{int(expires) + 10**6}.{mac}")
    assert client.get("/").status_code == 401


# ---------------------------------------------------------------- login rate limit


def test_failed_logins_are_rate_limited_per_client(store: TaskStore) -> None:
    clock = FakeClock(datetime.now(UTC))
    app = create_app(store, token=TOKEN, user=USER, clock=clock)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for _ in range(5):
            assert client.post("/login", data={"token": "w" * 40}).status_code == 401
        refused = client.post("/login", data={"token": TOKEN}, follow_redirects=False)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "60"
        assert "too many failed logins" in refused.text
        api = client.post("/login", data={"token": TOKEN}, headers={"Accept": "application/json"})
        assert api.status_code == 429
        clock.advance(30)
        assert client.post("/login", data={"token": TOKEN}).headers["retry-after"] == "30"
        assert client.get("/", headers=BEARER).status_code == 200  # bearer is not a login
        clock.advance(31)
        ok = client.post("/login", data={"token": TOKEN}, follow_redirects=False)
        assert ok.status_code == 303
    other = TestClient(app, base_url="http://127.0.0.1", client=("10.0.0.9", 5000))
    with other:  # another address has its own budget
        assert other.post("/login", data={"token": "w" * 40}).status_code == 401


# ---------------------------------------------------------------- token strength


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("short", "at least 32 characters, got 5"),
        ("x" * 31, "at least 32 characters, got 31"),
        ("ab" * 20, "too easy to guess"),
        ("0123456789" * 4, "too easy to guess"),  # digits only
        ("abcdefghijklmnopqrstuvwxyzabcdef", "too easy to guess"),  # lower case only
    ],
)
def test_weak_tokens_are_refused_at_start(store: TaskStore, token: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        create_app(store, token=token)
    with pytest.raises(ConfigurationError, match=message):
        create_app(store, tokens={"ann": TOKEN, "bob": token})


def test_a_generated_token_is_strong(store: TaskStore) -> None:
    for _ in range(20):
        app = create_app(store)
        assert len(app.state.dashboard.generated_token) >= 32


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan")])
def test_a_bad_session_ttl_is_refused(store: TaskStore, ttl: Any) -> None:
    with pytest.raises(ConfigurationError, match="session_ttl"):
        create_app(store, token=TOKEN, session_ttl=ttl)
