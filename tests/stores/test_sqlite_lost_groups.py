"""SQLite's grouped ``mark_lost_many`` against the generic path, on two copies of one store.

The grouped path (``stores/_sqlite_lost.py``) runs the state machine once per (status,
failure) group and patches each row; the generic one (``TaskStore.mark_lost_many``)
runs it per decoded snapshot and saves it. Every task must read back identically, with
the same history and the same marks, and so must the stored documents.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from store_builders import NOW

from chongming_task._model import Failure, FailureKind, Progress
from chongming_task.core.state_machine import StateMachine
from chongming_task.states import OCCUPYING, TaskStatus
from chongming_task.stores import _sqlite_lost
from chongming_task.stores._base import LostCandidate, LostMark, TaskQuery, TaskStore
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing._fake_clock import FakeClock

S = TaskStatus
ACTOR = "节点-b"
TRIGGER = "test:lease_expired"


def _shared_failure(task: LostCandidate) -> Failure:
    """One failure per (holder, status): tasks alike share it (groups of several)."""
    return Failure(
        kind=FailureKind.LOST,
        message=f"{task.lease_owner or task.owner or '?'} 走了 while {task.status.value}",
        retryable=True,
    )


def _own_failure(task: LostCandidate) -> Failure:
    """A failure per task (groups of one), made of every candidate field."""
    until = task.lease_until.isoformat() if task.lease_until else "never"
    return Failure(
        kind=FailureKind.LOST,
        message=f'{task.task_id} v{task.status_version} {task.lease_owner} «{until}» "q"',
        retryable=True,
    )


def _seed(store: SqliteTaskStore, clock: FakeClock) -> list[str]:
    """Tasks in every losable status (and a paused one), built by the state machine."""
    ids: list[str] = []

    def task(task_id: str, to: Callable[[StateMachine], None], **touch: object) -> None:
        machine = StateMachine.create(
            task_id,
            "同步.作业",
            max_attempts=3,
            label="标签 «x» 'y' \"z\" 🚀",
            tags=("租户", "with space"),
            bucket=len(ids) % 3,
            owner="dead-node",
            metadata={"租户": "A", "ratio": 0.1, "tiny": 1.5e-7, "nested": {"深": [1, "\n\t"]}},
            clock=clock,
        )
        to(machine)
        store.create(machine.snapshot, machine.transitions)
        store.touch(
            task_id,
            lease_owner=str(touch.pop("lease_owner", "dead-node:1")),
            lease_until=clock.now() - timedelta(seconds=30),
            **touch,  # type: ignore[arg-type]
        )
        ids.append(task_id)

    def starting(m: StateMachine) -> None:
        m.mark_queued()
        m.mark_starting(executor="exec-α")

    def running(m: StateMachine) -> None:
        starting(m)
        m.mark_running()

    def pausing(m: StateMachine) -> None:
        running(m)
        m.mark_pausing(actor="op", reason="暂停 please")

    def paused(m: StateMachine) -> None:
        pausing(m)
        m.mark_paused()

    def stopping(m: StateMachine) -> None:
        running(m)
        m.mark_stopping(actor="op", reason="stop «now»")

    def retried(m: StateMachine) -> None:  # an earlier failure, replaced by lost's
        running(m)
        m.mark_retry_wait(
            Failure(kind=FailureKind.EXCEPTION, message="上一轮 boom", exception_type="E")
        )
        m.mark_starting()
        m.mark_running()

    for n in range(3):
        task(f"starting-{n}", starting)
        task(f"running-{n}", running, progress=Progress(done=n, total=9, unit="行"), pid=4000 + n)
        task(
            f"beating-{n}",
            running,
            heartbeat_at=clock.now() - timedelta(minutes=2),
            lease_owner="other-ν",
            progress=Progress(done=1.5, message='中途 "x" \\ ☃'),
        )
        task(f"pausing-{n}", pausing, pid=77)
        task(f"paused-{n}", paused)  # not losable: both paths must leave it alone
        task(f"stopping-{n}", stopping)
        task(f"retried-{n}", retried)
        clock.advance(1)
    return ids


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[SqliteTaskStore, SqliteTaskStore, list[str]]]:
    """Two stores on byte-identical copies of one seeded file, and its task ids."""
    clock = FakeClock(NOW)
    first = tmp_path / "grouped.db"
    with SqliteTaskStore(first, clock=clock) as seeded:
        ids = _seed(seeded, clock)
    shutil.copyfile(first, tmp_path / "generic.db")
    grouped = SqliteTaskStore(first, clock=clock)
    generic = SqliteTaskStore(tmp_path / "generic.db", clock=clock)
    try:
        yield grouped, generic, ids
    finally:
        grouped.close()
        generic.close()


def _mark(
    store: TaskStore,
    failure: Callable[[LostCandidate], Failure],
    *,
    generic: bool = False,
    snapshots: bool = False,
) -> list[LostMark]:
    clock = FakeClock(NOW + timedelta(hours=1))
    mark = TaskStore.mark_lost_many if generic else type(store).mark_lost_many
    return mark(
        store,
        TaskQuery(statuses=OCCUPYING, lease_expired_by=clock.now()),
        clock=clock,
        actor=ACTOR,
        trigger=TRIGGER,
        failure=failure,
        snapshots=snapshots,
    )


def _documents(store: SqliteTaskStore) -> dict[str, tuple[object, ...]]:
    """Every task row as stored (columns and document text), by task id."""
    with sqlite3.connect(store._path) as conn:
        found = conn.execute("SELECT * FROM ct_tasks ORDER BY seq").fetchall()
    conn.close()
    return {row[1]: row[1:] for row in found}


def _assert_identical(grouped: SqliteTaskStore, generic: SqliteTaskStore, ids: list[str]) -> None:
    for task_id in ids:
        assert grouped.get(task_id) == generic.get(task_id), task_id
        assert grouped.history(task_id) == generic.history(task_id), task_id
    assert _documents(grouped) == _documents(generic)


@pytest.mark.parametrize("failure", [_shared_failure, _own_failure], ids=["shared", "own"])
def test_grouped_and_generic_paths_write_the_same(
    stores: tuple[SqliteTaskStore, SqliteTaskStore, list[str]],
    failure: Callable[[LostCandidate], Failure],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    grouped, generic, ids = stores
    runs: list[str] = []
    real = _sqlite_lost.lost_change  # type: ignore[attr-defined]  # private, patched below

    def counted(representative: object, **kwargs: object) -> object:
        runs.append(representative.task_id)  # type: ignore[attr-defined]
        return real(representative, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_sqlite_lost, "lost_change", counted)
    marks = _mark(grouped, failure)
    expected = _mark(generic, failure, generic=True)
    assert [(m.task_id, m.transition) for m in marks] == [
        (m.task_id, m.transition) for m in expected
    ]
    assert len(marks) == 18  # every task but the paused ones
    assert all(mark.transition is not None for mark in marks)
    assert len(runs) == (5 if failure is _shared_failure else 18)  # once per group
    _assert_identical(grouped, generic, ids)
    assert grouped.get("paused-0").status is S.PAUSED  # type: ignore[union-attr]


def test_snapshots_take_the_generic_path(
    stores: tuple[SqliteTaskStore, SqliteTaskStore, list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    grouped, generic, ids = stores
    monkeypatch.setattr(_sqlite_lost, "lost_change", None)  # must not be reached
    marks = _mark(grouped, _shared_failure, snapshots=True)
    assert all(mark.snapshot == grouped.get(mark.task_id) for mark in marks)
    _mark(generic, _shared_failure, generic=True)
    _assert_identical(grouped, generic, ids)


def test_another_document_format_takes_the_generic_path(
    stores: tuple[SqliteTaskStore, SqliteTaskStore, list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    grouped, generic, ids = stores
    for store in (grouped, generic):  # a document written before format versions existed
        with sqlite3.connect(store._path) as conn:
            conn.execute(
                "UPDATE ct_tasks SET doc = json_remove(doc, '$.v') WHERE task_id = 'running-1'"
            )
        conn.close()
    monkeypatch.setattr(_sqlite_lost, "lost_change", None)  # must not be reached
    _mark(grouped, _own_failure)
    _mark(generic, _own_failure, generic=True)
    _assert_identical(grouped, generic, ids)


def test_a_change_beyond_the_known_fields_takes_the_generic_path(
    stores: tuple[SqliteTaskStore, SqliteTaskStore, list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    grouped, generic, ids = stores
    monkeypatch.setattr(_sqlite_lost, "lost_change", lambda *args, **kwargs: None)
    _mark(grouped, _shared_failure)
    _mark(generic, _shared_failure, generic=True)
    _assert_identical(grouped, generic, ids)
    assert grouped.get("running-0").status is S.LOST  # type: ignore[union-attr]
