"""The contract suite against the third-party example backend (examples/07_custom_store.py)."""

from __future__ import annotations

from _custom_example import example
from chongming_task.core._clock import Clock
from chongming_task.stores._base import TaskStore
from chongming_task.testing.store_contract import StoreContract


class TestCustomExampleStore(StoreContract):
    def make_store(self, clock: Clock) -> TaskStore:
        store: TaskStore = example.DictTaskStore(clock=clock)
        return store

    def corrupt_status(self, store: TaskStore, task_id: str) -> None:
        example.DictStoreContract.corrupt_status(self, store, task_id)
