"""Every (from, to) pair of statuses: legal per the table, or refused by the API.

Each public action is tried from a natural path to every state (``edges.SETUPS``).
A call either raises (and changes nothing) or performs exactly one legal edge; and
every legal edge is performed by some action. Together that is the table, enforced.
"""

from __future__ import annotations

import itertools
from functools import cache

import pytest

from chongming_task.errors import AttemptsExhausted, ConfigurationError, InvalidTransition
from chongming_task.states import TERMINAL, TRANSITIONS, TaskStatus

from .edges import ACTIONS, SETUPS, TARGET_METHOD, build, witnesses

S = TaskStatus
LEGAL = {(source, target) for source, targets in TRANSITIONS.items() for target in targets}
PAIRS = list(itertools.product(TaskStatus, TaskStatus))


@cache
def _witnesses() -> dict[tuple[TaskStatus, TaskStatus], list[str]]:
    return witnesses()


def _setups_at(status: TaskStatus) -> list[str]:
    return [name for name, (reached, _path) in SETUPS.items() if reached is status]


def test_every_state_is_reachable_by_a_setup() -> None:
    assert {reached for reached, _path in SETUPS.values()} == set(TaskStatus)


@pytest.mark.parametrize(("setup", "action"), list(itertools.product(SETUPS, ACTIONS)))
def test_action_is_one_legal_edge_or_changes_nothing(setup: str, action: str) -> None:
    machine = build(setup)
    before = machine.snapshot
    history = machine.transitions
    try:
        ACTIONS[action](machine)
    except (InvalidTransition, AttemptsExhausted) as exc:
        error: InvalidTransition | AttemptsExhausted | None = exc
    else:
        error = None
    if error is not None:
        assert machine.snapshot is before
        assert machine.transitions == history
        if isinstance(error, InvalidTransition):
            assert error.current is before.status
            assert error.allowed == tuple(sorted(TRANSITIONS[before.status], key=str))
            assert f"illegal state transition: {before.status.value} -> " in str(error)
        return
    after = machine.snapshot
    assert (before.status, after.status) in LEGAL
    assert after.status_version == before.status_version + 1
    assert machine.transitions[:-1] == history
    record = machine.transitions[-1]
    assert (record.from_status, record.to_status) == (before.status, after.status)
    assert record.version == after.status_version
    assert record.at == after.updated_at
    assert record.attempt == after.attempt


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=lambda s: s.value)
def test_pair(source: TaskStatus, target: TaskStatus) -> None:
    produced_by = _witnesses().get((source, target))
    if (source, target) in LEGAL:
        assert produced_by, f"no public action performs the legal edge {source} -> {target}"
        return
    assert produced_by is None, f"{produced_by} performed the illegal edge {source} -> {target}"
    if target is S.PENDING:
        return  # only reset() enters pending; see test_reset_*
    for setup in _setups_at(source):
        machine = build(setup)
        with pytest.raises(InvalidTransition) as info:
            ACTIONS[TARGET_METHOD[target]](machine)
        assert info.value.current is source
        assert info.value.target is target
        allowed = ", ".join(sorted(t.value for t in TRANSITIONS[source])) or "none (terminal)"
        assert f"allowed now: {allowed}" in str(info.value)
        assert machine.status is source


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=lambda s: s.value)
def test_force_path_reaches_any_pair_with_audit(source: TaskStatus, target: TaskStatus) -> None:
    machine = build(_setups_at(source)[0])
    version = machine.snapshot.status_version
    with pytest.raises(InvalidTransition, match="actor"):
        machine.force_transition(target, actor=" ", reason="checked by hand")
    with pytest.raises(InvalidTransition, match="reason"):
        machine.force_transition(target, actor="ops", reason="")
    assert machine.snapshot.status_version == version
    machine.force_transition(target, actor="ops", reason="checked by hand")
    assert machine.status is target
    assert machine.snapshot.status_version == version + 1
    record = machine.transitions[-1]
    assert (record.from_status, record.to_status, record.trigger) == (
        source,
        target,
        "machine:forced",
    )
    assert (record.actor, record.reason) == ("ops", "checked by hand")
    assert (machine.snapshot.finished_at is not None) == (target in TERMINAL)


@pytest.mark.parametrize("setup", list(SETUPS))
def test_reset_only_from_terminal_and_only_confirmed(setup: str) -> None:
    machine = build(setup)
    source = machine.status
    with pytest.raises(ConfigurationError, match="confirm=True"):
        machine.reset()
    if source not in TERMINAL:
        with pytest.raises(InvalidTransition, match="terminal"):
            machine.reset(confirm=True)
        assert machine.status is source
        return
    machine.reset(confirm=True, actor="ops", reason="run it again from scratch")
    assert machine.status is S.PENDING
    assert machine.snapshot.attempt == 0
    assert machine.transitions[-1].trigger == "machine:reset"


@pytest.mark.parametrize("setup", list(SETUPS))
def test_retry_only_from_failed_stopped_cancelled_lost(setup: str) -> None:
    machine = build(setup)
    source = machine.status
    retryable = {S.FAILED, S.STOPPED, S.CANCELLED, S.LOST}
    assert machine.can_retry() == (source in retryable)
    if source not in retryable:
        with pytest.raises(InvalidTransition):
            machine.retry()
        return
    attempts = machine.snapshot.attempt
    machine.retry(actor="ops")
    assert machine.status is S.QUEUED
    assert machine.snapshot.attempt == attempts
    assert machine.snapshot.max_attempts >= attempts + 1
    assert machine.transitions[-1].trigger == "machine:retry"


@pytest.mark.parametrize("setup", list(SETUPS))
def test_can_predicates_agree_with_the_actions(setup: str) -> None:
    for predicate, action in (
        ("can_stop", "request_stop"),
        ("can_pause", "request_pause"),
        ("can_resume", "resume"),
    ):
        machine = build(setup)
        allowed = getattr(machine, predicate)()
        try:
            ACTIONS[action](machine)
        except InvalidTransition:
            assert not allowed, (predicate, setup)
        else:
            assert allowed, (predicate, setup)
    machine = build(setup)
    for target in TaskStatus:
        assert machine.can(target) == (target in TRANSITIONS[machine.status])
