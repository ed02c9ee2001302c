"""The transition table is guide §9.2 plus exactly the documented additions."""

from __future__ import annotations

from chongming_task.states import (
    GUIDE_ADDITIONS,
    NON_OCCUPYING,
    OCCUPYING,
    TERMINAL,
    TRANSITIONS,
    TaskStatus,
    allowed_targets,
    is_legal,
)

S = TaskStatus

#: Guide §9.2, copied by hand from the guide so that a change to ``states.py`` that
#: the guide does not make fails here.
GUIDE_9_2 = {
    "PENDING": {"BLOCKED", "QUEUED", "SKIPPED", "CANCELLED", "STOPPED"},
    "BLOCKED": {"QUEUED", "SKIPPED", "CANCELLED", "STOPPED"},
    "QUEUED": {"STARTING", "PAUSED", "SKIPPED", "STOPPED", "CANCELLED"},
    "STARTING": {"RUNNING", "RETRY_WAIT", "PAUSING", "STOPPING", "FAILED", "CANCELLED", "LOST"},
    "RUNNING": {"SUCCEEDED", "FAILED", "RETRY_WAIT", "PAUSING", "STOPPING", "CANCELLED", "LOST"},
    "PAUSING": {"PAUSED", "RUNNING", "STOPPING", "FAILED", "CANCELLED", "LOST"},
    "PAUSED": {"QUEUED", "RUNNING", "STOPPED", "CANCELLED"},
    "RETRY_WAIT": {"STARTING", "QUEUED", "PAUSED", "STOPPED", "FAILED", "CANCELLED"},
    "STOPPING": {"STOPPED", "SUCCEEDED", "FAILED", "LOST"},
    "SUCCEEDED": set(),
    "FAILED": set(),
    "STOPPED": set(),
    "CANCELLED": set(),
    "SKIPPED": set(),
    "LOST": set(),
}


def _edges(table: dict[str, set[str]]) -> set[tuple[TaskStatus, TaskStatus]]:
    return {
        (TaskStatus[source], TaskStatus[target])
        for source, targets in table.items()
        for target in targets
    }


def test_fifteen_statuses_with_the_guide_values() -> None:
    assert [status.value for status in TaskStatus] == [
        "pending",
        "blocked",
        "queued",
        "starting",
        "running",
        "pausing",
        "paused",
        "retry_wait",
        "stopping",
        "succeeded",
        "failed",
        "stopped",
        "cancelled",
        "skipped",
        "lost",
    ]
    assert str(S.RETRY_WAIT) == "retry_wait"
    assert f"{S.RUNNING}" == "running"


def test_table_is_guide_plus_exactly_the_additions() -> None:
    actual = {(source, target) for source, targets in TRANSITIONS.items() for target in targets}
    guide = _edges(GUIDE_9_2)
    assert set(TRANSITIONS) == set(TaskStatus)
    assert actual - guide == set(GUIDE_ADDITIONS)
    assert guide <= actual
    # One addition, each with its reason (TaskSkipped uses body_skipped(), no edge).
    assert set(GUIDE_ADDITIONS) == {(S.STOPPING, S.QUEUED)}  # a worker shutdown's hand-back
    assert all(GUIDE_ADDITIONS.values())


def test_terminal_states_have_explicit_empty_sets() -> None:
    assert {S.SUCCEEDED, S.FAILED, S.STOPPED, S.CANCELLED, S.SKIPPED, S.LOST} == TERMINAL
    for status in TERMINAL:
        assert TRANSITIONS[status] == frozenset()
        assert status.is_terminal
    assert len(set(TaskStatus) - TERMINAL) == 9


def test_occupying_partition() -> None:
    assert {S.STARTING, S.RUNNING, S.PAUSING, S.STOPPING} == OCCUPYING
    assert {S.PENDING, S.BLOCKED, S.QUEUED, S.PAUSED, S.RETRY_WAIT} == NON_OCCUPYING
    assert set(TaskStatus) == OCCUPYING | NON_OCCUPYING | TERMINAL
    assert not OCCUPYING & NON_OCCUPYING
    assert not OCCUPYING & TERMINAL
    assert not NON_OCCUPYING & TERMINAL
    assert all(status.occupies_slot for status in OCCUPYING)
    assert not any(status.occupies_slot for status in NON_OCCUPYING | TERMINAL)


def test_control_needs_a_buffer_exactly_when_a_slot_is_held() -> None:
    """§9.2's closing rule: occupying states stop via stopping, the others stop at once."""
    for status in NON_OCCUPYING:
        assert S.STOPPED in TRANSITIONS[status]
        assert S.STOPPING not in TRANSITIONS[status]
    for status in OCCUPYING - {S.STOPPING}:
        assert S.STOPPING in TRANSITIONS[status]
        assert S.STOPPED not in TRANSITIONS[status]


def test_table_is_immutable() -> None:
    try:
        TRANSITIONS[S.SUCCEEDED] = frozenset({S.RUNNING})  # type: ignore[index]
    except TypeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("TRANSITIONS must be read-only")
    assert isinstance(TRANSITIONS[S.PENDING], frozenset)


def test_helpers_read_the_table() -> None:
    for source in TaskStatus:
        assert allowed_targets(source) == TRANSITIONS[source]
        for target in TaskStatus:
            assert is_legal(source, target) == (target in TRANSITIONS[source])
