"""Contract cases for concurrency: exactly one winner, from threads and from processes."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from chongming_task._model import Progress
from chongming_task.errors import ConcurrencyConflict
from chongming_task.states import TaskStatus
from chongming_task.stores._base import (
    CommandStore,
    ScheduleConflict,
    ScheduleStore,
    TaskQuery,
    TaskRecordStore,
)
from chongming_task.testing._store_contract._support import (
    ContractHarness,
    as_commands,
    as_schedules,
)
from chongming_task.testing._store_contract._workers import FIRING_BASE, run_in_processes

__all__ = ["CommandRaceCases", "ScheduleRaceCases", "TaskRaceCases"]

T = TypeVar("T")

#: Seconds a racing thread may take before the case fails instead of hanging.
THREAD_SECONDS = 60.0


def run_in_threads(workers: list[Callable[[], T]]) -> list[T]:
    """Start every worker at a barrier, join them, re-raise the first failure."""
    barrier = threading.Barrier(len(workers))
    results: list[Any] = [None] * len(workers)
    errors: list[BaseException] = []

    def body(index: int, work: Callable[[], T]) -> None:
        try:
            barrier.wait(THREAD_SECONDS)
            results[index] = work()
        except BaseException as exc:
            barrier.abort()
            errors.append(exc)

    threads = [
        threading.Thread(target=body, args=(index, work), daemon=True)
        for index, work in enumerate(workers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_SECONDS)
        assert not thread.is_alive(), "a racing thread hung"
    if errors:
        raise errors[0]
    return results


class _Races(ContractHarness):
    """Concurrent writers through the public API; SQL stores also across processes."""

    TASKS = 40

    def _spread_stores(self, count: int) -> list[TaskRecordStore]:
        second = self.second_store()
        return [self.store if index % 2 == 0 else second for index in range(count)]


class TaskRaceCases(_Races):
    """Exactly one winner among writers of one task version, and no lost write."""

    def _race_saves(self, store: TaskRecordStore, label: str, ids: list[str]) -> list[str]:
        wins = []
        for task_id in ids:
            current = store.get(task_id)
            assert current is not None
            try:
                store.save(current.replace(status_version=1, label=label), expect_version=0)
            except ConcurrencyConflict:
                continue
            wins.append(task_id)
        return wins

    def _assert_one_winner_each(self, ids: list[str], wins: dict[str, list[str]]) -> None:
        counted = Counter(task_id for won in wins.values() for task_id in won)
        assert all(counted[task_id] == 1 for task_id in ids), counted
        for label, won in wins.items():
            for task_id in won:
                stored = self.store.get(task_id)
                assert stored is not None
                assert stored.label == label
                assert stored.status_version == 1

    def test_two_threads_with_the_same_expect_version_exactly_one_wins(self) -> None:
        ids = [self.created().task_id for _ in range(self.TASKS)]
        stores = self._spread_stores(2)
        wins = run_in_threads(
            [
                lambda: self._race_saves(stores[0], "thread-0", ids),
                lambda: self._race_saves(stores[1], "thread-1", ids),
            ]
        )
        self._assert_one_winner_each(ids, {"thread-0": wins[0], "thread-1": wins[1]})

    def test_two_processes_with_the_same_expect_version_exactly_one_wins(self) -> None:
        factory = self.process_factory()
        ids = [self.created().task_id for _ in range(self.TASKS * 5)]
        wins = run_in_processes("save", factory, ids)
        self._assert_one_winner_each(ids, wins)

    def test_many_threads_mixing_every_kind_of_write(self) -> None:
        stores = self._spread_stores(6)

        def churn(store: TaskRecordStore, worker: int) -> int:
            for n in range(15):
                snap = self.snapshot(f"churn-{worker}-{n}", status=TaskStatus.QUEUED)
                store.create(snap, [self.transition(snap.task_id, 0, TaskStatus.PENDING)])
                store.touch(snap.task_id, lease_owner=f"w{worker}")
                running = snap.replace(status=TaskStatus.RUNNING, status_version=1)
                store.save(
                    running,
                    expect_version=0,
                    transitions=[self.transition(snap.task_id, 1, TaskStatus.RUNNING)],
                )
                store.touch(snap.task_id, progress=Progress(done=n))
                store.query(TaskQuery(statuses=frozenset({TaskStatus.RUNNING}), limit=5))
                store.count_by_status()
            return worker

        run_in_threads([lambda s=store, w=i: churn(s, w) for i, store in enumerate(stores)])  # type: ignore[misc]
        assert self.store.count_by_status() == {TaskStatus.RUNNING: 90}
        for snap in self.store.query():
            assert [t.version for t in self.store.history(snap.task_id)] == [0, 1]
            assert snap.progress is not None


class CommandRaceCases(_Races):
    """No command is ever handed to two claimers, from threads or processes."""

    def test_concurrent_claims_never_hand_out_a_command_twice(self) -> None:
        ids = [self.commands.submit_command(self.command(f"t{i}")).command_id for i in range(60)]
        stores = [as_commands(store) for store in self._spread_stores(4)]

        def claimer(store: CommandStore, owner: str) -> list[str]:
            claimed: list[str] = []
            while batch := store.claim_commands(owner, lease=300, limit=2):
                claimed.extend(command.command_id for command in batch)
            return claimed

        results = run_in_threads(
            [lambda s=store, o=f"w{i}": claimer(s, o) for i, store in enumerate(stores)]  # type: ignore[misc]
        )
        counted = Counter(command_id for claimed in results for command_id in claimed)
        assert sorted(counted) == sorted(ids)
        assert set(counted.values()) == {1}

    def test_claims_across_processes_never_hand_out_a_command_twice(self) -> None:
        factory = self.process_factory()
        ids = [self.commands.submit_command(self.command(f"t{i}")).command_id for i in range(120)]
        results = run_in_processes("claim", factory, [])
        counted = Counter(command_id for claimed in results.values() for command_id in claimed)
        assert sorted(counted) == sorted(ids)
        assert set(counted.values()) == {1}


class ScheduleRaceCases(_Races):
    """One claimer per firing, one winner per schedule revision."""

    def test_claim_firing_is_exactly_once_across_threads(self) -> None:
        stores = [as_schedules(store) for store in self._spread_stores(4)]

        def fire(store: ScheduleStore, owner: str) -> list[int]:
            at = [FIRING_BASE + timedelta(seconds=second) for second in range(100)]
            return [i for i, when in enumerate(at) if store.claim_firing("s", when, owner, owner)]

        results = run_in_threads(
            [lambda s=store, o=f"n{i}": fire(s, o) for i, store in enumerate(stores)]  # type: ignore[misc]
        )
        counted = Counter(second for won in results for second in won)
        assert sorted(counted) == list(range(100))
        assert set(counted.values()) == {1}

    def test_claim_firing_is_exactly_once_across_processes(self) -> None:
        factory = self.process_factory()
        results = run_in_processes("firing", factory, list(range(300)))
        counted = Counter(second for won in results.values() for second in won)
        assert sorted(counted) == list(range(300))
        assert set(counted.values()) == {1}

    def test_schedule_compare_and_set_has_one_winner(self) -> None:
        names = [f"sched-{i}" for i in range(20)]
        for name in names:
            self.schedules.put_schedule(name, {"v": 0}, expect_revision=None)
        stores = [as_schedules(store) for store in self._spread_stores(4)]

        def bump(store: ScheduleStore, owner: str) -> list[str]:
            won = []
            for name in names:
                try:
                    store.put_schedule(name, {"by": owner}, expect_revision=1)
                except ScheduleConflict:
                    continue
                won.append(name)
            return won

        results = run_in_threads(
            [lambda s=store, o=f"n{i}": bump(s, o) for i, store in enumerate(stores)]  # type: ignore[misc]
        )
        counted = Counter(name for won in results for name in won)
        assert all(counted[name] == 1 for name in names), counted
        for name in names:
            record = self.schedules.get_schedule(name)
            assert record is not None
            assert record.revision == 2
