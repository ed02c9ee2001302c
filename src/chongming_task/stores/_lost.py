"""What every ``mark_lost_many`` shares: which queries it accepts, and one task's write.

Every store can mark tasks through the state machine, one snapshot at a time, and store
the result with its ordinary version-guarded write (``save_many``). ``check_lost_query``
makes a query that could match a task with no edge to ``lost`` fail before anything is
read, and the caller's ``failure`` function is told about each task as a
``LostCandidate``.

``lost_change`` is the same state machine run once for a group of tasks that share
their status and failure: what ``-> lost`` does to any task of the group, for a store
that applies it to many rows without decoding each one (SQLite's ``_sqlite_lost``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, NamedTuple

from chongming_task._model import Failure, FailureKind, TaskSnapshot, Transition
from chongming_task.core import Clock
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError
from chongming_task.states import TRANSITIONS, TaskStatus
from chongming_task.stores._records import LostCandidate, TaskQuery

__all__ = [
    "LOSABLE",
    "LOST_FIELDS",
    "LostChange",
    "Marking",
    "candidate_of",
    "check_lost_failure",
    "check_lost_query",
    "lost_change",
    "lost_transition",
]


@dataclass(frozen=True, slots=True)
class Marking:
    """The arguments of one ``mark_lost_many`` call, for a dialect's own path."""

    query: TaskQuery
    clock: Clock
    actor: str
    trigger: str
    describe: Callable[[LostCandidate], Failure]


#: The statuses with an edge to ``lost`` (the occupying ones: a carrier may hold them).
LOSABLE: Final = frozenset(
    status for status, targets in TRANSITIONS.items() if TaskStatus.LOST in targets
)


def check_lost_query(query: TaskQuery) -> None:
    """Refuse a query that could match a task ``lost`` is not legal from.

    Checked up front, not per task: a bulk write that failed halfway through on one
    illegal task would leave the caller guessing which tasks were marked.

    Raises:
        ConfigurationError: ``query.statuses`` is unset or names a status with no edge
            to ``lost``.
    """
    if query.statuses is None or not set(query.statuses) <= LOSABLE:
        given = (
            "every status" if query.statuses is None else sorted(s.value for s in query.statuses)
        )
        raise ConfigurationError(
            "mark_lost_many needs query.statuses limited to statuses with an edge to "
            f"'lost' ({sorted(s.value for s in LOSABLE)}), got {given}"
        )


def check_lost_failure(failure: object) -> Failure:
    """``failure`` if it is a ``Failure`` of kind ``lost`` (what the caller's function returns).

    Raises:
        ConfigurationError: Anything else; a lost task's record must say it was lost.
    """
    if not isinstance(failure, Failure) or failure.kind is not FailureKind.LOST:
        raise ConfigurationError(
            f"a lost task's failure must be a Failure of kind 'lost', got {failure!r}"
        )
    return failure


def candidate_of(snapshot: TaskSnapshot) -> LostCandidate:
    """The ``LostCandidate`` view of a decoded snapshot."""
    return LostCandidate(
        snapshot.task_id,
        snapshot.status,
        snapshot.status_version,
        snapshot.owner,
        snapshot.lease_owner,
        snapshot.lease_until,
    )


def lost_transition(
    snapshot: TaskSnapshot, *, clock: Clock, actor: str, trigger: str, failure: Failure
) -> StateMachine:
    """The state machine after ``-> lost`` of ``snapshot``, its lease released.

    ``reason`` is the failure's message: the record says why in the same words the
    snapshot does.

    Raises:
        ConfigurationError: ``failure`` is not of kind ``lost``.
    """
    machine = StateMachine(snapshot, clock=clock)
    machine.mark_lost(
        check_lost_failure(failure),
        actor=actor,
        reason=failure.message,
        trigger=trigger,
        release_lease=True,
    )
    return machine


#: The snapshot fields ``-> lost`` (lease released) sets, besides ``status_version``.
LOST_FIELDS: Final = ("status", "updated_at", "finished_at", "failure", "lease_until")


class LostChange(NamedTuple):
    """What the state machine's ``-> lost`` does to every task of one group.

    A group is the tasks of one call that share their status and failure: the state
    machine's change to them differs only in each task's own ``status_version`` (+ 1)
    and, in the record, its id and ``attempt``.
    """

    fields: dict[str, Any]
    """Each of ``LOST_FIELDS`` and its value after the transition, as the snapshot's
    ``to_dict`` writes it (the stored document's members)."""
    updated_at: datetime
    """The transition's instant (``updated_at`` of every task of the group)."""
    record: Transition
    """The representative's transition record (trigger, actor, reason, at, statuses)."""

    def transition(self, task_id: str, version: int, attempt: int) -> Transition:
        """The record of one task of the group, now at ``version``."""
        record = self.record
        return Transition(
            task_id=task_id,
            from_status=record.from_status,
            to_status=record.to_status,
            trigger=record.trigger,
            version=version,
            at=record.at,
            actor=record.actor,
            reason=record.reason,
            attempt=attempt,
        )


def lost_change(
    representative: TaskSnapshot, *, clock: Clock, actor: str, trigger: str, failure: Failure
) -> LostChange | None:
    """``lost_transition`` of ``representative``, as a change for its whole group.

    ``None`` when the state machine changed more than ``LOST_FIELDS`` (and the version
    by one): then the change may depend on a task's other fields, and each task must
    go through the state machine on its own.

    Raises:
        ConfigurationError: ``failure`` is not of kind ``lost``.
    """
    machine = lost_transition(
        representative, clock=clock, actor=actor, trigger=trigger, failure=failure
    )
    after = machine.snapshot
    old, new = representative.to_dict(), after.to_dict()
    changed = {name for name, value in new.items() if old.get(name) != value}
    if (
        not changed <= {*LOST_FIELDS, "status_version"}
        or after.status_version != representative.status_version + 1
        or len(machine.transitions) != 1
    ):
        return None
    return LostChange(
        {name: new[name] for name in LOST_FIELDS}, after.updated_at, machine.transitions[0]
    )
