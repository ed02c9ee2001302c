"""Contract cases for snapshots: create, save, get, fidelity, odd ids, the outcome cap."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from chongming_task._model import Progress, TaskSnapshot, Transition
from chongming_task.errors import ConcurrencyConflict, ConfigurationError, StoreError
from chongming_task.states import TaskStatus
from chongming_task.stores._base import (
    OUTCOME_MAX_BYTES,
    CommandStore,
    SnapshotWrite,
    TaskNotFound,
    TaskQuery,
)
from chongming_task.testing._store_contract._support import (
    ContractHarness,
    assert_snapshot_equal,
    raises,
)

__all__ = ["SnapshotCases"]

#: Ids that break naive SQL or LIKE: quotes, wildcards, escapes, unicode, length.
AWKWARD_IDS = (
    "it's",
    'say "hi"',
    "100%",
    "a_b",
    "a%_\\b",
    "Robert'); DROP TABLE ct_tasks;--",
    "任务/1 🚀",
    "tab\tnew\nline",
    "x" * 3000,
)


class SnapshotCases(ContractHarness):
    """create/save/get and what survives the round trip."""

    def test_create_then_get_round_trips_every_field(self) -> None:
        snap = self.rich_snapshot("任务/fidelity 'q' \"dq\" %_")
        history = [
            self.transition(snap.task_id, 0, TaskStatus.PENDING),
            self.transition(snap.task_id, 1, TaskStatus.QUEUED, TaskStatus.PENDING, actor="ops"),
        ]
        self.store.create(snap, history)
        assert_snapshot_equal(self.store.get(snap.task_id), snap)
        assert_snapshot_equal(self.store.query(TaskQuery())[0], snap)
        assert self.store.history(snap.task_id) == history

    def test_round_trip_is_visible_from_a_second_connection(self) -> None:
        other = self.second_store()
        snap = self.rich_snapshot("seen-elsewhere")
        self.store.create(snap)
        assert_snapshot_equal(other.get(snap.task_id), snap)
        changed = snap.replace(status=TaskStatus.PAUSING, status_version=8, label="changed")
        other.save(changed, expect_version=7)
        assert_snapshot_equal(self.store.get(snap.task_id), changed)

    def test_get_unknown_returns_none(self) -> None:
        assert self.store.get("no-such-task") is None

    def test_create_duplicate_is_a_configuration_error_and_keeps_the_original(self) -> None:
        original = self.created("dup", label="first")
        exc = raises(
            ConfigurationError,
            lambda: self.store.create(self.snapshot("dup", label="second")),
            "a duplicate create must raise ConfigurationError",
        )
        assert "dup" in str(exc)
        assert "already exists" in str(exc)
        assert_snapshot_equal(self.store.get("dup"), original)

    def _batch(self, *task_ids: str) -> list[tuple[TaskSnapshot, list[Transition]]]:
        entries = []
        for task_id in task_ids:
            snap = self.snapshot(task_id, status=TaskStatus.QUEUED, status_version=1)
            history = [
                self.transition(task_id, 0, TaskStatus.PENDING),
                self.transition(task_id, 1, TaskStatus.QUEUED, TaskStatus.PENDING),
            ]
            entries.append((snap, history))
        return entries

    def test_create_batch_stores_every_task_with_its_history(self) -> None:
        entries = self._batch("batch-a", "batch-b 'q'", "batch-c")
        self.store.create_batch(entries)
        for snap, history in entries:
            assert_snapshot_equal(self.store.get(snap.task_id), snap)
            assert self.store.history(snap.task_id) == history
        self.store.create_batch([])  # an empty batch is a no-op

    def test_create_batch_refuses_an_id_twice_in_it_and_stores_none(self) -> None:
        entries = self._batch("twice-a", "twice-b") + self._batch("twice-a")
        exc = raises(
            ConfigurationError,
            lambda: self.store.create_batch(entries),
            "a batch naming one id twice must raise ConfigurationError",
        )
        assert "twice-a" in str(exc)
        assert self.store.get("twice-a") is None
        assert self.store.get("twice-b") is None

    def test_create_batch_with_a_taken_id_stores_none_of_it(self) -> None:
        if not self.store.atomic_create_batch:
            self.skip("the store declares no atomic create_batch (atomic_create_batch)")
        original = self.created("taken", label="first")
        entries = self._batch("fresh-1", "taken", "fresh-2")
        exc = raises(
            ConfigurationError,
            lambda: self.store.create_batch(entries),
            "a batch with a taken id must raise ConfigurationError",
        )
        assert "taken" in str(exc)
        assert self.store.get("fresh-1") is None
        assert self.store.get("fresh-2") is None
        assert self.store.history("fresh-1") == []
        assert_snapshot_equal(self.store.get("taken"), original)

    def test_save_replaces_the_whole_snapshot_including_side_channel(self) -> None:
        snap = self.created()
        later = self.clock.now() + timedelta(minutes=5)
        changed = snap.replace(
            status=TaskStatus.QUEUED,
            status_version=1,
            updated_at=later,
            queued_at=later,
            progress=Progress(done=1, total=2),
            last_heartbeat_at=later,
            lease_owner="me",
            lease_until=later + timedelta(seconds=30),
            pid=99,
            tags=frozenset({"new"}),
            metadata={"schedule": "hourly"},
            owner="w2",
            bucket=3,
            priority=5,
        )
        self.store.save(changed, expect_version=0)
        assert_snapshot_equal(self.store.get(snap.task_id), changed)
        assert [s.task_id for s in self.store.query(TaskQuery(tag="new"))] == [snap.task_id]

    def test_stale_save_conflicts_and_writes_nothing(self) -> None:
        snap = self.created()
        first = snap.replace(status=TaskStatus.QUEUED, status_version=1)
        self.store.save(
            first,
            expect_version=0,
            transitions=[self.transition(snap.task_id, 1, TaskStatus.QUEUED, TaskStatus.PENDING)],
        )
        stale = snap.replace(status=TaskStatus.CANCELLED, status_version=1, label="stale")
        exc = raises(
            ConcurrencyConflict,
            lambda: self.store.save(
                stale,
                expect_version=0,
                transitions=[self.transition(snap.task_id, 2, TaskStatus.CANCELLED)],
            ),
            "a stale expect_version must raise ConcurrencyConflict",
        )
        assert (exc.task_id, exc.expected, exc.actual) == (snap.task_id, 0, 1)
        assert_snapshot_equal(self.store.get(snap.task_id), first)
        assert [t.version for t in self.store.history(snap.task_id)] == [1]

    def test_save_of_an_unknown_task_raises_task_not_found(self) -> None:
        ghost = self.snapshot("ghost")
        exc = raises(
            TaskNotFound,
            lambda: self.store.save(ghost, expect_version=0),
            "saving an unknown task must raise TaskNotFound",
        )
        assert isinstance(exc, StoreError)
        assert isinstance(exc, KeyError)
        assert "ghost" in str(exc)
        assert self.store.get("ghost") is None

    def test_save_appends_its_transitions_once(self) -> None:
        snap = self.created()
        step = self.transition(snap.task_id, 1, TaskStatus.QUEUED, TaskStatus.PENDING)
        self.store.save(snap.replace(status_version=1), expect_version=0, transitions=[step])
        self.store.save(snap.replace(status_version=2), expect_version=1, transitions=[step])
        assert self.store.history(snap.task_id) == [step]

    def test_save_many_reports_each_write_on_its_own(self) -> None:
        a, b = self.created("a"), self.created("b")
        results = self.store.save_many(
            [
                SnapshotWrite(a.replace(status_version=1, label="a1"), 0),
                SnapshotWrite(b.replace(status_version=1), 5),
                SnapshotWrite(self.snapshot("missing"), 0),
                SnapshotWrite(
                    b.replace(status_version=1, label="b1"),
                    0,
                    [self.transition("b", 1, TaskStatus.QUEUED, TaskStatus.PENDING)],
                ),
            ]
        )
        assert results[0] is None
        assert isinstance(results[1], ConcurrencyConflict)
        assert isinstance(results[2], TaskNotFound)
        assert results[3] is None
        assert self.store.get("a") == a.replace(status_version=1, label="a1")
        assert self.store.get("b") == b.replace(status_version=1, label="b1")
        assert [t.version for t in self.store.history("b")] == [1]

    def test_save_many_applies_chained_writes_to_one_task_in_order(self) -> None:
        a, b = self.created("a"), self.created("b")
        steps = [
            a.replace(status=TaskStatus.QUEUED, status_version=1),
            a.replace(status=TaskStatus.STARTING, status_version=2),
            a.replace(status=TaskStatus.RUNNING, status_version=3),
        ]
        results = self.store.save_many(
            [
                SnapshotWrite(steps[0], 0, [self.transition("a", 1, TaskStatus.QUEUED)]),
                SnapshotWrite(b.replace(status_version=1), 7),
                SnapshotWrite(steps[1], 1, [self.transition("a", 2, TaskStatus.STARTING)]),
                SnapshotWrite(b.replace(status_version=1, label="ok"), 0),
                SnapshotWrite(steps[2], 2, [self.transition("a", 3, TaskStatus.RUNNING)]),
                SnapshotWrite(steps[0], 0),  # stale: a is at version 3 by now
            ]
        )
        assert [type(r).__name__ for r in results] == [
            "NoneType",
            "ConcurrencyConflict",
            "NoneType",
            "NoneType",
            "NoneType",
            "ConcurrencyConflict",
        ]
        assert_snapshot_equal(self.store.get("a"), steps[2])
        assert [t.version for t in self.store.history("a")] == [1, 2, 3]
        assert_snapshot_equal(self.store.get("b"), b.replace(status_version=1, label="ok"))
        assert self.store.save_many([]) == []

    def test_a_stale_chain_in_save_many_fails_as_a_whole(self) -> None:
        a = self.created("a")
        self.store.save(a.replace(status_version=1), expect_version=0)
        results = self.store.save_many(
            [
                SnapshotWrite(a.replace(status_version=1, label="x"), 0),
                SnapshotWrite(a.replace(status_version=2, label="y"), 1),
            ]
        )
        assert all(isinstance(result, ConcurrencyConflict) for result in results)
        assert_snapshot_equal(self.store.get("a"), a.replace(status_version=1))

    def test_create_many_inserts_everything_and_refuses_duplicates(self) -> None:
        batch = [self.snapshot(f"bulk-{i}", tags=frozenset({"bulk"})) for i in range(25)]
        assert self.store.create_many(batch) == 25
        for snap in batch:
            assert_snapshot_equal(self.store.get(snap.task_id), snap)
        assert len(self.store.query(TaskQuery(tag="bulk"))) == 25
        assert self.store.history("bulk-0") == []
        raises(
            ConfigurationError,
            lambda: self.store.create_many([self.snapshot("bulk-new"), batch[3]]),
            "create_many must refuse an existing id",
        )
        assert self.store.create_many([]) == 0

    def test_awkward_ids_and_names_behave_like_any_other(self) -> None:
        for task_id in AWKWARD_IDS:
            snap = self.created(task_id, name=task_id, tags=frozenset({task_id}))
            step = self.transition(task_id, 1, TaskStatus.QUEUED, TaskStatus.PENDING)
            self.store.save(snap.replace(status_version=1), expect_version=0, transitions=[step])
            assert self.store.get(task_id) == snap.replace(status_version=1)
            assert self.store.history(task_id) == [step]
            assert self.store.touch(task_id, pid=1)
            assert [s.task_id for s in self.store.query(TaskQuery(tag=task_id))] == [task_id]
            found = self.store.query(TaskQuery(name_prefix=task_id))
            assert [s.task_id for s in found] == [task_id], task_id
        assert len(self.store.query()) == len(AWKWARD_IDS)

    def test_outcome_up_to_the_cap_round_trips(self) -> None:
        exact = "x" * (OUTCOME_MAX_BYTES - 2)  # plus two quotes: exactly the cap
        snap = self.created(status=TaskStatus.SUCCEEDED, outcome=exact)
        got = self.store.get(snap.task_id)
        assert got is not None
        assert got.outcome == exact

    def test_outcome_over_the_cap_is_refused_and_nothing_is_written(self) -> None:
        too_big = "x" * (OUTCOME_MAX_BYTES - 1)
        wide = "é" * (OUTCOME_MAX_BYTES // 2)  # fewer characters than the cap, more bytes
        for outcome in (too_big, wide, {"rows": [too_big]}):
            snap = self.snapshot(outcome=outcome)
            exc = raises(
                ConfigurationError,
                lambda snap=snap: self.store.create(snap),  # type: ignore[misc]
                "an outcome over the cap must be refused on create",
            )
            assert "OUTCOME_MAX_BYTES" in str(exc)
            assert self.store.get(snap.task_id) is None
        snap = self.created()
        raises(
            ConfigurationError,
            lambda: self.store.save(snap.replace(status_version=1, outcome=wide), expect_version=0),
            "an outcome over the cap must be refused on save",
        )
        assert self.store.get(snap.task_id) == snap

    def test_non_json_outcome_is_a_configuration_error(self) -> None:
        snap = self.snapshot(outcome={"when": object()})
        raises(
            ConfigurationError,
            lambda: self.store.create(snap),
            "a non-JSON outcome must raise ConfigurationError",
        )
        assert self.store.get(snap.task_id) is None

    def test_corrupt_status_in_the_database_is_a_store_error(self) -> None:
        snap = self.created("corrupt")
        self.created("healthy")
        self.corrupt_status(self.store, snap.task_id)
        for read in (
            lambda: self.store.get("corrupt"),
            lambda: self.store.query(TaskQuery()),
            lambda: self.store.count_by_status(None),
        ):
            exc = raises(
                StoreError, read, "an unknown status in a stored row must raise StoreError"
            )
            assert not isinstance(exc, TaskNotFound)
        assert self.store.get("healthy") is not None

    def test_closed_store_refuses_every_call(self) -> None:
        self.created("before-close")
        self.store.close()
        calls: list[Callable[[], object]] = [
            lambda: self.store.get("before-close"),
            lambda: self.store.create(self.snapshot()),
            lambda: self.store.query(TaskQuery()),
        ]
        store = self.store
        if isinstance(store, CommandStore):
            calls.append(lambda: store.claim_commands("me", lease=1))
            calls.append(lambda: store.wait_for_commands(0.01))
        for call in calls:
            raises(StoreError, call, "a closed store must raise StoreError")
