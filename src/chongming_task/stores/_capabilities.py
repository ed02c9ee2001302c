"""What a store can do is what it declares: one check, one message, for every feature.

A third-party backend may implement only the task part
(:class:`~chongming_task.stores._base.TaskRecordStore`). Everything in one process then
works: submit, run, stop, pause, wait, reconcile. A feature that needs another part
asks for it here (``require_commands``...), by ``isinstance`` of that part's abstract
class, never by looking at which methods a store overrides or what their signatures
say (both depend on how a backend was written, not on what it promises).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from chongming_task._model import TaskSnapshot, Transition
from chongming_task.errors import ConfigurationError
from chongming_task.stores._base import TaskRecordStore
from chongming_task.stores._command_store import CommandStore
from chongming_task.stores._queue_store import QueueStore
from chongming_task.stores._schedule_store import ScheduleStore

__all__ = [
    "require_commands",
    "require_queue",
    "require_schedules",
    "save_unheld",
    "wake_workers",
]

#: Each part: what it holds, and the contract that checks an implementation of it.
_PARTS: Final[dict[type, tuple[str, str]]] = {
    CommandStore: ("commands: cross-process control under a lease", "CommandStoreContract"),
    ScheduleStore: ("schedule control records and firing claims", "ScheduleStoreContract"),
    QueueStore: ("the work queue and the worker registry", "QueueStoreContract"),
}


def require_commands(store: object, feature: str) -> CommandStore:
    """``store`` as a :class:`CommandStore`, for ``feature`` (which needs commands).

    Raises:
        ConfigurationError: ``store`` is no ``CommandStore``; the message names the
            feature, the missing part and what to do.
    """
    if isinstance(store, CommandStore):
        return store
    raise _missing(store, CommandStore, feature)


def require_schedules(store: object, feature: str) -> ScheduleStore:
    """``store`` as a :class:`ScheduleStore`, for ``feature``.

    Raises:
        ConfigurationError: ``store`` is no ``ScheduleStore`` (see :func:`require_commands`).
    """
    if isinstance(store, ScheduleStore):
        return store
    raise _missing(store, ScheduleStore, feature)


def require_queue(store: object, feature: str) -> QueueStore:
    """``store`` as a :class:`QueueStore`, for ``feature``.

    Raises:
        ConfigurationError: ``store`` is no ``QueueStore`` (see :func:`require_commands`).
    """
    if isinstance(store, QueueStore):
        return store
    raise _missing(store, QueueStore, feature)


def _missing(store: object, part: type, feature: str) -> ConfigurationError:
    holds, contract = _PARTS[part]
    module = part.__module__.rsplit(".", 1)[-1]
    return ConfigurationError(
        f"{feature} needs a store that implements {part.__name__} ({holds}); "
        f"{type(store).__name__} does not. Use a built-in store (InMemoryTaskStore, "
        f"SqliteTaskStore, PostgresTaskStore), or implement "
        f"chongming_task.stores.{module}.{part.__name__} and check it with "
        f"chongming_task.testing.store_contract.{contract} (docs/store-guide.md)"
    )


def save_unheld(
    store: TaskRecordStore,
    snapshot: TaskSnapshot,
    *,
    expect_version: int,
    transitions: Sequence[Transition] = (),
) -> None:
    """Write a task nobody holds, so that a worker's claim and this write never both win.

    With a work queue that is :meth:`QueueStore.save_unheld` (guarded on the owner
    too). Without one nobody can claim the task, and the version guard of ``save`` is
    the whole guard.

    Raises:
        ConcurrencyConflict: The version differs, or a worker claimed the task.
        TaskNotFound: No such task.
    """
    if isinstance(store, QueueStore):
        store.save_unheld(snapshot, expect_version=expect_version, transitions=transitions)
    else:
        store.save(snapshot, expect_version=expect_version, transitions=transitions)


def wake_workers(store: TaskRecordStore) -> None:
    """Tell the workers of ``store`` that queued work arrived (nothing without a queue)."""
    if isinstance(store, QueueStore):
        store.notify_work()
