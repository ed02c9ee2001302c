"""``Client.enqueue``: bad input is a clear ``ConfigurationError`` and stores nothing.

On every store: the checks run before the row is written, so a refused call leaves
the store as it was; accepted metadata (a W3C ``traceparent`` included) is stored with
the queued row for the worker that claims it.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from chongming_task import Client, TaskStatus
from chongming_task.errors import ConfigurationError
from chongming_task.stores._base import TaskStore

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def sync(ctx: Any, tenant: str, limit: int = 10) -> None:
    """A task signature to check calls against."""


@pytest.fixture
def client(store: TaskStore) -> Client:
    from chongming_task import Controller

    definitions = Controller()
    definitions.register("sync", sync)
    return Client(store, tasks=definitions)


REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("unknown name", {"name": "nope"}, "nope"),
    ("missing argument", {"args": ()}, "tenant"),
    ("extra argument", {"kwargs": {"colour": "red"}}, "colour"),
    ("non-JSON argument", {"kwargs": {"limit": {1, 2}}}, "kwargs"),
    ("NaN argument", {"kwargs": {"limit": math.nan}}, "kwargs"),
    ("task id too long", {"task_id": "x" * 10_000}, "at most"),
    ("task id with a newline", {"task_id": "a\nb"}, "control characters"),
    ("bool priority", {"priority": True}, "priority"),
    ("huge priority", {"priority": 2**80}, "priority"),
    ("tags as a string", {"tags": "nightly"}, "collection"),
    ("NaN delay", {"delay": math.nan}, "delay"),
    ("infinite delay", {"delay": math.inf}, "delay"),
    ("negative delay", {"delay": -1}, "delay"),
    ("naive not_before", {"not_before": __import__("datetime").datetime(2030, 1, 1)}, "aware"),
    ("bucket key not text", {"bucket_key": 7}, "bucket_key"),
    ("metadata not a mapping", {"metadata": ["a"]}, "metadata"),
    ("metadata not JSON", {"metadata": {"when": object()}}, "metadata"),
    ("metadata takes the recipe key", {"metadata": {"recipe": 1}}, "reserved"),
]


@pytest.mark.parametrize(("case", "call", "expected"), REFUSED, ids=[c[0] for c in REFUSED])
def test_bad_enqueue_is_refused_and_stores_nothing(
    client: Client, store: TaskStore, case: str, call: dict[str, Any], expected: str
) -> None:
    call = dict(call)
    name = call.pop("name", "sync")
    args = call.pop("args", ("tenant-a",))
    kwargs = call.pop("kwargs", {})
    with pytest.raises(ConfigurationError, match=expected):
        client.enqueue(name, *args, **call, **kwargs)
    assert store.query() == [], case


def test_metadata_and_traceparent_are_stored_with_the_queued_row(
    client: Client, store: TaskStore
) -> None:
    handle = client.enqueue("sync", "tenant-a", metadata={"traceparent": TRACE, "team": "etl"})
    stored = store.get(handle.task_id)
    assert stored is not None
    assert stored.status is TaskStatus.QUEUED
    assert stored.metadata["traceparent"] == TRACE
    assert stored.metadata["team"] == "etl"
    assert [(t.from_status, t.to_status) for t in handle.transitions] == [
        (None, TaskStatus.PENDING),
        (TaskStatus.PENDING, TaskStatus.QUEUED),
    ]


def test_a_bad_call_in_a_batch_stores_none_of_it(client: Client, store: TaskStore) -> None:
    with pytest.raises(ConfigurationError, match="call 1"):
        client.enqueue_many("sync", [("tenant-a",), {"tenant": "b", "limit": math.inf}])
    assert store.query() == []
