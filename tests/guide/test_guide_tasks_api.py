"""Guide §8.13 samples: ``@task``, registering modules, ``TaskContext``, progress, logs,
JSON return values.

``Row``, ``partitions`` and ``myapp.tasks`` are what the samples leave undefined:
``myapp.tasks`` is this package's ``guide_tasks`` module.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from chongming_task import Controller, RetryPolicy, TaskSnapshot, Timeout, task
from chongming_task._model import FailureKind
from chongming_task.errors import ConfigurationError
from chongming_task.testing import wait_until

from . import guide_tasks
from .conftest import HAPPY, PATIENCE, S, path, reach

Row = dict[str, Any]


@task(tags={"io"}, retry=RetryPolicy(max_attempts=3), timeout=Timeout(per_attempt=60))
def extract(ctx, source: str) -> list[Row]:  # type: ignore[no-untyped-def,empty-body]
    """从 source 读取数据。"""
    ...


@task
def load(ctx, rows: int = 0) -> int:  # type: ignore[no-untyped-def]
    """Write rows somewhere.

    More text that is not the description.
    """
    return rows


def test_s8_13_task_decorator_spec() -> None:
    from chongming_task._decorator import spec_of

    spec = spec_of(extract)
    assert spec is not None
    assert spec is extract.__chongming_task__  # type: ignore[attr-defined]
    assert spec.name == "extract"  # the function name by default
    assert spec.description == "从 source 读取数据。"  # the docstring's first line
    assert spec.tags == frozenset({"io"})
    assert spec.retry == RetryPolicy(max_attempts=3)
    assert spec.timeout == Timeout(per_attempt=60)
    bare = spec_of(load)  # bare @task, no parentheses
    assert bare is not None
    assert (bare.name, bare.description) == ("load", "Write rows somewhere.")
    # Still the plain function (no context needed for this body).
    assert load(None, rows=3) == 3  # type: ignore[arg-type]


def test_s8_13_register_module_and_register_all() -> None:
    myapp = SimpleNamespace(tasks=guide_tasks)

    controller = Controller()
    controller.register_module(myapp.tasks)  # 模块里所有 @task 都被登记
    assert sorted(controller.task_names()) == ["broken", "demo", "resize", "worker"]
    other = Controller()
    other.register_all(extract, load)  # 或者逐个登记
    assert sorted(other.task_names()) == ["extract", "load"]
    definition = {d.name: d for d in other.definitions()}["extract"]
    assert definition.tags == frozenset({"io"})
    assert definition.description == "从 source 读取数据。"
    # The run gets the decorator's retry policy.
    run = other.submit("extract", "s3://x")
    assert run.snapshot.max_attempts == 3
    other.wait_all(timeout=PATIENCE)
    # No global registry: a third controller knows nothing.
    with pytest.raises(ConfigurationError):
        Controller().submit("extract", "s3://x")
    controller.close()
    other.close()


def test_s8_13_task_context_is_runtime_context() -> None:
    from chongming_task import RuntimeContext, TaskContext

    assert TaskContext is RuntimeContext
    seen: list[Any] = []

    def body(ctx: Any) -> None:
        seen.append(ctx)

    from chongming_task.run import run_task

    run_task(body)
    assert isinstance(seen[0], TaskContext)
    for member in (
        "checkpoint", "acheckpoint", "progress", "log", "warning", "error", "logs",
        "input", "upstream", "artifact_dir", "is_stop_requested", "is_pause_requested",
    ):  # fmt: skip
        assert hasattr(TaskContext, member), member


def test_s8_13_is_pause_requested_is_readable_without_blocking() -> None:
    from chongming_task.run import TaskRun

    flags: list[bool] = []
    release = threading.Event()

    def body(ctx: Any) -> None:
        while not release.is_set():
            flags.append(ctx.is_pause_requested)
            if ctx.is_pause_requested:
                release.set()
            threading.Event().wait(0.002)
        ctx.checkpoint()

    run = TaskRun(body)
    run.start()
    reach(run, S.RUNNING)
    assert run.pause(timeout=PATIENCE) is True
    assert True in flags
    run.resume()
    assert run.wait(PATIENCE).ok


def test_s8_13_progress_reaches_the_store_without_a_version(tmp_path: Path) -> None:
    from chongming_task import SqliteTaskStore
    from chongming_task.controller import render_table

    partitions = ["p0", "p1", "p2", "p3"]
    reported = threading.Event()
    release = threading.Event()

    def body(ctx: Any) -> int:
        for index, part in enumerate(partitions, start=1):
            ctx.checkpoint()
            ctx.progress(index, total=len(partitions), unit="partitions", message=part)
            if index == 2:
                reported.set()
                release.wait(PATIENCE)
        return len(partitions)

    store = SqliteTaskStore(str(tmp_path / "tasks.db"))
    controller = Controller(store=store, owner="node-a")
    controller.register("copy", body)
    run = controller.submit("copy", task_id="copy-1")
    assert reported.wait(PATIENCE)
    stored = wait_until(
        lambda: (s := store.get("copy-1")) and s.progress and s.progress.done == 2 and s,
        timeout=PATIENCE,
    )
    assert isinstance(stored, TaskSnapshot)
    assert stored.progress is not None
    assert stored.progress.total == 4
    assert stored.progress.unit == "partitions"
    assert stored.progress.message == "p1"
    assert stored.status_version == run.snapshot.status_version  # progress bumped nothing
    assert stored.status is S.RUNNING
    cells = render_table([stored]).splitlines()[2].split()
    assert any("2/4" in cell for cell in cells)  # the PROGRESS column
    release.set()
    assert controller.wait("copy-1", timeout=PATIENCE).ok
    assert path(run) == HAPPY  # no transition came from progress
    controller.close(close_store=True)


def test_s8_13_progress_does_not_refresh_the_heartbeat() -> None:
    from chongming_task.run import TaskRun
    from chongming_task.testing import FakeClock

    clock = FakeClock()
    halfway = threading.Event()

    def body(ctx: Any) -> None:
        ctx.checkpoint()
        halfway.set()
        while not ctx.is_stop_requested:  # progress only, no checkpoint
            ctx.progress(1, total=2)
            threading.Event().wait(0.002)
        ctx.checkpoint()

    run = TaskRun(body, clock=clock, timeout=Timeout(idle=10))
    run.start()
    assert halfway.wait(PATIENCE)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    clock.advance(11)
    outcome = run.wait(PATIENCE)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_IDLE


def test_s8_13_logs_go_through_the_standard_library(caplog: pytest.LogCaptureFixture) -> None:
    from chongming_task.run import TaskRun

    def body(ctx: Any) -> None:
        ctx.log("开始处理")  # INFO
        ctx.warning("分区为空，跳过")
        ctx.error("写入失败")
        ctx.log("细节", level=logging.DEBUG)

    logging.getLogger("chongming_task.task").setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG, logger="chongming_task.task"):
            run = TaskRun(body, task_id="log-1", name="logger")
            run.start()
            run.wait(PATIENCE)
    finally:
        logging.getLogger("chongming_task.task").setLevel(logging.NOTSET)
    records = [r for r in caplog.records if r.name.startswith("chongming_task.task")]
    assert [(r.name, r.levelno, r.getMessage()) for r in records] == [
        ("chongming_task.task.log-1", logging.INFO, "开始处理"),
        ("chongming_task.task.log-1", logging.WARNING, "分区为空，跳过"),
        ("chongming_task.task.log-1", logging.ERROR, "写入失败"),
        ("chongming_task.task.log-1", logging.DEBUG, "细节"),
    ]
    for record in records:
        assert (record.task_id, record.task_name, record.attempt) == ("log-1", "logger", 1)  # type: ignore[attr-defined]
    assert [entry.message for entry in run.logs][:3] == ["开始处理", "分区为空，跳过", "写入失败"]


def test_s8_13_ctx_logs_keeps_the_last_200() -> None:
    from chongming_task.run import TaskRun

    kept: list[int] = []

    def body(ctx: Any) -> None:
        for index in range(250):
            ctx.log(f"line {index}")
        kept.append(len(ctx.logs))

    run = TaskRun(body)
    run.start()
    run.wait(PATIENCE)
    assert kept == [200]
    assert run.logs[0].message == "line 50"
    assert run.logs[-1].message == "line 249"


@task
def good(ctx) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return {"rows": 3, "path": "s3://bucket/x.parquet"}  # ✅


@task
def bad(ctx) -> set[int]:  # type: ignore[no-untyped-def]
    return {1, 2, 3}  # ❌ set 不可序列化


def test_s8_13_return_values_must_be_json(tmp_path: Path) -> None:
    from chongming_task import SqliteTaskStore

    store = SqliteTaskStore(str(tmp_path / "tasks.db"))
    with Controller(store=store) as controller:
        controller.register_all(good, bad)
        ok = controller.submit("good", task_id="good")
        ko = controller.submit("bad", task_id="bad")
        controller.wait_all(timeout=PATIENCE)
        assert ok.wait(PATIENCE).value == {"rows": 3, "path": "s3://bucket/x.parquet"}
        outcome = ko.wait(PATIENCE)
        assert outcome.status is S.FAILED  # loudly, at return time
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.RESULT_INVALID
        assert "set" in outcome.failure.message  # says why
        wait_until(lambda: (s := store.get("good")) and s.status is S.SUCCEEDED, timeout=PATIENCE)
        stored = store.get("good")
        assert stored is not None
        assert stored.outcome == {"rows": 3, "path": "s3://bucket/x.parquet"}
        wait_until(lambda: (s := store.get("bad")) and s.status is S.FAILED, timeout=PATIENCE)
    store.close()


def test_s8_13_tags_must_be_strings_and_arguments_need_not_be_json(tmp_path: Path) -> None:
    with Controller() as controller:
        controller.register("touch", lambda ctx, where: str(where))
        with pytest.raises(ConfigurationError, match="tag"):
            controller.submit("touch", tmp_path, tags=[1])  # type: ignore[list-item]
        assert controller.list_tasks() == []
        # A Path argument is fine: arguments are not stored.
        assert controller.submit("touch", tmp_path).wait(PATIENCE).value == str(tmp_path)
