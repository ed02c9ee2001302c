"""The contract suite against the third-party example backend (examples/07_custom_store.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from chongming_task.core._clock import Clock
from chongming_task.stores._base import TaskStore
from chongming_task.testing.store_contract import StoreContract

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "07_custom_store.py"


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("custom_store_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = _load_example()


class TestCustomExampleStore(StoreContract):
    def make_store(self, clock: Clock) -> TaskStore:
        store: TaskStore = example.DictTaskStore(clock=clock)
        return store

    def corrupt_status(self, store: TaskStore, task_id: str) -> None:
        example.DictStoreContract.corrupt_status(self, store, task_id)
