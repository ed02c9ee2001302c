"""Contract cases for ``mark_lost_many``: restart recovery's bulk ``-> lost``.

Every store reads the tasks, runs the state machine and saves the result; every
marked task must read back exactly as the state machine left it, with its transition
in the history, and nothing else may change: tasks the query does not match, tasks
whose lease is live, fields the transition does not touch.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from chongming_task._model import Failure, FailureKind, Progress, TaskSnapshot
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError
from chongming_task.states import OCCUPYING, TaskStatus
from chongming_task.stores._base import LostCandidate, LostMark, TaskQuery
from chongming_task.testing._fake_clock import FakeClock
from chongming_task.testing._store_contract._support import (
    ContractHarness,
    assert_snapshot_equal,
    raises,
)

__all__ = ["LostCases"]

S = TaskStatus
ACTOR = "node-b"
TRIGGER = "contract:lease_expired"


def _failure(task: LostCandidate) -> Failure:
    """A message made of every candidate field, so a wrong field shows in the text."""
    until = task.lease_until.isoformat() if task.lease_until else "never"
    return Failure(
        kind=FailureKind.LOST,
        message=(
            f"{task.task_id} v{task.status_version} {task.status.value}: "
            f"{task.lease_owner or task.owner or '?'} gone since {until}"
        ),
        retryable=True,
    )


class LostCases(ContractHarness):
    """``mark_lost_many``."""

    def expired(
        self, task_id: str, status: TaskStatus = S.RUNNING, **changes: object
    ) -> TaskSnapshot:
        """A task of a dead holder, ``status``, whose lease ended a minute ago."""
        fields: dict[str, object] = {
            "status": status,
            "status_version": 4,
            "attempt": 1,
            "started_at": self.clock.now() - timedelta(hours=1),
            "owner": "dead",
            "lease_owner": "dead",
            "lease_until": self.clock.now() - timedelta(minutes=1),
        }
        fields.update(changes)
        return self.created(task_id, **fields)

    def query(self, *task_ids: str) -> TaskQuery:
        return TaskQuery(
            task_ids=frozenset(task_ids) if task_ids else None,
            statuses=OCCUPYING,
            lease_expired_by=self.clock.now(),
        )

    def mark(self, query: TaskQuery, *, snapshots: bool = False) -> list[LostMark]:
        return self.store.mark_lost_many(
            query,
            clock=self.clock,
            actor=ACTOR,
            trigger=TRIGGER,
            failure=_failure,
            snapshots=snapshots,
        )

    def expected(self, before: TaskSnapshot) -> StateMachine:
        """What the state machine makes of ``before`` at the suite clock's instant."""
        machine = StateMachine(before, clock=FakeClock(self.clock.now()))
        failure = _failure(
            LostCandidate(
                before.task_id,
                before.status,
                before.status_version,
                before.owner,
                before.lease_owner,
                before.lease_until,
            )
        )
        machine.mark_lost(
            failure, actor=ACTOR, reason=failure.message, trigger=TRIGGER, release_lease=True
        )
        return machine

    def test_mark_lost_many_writes_what_the_state_machine_would(self) -> None:
        rich = self.rich_snapshot("rich").replace(
            lease_until=self.clock.now() - timedelta(seconds=1)
        )
        self.store.create(rich)
        self.expired("plain", S.STARTING)
        self.expired("stopping", S.STOPPING, owner=None, lease_owner=None)
        self.expired("pausing", S.PAUSING, lease_until=None)
        befores = {
            task_id: self.store.get(task_id) for task_id in ("plain", "stopping", "pausing", "rich")
        }
        self.clock.advance(5)
        marks = self.mark(self.query())
        assert [mark.task_id for mark in marks] == ["rich", "plain", "stopping", "pausing"]
        for mark in marks:
            before = befores[mark.task_id]
            assert before is not None
            machine = self.expected(before)
            stored = self.store.get(mark.task_id)
            assert stored is not None
            assert_snapshot_equal(stored, machine.snapshot)
            assert stored.lease_owner == before.lease_owner  # kept: who held it
            assert mark.transition == machine.transitions[-1]
            assert self.store.history(mark.task_id) == [machine.transitions[-1]]

    def test_mark_lost_many_returns_snapshots_when_asked(self) -> None:
        self.expired("one")
        self.expired("two", S.PAUSING)
        plain = self.mark(self.query("one"))
        assert [(mark.task_id, mark.transition is not None) for mark in plain] == [("one", True)]
        marks = self.mark(self.query("two"), snapshots=True)
        assert [mark.task_id for mark in marks] == ["two"]
        assert marks[0].snapshot is not None
        stored = self.store.get("two")
        assert stored is not None
        assert_snapshot_equal(marks[0].snapshot, stored)
        assert marks[0].transition is not None
        assert marks[0].transition.version == stored.status_version

    def test_mark_lost_many_touches_only_what_the_query_matches(self) -> None:
        self.expired("gone")
        live = self.expired("live", lease_until=self.clock.now() + timedelta(seconds=30))
        queued = self.expired("queued", S.QUEUED, started_at=None, attempt=0)
        other = self.expired("other")
        marks = self.mark(self.query("gone", "live", "queued"))
        assert [mark.task_id for mark in marks] == ["gone"]
        for untouched in (live, queued, other):
            stored = self.store.get(untouched.task_id)
            assert stored is not None
            assert_snapshot_equal(stored, untouched)
            assert self.store.history(untouched.task_id) == []
        assert self.mark(self.query("live", "queued")) == []

    def test_mark_lost_many_sees_the_side_channel(self) -> None:
        self.expired("touched")
        beat = self.clock.now() - timedelta(seconds=90)
        lease = self.clock.now() - timedelta(seconds=3)
        progress = Progress(done=3, total=9, unit="步", message='中途 "x"')
        assert self.store.touch(
            "touched",
            progress=progress,
            heartbeat_at=beat,
            lease_owner="other-holder",
            lease_until=lease,
            pid=4242,
        )
        before = self.store.get("touched")
        assert before is not None
        seen: list[LostCandidate] = []

        def failure(task: LostCandidate) -> Failure:
            seen.append(task)
            return _failure(task)

        self.store.mark_lost_many(
            self.query("touched"), clock=self.clock, actor=ACTOR, trigger=TRIGGER, failure=failure
        )
        assert seen == [LostCandidate("touched", S.RUNNING, 4, "dead", "other-holder", lease)]
        stored = self.store.get("touched")
        assert stored is not None
        assert_snapshot_equal(stored, self.expected(before).snapshot)
        assert stored.progress == progress
        assert stored.last_heartbeat_at == beat
        assert stored.pid == 4242

    def test_mark_lost_many_refuses_queries_it_cannot_honour(self) -> None:
        self.expired("task")
        raises(
            ConfigurationError,
            lambda: self.mark(TaskQuery(task_ids=frozenset({"task"}))),
            "a query without a status limit could match a task lost is illegal from",
        )
        raises(
            ConfigurationError,
            lambda: self.mark(TaskQuery(statuses=frozenset({S.RUNNING, S.QUEUED}))),
            "queued has no edge to lost",
        )

        def wrong_kind(task: LostCandidate) -> Failure:
            return Failure(kind=FailureKind.EXCEPTION, message="no")

        raises(
            ConfigurationError,
            lambda: self.store.mark_lost_many(
                self.query(), clock=self.clock, actor=ACTOR, trigger=TRIGGER, failure=wrong_kind
            ),
            "a lost task's failure must be of kind lost",
        )
        stored = self.store.get("task")
        assert stored is not None
        assert stored.status is S.RUNNING
        assert self.store.history("task") == []
        assert self.mark(dataclasses.replace(self.query(), task_ids=frozenset())) == []
