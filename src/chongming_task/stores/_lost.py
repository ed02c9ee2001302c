"""What every ``mark_lost_many`` shares: which queries it accepts, and one task's write.

Every store marks tasks through the state machine, one snapshot at a time, and stores
the result with its ordinary version-guarded write (``save_many``). ``check_lost_query``
makes a query that could match a task with no edge to ``lost`` fail before anything is
read, and the caller's ``failure`` function is told about each task as a
``LostCandidate``.
"""

from __future__ import annotations

from typing import Final

from chongming_task.core.clock import Clock
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError
from chongming_task.model import Failure, FailureKind, TaskSnapshot
from chongming_task.states import TRANSITIONS, TaskStatus
from chongming_task.stores.records import LostCandidate, TaskQuery

__all__ = ["LOSABLE", "candidate_of", "check_lost_failure", "check_lost_query", "lost_transition"]

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
