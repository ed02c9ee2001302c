"""The dashboard's edge requests: every bad input is a 400 (or a 404 for an id that is
merely unknown), never a 500 or a 503, on every store.

Bad numbers (superscript digits, which ``str.isdigit()`` accepts and ``int()`` does
not, 5,000-digit numbers, signs, fractions), NUL bytes and lone surrogates in every
filter, id and field, JSON nested past the parser's depth, oversized bodies and odd ids
(``%``, ``/``, ``..``). A 503 says the store is down: monitoring pages someone for it,
so bad input must never produce one, nor a logged traceback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from chongming_task._model import TaskSnapshot
from chongming_task.schedule import CronTrigger, Schedule
from chongming_task.schedule._admin import ScheduleAdmin
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.web import create_app

from .conftest import record

TOKEN = "edge-token-0123456789abcdefGHIJKLMN"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
TASK = "t1"
SCHEDULE = "nightly"

SUPERSCRIPT = "\u00b2"  # '²': str.isdigit() is True, int() refuses it
HUGE = "9" * 5000
NUMBERS = [SUPERSCRIPT, "1" + SUPERSCRIPT, HUGE, "-1", "1.5", "0x10", "1e3", "nan", "1\x00"]
NUL = "a\x00b"
SURROGATE = "a\udcffb"


@dataclass(frozen=True)
class Edge:
    method: str
    path: str
    expect: frozenset[int]
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    raw: bytes | None = None


def _get(path: str, expect: int | set[int] = 400, **params: str) -> Edge:
    codes = {expect} if isinstance(expect, int) else expect
    return Edge("GET", path, frozenset(codes), params)


def _post(path: str, body: Any = None, expect: int = 400, raw: bytes | None = None) -> Edge:
    return Edge("POST", path, frozenset({expect}), body=body, raw=raw)


def _nested(depth: int) -> bytes:
    return b'{"reason": ' + b"[" * depth + b"]" * depth + b"}"


def edges() -> list[Edge]:
    """The audit's edge requests (110 of them)."""
    out: list[Edge] = []
    # Numbers: every integer parameter of the dashboard.
    for value in NUMBERS:
        out.append(_get("/api/events", max_events=value))
        out.append(_get("/api/tasks", limit=value))
        out.append(_get("/api/tasks", bucket=value))
        out.append(_get("/tasks", done="stop", requested=value, refused="0"))
        out.append(_get("/tasks", done="stop", requested="1", refused=value))
        out.append(
            _post(
                f"/api/schedules/{SCHEDULE}/override",
                {"pattern": "0 4 * * *", "definition_revision": value},
            )
        )
    for revision in (-1, 1.5, True, [1], 2**70, None):
        body = {"pattern": "0 4 * * *", "definition_revision": revision}
        out.append(_post(f"/api/schedules/{SCHEDULE}/override", body))
    # NUL bytes: every filter, every id.
    for key in ("name", "tag", "owner", "q", "status", "created_after", "cursor", "limit"):
        out.append(Edge("GET", "/api/tasks", frozenset({400}), {key: NUL}))
        out.append(Edge("GET", "/tasks", frozenset({400}), {key: NUL}))
    for path in ("/api/tasks/a%00b", "/tasks/a%00b", "/api/schedules/a%00b", "/schedules/a%00b"):
        out.append(_get(path))
    out.append(_post("/api/tasks/a%00b/stop", {"reason": "r"}))
    out.append(_post("/api/schedules/a%00b/pause", {"reason": "r"}))
    out.append(_post("/api/tasks/bulk", {"action": "stop", "reason": "r", "ids": [NUL]}))
    out.append(_post(f"/api/tasks/{TASK}/stop", {"reason": NUL}))
    out.append(
        _post(
            f"/api/schedules/{SCHEDULE}/override",
            {"pattern": "0 4 * * *\x00", "definition_revision": 1},
        )
    )
    out.append(
        _post(
            f"/api/schedules/{SCHEDULE}/override",
            {"pattern": "0 4 * * *", "timezone": "UTC\x00", "definition_revision": 1},
        )
    )
    # Lone surrogates (JSON can spell them: "\udcff").
    out.append(_post("/api/tasks/bulk", {"action": "stop", "reason": "r", "ids": [SURROGATE]}))
    out.append(_post("/api/tasks/bulk", {"action": "stop", "reason": SURROGATE, "ids": [TASK]}))
    out.append(_post(f"/api/tasks/{TASK}/stop", {"reason": SURROGATE}))
    out.append(_post(f"/api/schedules/{SCHEDULE}/pause", {"reason": SURROGATE}))
    out.append(
        _post(
            f"/api/schedules/{SCHEDULE}/override",
            {"pattern": SURROGATE, "definition_revision": 1},
        )
    )
    out.append(
        _post(
            f"/api/schedules/{SCHEDULE}/override",
            {"pattern": "0 4 * * *", "timezone": SURROGATE, "definition_revision": 1},
        )
    )
    # Bodies: nested past the parser's depth, not JSON, not an object, too big.
    for path in (
        "/api/tasks/bulk",
        f"/api/tasks/{TASK}/stop",
        f"/api/schedules/{SCHEDULE}/run",
        f"/api/schedules/{SCHEDULE}/override",
    ):
        out.append(_post(path, raw=_nested(1_001)))
        out.append(_post(path, raw=_nested(100_000)))
        out.append(_post(path, raw=b"\xff\xfe{not json"))
        out.append(_post(path, raw=b"[1, 2]"))
    out.append(_post(f"/api/tasks/{TASK}/stop", {"reason": "r" * 2_000_000}))
    out.append(_post("/api/tasks/bulk", {"action": "stop", "reason": "r", "ids": [TASK] * 100_000}))
    out.append(_post("/api/tasks/bulk", {"action": "stop", "reason": "r", "ids": [[TASK]]}))
    out.append(_post("/api/tasks/bulk", {"action": "stop", "reason": "r", "ids": TASK}))
    out.append(_post("/api/tasks/bulk", {"action": "stop", "reason": "r", "ids": [1]}))
    # Odd ids: unknown (404), never an error of the dashboard.
    for task_id in ("%25", "a%2Fb", "%2e%2e", "..%2Fx", "%2F", "a%20b", "%E2%80%AE", "x" * 300):
        out.append(_get(f"/api/tasks/{task_id}", 404))
    out.append(_post("/api/tasks/%25/stop", {"reason": "r"}, expect=404))
    out.append(_post("/api/schedules/%2e%2e/pause", {"reason": "r"}, expect=404))
    out.append(_get("/api/schedules/%25", 404))
    return out


EDGES = edges()


@pytest.fixture
def client(store: TaskStore) -> Iterator[TestClient]:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    store.create(
        TaskSnapshot(
            task_id=TASK,
            name="job",
            status=TaskStatus.QUEUED,
            status_version=1,
            created_at=at,
            updated_at=at,
            queued_at=at,
        )
    )
    ScheduleAdmin(store, actor="deploy").register(
        Schedule(name=SCHEDULE, task="job", trigger=CronTrigger("0 3 * * *", "UTC"))
    )
    with TestClient(
        create_app(store, token=TOKEN),
        base_url="http://127.0.0.1",
        raise_server_exceptions=False,
    ) as made:
        yield made


def test_no_bad_request_is_answered_500_or_503(
    client: TestClient, store: TaskStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    task, schedule = store.get(TASK), store.get_schedule(SCHEDULE)
    wrong: list[str] = []
    server_errors = 0
    for edge in EDGES:
        if edge.method == "GET":
            response = client.get(edge.path, params=edge.params, headers=BEARER)
        else:
            raw = edge.raw if edge.raw is not None else json.dumps(edge.body).encode()
            headers = {**BEARER, "content-type": "application/json"}
            response = client.post(edge.path, content=raw, headers=headers)
        server_errors += response.status_code >= 500
        if response.status_code not in edge.expect:
            shown = {k: v[:40] for k, v in edge.params.items()}
            wrong.append(f"{edge.method} {edge.path[:60]} {shown} -> {response.status_code}")
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("chongming_task")]
    record(dashboard_edge_requests=len(EDGES), dashboard_edge_5xx=server_errors)
    assert not wrong, "\n".join(wrong)
    assert not logged
    # Nothing was written: the task and the schedule are as they were.
    assert (store.get(TASK), store.get_schedule(SCHEDULE)) == (task, schedule)
    assert store.history(TASK) == []
