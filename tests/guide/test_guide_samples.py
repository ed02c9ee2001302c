"""Guide §1 to §3 samples, run as written: the state machine, task bodies, running.

Each test quotes its sample verbatim (statements, names, arguments, order) and
supplies only what the sample leaves undefined: ``rows``, ``process``, ``connect``,
``write``, ``Row``. The assertions are the claims the guide makes right after it.

The conformance suite of the user guide is this package; test names carry the
section (``test_s8_11_...``). Where the other sections live:

- §4 (stop, pause, resume, resident workers, the §4.1/§4.3/§4.5 tables):
  ``test_guide_control``; with a store: ``test_guide_stores``; shell: ``test_guide_cli``
- §5, §6 (retry, timeouts): ``test_guide_retry_timeout``
- §7 (executors): ``test_guide_executors`` (module-level bodies in ``guide_tasks``)
- §8.1-§8.5, §8.8: ``test_guide_controller``; §8.6, §8.7, §8.9: ``test_guide_stores``
  and ``test_guide_store_contract``; §8.10: ``test_guide_cli``; §8.11, §8.14:
  ``test_guide_recovery``; §8.12: ``test_guide_pipeline``; §8.13: ``test_guide_tasks_api``
- §1.4, §9.2, §9.3, §10, §11, §12: ``test_guide_errors``
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest

from chongming_task._model import FailureKind
from chongming_task.errors import ConfigurationError, InvalidTransition, TaskCancelled
from chongming_task.policies import FixedBackoff, RetryPolicy
from chongming_task.runtime._context import TaskContext

from .conftest import HAPPY, PATIENCE, Gate, S, path

Row = dict[str, Any]


class Rows:
    """``rows`` and ``process`` of §2.2: the third row waits until ``go`` is set."""

    def __init__(self, count: int = 6) -> None:
        self.rows: list[Row] = [{"id": index} for index in range(count)]
        self.done: list[Row] = []
        self.at_third = threading.Event()
        self.go = threading.Event()

    def process(self, row: Row) -> None:
        self.done.append(row)
        if row["id"] == 2:
            self.at_third.set()
            assert self.go.wait(PATIENCE)


class Conn:
    """What ``connect()`` of §2.3 returns: records writes, commit and close."""

    def __init__(self) -> None:
        self.written: list[Row] = []
        self.events: list[str] = []

    def commit(self) -> None:
        self.events.append("commit")

    def close(self) -> None:
        self.events.append("close")


# ---------------------------------------------------------------- §1


def test_s1_1_transitions_print_from_to_and_trigger(capsys: pytest.CaptureFixture[str]) -> None:
    from chongming_task.run import TaskRun

    run = TaskRun(lambda ctx: 42, task_id="t1")
    run.start()
    run.wait(PATIENCE)

    for record in run.transitions:
        print(record.from_status, "->", record.to_status, "by", record.trigger)

    assert capsys.readouterr().out.splitlines() == [
        "None -> pending by machine:created",
        "pending -> queued by controller:queued",
        "queued -> starting by executor:starting",
        "starting -> running by executor:launched",
        "running -> succeeded by runtime:returned",
    ]
    # Every record carries a trigger and a version (§1.1); versions have no gaps.
    assert [record.version for record in run.transitions] == [0, 1, 2, 3, 4]
    assert all(record.trigger for record in run.transitions)


def test_s1_3_state_machine_is_the_only_writer() -> None:
    from chongming_task.core.state_machine import StateMachine
    from chongming_task.states import TaskStatus

    machine = StateMachine.create("t1", "抽取", max_attempts=3)
    machine.mark_queued()
    machine.mark_starting(executor="thread")
    machine.mark_running()
    machine.mark_succeeded(outcome={"rows": 42})

    # 非法转移会抛异常，而不是静默忽略
    with pytest.raises(InvalidTransition) as caught:
        machine.mark_running()
    # InvalidTransition: 非法状态转移：succeeded -> running；动作 'executor:launched'；当前允许：无（终态）  # noqa: E501
    assert re.fullmatch(
        r"illegal state transition: succeeded -> running; action 'executor:launched'; "
        r"allowed now: none \(terminal\)",
        str(caught.value),
    )
    # Nothing changed: the refusal is loud and leaves the machine as it was.
    assert machine.status is TaskStatus.SUCCEEDED
    assert machine.snapshot.status_version == 4
    assert machine.snapshot.outcome == {"rows": 42}
    assert [t.to_status for t in machine.transitions] == HAPPY
    # Pre-checks instead of exceptions.
    assert machine.can(TaskStatus.RUNNING) is False
    assert not machine.can_stop()
    assert not machine.can_pause()
    assert not machine.can_resume()
    assert not machine.can_retry()


def test_s1_3_prechecks_on_a_live_machine() -> None:
    from chongming_task.core.state_machine import StateMachine

    machine = StateMachine.create("t2", "抽取", max_attempts=3)
    machine.mark_queued()
    assert machine.can(S.STARTING)
    assert not machine.can(S.SUCCEEDED)
    assert machine.can_stop()
    assert machine.can_pause()
    assert not machine.can_resume()


# ---------------------------------------------------------------- §2


def test_s2_1_ctx_is_injected_not_passed() -> None:
    from chongming_task.run import run_task

    def my_task(ctx, source: str, *, batch_size: int = 100) -> list[Row]: ...  # type: ignore[no-untyped-def,empty-body]

    outcome = run_task(my_task, "s3://bucket/x", batch_size=500)
    assert outcome.ok
    assert outcome.value is None  # the sample's body is `...`

    seen: list[Any] = []

    def spy(ctx, source: str, *, batch_size: int = 100) -> list[Row]:  # type: ignore[no-untyped-def]
        seen.append((type(ctx), ctx.task_id, ctx.attempt, source, batch_size))
        return []

    assert run_task(spy, "s3://bucket/x", batch_size=500, task_id="inj").ok
    assert seen == [(TaskContext, "inj", 1, "s3://bucket/x", 500)]


def test_s2_1_passing_ctx_yourself_is_refused_at_once() -> None:
    from chongming_task.run import run_task

    def my_task(ctx, source: str, *, batch_size: int = 100) -> list[Row]: ...  # type: ignore[no-untyped-def,empty-body]

    with pytest.raises(ConfigurationError):
        run_task(my_task, object(), "s3://bucket/x", batch_size=500)


def test_s2_2_checkpoint_makes_the_loop_stoppable() -> None:
    from chongming_task.run import TaskRun

    data = Rows()
    rows, process = data.rows, data.process

    def my_task(ctx):  # type: ignore[no-untyped-def]
        for row in rows:
            ctx.checkpoint()  # ← 就这一行
            process(row)

    run = TaskRun(my_task)
    run.start()
    assert data.at_third.wait(PATIENCE)
    assert run.snapshot.last_heartbeat_at is not None  # 3. checkpoint refreshes the heartbeat
    run.stop(reason="enough")
    data.go.set()
    outcome = run.wait(PATIENCE)
    # 1. stop requested -> the next checkpoint raises TaskCancelled -> stopped
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert data.done == rows[:3]
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED]


def test_s2_2_checkpoint_suspends_on_pause() -> None:
    from chongming_task.run import TaskRun

    data = Rows()
    rows, process = data.rows, data.process

    def my_task(ctx):  # type: ignore[no-untyped-def]
        for row in rows:
            ctx.checkpoint()  # ← 就这一行
            process(row)

    run = TaskRun(my_task)
    run.start()
    assert data.at_third.wait(PATIENCE)
    data.go.set()
    assert run.pause(timeout=PATIENCE) is True  # 2. pause -> suspended at the checkpoint
    assert data.done == rows[:3]  # suspended before processing row 3
    assert run.status is S.PAUSED
    assert run.resume() is True
    outcome = run.wait(PATIENCE)
    assert outcome.ok
    assert data.done == rows
    assert path(run) == [
        S.PENDING, S.QUEUED, S.STARTING, S.RUNNING,
        S.PAUSING, S.PAUSED, S.RUNNING, S.SUCCEEDED,
    ]  # fmt: skip


def test_s2_3_cleanup_uses_is_stop_requested(capsys: pytest.CaptureFixture[str]) -> None:
    from chongming_task.run import TaskRun

    data = Rows(count=10)
    rows = data.rows
    conns: list[Conn] = []

    def connect() -> Conn:
        conns.append(Conn())
        return conns[-1]

    def write(conn: Conn, row: Row) -> None:
        conn.written.append(row)
        data.process(row)

    def my_task(ctx):  # type: ignore[no-untyped-def]
        conn = connect()
        try:
            for row in rows:
                ctx.checkpoint()
                write(conn, row)
        finally:
            conn.commit()  # 无论如何都要收尾
            if ctx.is_stop_requested:
                print("任务被中断，已提交部分结果")  # log/progress 属于 P4，此处暂用 print
            conn.close()

    run = TaskRun(my_task)
    run.start()
    assert data.at_third.wait(PATIENCE)
    run.stop(reason="interrupt")
    data.go.set()
    assert run.wait(PATIENCE).status is S.STOPPED
    assert conns[0].written == rows[:3]
    assert conns[0].events == ["commit", "close"]  # the cleanup completed
    assert "任务被中断，已提交部分结果" in capsys.readouterr().out


def test_s2_3_an_uninterrupted_run_does_not_report_an_interruption(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from chongming_task.run import run_task

    conns: list[Conn] = []
    rows: list[Row] = [{"id": 1}]

    def connect() -> Conn:
        conns.append(Conn())
        return conns[-1]

    def write(conn: Conn, row: Row) -> None:
        conn.written.append(row)

    def my_task(ctx):  # type: ignore[no-untyped-def]
        conn = connect()
        try:
            for row in rows:
                ctx.checkpoint()
                write(conn, row)
        finally:
            conn.commit()  # 无论如何都要收尾
            if ctx.is_stop_requested:
                print("任务被中断，已提交部分结果")  # log/progress 属于 P4，此处暂用 print
            conn.close()

    assert run_task(my_task).ok
    assert conns[0].events == ["commit", "close"]
    assert capsys.readouterr().out == ""


def test_s2_4_artifact_dir_is_per_attempt(tmp_path: Path) -> None:
    from chongming_task.run import run_task

    targets: list[Path] = []

    def my_task(ctx):  # type: ignore[no-untyped-def]
        target = ctx.artifact_dir / "part-0.parquet"
        ...
        targets.append(target)
        target.write_text(f"attempt {ctx.attempt}")
        if ctx.attempt == 1:
            raise OSError("disk hiccup")
        return str(target)

    outcome = run_task(
        my_task,
        artifact_dir=tmp_path,
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)),
    )
    assert outcome.ok
    first, second = targets
    assert first.parent != second.parent  # a retry does not overwrite the first attempt
    assert first.read_text() == "attempt 1"
    assert second.read_text() == "attempt 2"
    assert tmp_path in first.parents
    assert tmp_path in second.parents


def test_s2_4_artifact_dir_needs_the_option() -> None:
    from chongming_task.run import run_task

    def my_task(ctx):  # type: ignore[no-untyped-def]
        target = ctx.artifact_dir / "part-0.parquet"
        return str(target)

    outcome = run_task(my_task)
    # Without artifact_dir= there is no directory: an honest failure, not a silent cwd.
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert "artifact_dir" in outcome.failure.message


# ---------------------------------------------------------------- §3


def _extract(ctx: Any, source: str) -> dict[str, Any]:
    return {"source": source}


def test_s3_1_run_task(capsys: pytest.CaptureFixture[str]) -> None:
    from chongming_task.run import run_task

    my_task = _extract

    outcome = run_task(my_task, "s3://bucket/x", task_id="job-1", name="抽取")

    if outcome.ok:
        print(outcome.value)
    else:
        # The guide's sample: a run that is not ok has a failure.
        print(outcome.status.value, outcome.failure.kind.value)  # type: ignore[union-attr]

    assert capsys.readouterr().out == "{'source': 's3://bucket/x'}\n"
    # run_task blocked until the terminal state.
    assert outcome.snapshot.task_id == "job-1"
    assert outcome.snapshot.name == "抽取"
    assert outcome.status is S.SUCCEEDED


def test_s3_1_run_task_failure_branch(capsys: pytest.CaptureFixture[str]) -> None:
    from chongming_task.run import run_task

    def my_task(ctx, source):  # type: ignore[no-untyped-def]
        raise ValueError(f"cannot read {source}")

    outcome = run_task(my_task, "s3://bucket/x", task_id="job-1", name="抽取")

    if outcome.ok:
        print(outcome.value)
    else:
        # The guide's sample: a run that is not ok has a failure.
        print(outcome.status.value, outcome.failure.kind.value)  # type: ignore[union-attr]

    assert capsys.readouterr().out == "failed exception\n"
    assert outcome.value is None


def test_s3_2_task_run_members(gate: Gate) -> None:
    from chongming_task.run import TaskRun

    my_task = gate

    run = TaskRun(my_task, ("s3://bucket/x",), task_id="job-1", name="抽取")
    run.start()  # 立即返回
    gate.wait_entered()
    with pytest.raises(ConfigurationError, match="cannot start"):  # 重复调用报错
        run.start()
    # wait(timeout) raises TimeoutError and changes nothing.
    before = run.transitions
    with pytest.raises(TimeoutError):
        run.wait(timeout=0.05)
    assert run.transitions == before
    assert run.status is S.RUNNING
    assert run.snapshot.status is S.RUNNING
    assert run.pause(timeout=PATIENCE) is True
    assert run.resume() is True
    gate.release.set()
    outcome = run.wait(timeout=60)
    assert outcome.ok
    assert outcome.value == "released"
    assert path(run) == [
        S.PENDING, S.QUEUED, S.STARTING, S.RUNNING,
        S.PAUSING, S.PAUSED, S.RUNNING, S.SUCCEEDED,
    ]  # fmt: skip


def test_s3_2_task_run_is_thread_safe() -> None:
    from chongming_task.run import TaskRun

    gate = Gate()
    run = TaskRun(gate, task_id="job-1", name="抽取")
    run.start()
    gate.wait_entered()
    results: list[bool] = []

    def control() -> None:
        results.append(run.stop(reason="from a thread"))

    threads = [threading.Thread(target=control) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PATIENCE)
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.STOPPED
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED]
    versions = [t.version for t in run.transitions]
    assert versions == list(range(len(versions)))  # one writer, no gaps
    assert results.count(True) >= 1


def test_s3_3_outcome_fields() -> None:
    from chongming_task.run import run_task

    def my_task(ctx):  # type: ignore[no-untyped-def]
        ctx.progress(3, total=3, unit="rows")
        return [1, 2, 3]

    outcome = run_task(my_task)

    assert outcome.ok is True  # bool：是否 succeeded
    assert outcome.status is S.SUCCEEDED  # TaskStatus
    assert outcome.value == [1, 2, 3]  # 任务返回值
    assert outcome.failure is None  # Failure | None
    snapshot = outcome.snapshot  # 终态快照：attempt、时间戳、progress、failure 等
    assert snapshot.status is S.SUCCEEDED
    assert snapshot.attempt == 1
    assert snapshot.started_at is not None
    assert snapshot.finished_at is not None
    assert snapshot.progress is not None
    assert (snapshot.progress.done, snapshot.progress.total) == (3, 3)


def test_s3_3_value_is_none_when_not_succeeded() -> None:
    from chongming_task.run import run_task

    def my_task(ctx):  # type: ignore[no-untyped-def]
        raise TaskCancelled("cancelled from inside")

    outcome = run_task(my_task)
    assert outcome.ok is False
    assert outcome.value is None
    assert outcome.failure is not None
