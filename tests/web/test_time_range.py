"""The tasks page's time range (``created_after``/``created_before``) and keyset pages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient

from chongming_task._model import TaskSnapshot
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.testing import FakeClock
from chongming_task.web._views import _CURSOR_SLACK

from .conftest import BEARER
from .test_api import seed

DAY0 = datetime(2026, 1, 1, tzinfo=UTC)  # seed(): task i is created at DAY0 + i seconds


def ids(page: dict[str, Any]) -> list[str]:
    return [t["task_id"] for t in page["tasks"]]


def all_pages(client: TestClient, params: dict[str, str]) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        response = client.get("/api/tasks", params=query, headers=BEARER)
        assert response.status_code == 200, response.text
        page = response.json()
        pages.append(ids(page))
        cursor = page["next_cursor"]
        if cursor is None:
            return pages


def test_iso_range_is_half_open(client: TestClient, store: TaskStore) -> None:
    seed(store, 10)
    params = {
        "created_after": (DAY0 + timedelta(seconds=3)).isoformat(),
        "created_before": (DAY0 + timedelta(seconds=7)).isoformat(),
    }
    page = client.get("/api/tasks", params=params, headers=BEARER).json()
    assert ids(page) == ["t0006", "t0005", "t0004", "t0003"]
    assert page["filters"] == params
    # The same instants in another offset and with "Z".
    shifted = {
        "created_after": "2026-01-01T08:00:03+08:00",
        "created_before": "2026-01-01T00:00:07Z",
    }
    assert ids(client.get("/api/tasks", params=shifted, headers=BEARER).json()) == ids(page)
    # With the other filters and in the HTML page, whose form shows the instants.
    html = client.get("/tasks", params={**params, "status": "queued"}, headers=BEARER).text
    shown = [t for t in (f"t{i:04d}" for i in range(10)) if f'data-task="{t}"' in html]
    assert shown == ["t0003", "t0004", "t0005", "t0006"]  # (set order of the page)
    assert 'value="2026-01-01T00:00:03+00:00"' in html
    none = client.get("/api/tasks", params={**params, "status": "failed"}, headers=BEARER)
    assert ids(none.json()) == []


def test_ages_count_back_from_the_dashboards_clock(make_client: Any, store: TaskStore) -> None:
    seed(store, 10)
    clock = FakeClock(DAY0 + timedelta(minutes=1))  # t0009 was created 51 s before
    client = make_client(clock=clock)
    page = client.get("/api/tasks", params={"created_after": "55s"}, headers=BEARER).json()
    assert ids(page) == ["t0009", "t0008", "t0007", "t0006", "t0005"]
    # The age is resolved once: the links carry the instant, not "55s".
    assert page["filters"] == {"created_after": (DAY0 + timedelta(seconds=5)).isoformat()}
    older = client.get("/api/tasks", params={"created_before": "55s"}, headers=BEARER).json()
    assert ids(older) == ["t0004", "t0003", "t0002", "t0001", "t0000"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"created_after": "yesterday"}, "created_after 'yesterday' is not a time"),
        ({"created_before": "2026-01-01T00:00:00"}, "has no UTC offset"),
        ({"created_after": "1h", "created_before": "2h"}, "must be after created_after"),
        ({"updated_after": "-5m"}, "updated_after '-5m'"),
    ],
)
def test_bad_times_are_400_with_a_message(
    client: TestClient, params: dict[str, str], message: str
) -> None:
    response = client.get("/api/tasks", params=params, headers=BEARER)
    assert response.status_code == 400
    assert message in response.json()["error"]
    html = client.get("/tasks", params=params, headers=BEARER)
    assert html.status_code == 400
    assert "Traceback" not in html.text


def test_updated_range_through_the_api(client: TestClient, store: TaskStore) -> None:
    seed(store, 4)
    first = store.get("t0000")
    assert first is not None
    store.save(
        first.replace(updated_at=DAY0 + timedelta(hours=1), status_version=2),
        expect_version=1,
    )
    recent = {"updated_after": (DAY0 + timedelta(minutes=30)).isoformat()}
    assert ids(client.get("/api/tasks", params=recent, headers=BEARER).json()) == ["t0000"]
    html = client.get("/tasks", params=recent, headers=BEARER).text
    assert 'name="updated_after"' in html  # kept by the filter form


def test_pages_of_a_window_are_keyset_reads_and_stable(
    client: TestClient, store: TaskStore
) -> None:
    ids_made = seed(store, 130)
    reads: list[int | None] = []
    real = store.query_heads

    def counting(query: Any) -> Any:
        reads.append(query.limit)
        return real(query)

    store.query_heads = counting  # type: ignore[method-assign,assignment]
    window = {
        "created_after": (DAY0 + timedelta(seconds=10)).isoformat(),
        "limit": "20",
    }
    cursor = None
    seen: list[str] = []
    while True:
        params = {**window, **({"cursor": cursor} if cursor else {})}
        page = client.get("/api/tasks", params=params, headers=BEARER).json()
        if not seen:
            seed(store, 5, prefix="new", day=1)  # newer tasks arrive: nothing shifts
        seen += ids(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids_made[10:]))
    # Every deep page read at most one page plus the slack, whatever its depth.
    assert reads
    assert max(r or 0 for r in reads) <= 20 + 1 + _CURSOR_SLACK


def test_pages_through_equal_creation_times(client: TestClient, store: TaskStore) -> None:
    """Ties on created_at: within the slack by keyset, beyond it by position."""
    at = DAY0 + timedelta(days=3)
    tied = [
        TaskSnapshot(
            task_id=f"tie{i:04d}",
            name="job.tied",
            status=TaskStatus.QUEUED,
            status_version=1,
            created_at=at,
            updated_at=at,
        )
        for i in range(_CURSOR_SLACK + 60)
    ]
    store.create_many(tied)
    seed(store, 30, prefix="before")
    pages = all_pages(client, {"limit": "50"})
    flat = [task_id for page in pages for task_id in page]
    assert len(flat) == len(set(flat)) == len(tied) + 30
    # Newest first: the tied ones in reverse insertion order, then the older ones.
    assert flat[: len(tied)] == [s.task_id for s in reversed(tied)]
    assert flat[len(tied) :] == [f"before{i:04d}" for i in reversed(range(30))]
