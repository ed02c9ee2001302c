"""An id, a name or a filter no store can hold (a NUL byte, a lone surrogate) is a
``ConfigurationError`` from every store and every API call that looks it up -- never a
``StoreError`` (PostgreSQL refuses NUL in text, which would read as a broken
database) and never a quiet ``None`` on one store and an error on another."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chongming_task import Controller
from chongming_task.errors import ConfigurationError
from chongming_task.queue import Client
from chongming_task.stores._base import TaskQuery, TaskStore

NUL = "a\x00b"
SURROGATE = "a\udcffb"

LOOKUPS: dict[str, Callable[[TaskStore, Controller, Client, str], Any]] = {
    "store.get": lambda s, c, q, v: s.get(v),
    "store.history": lambda s, c, q, v: s.history(v),
    "store.get_schedule": lambda s, c, q, v: s.get_schedule(v),
    "store.query(name_prefix)": lambda s, c, q, v: s.query(TaskQuery(name_prefix=v)),
    "store.query(task_ids)": lambda s, c, q, v: s.query(TaskQuery(task_ids=frozenset({v}))),
    "store.query(metadata_eq)": lambda s, c, q, v: s.query(TaskQuery(metadata_eq={"k": v})),
    "Controller.get": lambda s, c, q, v: c.get(v),
    "Controller.history": lambda s, c, q, v: c.history(v),
    "Controller.list_tasks(name_prefix)": lambda s, c, q, v: c.list_tasks(name_prefix=v),
    "Controller.list_tasks(tag)": lambda s, c, q, v: c.list_tasks(tag=v),
    "Controller.list_tasks(owner)": lambda s, c, q, v: c.list_tasks(owner=v),
    "Client.get": lambda s, c, q, v: q.get(v),
    "Client.list_tasks(tag)": lambda s, c, q, v: q.list_tasks(tag=v),
}


@pytest.mark.parametrize("value", [NUL, SURROGATE], ids=["nul", "surrogate"])
def test_a_lookup_no_store_can_hold_is_a_configuration_error(store: TaskStore, value: str) -> None:
    controller = Controller(store)
    client = Client(store)
    try:
        refused = []
        for name, call in LOOKUPS.items():
            with pytest.raises(ConfigurationError) as caught:
                call(store, controller, client, value)
            refused.append(name)
            assert ("NUL" in str(caught.value)) == (value == NUL), (name, caught.value)
        assert refused == list(LOOKUPS)
        # The store still answers.
        assert store.get("a") is None
    finally:
        controller.close()
