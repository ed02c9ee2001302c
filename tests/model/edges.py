"""The state machine's public actions and natural paths to every state.

Shared by the exhaustive edge tests and by the design-doc generator
(``python -m tests.model.design_doc``), so the diagram's edge labels are the methods
that were actually observed to produce each edge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from chongming_task._model import Failure, FailureKind
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import AttemptsExhausted, InvalidTransition
from chongming_task.states import TaskStatus
from chongming_task.testing import FakeClock

S = TaskStatus

Action = Callable[[StateMachine], object]

BOOM = Failure(kind=FailureKind.EXCEPTION, message="boom", retryable=True)

#: Every public edge method, called with typical arguments. ``retry``, ``reset`` and
#: ``force_transition`` are the explicit escapes and are tested on their own.
ACTIONS: dict[str, Action] = {
    "mark_blocked": lambda m: m.mark_blocked(reason="waiting for upstream"),
    "mark_queued": lambda m: m.mark_queued(),
    "mark_starting": lambda m: m.mark_starting(executor="thread"),
    "mark_running": lambda m: m.mark_running(),
    "request_pause": lambda m: m.request_pause(actor="ops"),
    "mark_pausing": lambda m: m.mark_pausing(),
    "mark_paused": lambda m: m.mark_paused(),
    "abort_pause": lambda m: m.abort_pause(reason="no checkpoint in time"),
    "resume": lambda m: m.resume(actor="ops"),
    "request_stop": lambda m: m.request_stop(actor="ops", reason="maintenance"),
    "mark_stopping": lambda m: m.mark_stopping(),
    "mark_stopped": lambda m: m.mark_stopped(reason="maintenance"),
    "mark_succeeded": lambda m: m.mark_succeeded(outcome={"rows": 1}),
    "mark_failed": lambda m: m.mark_failed(BOOM),
    "mark_retry_wait": lambda m: m.mark_retry_wait(BOOM, delay=1.0),
    "mark_cancelled": lambda m: m.mark_cancelled(reason="sibling failed"),
    "mark_skipped": lambda m: m.mark_skipped(reason="condition false"),
    "mark_lost": lambda m: m.mark_lost(reason="lease expired"),
    "hand_back": lambda m: m.hand_back(actor="w1", reason="worker shutdown"),
}

#: The ``mark_*`` method whose name is its target, for every state but ``pending``
#: (which only ``reset()`` enters).
TARGET_METHOD: dict[TaskStatus, str] = {
    S.BLOCKED: "mark_blocked",
    S.QUEUED: "mark_queued",
    S.STARTING: "mark_starting",
    S.RUNNING: "mark_running",
    S.PAUSING: "mark_pausing",
    S.PAUSED: "mark_paused",
    S.RETRY_WAIT: "mark_retry_wait",
    S.STOPPING: "mark_stopping",
    S.STOPPED: "mark_stopped",
    S.SUCCEEDED: "mark_succeeded",
    S.FAILED: "mark_failed",
    S.CANCELLED: "mark_cancelled",
    S.SKIPPED: "mark_skipped",
    S.LOST: "mark_lost",
}

_RUN = ["mark_queued", "mark_starting", "mark_running"]

#: Natural paths from ``pending`` (max_attempts=3) to every state, with the variants
#: that matter (a pause in place versus a pause before start, and so on).
SETUPS: dict[str, tuple[TaskStatus, list[str]]] = {
    "pending": (S.PENDING, []),
    "blocked": (S.BLOCKED, ["mark_blocked"]),
    "queued": (S.QUEUED, ["mark_queued"]),
    "queued_after_blocked": (S.QUEUED, ["mark_blocked", "mark_queued"]),
    "queued_after_pause": (S.QUEUED, ["mark_queued", "request_pause", "resume"]),
    "starting": (S.STARTING, ["mark_queued", "mark_starting"]),
    "starting_second_attempt": (
        S.STARTING,
        [*_RUN, "mark_retry_wait", "mark_starting"],
    ),
    "starting_last_attempt": (
        S.STARTING,
        [
            *_RUN,
            "mark_retry_wait",
            "mark_starting",
            "mark_running",
            "mark_retry_wait",
            "mark_starting",
        ],
    ),
    "running": (S.RUNNING, _RUN),
    "running_after_pause_aborted": (S.RUNNING, [*_RUN, "request_pause", "abort_pause"]),
    "running_after_resume": (S.RUNNING, [*_RUN, "request_pause", "mark_paused", "resume"]),
    "pausing": (S.PAUSING, [*_RUN, "request_pause"]),
    "pausing_from_starting": (S.PAUSING, ["mark_queued", "mark_starting", "request_pause"]),
    "paused_in_place": (S.PAUSED, [*_RUN, "request_pause", "mark_paused"]),
    "paused_before_start": (S.PAUSED, ["mark_queued", "request_pause"]),
    "paused_in_retry_wait": (S.PAUSED, [*_RUN, "mark_retry_wait", "request_pause"]),
    "retry_wait": (S.RETRY_WAIT, [*_RUN, "mark_retry_wait"]),
    "retry_wait_from_starting": (S.RETRY_WAIT, ["mark_queued", "mark_starting", "mark_retry_wait"]),
    "stopping": (S.STOPPING, [*_RUN, "request_stop"]),
    "stopping_from_pausing": (S.STOPPING, [*_RUN, "request_pause", "request_stop"]),
    "succeeded": (S.SUCCEEDED, [*_RUN, "mark_succeeded"]),
    "failed": (S.FAILED, [*_RUN, "mark_failed"]),
    "stopped": (S.STOPPED, ["mark_queued", "request_stop"]),
    "stopped_after_stopping": (S.STOPPED, [*_RUN, "request_stop", "mark_stopped"]),
    "cancelled": (S.CANCELLED, ["mark_cancelled"]),
    "skipped": (S.SKIPPED, ["mark_skipped"]),
    "lost": (S.LOST, [*_RUN, "mark_lost"]),
}

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def build(setup: str, *, max_attempts: int = 3) -> StateMachine:
    """A machine driven along ``SETUPS[setup]``, on a FakeClock advanced per step."""
    clock = FakeClock(T0)
    machine = StateMachine.create("t1", "extract", max_attempts=max_attempts, clock=clock)
    expected, path = SETUPS[setup]
    for name in path:
        clock.advance(1)
        ACTIONS[name](machine)
    assert machine.status is expected, (setup, machine.status)
    return machine


def observe() -> Iterator[tuple[str, str, TaskStatus, TaskStatus | None, BaseException | None]]:
    """Every (setup, action) pair: ``(setup, action, before, after or None, error)``."""
    for setup in SETUPS:
        for action, call in ACTIONS.items():
            machine = build(setup)
            before = machine.status
            try:
                call(machine)
            except (InvalidTransition, AttemptsExhausted) as exc:
                yield setup, action, before, None, exc
            else:
                yield setup, action, before, machine.status, None


def witnesses() -> dict[tuple[TaskStatus, TaskStatus], list[str]]:
    """Each edge produced by some public action -> the sorted actions that produced it."""
    found: dict[tuple[TaskStatus, TaskStatus], set[str]] = {}
    for _setup, action, before, after, _error in observe():
        if after is not None:
            found.setdefault((before, after), set()).add(action)
    return {edge: sorted(actions) for edge, actions in found.items()}
