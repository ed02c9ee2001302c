"""reconcile() writes its ``-> lost`` transitions in batches; a conflict costs only its task."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from chongming_task._model import FailureKind, TaskSnapshot, Transition
from chongming_task.controller import _reconcile as reconcile_module
from chongming_task.controller._reconcile import RECONCILE_TRIGGER, reconcile
from chongming_task.core.state_machine import StateMachine
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskQuery, TaskStore
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing import FakeClock

S = TaskStatus
RUNNING_PATH = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING]


class RacingStore(SqliteTaskStore):
    """The holder of ``racer`` writes first, right after reconcile read the tasks.

    On the generic ``mark_lost_many`` (a page's ``query``, then its ``save_many``): the
    native one reads and writes in one transaction, where no holder can come between.
    """

    racer = "run-0007"
    mark_lost_many = TaskStore.mark_lost_many

    def query(self, query: TaskQuery = TaskQuery()) -> list[TaskSnapshot]:  # noqa: B008
        found = super().query(query)
        current = self.get(self.racer)
        assert current is not None
        bumped = current.replace(status_version=current.status_version + 1)
        self.save(bumped, expect_version=current.status_version)
        return found


def _seed(store: SqliteTaskStore, clock: FakeClock, count: int) -> None:
    snapshots: list[tuple[TaskSnapshot, tuple[Transition, ...]]] = []
    for index in range(count):
        machine = StateMachine.create(f"run-{index:04d}", "job", owner="dead", clock=clock)
        machine.mark_queued()
        machine.mark_starting()
        machine.mark_running()
        expired = clock.now() - timedelta(seconds=1)
        snapshots.append(
            (machine.snapshot.replace(lease_owner="dead", lease_until=expired), machine.transitions)
        )
    for index in range(3):
        machine = StateMachine.create(f"idle-{index}", "job", owner="dead", clock=clock)
        machine.mark_queued()
        snapshots.append((machine.snapshot.replace(lease_owner="dead"), machine.transitions))
    for snapshot, transitions in snapshots:
        store.create(snapshot, transitions)


def test_lost_writes_go_out_in_batches_and_a_conflict_skips_only_its_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconcile_module, "WRITE_BATCH", 10)
    clock = FakeClock()
    store = RacingStore(str(tmp_path / "tasks.db"), clock=clock)
    _seed(store, clock, 35)
    heard: list[str] = []
    report = reconcile(
        store, clock=clock, actor="node-b", on_lost=lambda t, s: heard.append(t.task_id)
    )
    expected = [f"run-{index:04d}" for index in range(35) if index != 7]
    assert sorted(report.lost) == expected
    assert report.skipped == ("run-0007",)
    assert sorted(report.adoptable) == ["idle-0", "idle-1", "idle-2"]
    assert sorted(heard) == expected  # every stored lost transition announced once
    for task_id in expected:
        stored = store.get(task_id)
        assert stored is not None
        assert stored.status is S.LOST
        assert stored.lease_until is None
        assert stored.failure is not None
        assert stored.failure.kind is FailureKind.LOST
        history = store.history(task_id)
        assert [t.to_status for t in history] == [*RUNNING_PATH, S.LOST]
        assert history[-1].trigger == RECONCILE_TRIGGER
    racer = store.get("run-0007")
    assert racer is not None
    assert racer.status is S.RUNNING  # the holder's write stands
    store.close()
