"""SQLite's ``mark_lost_many`` patches rows in place: it must store the very bytes the
generic path (read, state machine, encode, save) stores, and never half-write."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chongming_task.errors import StoreError
from chongming_task.model import Failure, FailureKind, Progress, TaskSnapshot
from chongming_task.states import OCCUPYING, TaskStatus
from chongming_task.stores import _sqlrows as rows
from chongming_task.stores.base import LostCandidate, LostMark, TaskQuery, TaskStore
from chongming_task.stores.sqlite import SqliteTaskStore
from chongming_task.testing import FakeClock
from chongming_task.testing.store_contract import StoreContract

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)

#: Text as users write it (CJK, emoji, quotes, backslashes, control characters).
texts = st.text(max_size=30)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
offsets = st.sampled_from(
    [UTC, timezone(timedelta(hours=8)), timezone(-timedelta(hours=3, minutes=30))]
)
instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2026, 4, 1), timezones=offsets
)
tasks = st.builds(
    TaskSnapshot,
    task_id=st.text(min_size=1, max_size=20),
    name=st.text(min_size=1, max_size=20),
    status=st.sampled_from(sorted(OCCUPYING)),
    status_version=st.integers(min_value=0, max_value=2**31),
    created_at=instants,
    updated_at=instants,
    label=st.none() | texts,
    attempt=st.integers(min_value=0, max_value=100),
    started_at=instants,
    progress=st.none()
    | st.builds(
        Progress,
        done=st.integers(0, 10**6),
        total=st.none() | st.integers(0, 10**6),
        unit=st.none() | texts,
        message=st.none() | texts,
    ),
    last_heartbeat_at=st.none() | instants,
    lease_owner=st.none() | texts,
    lease_until=st.none() | instants,
    outcome=json_values,
    tags=st.frozensets(texts, max_size=3),
    bucket=st.none() | st.integers(min_value=0, max_value=4095),
    owner=st.none() | texts,
    pid=st.none() | st.integers(min_value=1, max_value=2**22),
    metadata=st.dictionaries(texts, json_values, max_size=3),
)
QUERY = TaskQuery(statuses=OCCUPYING, lease_expired_by=T0)


def describe(task: LostCandidate) -> Failure:
    """Every candidate field in the text (unicode and quotes included, via the owners)."""
    return Failure(
        kind=FailureKind.LOST,
        message=f"{task.lease_owner or task.owner} {task.lease_until} {task.status.value}",
        retryable=True,
    )


def mark(store: TaskStore, clock: FakeClock, *, generic: bool) -> list[LostMark]:
    """``mark_lost_many`` as SQLite does it, or as the base class does it."""
    method = TaskStore.mark_lost_many if generic else type(store).mark_lost_many
    return method(store, QUERY, clock=clock, actor="node-β", trigger="t", failure=describe)


def raw(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """Every task row and history row, byte for byte."""
    with sqlite3.connect(path) as conn:
        tasks = conn.execute("SELECT * FROM ct_tasks ORDER BY task_id").fetchall()
        history = conn.execute("SELECT * FROM ct_transitions ORDER BY task_id, version").fetchall()
    conn.close()
    return tasks, history


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[SqliteTaskStore, SqliteTaskStore, FakeClock]]:
    clock = FakeClock(T0)
    native = SqliteTaskStore(tmp_path / "native.db", clock=clock)
    generic = SqliteTaskStore(tmp_path / "generic.db", clock=clock)
    with native, generic:
        yield native, generic, clock


def occupying(snapshot: TaskSnapshot, status: TaskStatus) -> TaskSnapshot:
    return snapshot.replace(
        status=status,
        started_at=snapshot.created_at,
        lease_until=T0 - timedelta(seconds=1),
        finished_at=None,
    )


def _create_rich_and_bare(*stores: SqliteTaskStore) -> None:
    """A running task with every field set and a stopping one with none, in each store."""
    contract = StoreContract()
    contract.setup_method()
    rich = occupying(contract.rich_snapshot("rich"), TaskStatus.RUNNING)
    bare = occupying(contract.snapshot("bare"), TaskStatus.STOPPING)
    for store in stores:
        store.create(rich)
        store.create(bare)


def test_the_richest_snapshot_is_stored_exactly_as_the_generic_path_stores_it(
    pair: tuple[SqliteTaskStore, SqliteTaskStore, FakeClock], tmp_path: Path
) -> None:
    native, generic, clock = pair
    _create_rich_and_bare(native, generic)
    for store in (native, generic):
        store.touch(
            "rich",
            progress=Progress(done=1, total=2, unit="件", message='a "q" \\ ☃'),
            heartbeat_at=T0 - timedelta(seconds=5),
            lease_owner='holder "β"\\\n',
            pid=7,
        )
    clock.advance(3)
    native_marks = mark(native, clock, generic=False)
    generic_marks = mark(generic, clock, generic=True)
    assert [m.transition for m in native_marks] == [m.transition for m in generic_marks]
    assert raw(tmp_path / "native.db") == raw(tmp_path / "generic.db")


def test_a_document_of_another_format_takes_the_generic_path(
    pair: tuple[SqliteTaskStore, SqliteTaskStore, FakeClock], tmp_path: Path
) -> None:
    native, generic, clock = pair
    contract = StoreContract()
    contract.setup_method()
    old = occupying(contract.snapshot("old"), TaskStatus.RUNNING)
    for store, name in ((native, "native.db"), (generic, "generic.db")):
        store.create(old)
        with sqlite3.connect(tmp_path / name) as conn:  # a document without its version
            conn.execute("UPDATE ct_tasks SET doc = json_remove(doc, '$.v')")
        conn.close()
    [native_mark] = mark(native, clock, generic=False)
    mark(generic, clock, generic=True)
    assert native_mark.snapshot is not None  # the generic path decoded it anyway
    assert raw(tmp_path / "native.db") == raw(tmp_path / "generic.db")
    stored = native.get("old")
    assert stored is not None
    assert stored.status is TaskStatus.LOST


def test_a_row_that_does_not_match_its_version_writes_nothing(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    with SqliteTaskStore(tmp_path / "tasks.db", clock=clock) as store:
        contract = StoreContract()
        contract.setup_method()
        for task_id in ("a", "b"):
            store.create(occupying(contract.snapshot(task_id), TaskStatus.RUNNING))
        # As if another writer had changed "b" between the read and the write: a
        # trigger makes SQLite skip the row's update.
        with sqlite3.connect(tmp_path / "tasks.db") as conn:
            conn.execute(
                "CREATE TRIGGER skip_b BEFORE UPDATE ON ct_tasks"
                " WHEN old.task_id = 'b' AND new.status = 'lost' BEGIN SELECT RAISE(IGNORE); END"
            )
        conn.close()
        before = raw(tmp_path / "tasks.db")
        with pytest.raises(StoreError, match="1 of 2 rows"):
            mark(store, clock, generic=False)
        assert raw(tmp_path / "tasks.db") == before


@settings(max_examples=60, deadline=None)
@given(task=tasks)
def test_generated_tasks_are_stored_exactly_as_the_generic_path_stores_them(
    task: TaskSnapshot,
) -> None:
    clock = FakeClock(T0)
    with tempfile.TemporaryDirectory(prefix="ct-lost-") as directory:
        stored = []
        for name, generic in (("native.db", False), ("generic.db", True)):
            path = Path(directory) / name
            with SqliteTaskStore(path, clock=clock) as store:
                store.create(task)
                assert len(mark(store, clock, generic=generic)) == 1
            stored.append(raw(path))
    assert stored[0] == stored[1]


def test_snapshots_are_those_the_generic_path_returns_and_decoded_only_when_read(
    pair: tuple[SqliteTaskStore, SqliteTaskStore, FakeClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    native, generic, clock = pair
    _create_rich_and_bare(native, generic)
    clock.advance(3)
    decoded: list[object] = []
    real_decode = rows.decode_task

    def counting(row: object) -> TaskSnapshot:
        decoded.append(row)
        return real_decode(row)  # type: ignore[arg-type]

    monkeypatch.setattr(rows, "decode_task", counting)
    native_marks = native.mark_lost_many(
        QUERY, clock=clock, actor="node-β", trigger="t", failure=describe, snapshots=True
    )
    assert decoded == []  # read back, not decoded
    snapshot = native_marks[0].snapshot
    assert snapshot is not None
    # The four fields an observer's log line needs come without a decode...
    known = (snapshot.task_id, snapshot.name, snapshot.status, snapshot.status_version)
    assert decoded == []
    # ...any other field decodes the row once.
    assert snapshot.failure is not None
    assert snapshot.lease_until is None
    assert len(decoded) == 1
    monkeypatch.undo()
    stored = native.get("rich")
    assert stored is not None
    assert known == (stored.task_id, stored.name, TaskStatus.LOST, stored.status_version)
    generic_marks = TaskStore.mark_lost_many(
        generic, QUERY, clock=clock, actor="node-β", trigger="t", failure=describe, snapshots=True
    )
    assert [m.snapshot for m in native_marks] == [m.snapshot for m in generic_marks]
    assert [m.snapshot for m in native_marks] == [native.get("rich"), native.get("bare")]
    assert [m.transition for m in native_marks] == [m.transition for m in generic_marks]
