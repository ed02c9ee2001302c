"""The lifecycle vocabulary: statuses and the one transition table everything uses.

A status only answers "which lifecycle stage is this task in" (guide §1.2). Attempts,
progress, health and results are orthogonal fields of the snapshot, never statuses.

The transition table below is the single source of truth for legal edges: the state
machine, the stores' validation, the docs' diagram and the exhaustive tests all read
it. Terminal states are declared with an explicit empty set (guide §1.4).
"""

from __future__ import annotations

from enum import StrEnum
from types import MappingProxyType
from typing import Final

from chongming_task._public import public

__all__ = [
    "GUIDE_ADDITIONS",
    "NON_OCCUPYING",
    "OCCUPYING",
    "TERMINAL",
    "TRANSITIONS",
    "TaskStatus",
    "allowed_targets",
    "is_legal",
]


@public
class TaskStatus(StrEnum):
    """The 15 lifecycle stages of guide §9.1 (9 non-terminal, 6 terminal)."""

    PENDING = "pending"
    BLOCKED = "blocked"
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    PAUSING = "pausing"
    PAUSED = "paused"
    RETRY_WAIT = "retry_wait"
    STOPPING = "stopping"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    LOST = "lost"

    # Plain attributes, set on every member below from the table: they are read a
    # couple of dozen times per task, and a property call costs several times a read.
    is_terminal: bool
    """True for the six states with no outgoing edge."""
    occupies_slot: bool
    """True when a task in this state holds execution resources (guide §8.11)."""

    def __str__(self) -> str:
        return self.value


S = TaskStatus

#: Guide §9.2, plus the edges of ``GUIDE_ADDITIONS``. Keys are sources, values the legal targets.
TRANSITIONS: Final = MappingProxyType(
    {
        S.PENDING: frozenset({S.BLOCKED, S.QUEUED, S.SKIPPED, S.CANCELLED, S.STOPPED}),
        S.BLOCKED: frozenset({S.QUEUED, S.SKIPPED, S.CANCELLED, S.STOPPED}),
        S.QUEUED: frozenset({S.STARTING, S.PAUSED, S.SKIPPED, S.STOPPED, S.CANCELLED}),
        S.STARTING: frozenset(
            {S.RUNNING, S.RETRY_WAIT, S.PAUSING, S.STOPPING, S.FAILED, S.CANCELLED, S.LOST}
        ),
        S.RUNNING: frozenset(
            {S.SUCCEEDED, S.FAILED, S.RETRY_WAIT, S.PAUSING, S.STOPPING, S.CANCELLED, S.LOST}
        ),
        S.PAUSING: frozenset({S.PAUSED, S.RUNNING, S.STOPPING, S.FAILED, S.CANCELLED, S.LOST}),
        S.PAUSED: frozenset({S.QUEUED, S.RUNNING, S.STOPPED, S.CANCELLED}),
        S.RETRY_WAIT: frozenset({S.STARTING, S.QUEUED, S.PAUSED, S.STOPPED, S.FAILED, S.CANCELLED}),
        S.STOPPING: frozenset({S.STOPPED, S.SUCCEEDED, S.FAILED, S.LOST, S.QUEUED}),
        S.SUCCEEDED: frozenset(),
        S.FAILED: frozenset(),
        S.STOPPED: frozenset(),
        S.CANCELLED: frozenset(),
        S.SKIPPED: frozenset(),
        S.LOST: frozenset(),
    }
)

#: Edges we add to the guide's §9.2 table, each with its reason; tests check that
#: ``TRANSITIONS`` is exactly §9.2 plus these. (A body raising ``TaskSkipped`` ends
#: ``running -> skipped`` through the explicit ``StateMachine.body_skipped()``, outside
#: the table like ``retry()``/``reset()``; ``can(SKIPPED)`` from ``running`` is False.)
GUIDE_ADDITIONS: Final[MappingProxyType[tuple[TaskStatus, TaskStatus], str]] = MappingProxyType(
    {
        (S.STOPPING, S.QUEUED): (
            "a worker shutting down hands a task it stopped at a checkpoint back to the "
            "queue, unheld, for another worker (StateMachine.hand_back, trigger "
            "worker:shutdown_requeue): the stop was the worker's, not an operator's"
        ),
    }
)

#: States with no outgoing edge. Derived from the table so the two never disagree.
TERMINAL: Final = frozenset(status for status, targets in TRANSITIONS.items() if not targets)

#: States that hold an execution slot: a control action on them needs an intermediate
#: state (stopping/pausing), and an expired lease on them means the carrier is gone.
OCCUPYING: Final = frozenset({S.STARTING, S.RUNNING, S.PAUSING, S.STOPPING})

for _member in TaskStatus:
    _member.is_terminal = _member in TERMINAL
    _member.occupies_slot = _member in OCCUPYING
del _member

#: Non-terminal states that hold no execution slot: control takes effect immediately.
NON_OCCUPYING: Final = frozenset(set(TaskStatus) - TERMINAL - OCCUPYING)


def allowed_targets(status: TaskStatus) -> frozenset[TaskStatus]:
    """The legal targets from ``status`` (empty for terminal states)."""
    return TRANSITIONS[status]


def is_legal(source: TaskStatus, target: TaskStatus) -> bool:
    """Whether ``source -> target`` is an edge of the transition table."""
    return target in TRANSITIONS[source]
