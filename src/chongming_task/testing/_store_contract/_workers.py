"""Child-process bodies for the cross-process contract cases.

They live at module level so ``multiprocessing``'s *spawn* start method can import
them (spawn, not fork: forking a threaded test process is unsafe). Each child opens
its own store from a picklable factory, meets its siblings at a barrier so that the
racing operations really overlap, and reports through a queue.
"""

from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from chongming_task.errors import ConcurrencyConflict
from chongming_task.stores._base import CommandStore, ScheduleStore, TaskRecordStore

__all__ = ["run_in_processes"]

#: Real-time bounds for a child to start, race and report (spawn imports the library).
_BARRIER_SECONDS: Final = 60.0
_RESULT_SECONDS: Final = 120.0
FIRING_BASE: Final = datetime(2026, 3, 1, tzinfo=UTC)


def _race_saves(store: TaskRecordStore, label: str, items: Sequence[Any]) -> list[str]:
    wins = []
    for task_id in items:
        current = store.get(task_id)
        assert current is not None, f"{task_id} vanished"
        try:
            store.save(current.replace(status_version=1, label=label), expect_version=0)
        except ConcurrencyConflict:
            continue
        wins.append(task_id)
    return wins


def _race_claims(store: TaskRecordStore, label: str, items: Sequence[Any]) -> list[str]:
    assert isinstance(store, CommandStore)
    claimed: list[str] = []
    while True:
        batch = store.claim_commands(label, lease=300, limit=3)
        if not batch:
            return claimed
        claimed.extend(command.command_id for command in batch)


def _race_firings(store: TaskRecordStore, label: str, items: Sequence[Any]) -> list[int]:
    assert isinstance(store, ScheduleStore)
    won = []
    for second in items:
        at = FIRING_BASE + timedelta(seconds=second)
        if store.claim_firing("contract", at, label, f"{label}-{second}"):
            won.append(second)
    return won


RACES: Final[dict[str, Callable[[TaskRecordStore, str, Sequence[Any]], list[Any]]]] = {
    "save": _race_saves,
    "claim": _race_claims,
    "firing": _race_firings,
}


def _child(
    race: str,
    factory: Callable[[], TaskRecordStore],
    sync: tuple[Any, Any],
    label: str,
    items: Sequence[Any],
) -> None:
    barrier, queue = sync
    store: TaskRecordStore | None = None
    try:
        store = factory()
        barrier.wait(_BARRIER_SECONDS)
        queue.put((label, "ok", RACES[race](store, label, items)))
    except BaseException:
        barrier.abort()
        queue.put((label, "error", traceback.format_exc()))
    finally:
        if store is not None:
            store.close()


def run_in_processes(
    race: str, factory: Callable[[], TaskRecordStore], items: Sequence[Any], processes: int = 2
) -> dict[str, list[Any]]:
    """Run ``race`` over ``items`` in ``processes`` children at once; results per child."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes)
    queue = context.Queue()
    children = [
        context.Process(
            target=_child,
            args=(race, factory, (barrier, queue), f"proc-{index}", list(items)),
            daemon=True,
        )
        for index in range(processes)
    ]
    for child in children:
        child.start()
    results: dict[str, list[Any]] = {}
    errors: list[str] = []
    try:
        for _ in children:
            label, status, value = queue.get(timeout=_RESULT_SECONDS)
            if status == "ok":
                results[label] = value
            else:
                errors.append(f"{label}:\n{value}")
    finally:
        for child in children:
            child.join(_RESULT_SECONDS)
            if child.is_alive():
                child.terminate()
                child.join()
            child.close()
        queue.close()
        queue.join_thread()
    assert not errors, "child process failed:\n" + "\n".join(errors)
    return results
