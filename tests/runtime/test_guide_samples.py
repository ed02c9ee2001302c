"""Every code sample of user guide §1.1, §2-§7, §8.13, §10 and §12, run as written.

Each test quotes its sample with the smallest scaffolding the sample leaves out
(``rows``, ``connect``, ``Row``...). The samples' calls are not adapted.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from _status import status_now
from chongming_task import task
from chongming_task._model import FailureKind
from chongming_task.errors import TaskCancelled
from chongming_task.policies import ExponentialBackoff, FixedBackoff, Jitter, RetryPolicy, Timeout
from chongming_task.runtime._context import TaskContext
from chongming_task.runtime.executors.inline import InlineExecutor
from chongming_task.runtime.executors.thread import ThreadExecutor
from chongming_task.states import TaskStatus
from chongming_task.testing import FakeClock, wait_until

from . import proc_tasks
from .helpers import PATIENCE, S, path, reach

Row = dict[str, Any]
rows: list[Row] = [{"id": i} for i in range(5)]
processed: list[Row] = []


def process(row: Row) -> None:
    processed.append(row)


class Conn:
    def __init__(self) -> None:
        self.written: list[Row] = []
        self.committed = False
        self.closed = False

    def commit(self) -> None:
        self.committed = True

    def close(self) -> None:
        self.closed = True


connections: list[Conn] = []


def connect() -> Conn:
    conn = Conn()
    connections.append(conn)
    return conn


def write(conn: Conn, row: Row) -> None:
    conn.written.append(row)


# ---------------------------------------------------------------- §2


def test_2_1_signature_ctx_is_injected() -> None:
    from chongming_task.run import run_task

    def my_task(ctx, source: str, *, batch_size: int = 100) -> list[Row]:  # type: ignore[no-untyped-def]
        assert isinstance(ctx, TaskContext)
        return [{"source": source, "batch_size": batch_size}]

    outcome = run_task(my_task, "s3://bucket/x", batch_size=500)
    assert outcome.value == [{"source": "s3://bucket/x", "batch_size": 500}]


def test_2_2_checkpoint_in_the_loop() -> None:
    from chongming_task.run import run_task

    def my_task(ctx):  # type: ignore[no-untyped-def]
        for row in rows:
            ctx.checkpoint()  # ← 就这一行
            process(row)

    processed.clear()
    assert run_task(my_task).ok
    assert processed == rows


def test_2_3_is_stop_requested_in_cleanup(capsys: pytest.CaptureFixture[str]) -> None:
    from chongming_task.run import TaskRun

    many = [{"id": i} for i in range(10_000)]

    def my_task(ctx):  # type: ignore[no-untyped-def]
        conn = connect()
        try:
            for row in many:
                ctx.checkpoint()
                write(conn, row)
                time.sleep(0.0005)
        finally:
            conn.commit()  # 无论如何都要收尾
            if ctx.is_stop_requested:
                print("任务被中断，已提交部分结果")  # log/progress 属于 P4，此处暂用 print
            conn.close()

    connections.clear()
    run = TaskRun(my_task)
    run.start()
    wait_until(lambda: connections and connections[0].written, timeout=PATIENCE)
    run.stop(reason="enough")
    assert run.wait(PATIENCE).status is S.STOPPED
    conn = connections[0]
    assert conn.committed
    assert conn.closed
    assert 0 < len(conn.written) < len(many)
    assert "任务被中断，已提交部分结果" in capsys.readouterr().out


def test_2_4_artifact_dir(tmp_path: Path) -> None:
    from chongming_task.run import run_task

    def my_task(ctx):  # type: ignore[no-untyped-def]
        target = ctx.artifact_dir / "part-0.parquet"
        target.write_bytes(b"PAR1")
        return str(target)

    outcome = run_task(my_task, artifact_dir=tmp_path, task_id="job-1")
    assert outcome.value == str(tmp_path / "job-1" / "attempt-1" / "part-0.parquet")


# ---------------------------------------------------------------- §1.1 and §3


def my_task(ctx: TaskContext, source: str = "s3://bucket/x") -> dict[str, Any]:
    ctx.checkpoint()
    return {"rows": 42, "source": source}


def test_1_1_transitions_are_printable(capsys: pytest.CaptureFixture[str]) -> None:
    from chongming_task.run import TaskRun

    run = TaskRun(my_task)
    run.start()
    run.wait(PATIENCE)
    for record in run.transitions:
        print(record.from_status, "->", record.to_status, "by", record.trigger)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "None -> pending by machine:created"
    assert lines[-1] == "running -> succeeded by runtime:returned"


def test_3_1_run_task(capsys: pytest.CaptureFixture[str]) -> None:
    from chongming_task.run import run_task

    outcome = run_task(my_task, "s3://bucket/x", task_id="job-1", name="抽取")

    if outcome.ok:
        print(outcome.value)
    else:
        print(outcome.status.value, outcome.failure.kind.value)  # type: ignore[union-attr]
    assert "'rows': 42" in capsys.readouterr().out


def test_3_1_run_task_failure_branch(capsys: pytest.CaptureFixture[str]) -> None:
    from chongming_task.run import run_task

    def my_task(ctx, source):  # type: ignore[no-untyped-def]
        raise OSError("bucket gone")

    outcome = run_task(my_task, "s3://bucket/x", task_id="job-1", name="抽取")

    if outcome.ok:
        print(outcome.value)
    else:
        print(outcome.status.value, outcome.failure.kind.value)  # type: ignore[union-attr]
    assert capsys.readouterr().out == "failed exception\n"


def test_3_2_task_run_and_3_3_outcome() -> None:
    from chongming_task.run import TaskRun

    run = TaskRun(my_task, ("s3://bucket/x",), task_id="job-1", name="抽取")
    run.start()  # 立即返回
    ...  # 这里可以做任何事：暂停、停止、轮询状态
    outcome = run.wait(timeout=60)

    assert outcome.ok  # bool：是否 succeeded
    assert outcome.status is TaskStatus.SUCCEEDED  # TaskStatus
    assert outcome.value == {"rows": 42, "source": "s3://bucket/x"}  # 任务返回值（未成功时为 None）
    assert outcome.failure is None  # Failure | None
    assert outcome.snapshot.attempt == 1  # 终态快照：attempt、时间戳、progress、failure 等


# ---------------------------------------------------------------- §4


def looping(ctx: TaskContext) -> None:
    while True:
        ctx.checkpoint()
        time.sleep(0.001)


def test_4_1_stop() -> None:
    from chongming_task.run import TaskRun

    run = TaskRun(looping)
    run.start()
    reach(run, S.RUNNING)
    run.stop(reason="发布窗口")  # 不阻塞
    outcome = run.wait(timeout=30)
    assert outcome.status.value == "stopped"
    assert outcome.failure is not None
    assert outcome.failure.kind.value == "cancelled"
    assert outcome.failure.retryable is False


def test_4_1_the_uncooperative_column_is_lost() -> None:
    from chongming_task.run import TaskRun

    release = threading.Event()

    def ignores(ctx):  # type: ignore[no-untyped-def]
        release.wait(PATIENCE)

    run = TaskRun(ignores, graceful_stop=0.05)
    run.start()
    reach(run, S.RUNNING)
    run.stop(reason="发布窗口")
    outcome = run.wait(timeout=30)
    release.set()
    assert outcome.status.value == "lost"
    assert outcome.failure is not None
    assert outcome.failure.kind.value == "lost"
    assert outcome.failure.retryable is True


def test_4_2_pause_and_resume() -> None:
    from chongming_task.run import TaskRun

    run = TaskRun(looping)
    run.start()
    reach(run, S.RUNNING)
    assert run.pause() is True  # → True 表示已确认挂起，状态变为 paused
    assert run.status is S.PAUSED
    run.resume()  # → running
    assert status_now(run) is S.RUNNING
    run.stop()
    run.wait(PATIENCE)


def test_4_4_stop_then_the_task_finishes_anyway() -> None:
    from chongming_task.run import TaskRun

    def finishes(ctx):  # type: ignore[no-untyped-def]
        wait_until(lambda: ctx.is_stop_requested, timeout=PATIENCE)
        return "done"

    run = TaskRun(finishes)
    run.start()
    reach(run, S.RUNNING)
    run.stop()
    assert run.wait(PATIENCE).status is S.SUCCEEDED
    assert path(run)[-2:] == [S.STOPPING, S.SUCCEEDED]


@task
def worker(ctx, source: str) -> int:  # type: ignore[no-untyped-def]
    processed = 0
    while not ctx.is_stop_requested:  # ← 优雅收尾的写法
        ctx.checkpoint()  # ← 不调用它 = 停不掉
        processed += 1
        ctx.progress(processed, unit="batch")
        time.sleep(0.02)
    ctx.log(f"收到停止请求，本次共处理 {processed} 批")
    return processed  # 正常返回 → 终态 succeeded，返回值保留


def test_4_5_resident_worker_returns_its_count_when_stopped() -> None:
    from chongming_task.run import TaskRun

    run = TaskRun(worker, ("kafka://orders",), task_id="orders-worker")
    run.start()
    wait_until(lambda: run.snapshot.progress is not None, timeout=PATIENCE)
    run.stop(reason="发布窗口")
    outcome = run.wait(timeout=10)  # → succeeded，value=已处理批数
    assert outcome.status is S.SUCCEEDED
    assert outcome.value >= 1
    assert run.logs[-1].message == f"收到停止请求，本次共处理 {outcome.value} 批"


# ---------------------------------------------------------------- §5 and §6


def test_5_retry_policy_as_written() -> None:
    from chongming_task.run import run_task

    policy = RetryPolicy(
        max_attempts=5,  # 总尝试次数（含首次）
        backoff=ExponentialBackoff(base=1, factor=2, max_delay=300),
        retry_on=(Exception,),  # 哪些异常值得重试
        give_up_on=(ValueError, KeyError),  # 哪些立刻放弃
    )
    assert policy.backoff.jitter is Jitter.FULL  # jitter by default

    def bad_input(ctx):  # type: ignore[no-untyped-def]
        raise KeyError("missing column")

    outcome = run_task(bad_input, retry=policy)
    assert outcome.snapshot.attempt == 1  # give_up_on wins
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.EXCEPTION


def test_5_1_cancellation_is_never_retried() -> None:
    from chongming_task.run import TaskRun

    run = TaskRun(looping, retry=RetryPolicy(max_attempts=5, backoff=FixedBackoff(0)))
    run.start()
    reach(run, S.RUNNING)
    run.stop()
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.STOPPED
    assert outcome.snapshot.attempt == 1
    assert outcome.failure is not None
    assert outcome.failure.retryable is False


def test_6_timeout_as_written() -> None:
    from chongming_task.run import run_task

    timeout = Timeout(start=30, per_attempt=600, idle=60)
    outcome = run_task(my_task, timeout=timeout)
    assert outcome.ok


# ---------------------------------------------------------------- §7


def test_7_1_thread_executor() -> None:
    from chongming_task.run import TaskRun
    from chongming_task.runtime.executors.thread import ThreadExecutor

    run = TaskRun(my_task, executor=ThreadExecutor())
    run.start()
    assert run.wait(PATIENCE).ok
    assert isinstance(run.executor, ThreadExecutor)


def test_7_2_inline_executor() -> None:
    from chongming_task.run import run_task
    from chongming_task.runtime.executors.inline import InlineExecutor

    def trivial_step(ctx):  # type: ignore[no-untyped-def]
        return 1 + 1

    assert run_task(trivial_step, executor=InlineExecutor()).value == 2


def test_7_4_process_executor() -> None:
    from chongming_task import ProcessExecutor, run_task

    fetch_all = proc_tasks.fetch_all
    outcome = run_task(fetch_all, executor=ProcessExecutor())  # 单个任务
    assert outcome.value == [1, 2, 3]
    resize = proc_tasks.resize  # ✅ 模块级、参数可 pickle
    assert run_task(resize, "cat.png", executor=ProcessExecutor()).value == "CAT.PNG"


def test_7_4_closures_are_refused_at_submission() -> None:
    from chongming_task import ProcessExecutor, run_task
    from chongming_task.errors import ConfigurationError

    async def _inline():  # type: ignore[no-untyped-def]  # ❌ 闭包 / 局部函数
        ...

    with pytest.raises(ConfigurationError):
        run_task(_inline, executor=ProcessExecutor())

    async def _inline_with_ctx(ctx):  # type: ignore[no-untyped-def]
        ...

    with pytest.raises(ConfigurationError, match="module level"):
        run_task(_inline_with_ctx, executor=ProcessExecutor())


# ---------------------------------------------------------------- §8.13


def test_8_13_task_decorator_and_context(caplog: pytest.LogCaptureFixture) -> None:
    from chongming_task import RetryPolicy, Timeout, task
    from chongming_task.run import run_task

    @task(tags={"io"}, retry=RetryPolicy(max_attempts=3), timeout=Timeout(per_attempt=60))
    def extract(ctx, source: str) -> list[Row]:  # type: ignore[no-untyped-def]
        """从 source 读取数据。"""
        partitions = ["p0", "p1", "p2"]
        for index, part in enumerate(partitions, start=1):
            ctx.checkpoint()
            ctx.progress(index, total=len(partitions), unit="partitions", message=part)
        ctx.log("开始处理")  # INFO
        ctx.warning("分区为空，跳过")
        ctx.error("写入失败")
        return [{"source": source}]

    logging.getLogger("chongming_task.task").setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG, logger="chongming_task.task"):
            outcome = run_task(extract, "s3://x")
    finally:
        logging.getLogger("chongming_task.task").setLevel(logging.NOTSET)
    spec = extract.__chongming_task__  # type: ignore[attr-defined]
    assert spec.description == "从 source 读取数据。"
    assert spec.name == "extract"
    assert spec.tags == frozenset({"io"})
    assert outcome.snapshot.max_attempts == 3
    assert outcome.snapshot.tags == frozenset({"io"})
    assert outcome.snapshot.progress is not None
    assert outcome.snapshot.progress.render() == "3/3 partitions (100%)"
    assert [r.getMessage() for r in caplog.records][-3:] == [
        "开始处理",
        "分区为空，跳过",
        "写入失败",
    ]


def test_8_13_upstream_data() -> None:
    from chongming_task.run import TaskRun

    @task
    def transform(ctx, day: str) -> int:  # type: ignore[no-untyped-def]
        partitions = ctx.input("extract", [])  # extract 节点的返回值
        return len(partitions)

    run = TaskRun(transform, ("2026-10-02",), upstream={"extract": ["a", "b"]})
    run.start()
    assert run.wait(PATIENCE).value == 2


def test_8_13_results_must_be_json() -> None:
    from chongming_task.run import run_task

    @task
    def good(ctx) -> dict[str, Any]:  # type: ignore[no-untyped-def]
        return {"rows": 3, "path": "s3://bucket/x.parquet"}  # ✅

    @task
    def bad(ctx) -> set[int]:  # type: ignore[no-untyped-def]
        return {1, 2, 3}  # ❌ set 不可序列化

    assert run_task(good).ok
    failure = run_task(bad).failure
    assert failure is not None
    assert failure.kind.value == "result_invalid"
    assert "set" in failure.message


# ---------------------------------------------------------------- §10


def test_10_except_exception_does_not_swallow_the_stop() -> None:
    from chongming_task.run import TaskRun

    logged: list[Exception] = []

    def log(exc: Exception) -> None:
        logged.append(exc)

    def work() -> None:
        time.sleep(0.001)

    def swallowing(ctx):  # type: ignore[no-untyped-def]
        try:
            while True:
                ctx.checkpoint()
                work()
        except Exception as exc:  # 想捕获业务异常
            log(exc)  # 但会把停止信号一起吃掉

    def correct(ctx):  # type: ignore[no-untyped-def]
        try:
            while True:
                ctx.checkpoint()
                work()
        except TaskCancelled:
            raise  # 取消要放行
        except Exception as exc:
            log(exc)  # 只处理真正的业务异常

    for body in (swallowing, correct):
        run = TaskRun(body)
        run.start()
        reach(run, S.RUNNING)
        run.stop()
        assert run.wait(PATIENCE).status is S.STOPPED
    assert logged == []


# ---------------------------------------------------------------- §12


def test_idle_timeout_fires_without_waiting() -> None:
    from chongming_task.policies import Timeout
    from chongming_task.run import TaskRun, run_task
    from chongming_task.testing import FakeClock

    clock = FakeClock()
    # 通过 clock 注入控制时间，配合 handle.heartbeat 即可在毫秒内验证超时逻辑
    entered = threading.Event()
    release = threading.Event()

    def stuck(ctx):  # type: ignore[no-untyped-def]
        ctx.heartbeat.beat()
        entered.set()
        release.wait(PATIENCE)
        ctx.checkpoint()

    run = TaskRun(stuck, clock=clock, timeout=Timeout(idle=60))
    run.start()
    assert entered.wait(PATIENCE)
    clock.wait_for_sleepers(1)
    clock.advance(60)
    wait_until(lambda: run._state.attempt.control.stop_requested, timeout=PATIENCE)  # type: ignore[union-attr]
    release.set()
    outcome = run.wait(timeout=5)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_IDLE
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.FAILED]
    assert run_task is not None


def test_12_common_practices() -> None:
    from chongming_task.run import TaskRun

    calls: list[int] = []

    def flaky(ctx):  # type: ignore[no-untyped-def]
        calls.append(ctx.attempt)
        if ctx.attempt < 2:
            raise RuntimeError("transient")
        return ctx.attempt

    clock = FakeClock()
    run = TaskRun(
        flaky,
        clock=clock,  # FakeClock 注入
        executor=InlineExecutor(),  # 执行同步化
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)),  # 去掉重试等待
    )
    run.start()
    assert run.done
    assert path(run) == [  # 断言 run.transitions，而不是只断言最终状态
        S.PENDING,
        S.QUEUED,
        S.STARTING,
        S.RUNNING,
        S.RETRY_WAIT,
        S.STARTING,
        S.RUNNING,
        S.SUCCEEDED,
    ]
    assert isinstance(ThreadExecutor(), ThreadExecutor)
