"""``settle``: move a stored queued task to a given state as a worker would have.

For the retry tests (queue, CLI, dashboard), which need failed, stopped, lost,
succeeded... tasks in a store without running a worker for each.
"""

from __future__ import annotations

from chongming_task import TaskStatus
from chongming_task._model import Failure, FailureKind, TaskSnapshot
from chongming_task.core.state_machine import StateMachine
from chongming_task.stores._base import TaskStore

S = TaskStatus
_RAN = frozenset({S.RUNNING, S.SUCCEEDED, S.FAILED, S.STOPPED, S.LOST, S.CANCELLED})


def settle(
    store: TaskStore, task_id: str, status: TaskStatus, *, owner: str = "worker-1"
) -> TaskSnapshot:
    """Take the stored queued task ``task_id`` to ``status`` under ``owner``; the stored
    snapshot after (one guarded write with every transition)."""
    stored = store.get(task_id)
    assert stored is not None
    assert stored.status is S.QUEUED, stored
    machine = StateMachine(stored.replace(owner=owner, lease_owner=owner), clock=store.clock)
    if status in _RAN:
        machine.mark_starting(executor="thread")
        machine.mark_running()
    if status is S.SUCCEEDED:
        machine.mark_succeeded(outcome=1)
    elif status is S.FAILED:
        machine.mark_failed(Failure(kind=FailureKind.EXCEPTION, message="boom", retryable=False))
    elif status is S.STOPPED:
        machine.request_stop(actor="ops", reason="enough")
        machine.mark_stopped(reason="stopped at a checkpoint")
    elif status is S.LOST:
        machine.mark_lost(reason="worker gone")
    elif status is S.CANCELLED:
        machine.mark_cancelled(reason="upstream failed")
    elif status is S.SKIPPED:
        machine.mark_skipped(reason="nothing to do")
    else:
        assert status is S.RUNNING, status
    store.save(
        machine.snapshot, expect_version=stored.status_version, transitions=machine.transitions
    )
    after = store.get(task_id)
    assert after is not None
    assert after.status is status
    return after
