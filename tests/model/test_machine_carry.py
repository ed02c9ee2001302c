"""``StateMachine.carry``: non-status changes folded into the next transition.

The runtime refreshes the heartbeat and the pid right before a transition; carried,
they land on that transition's snapshot (one copy instead of two). What no transition
takes is applied by ``settle`` exactly as ``update`` would have.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError, InvalidTransition
from chongming_task.states import TaskStatus as S
from chongming_task.testing import FakeClock

BEAT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _machine() -> StateMachine:
    machine = StateMachine.create("t", "job", clock=FakeClock())
    machine.mark_queued()
    machine.mark_starting()
    return machine


def test_carried_changes_land_on_the_next_transition() -> None:
    machine = _machine()
    before = machine.snapshot
    machine.carry(pid=42, last_heartbeat_at=BEAT)
    assert machine.snapshot is before  # nothing visible until the transition
    machine.mark_running()
    machine.settle()  # nothing left to apply
    after = machine.snapshot
    assert (after.status, after.pid, after.last_heartbeat_at) == (S.RUNNING, 42, BEAT)
    assert after.status_version == before.status_version + 1
    assert [t.to_status for t in machine.transitions][-2:] == [S.STARTING, S.RUNNING]


def test_settle_applies_what_no_transition_took() -> None:
    machine = _machine()
    machine.carry(pid=7)
    with pytest.raises(InvalidTransition):
        machine.mark_succeeded()  # starting -> succeeded is not an edge: nothing taken
    machine.settle()
    assert machine.snapshot.pid == 7
    assert machine.status is S.STARTING
    assert machine.snapshot.status_version == 2  # an update, not a transition


def test_a_transition_s_own_change_wins_over_a_carried_one() -> None:
    machine = _machine()
    machine.mark_running()
    machine.carry(finished_at=BEAT, pid=5)
    machine.mark_succeeded(outcome=1)  # sets finished_at to its own instant
    machine.settle()
    after = machine.snapshot
    assert after.status is S.SUCCEEDED
    assert after.finished_at == after.updated_at != BEAT
    assert after.pid == 5


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"status": S.FAILED}, "cannot change"), ({"nope": 1}, "unknown snapshot field")],
)
def test_carry_refuses_what_update_refuses(changes: dict[str, object], message: str) -> None:
    machine = _machine()
    with pytest.raises(ConfigurationError, match=message):
        machine.carry(**changes)
    with pytest.raises(ConfigurationError, match=message):
        machine.update(**changes)
