"""Contract cases for the work queue: claim_queued, save_unheld and the worker registry."""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime, timedelta

from chongming_task.errors import ConcurrencyConflict, ConfigurationError, DuplicateTaskId
from chongming_task.states import TaskStatus
from chongming_task.stores._queue_records import RECIPE_KEY, Recipe, WorkerRecord
from chongming_task.stores._queue_store import QueueStore
from chongming_task.stores._records import Command, TaskQuery
from chongming_task.testing import wait_until
from chongming_task.testing._store_contract._support import (
    ContractHarness,
    assert_snapshot_equal,
    raises,
)

__all__ = ["QueueCases"]

S = TaskStatus
#: How soon a woken waiter must be back (seconds of real time).
PROMPT_SECONDS = 3.0


def _worker(worker_id: str, now: datetime, buckets: tuple[int, ...], slots: int) -> WorkerRecord:
    """A registry record of ``worker_id``, started and last seen at ``now``."""
    return WorkerRecord(
        worker_id=worker_id,
        host="h",
        pid=7,
        version="1",
        buckets=buckets,
        slots=slots,
        started_at=now,
        heartbeat_at=now,
    )


def second_queue(store: object) -> QueueStore:
    """``store`` (a second connection to a queue store) as its queue part."""
    assert isinstance(store, QueueStore), type(store).__name__
    return store


class QueueCases(ContractHarness):
    """Queued unheld tasks are claimed once, in priority then FIFO order; stops race claims."""

    def require_queue(self) -> None:
        """Skip on a store without the work queue (it is optional for a backend)."""
        if not isinstance(self.store, QueueStore):
            self.skip(f"{type(self.store).__name__} has no work queue (QueueStore)")

    def queued(self, task_id: str, **changes: object) -> None:
        self.require_queue()
        recipe = changes.pop("recipe", Recipe(args=(1,)))
        meta = {} if recipe is None else {RECIPE_KEY: recipe.to_dict()}  # type: ignore[attr-defined]
        self.created(task_id, status=S.QUEUED, status_version=1, metadata=meta, **changes)

    def test_claim_takes_priority_then_fifo_and_sets_holder_and_lease(self) -> None:
        self.queued("low-1", bucket=1)
        self.queued("high", bucket=1, priority=5)
        self.queued("low-2", bucket=1)
        self.queued("other-bucket", bucket=2, priority=9)
        self.queued("no-recipe", bucket=1, priority=9, recipe=None)
        self.created("held", status=S.QUEUED, status_version=1, bucket=1, owner="w0")
        until = self.clock.now() + timedelta(seconds=30)
        got = self.queue.claim_queued("w1", buckets={1}, limit=2, lease_until=until)
        assert [s.task_id for s in got] == ["high", "low-1"]
        for task_id in ("high", "low-1"):
            stored = self.store.get(task_id)
            assert stored is not None
            assert stored.owner == "w1"
            assert stored.lease_owner == "w1"
            assert stored.lease_until == until
            assert stored.status is S.QUEUED
            assert stored.status_version == 1
        again = self.queue.claim_queued("w2", buckets={1}, limit=5, lease_until=until)
        assert [s.task_id for s in again] == ["low-2"]
        assert self.queue.claim_queued("w2", buckets=set(), limit=5, lease_until=until) == []

    def test_create_queued_stores_the_task_and_its_history_and_wakes_a_waiter(self) -> None:
        self.require_queue()
        second = self.second_store()
        meta = {RECIPE_KEY: Recipe(args=(1,)).to_dict()}
        snapshot = self.snapshot("woken", status=S.QUEUED, status_version=1, metadata=meta)
        queued = self.transition("woken", 1, S.QUEUED)
        woke = threading.Event()

        def wait() -> None:  # a worker's intake, on the other connection
            second_queue(second).wait_for_work(60.0)
            woke.set()

        with self.real_time(self.store, second) as clock:
            thread = threading.Thread(target=wait, daemon=True)
            thread.start()
            wait_until(lambda: clock.sleepers >= 1, timeout=PROMPT_SECONDS)
            self.queue.create_queued(snapshot, [queued])
            assert woke.wait(PROMPT_SECONDS), "create_queued woke no waiting worker"
            thread.join(PROMPT_SECONDS)
        assert_snapshot_equal(second.get("woken"), snapshot)
        assert [t.to_status for t in second.history("woken")] == [S.QUEUED]
        until = self.clock.now() + timedelta(seconds=30)
        claimed = second_queue(second).claim_queued("w", buckets=None, limit=5, lease_until=until)
        assert [s.task_id for s in claimed] == ["woken"]
        again = self.snapshot("woken", status=S.QUEUED, status_version=1, label="again")
        raises(
            DuplicateTaskId,
            lambda: self.queue.create_queued(again, [queued]),
            "a second create_queued of one id must raise DuplicateTaskId",
        )
        assert len(self.store.history("woken")) == 1

    def test_owned_selects_claimed_tasks_and_waiting_ones(self) -> None:
        self.queued("waiting")
        self.queued("claimed", owner="w1", lease_owner="w1")
        queued = frozenset({S.QUEUED})
        owned = self.store.query(TaskQuery(statuses=queued, owned=True))
        assert [s.task_id for s in owned] == ["claimed"]
        unowned = self.store.query(TaskQuery(statuses=queued, owned=False))
        assert [s.task_id for s in unowned] == ["waiting"]
        everyone = self.store.query(TaskQuery(statuses=queued, order="id"))
        assert [s.task_id for s in everyone] == ["claimed", "waiting"]
        raises(
            ConfigurationError,
            lambda: TaskQuery(owned="yes"),  # type: ignore[arg-type]
            "TaskQuery(owned='yes') must be refused",
        )

    def test_claim_skips_tasks_not_due(self) -> None:
        later = self.clock.now() + timedelta(seconds=60)
        self.queued("later", recipe=Recipe(not_before=later))
        until = self.clock.now() + timedelta(seconds=30)
        assert self.queue.claim_queued("w", buckets=None, limit=5, lease_until=until) == []
        self.clock.advance(61)
        got = self.queue.claim_queued("w", buckets=None, limit=5, lease_until=until)
        assert [s.task_id for s in got] == ["later"]

    def test_claim_looks_past_rows_it_cannot_take(self) -> None:
        later = self.clock.now() + timedelta(seconds=60)
        self.queued("not-due", priority=9, recipe=Recipe(not_before=later))
        self.queued("no-recipe", priority=8, recipe=None)
        self.queued("due", priority=1)
        until = self.clock.now() + timedelta(seconds=30)
        got = self.queue.claim_queued("w", buckets=None, limit=1, lease_until=until)
        assert [s.task_id for s in got] == ["due"]
        not_due = self.store.get("not-due")
        assert not_due is not None
        assert not_due.owner is None

    def test_save_unheld_loses_to_a_claim(self) -> None:
        self.queued("race")
        before = self.store.get("race")
        assert before is not None
        until = self.clock.now() + timedelta(seconds=30)
        assert len(self.queue.claim_queued("w", buckets=None, limit=1, lease_until=until)) == 1
        stopped = before.replace(status=S.STOPPED, status_version=2)
        raises(
            ConcurrencyConflict,
            lambda: self.queue.save_unheld(stopped, expect_version=1),
            "a stop of a task a worker claimed must conflict",
        )
        got = self.store.get("race")
        assert got is not None
        assert got.status is S.QUEUED
        assert got.owner == "w"

    def test_a_stop_written_first_is_never_claimed(self) -> None:
        self.queued("stopped-first")
        before = self.store.get("stopped-first")
        assert before is not None
        stopped = before.replace(status=S.STOPPED, status_version=2)
        self.queue.save_unheld(
            stopped,
            expect_version=1,
            transitions=[self.transition("stopped-first", 2, S.STOPPED, S.QUEUED)],
        )
        until = self.clock.now() + timedelta(seconds=30)
        assert self.queue.claim_queued("w", buckets=None, limit=1, lease_until=until) == []
        assert [t.version for t in self.store.history("stopped-first")] == [2]

    def test_worker_registry_upserts_and_lists(self) -> None:
        self.require_queue()
        now = self.clock.now()
        record = _worker("w1", now, buckets=(1, 2), slots=4)
        self.queue.put_worker(record)
        self.queue.put_worker(dataclasses.replace(record, heartbeat_at=now + timedelta(seconds=1)))
        found = self.queue.list_workers()
        assert [w.worker_id for w in found] == ["w1"]
        assert found[0].heartbeat_at == now + timedelta(seconds=1)
        assert found[0].buckets == (1, 2)
        assert self.queue.delete_worker("w1") is True
        assert self.queue.list_workers() == []

    def test_bucket_declarations_round_trip(self) -> None:
        """A node's bucket declaration (kind, lease, num_buckets, draining) comes back
        as written, and a ``kind="node"`` handoff command is claimed by its node only."""
        self.require_queue()
        now = self.clock.now()
        record = dataclasses.replace(
            _worker("node-a", now, buckets=(0, 1, 3), slots=2),
            kind="controller",
            lease_until=now + timedelta(seconds=5),
            num_buckets=16,
            draining=(2,),
        )
        self.queue.put_worker(record)
        assert self.queue.list_workers() == [record]
        assert record.alive(now + timedelta(seconds=5))
        assert not record.alive(now + timedelta(seconds=5.001))
        command = self.commands.submit_command(
            Command.new(
                kind="node",
                target="node-a",
                action="release_buckets",
                issued_by="op",
                issued_at=now,
                payload={"buckets": [2], "to": "node-b"},
                target_owner="node-a",
            )
        )
        assert self.commands.claim_commands("node-b", lease=5, kinds=("node",)) == []
        assert self.commands.claim_commands("node-a", lease=5, kinds=("task",)) == []
        claimed = self.commands.claim_commands("node-a", lease=5, kinds=("node",))
        assert [(c.command_id, c.kind, c.target, dict(c.payload)) for c in claimed] == [
            (command.command_id, "node", "node-a", {"buckets": [2], "to": "node-b"})
        ]
