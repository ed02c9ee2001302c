"""The contract suite against the in-memory reference store."""

from __future__ import annotations

from chongming_task.core._clock import Clock
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.testing.store_contract import StoreContract


class TestInMemoryStore(StoreContract):
    def make_store(self, clock: Clock) -> InMemoryTaskStore:
        return InMemoryTaskStore(clock=clock)
