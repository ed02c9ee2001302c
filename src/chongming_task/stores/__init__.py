"""Persistence: the :class:`~chongming_task.stores.base.TaskStore` contract and its backends.

The package itself imports nothing heavy: ``stores.base`` holds the contract,
``stores.memory`` the in-process reference, ``stores.sqlite`` the default file backend
and ``stores.postgres`` the shared-server backend (``pip install "chongming-task[postgres]"``).
See ``docs/store-guide.md`` for the semantics every backend must honour.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming_task._lazy import lazy_exports

if TYPE_CHECKING:  # type checkers see the real classes; runtime resolves them lazily
    from chongming_task.stores.base import (
        Command,
        ScheduleRecord,
        TaskHead,
        TaskQuery,
        TaskStore,
    )
    from chongming_task.stores.memory import InMemoryTaskStore
    from chongming_task.stores.postgres import PostgresTaskStore
    from chongming_task.stores.sqlite import SqliteTaskStore

_LAZY: dict[str, str] = {
    "Command": "chongming_task.stores.base",
    "InMemoryTaskStore": "chongming_task.stores.memory",
    "PostgresTaskStore": "chongming_task.stores.postgres",
    "ScheduleRecord": "chongming_task.stores.base",
    "SqliteTaskStore": "chongming_task.stores.sqlite",
    "TaskHead": "chongming_task.stores.base",
    "TaskQuery": "chongming_task.stores.base",
    "TaskStore": "chongming_task.stores.base",
}

__getattr__, __dir__ = lazy_exports("chongming_task.stores", globals(), _LAZY)

__all__ = [
    "Command",
    "InMemoryTaskStore",
    "PostgresTaskStore",
    "ScheduleRecord",
    "SqliteTaskStore",
    "TaskHead",
    "TaskQuery",
    "TaskStore",
]
