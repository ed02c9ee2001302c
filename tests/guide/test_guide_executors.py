"""Guide §7 samples: thread, inline and process executors, as written.

The process samples use module-level functions from ``guide_tasks`` (a child
process imports its function by name); the "❌ closure / local function" sample is
checked to be refused at submission with a ConfigurationError that says what to do.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from chongming_task._model import FailureKind
from chongming_task.errors import ConfigurationError
from chongming_task.policies import Timeout

from . import guide_tasks
from .conftest import HAPPY, PATIENCE, Gate, S, path, reach
from .guide_tasks import fetch_all, resize


def test_s7_1_thread_executor_sample(gate: Gate) -> None:
    from chongming_task.run import TaskRun
    from chongming_task.runtime.executors.thread import ThreadExecutor

    my_task = gate

    run = TaskRun(my_task, executor=ThreadExecutor())

    run.start()
    gate.wait_entered()
    # A daemon thread per task, so a stuck task never blocks interpreter exit (§7.3).
    carriers = [t for t in threading.enumerate() if t.name.endswith(run.task_id)]
    assert carriers
    assert all(t.daemon for t in carriers)
    gate.release.set()
    assert run.wait(PATIENCE).ok
    assert path(run) == HAPPY


def test_s7_1_closures_lambdas_and_local_functions_work_on_threads() -> None:
    from chongming_task.run import run_task
    from chongming_task.runtime.executors.thread import ThreadExecutor

    captured = {"rows": 3}

    def local(ctx: Any) -> int:
        return captured["rows"]

    assert run_task(local, executor=ThreadExecutor()).value == 3
    assert run_task(lambda ctx: captured["rows"] * 2, executor=ThreadExecutor()).value == 6


def test_s7_1_async_tasks_run_and_acheckpoint_answers_stop_and_pause() -> None:
    from chongming_task.run import TaskRun
    from chongming_task.runtime.executors.thread import ThreadExecutor

    steps: list[int] = []

    async def my_task(ctx: Any) -> int:
        import asyncio

        while True:
            await ctx.acheckpoint()
            steps.append(1)
            await asyncio.sleep(0.002)

    run = TaskRun(my_task, executor=ThreadExecutor())
    run.start()
    reach(run, S.RUNNING)
    assert run.pause(timeout=PATIENCE) is True
    assert run.status is S.PAUSED
    count = len(steps)
    time.sleep(0.05)
    assert len(steps) == count  # really suspended at the await
    assert run.resume() is True
    run.stop(reason="done")
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.STOPPED
    assert path(run) == [
        S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.PAUSING, S.PAUSED,
        S.RUNNING, S.STOPPING, S.STOPPED,
    ]  # fmt: skip


def test_s7_1_an_async_task_returns_its_value() -> None:
    from chongming_task.run import run_task
    from chongming_task.runtime.executors.thread import ThreadExecutor

    async def my_task(ctx: Any) -> str:
        await ctx.acheckpoint()
        return "async ok"

    assert run_task(my_task, executor=ThreadExecutor()).value == "async ok"


def test_s7_2_inline_executor_sample() -> None:
    from chongming_task.run import run_task
    from chongming_task.runtime.executors.inline import InlineExecutor

    caller = threading.get_ident()
    seen: list[int] = []

    def trivial_step(ctx: Any) -> int:
        seen.append(threading.get_ident())
        return 7

    outcome = run_task(trivial_step, executor=InlineExecutor())

    assert outcome.ok
    assert outcome.value == 7
    assert seen == [caller]  # ran synchronously in the calling thread


def test_s7_2_inline_start_returns_when_the_run_is_over() -> None:
    from chongming_task.run import TaskRun
    from chongming_task.runtime.executors.inline import InlineExecutor

    run = TaskRun(lambda ctx: "done", executor=InlineExecutor())
    run.start()
    assert run.done  # launch blocked on purpose
    assert path(run) == HAPPY


def test_s7_2_inline_cannot_be_paused_and_says_so() -> None:
    from chongming_task.run import TaskRun
    from chongming_task.runtime.executors.inline import InlineExecutor

    inside = threading.Event()
    release = threading.Event()
    answers: list[bool] = []

    def body(ctx: Any) -> str:
        inside.set()
        while not release.wait(0.002):
            ctx.checkpoint()
        return "done"

    run = TaskRun(body, executor=InlineExecutor())
    runner = threading.Thread(target=run.start)
    runner.start()
    assert inside.wait(PATIENCE)
    answers.append(run.pause(timeout=0.2))
    assert run.status is S.RUNNING  # not pretending to be paused
    release.set()
    runner.join(PATIENCE)
    assert answers == [False]
    assert run.wait(PATIENCE).ok
    assert S.PAUSED not in path(run)


# ---------------------------------------------------------------- §7.4


def test_s7_4_process_executor_single_task() -> None:
    from chongming_task import ProcessExecutor, run_task

    outcome = run_task(fetch_all, executor=ProcessExecutor())  # 单个任务

    assert outcome.ok
    assert outcome.value["pid"] != os.getpid()  # a separate child process
    assert outcome.value["parent"] == os.getpid()
    assert outcome.snapshot.pid == outcome.value["pid"]  # `ps` matches the snapshot


def test_s7_4_process_executor_for_a_whole_controller() -> None:
    from chongming_task import Controller, ProcessExecutor

    controller = Controller(executor=ProcessExecutor())  # 或整批任务
    try:
        controller.register("square", guide_tasks.square)
        controller.register_all(resize)
        controller.submit("square", 7, task_id="sq")
        controller.submit("resize", "a.png", task_id="rs")
        outcomes = {o.snapshot.task_id: o for o in controller.wait_all(timeout=60)}
        assert outcomes["sq"].value == 49
        assert outcomes["rs"].value == "a.png@2x"
        assert outcomes["sq"].snapshot.pid not in (None, os.getpid())
    finally:
        controller.close(timeout=PATIENCE)


def test_s7_4_a_stop_really_stops_the_child() -> None:
    from chongming_task import ProcessExecutor
    from chongming_task.run import TaskRun

    run = TaskRun(guide_tasks.never_checkpoints, executor=ProcessExecutor(), graceful_stop=0.2)
    run.start()
    reach(run, S.RUNNING)
    pid = run.snapshot.pid
    assert pid is not None
    run.stop(reason="release window")
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.STOPPED  # not lost: terminate() really ended it
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_s7_4_pause_and_stop_cross_the_process_boundary() -> None:
    from chongming_task import ProcessExecutor
    from chongming_task.run import TaskRun

    run = TaskRun(guide_tasks.checkpoints_forever, executor=ProcessExecutor())
    run.start()
    reach(run, S.RUNNING)
    assert run.pause(timeout=PATIENCE) is True
    assert run.resume() is True
    run.stop(reason="done")
    assert run.wait(PATIENCE).status is S.STOPPED
    assert path(run) == [
        S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.PAUSING, S.PAUSED,
        S.RUNNING, S.STOPPING, S.STOPPED,
    ]  # fmt: skip


def test_s7_4_a_child_cannot_start_processes() -> None:
    from chongming_task import ProcessExecutor, run_task

    outcome = run_task(guide_tasks.spawns_a_process, executor=ProcessExecutor())
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert "daemonic" in outcome.failure.message


def test_s7_4_a_lambda_is_refused_at_submission_by_a_controller() -> None:
    from chongming_task import Controller, ProcessExecutor

    with Controller(executor=ProcessExecutor()) as controller:
        controller.register("inline", lambda ctx: 1)  # names only: checked at submission
        with pytest.raises(ConfigurationError, match="lambda"):
            controller.submit("inline")
        assert controller.list_tasks() == []


def test_s7_4_a_timeout_kills_the_child_and_fails() -> None:
    from chongming_task import ProcessExecutor
    from chongming_task.run import TaskRun

    run = TaskRun(
        guide_tasks.never_checkpoints,
        executor=ProcessExecutor(),
        graceful_stop=0.1,
        timeout=Timeout(per_attempt=0.3),
    )
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT


def test_s7_4_a_native_crash_takes_only_the_child() -> None:
    from chongming_task import ProcessExecutor, run_task

    outcome = run_task(guide_tasks.crashes, executor=ProcessExecutor())
    assert outcome.status is S.FAILED  # recorded honestly as one failure
    assert outcome.failure is not None
    assert outcome.failure.kind in (FailureKind.CRASHED, FailureKind.NONZERO_EXIT)


def test_s7_4_closures_are_refused_at_submission() -> None:
    from chongming_task import ProcessExecutor
    from chongming_task.run import TaskRun

    async def _inline():  # type: ignore[no-untyped-def]  # ❌ 闭包 / 局部函数
        ...

    with pytest.raises(ConfigurationError):  # the sample as written (it takes no ctx)
        TaskRun(_inline, executor=ProcessExecutor())

    async def _inline_with_ctx(ctx):  # type: ignore[no-untyped-def]
        ...

    with pytest.raises(ConfigurationError, match="move it to module level"):
        TaskRun(_inline_with_ctx, executor=ProcessExecutor())
    with pytest.raises(ConfigurationError, match="lambda"):
        TaskRun(lambda ctx: 1, executor=ProcessExecutor())
    # Arguments must pickle too; the message names the problem.
    with pytest.raises(ConfigurationError, match="pickle"):
        TaskRun(resize, (threading.Lock(),), executor=ProcessExecutor())
