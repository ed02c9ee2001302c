"""Persistence: the :class:`~chongming_task.stores._base.TaskStore` contract and its backends.

The contract is split by concern (``stores.base``): the task part
(``TaskRecordStore``), ``CommandStore``, ``ScheduleStore`` and ``QueueStore``;
``TaskStore`` is the first three. The package itself imports nothing heavy:
``stores.memory`` is the in-process reference, ``stores.sqlite`` the default file backend
and ``stores.postgres`` the shared-server backend (``pip install "chongming-task[postgres]"``).
A third-party backend imports everything it needs from here: the contract, the
records, the codec the built-in stores use, the in-process command signal, and the
rules a store that holds its rows in Python shares with the in-memory one.
See ``docs/store-guide.md`` for the semantics every backend must honour.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming_task._lazy import lazy_exports

if TYPE_CHECKING:  # type checkers see the real classes; runtime resolves them lazily
    from chongming_task._model import JSONValue, dumps, loads
    from chongming_task.stores._base import (
        Command,
        CommandStore,
        QueueStore,
        ScheduleRecord,
        ScheduleStore,
        TaskHead,
        TaskQuery,
        TaskRecordStore,
        TaskStore,
        validate_actions,
    )
    from chongming_task.stores._codec import (
        decode_snapshot,
        decode_transition,
        encode_json,
        encode_snapshot,
        encode_transition,
        from_micros,
        require_aware,
        to_micros,
    )
    from chongming_task.stores._command_store import validate_claim
    from chongming_task.stores._memory import InMemoryTaskStore
    from chongming_task.stores._postgres import PostgresTaskStore
    from chongming_task.stores._scan import (
        StoredRow,
        TaskRow,
        prune_choice,
        select_tasks,
        touch_changes,
    )
    from chongming_task.stores._signal import CommandSignal
    from chongming_task.stores._sqlite import SqliteTaskStore

_LAZY: dict[str, str] = {
    "Command": "chongming_task.stores._base",
    "CommandStore": "chongming_task.stores._command_store",
    "InMemoryTaskStore": "chongming_task.stores._memory",
    "PostgresTaskStore": "chongming_task.stores._postgres",
    "QueueStore": "chongming_task.stores._queue_store",
    "ScheduleRecord": "chongming_task.stores._base",
    "ScheduleStore": "chongming_task.stores._schedule_store",
    "SqliteTaskStore": "chongming_task.stores._sqlite",
    "TaskHead": "chongming_task.stores._base",
    "TaskQuery": "chongming_task.stores._base",
    "TaskRecordStore": "chongming_task.stores._base",
    "TaskStore": "chongming_task.stores._base",
    # What a third-party backend needs besides the contract (examples/07_custom_store.py):
    "validate_actions": "chongming_task.stores._base",
    "validate_claim": "chongming_task.stores._command_store",
    "CommandSignal": "chongming_task.stores._signal",
    "JSONValue": "chongming_task._model",
    "dumps": "chongming_task._model",
    "loads": "chongming_task._model",
    "decode_snapshot": "chongming_task.stores._codec",
    "decode_transition": "chongming_task.stores._codec",
    "encode_json": "chongming_task.stores._codec",
    "encode_snapshot": "chongming_task.stores._codec",
    "encode_transition": "chongming_task.stores._codec",
    "from_micros": "chongming_task.stores._codec",
    "require_aware": "chongming_task.stores._codec",
    "to_micros": "chongming_task.stores._codec",
    # The task part's rules for a backend that holds its rows in Python:
    "StoredRow": "chongming_task.stores._scan",
    "TaskRow": "chongming_task.stores._scan",
    "prune_choice": "chongming_task.stores._scan",
    "select_tasks": "chongming_task.stores._scan",
    "touch_changes": "chongming_task.stores._scan",
}

__getattr__, __dir__ = lazy_exports("chongming_task.stores", globals(), _LAZY)

__all__ = [
    "Command",
    "CommandSignal",
    "CommandStore",
    "InMemoryTaskStore",
    "JSONValue",
    "PostgresTaskStore",
    "QueueStore",
    "ScheduleRecord",
    "ScheduleStore",
    "SqliteTaskStore",
    "StoredRow",
    "TaskHead",
    "TaskQuery",
    "TaskRecordStore",
    "TaskRow",
    "TaskStore",
    "decode_snapshot",
    "decode_transition",
    "dumps",
    "encode_json",
    "encode_snapshot",
    "encode_transition",
    "from_micros",
    "loads",
    "prune_choice",
    "require_aware",
    "select_tasks",
    "to_micros",
    "touch_changes",
    "validate_actions",
    "validate_claim",
]
