"""What the store must say after any fault: the invariants the fault suite checks."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from chongming_task._model import TaskSnapshot, Transition
from chongming_task.states import TaskStatus, is_legal
from chongming_task.stores._base import TaskQuery, TaskStore


def check_trajectory(snapshot: TaskSnapshot, history: list[Transition]) -> None:
    """Legal edges only, versions 0, 1, 2... without a gap, snapshot = last record."""
    task_id = snapshot.task_id
    assert history, f"{task_id}: no history"
    assert history[0].from_status is None, f"{task_id}: history does not start at creation"
    for index, record in enumerate(history):
        assert record.version == index, (
            f"{task_id}: version gap at {index}: {[r.version for r in history]}"
        )
        if index:
            previous = history[index - 1].to_status
            assert record.from_status is previous, (
                f"{task_id}: record {index} starts at {record.from_status}, not {previous}"
            )
            assert is_legal(previous, record.to_status), (
                f"{task_id}: illegal edge {previous.value} -> {record.to_status.value}"
            )
    last = history[-1]
    assert snapshot.status is last.to_status, (
        f"{task_id}: snapshot says {snapshot.status.value}, history {last.to_status.value}"
    )
    assert snapshot.status_version == last.version, (
        f"{task_id}: snapshot version {snapshot.status_version}, history {last.version}"
    )


def check_store(store: TaskStore, task_ids: Iterable[str] | None = None) -> dict[str, TaskStatus]:
    """Check every task (or ``task_ids``); returns each one's status. Counts records."""
    snapshots = (
        store.query(TaskQuery())
        if task_ids is None
        else [s for s in (store.get(t) for t in task_ids) if s is not None]
    )
    statuses: dict[str, TaskStatus] = {}
    for snapshot in snapshots:
        check_trajectory(snapshot, store.history(snapshot.task_id))
        statuses[snapshot.task_id] = snapshot.status
    return statuses


def transitions_in(store: TaskStore) -> int:
    return sum(len(store.history(s.task_id)) for s in store.query(TaskQuery()))


def integrity_ok(path: Path | str) -> None:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
