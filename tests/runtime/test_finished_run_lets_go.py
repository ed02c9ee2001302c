"""A finished run lets go of its arguments and its attempt (``Driver._let_go_locked``).

A controller holds every terminal run until ``prune()``; a run that kept its task's
arguments and its attempt's control block would pin a user's payload for hours and
give the cyclic garbage collector more to walk on every collection.
"""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import pytest

from chongming_task import Controller, TaskRun
from chongming_task.errors import ConfigurationError
from chongming_task.policies import FixedBackoff, RetryPolicy
from chongming_task.runtime.executors.inline import InlineExecutor
from chongming_task.states import TaskStatus as S
from chongming_task.testing import wait_until


class Payload:
    """An argument we can watch with a weak reference."""


def _statuses(run: TaskRun) -> list[S]:
    return [t.to_status for t in run.transitions]


def test_a_succeeded_run_held_by_its_controller_frees_its_arguments() -> None:
    payload = Payload()
    gone = weakref.ref(payload)
    with Controller(max_parallel=1) as controller:
        controller.register("take", lambda ctx, p: "done")
        run = controller.submit("take", payload)
        del payload
        outcome = run.wait(timeout=10)
        assert outcome.value == "done"
        assert _statuses(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
        assert controller.run(run.task_id) is run  # still held: terminal until pruned
        assert gone() is None  # freed by reference counting, no collection needed


def test_a_failed_run_frees_its_arguments_only_after_its_last_attempt() -> None:
    payload = Payload()
    gone = weakref.ref(payload)
    seen: list[bool] = []

    def flaky(ctx: Any, p: Payload) -> None:
        seen.append(isinstance(p, Payload))  # the retry still gets the argument
        raise ValueError("nope")

    run = TaskRun(
        flaky,
        (payload,),
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)),
        executor=InlineExecutor(),
    )
    del payload
    run.start()
    outcome = run.wait(timeout=10)
    assert outcome.status is S.FAILED
    assert seen == [True, True]
    assert _statuses(run) == [
        S.PENDING,
        S.QUEUED,
        S.STARTING,
        S.RUNNING,
        S.RETRY_WAIT,
        S.STARTING,
        S.RUNNING,
        S.FAILED,
    ]
    gc.collect()  # the traceback's frames form a cycle, as every caught exception's do
    assert gone() is None


def test_a_finished_run_still_answers_and_refuses_to_run_again() -> None:
    run = TaskRun(lambda ctx, n: n * 2, (21,), executor=InlineExecutor())
    run.start()
    assert run.wait(timeout=10).value == 42
    assert run.outcome is not None
    assert run.outcome.value == 42
    assert run.snapshot.attempt == 1
    assert run.stop("late") is False  # already terminal
    with pytest.raises(ConfigurationError, match="executes once"):
        run.start()
    assert _statuses(run)[-1] is S.SUCCEEDED


def test_a_closed_controller_is_not_kept_alive_by_the_carrier_of_its_last_run() -> None:
    """A parked carrier once kept its last job, and through the run's listener the
    controller, its store and every run it held, until it carried another task."""
    controller = Controller(max_parallel=1)
    controller.register("take", lambda ctx: "done")
    run = controller.submit("take")
    task_id = run.task_id
    assert run.wait(timeout=10).value == "done"
    assert _statuses(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    controller.close()
    alive = weakref.ref(controller)
    del controller, run

    # Once the carrier is parked (renamed idle), one collection frees everything.
    wait_until(
        lambda: not any(t.name == f"chongming-task:{task_id}" for t in threading.enumerate()),
        message="the carrier to park",
    )
    gc.collect()
    assert alive() is None
