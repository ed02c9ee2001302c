"""Carrier threads are reused after a run ends, never while it runs, never once abandoned."""

from __future__ import annotations

import contextvars
import threading

from chongming_task._model import FailureKind
from chongming_task.run import TaskRun, run_task
from chongming_task.runtime._context import TaskContext
from chongming_task.runtime.executors._carriers import IDLE_NAME, CarrierPool
from chongming_task.runtime.executors.thread import ThreadExecutor
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

S = TaskStatus
PATIENCE = 10.0
HAPPY = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
LOST = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.LOST]


def _parked(ident: object) -> None:
    """Wait until the carrier ``ident`` has parked (its run ends before its thread does)."""

    def idle() -> bool:
        return any(t.ident == ident and t.name == IDLE_NAME for t in threading.enumerate())

    wait_until(idle, timeout=PATIENCE, message=f"carrier {ident} parked")


def _whoami(ctx: TaskContext) -> list[object]:
    current = threading.current_thread()
    return [current.ident, current.name, current.daemon]


def test_sequential_runs_reuse_one_named_daemon_carrier() -> None:
    first = run_task(_whoami, task_id="reuse-1", executor=ThreadExecutor())
    _parked(first.value[0])
    second = run_task(_whoami, task_id="reuse-2", executor=ThreadExecutor())
    assert first.value[1:] == ["chongming-task:reuse-1", True]
    assert second.value[1:] == ["chongming-task:reuse-2", True]
    assert first.value[0] == second.value[0]  # the same thread carried both


def test_concurrent_runs_never_share_a_carrier() -> None:
    gate = threading.Event()
    entered: list[int | None] = []
    lock = threading.Lock()

    def body(ctx: TaskContext) -> None:
        with lock:
            entered.append(threading.get_ident())
        gate.wait(PATIENCE)

    runs = [TaskRun(body, task_id=f"pair-{i}") for i in range(3)]
    for run in runs:
        run.start()
    wait_until(lambda: len(entered) == 3, timeout=PATIENCE, message="three bodies running")
    assert len(set(entered)) == 3
    gate.set()
    for run in runs:
        assert run.wait(PATIENCE).ok
        assert [r.to_status for r in run.transitions] == HAPPY


def test_an_abandoned_carrier_is_never_reused() -> None:
    release = threading.Event()
    carriers: list[threading.Thread] = []

    def stuck(ctx: TaskContext) -> str:
        carriers.append(threading.current_thread())
        release.wait(PATIENCE)  # never reaches a checkpoint
        return "late"

    run = TaskRun(stuck, task_id="stuck", graceful_stop=0.01)
    run.start()
    wait_until(lambda: carriers, timeout=PATIENCE, message="body entered")
    run.stop("enough")
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.LOST
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.LOST
    assert [r.to_status for r in run.transitions] == LOST
    release.set()  # the body returns one day; its thread must not take new work
    carrier = carriers[0]
    carrier.join(PATIENCE)
    assert not carrier.is_alive()
    assert carrier.name == "chongming-task:stuck"  # it exited instead of parking

    def later(ctx: TaskContext) -> None:
        carriers.append(threading.current_thread())

    assert run_task(later, task_id="after-stuck").ok
    assert carriers[1] is not carrier


def test_each_run_starts_with_an_empty_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("leak", default="unset")

    def setter(ctx: TaskContext) -> int | None:
        var.set("from the first task")
        return threading.get_ident()

    def reader(ctx: TaskContext) -> list[object]:
        return [threading.get_ident(), var.get()]

    ident = run_task(setter, task_id="ctx-1").value
    _parked(ident)
    same_thread, seen = run_task(reader, task_id="ctx-2").value
    assert same_thread == ident
    assert seen == "unset"


def test_idle_carriers_exit_after_lingering_and_are_renamed() -> None:
    pool = CarrierPool(linger=0.05, max_idle=4)
    done = threading.Event()
    names: list[str] = []

    def job() -> None:
        names.append(threading.current_thread().name)
        done.set()

    pool.launch(job, name="chongming-task:linger")
    assert done.wait(PATIENCE)
    wait_until(lambda: pool.idle == 1, timeout=PATIENCE, message="carrier parked")
    assert any(t.name == IDLE_NAME for t in threading.enumerate())
    wait_until(lambda: pool.idle == 0, timeout=PATIENCE, message="carrier gone")
    assert names == ["chongming-task:linger"]
    assert pool.started == 1


def test_more_idle_carriers_than_the_cap_exit_at_once() -> None:
    pool = CarrierPool(linger=PATIENCE, max_idle=1)
    gate = threading.Event()
    finished: list[int] = []
    lock = threading.Lock()

    def job() -> None:
        gate.wait(PATIENCE)
        with lock:
            finished.append(threading.get_ident())

    for index in range(3):
        pool.launch(job, name=f"chongming-task:cap-{index}")
    gate.set()
    wait_until(lambda: len(finished) == 3, timeout=PATIENCE, message="jobs done")
    wait_until(lambda: pool.idle == 1, timeout=PATIENCE, message="one carrier parked")
    assert pool.started == 3
