"""TaskContext: checkpoints, probes, progress, logs, upstream, artifacts, TaskSkipped."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import chongming_task
from chongming_task._model import FailureKind
from chongming_task.errors import ConfigurationError, TaskCancelled
from chongming_task.policies import FixedBackoff, RetryPolicy
from chongming_task.run import TaskRun, run_task
from chongming_task.runtime import RuntimeContext, TaskContext, TaskSkipped
from chongming_task.runtime._context import ArtifactDirUnavailable
from chongming_task.runtime.executors.inline import InlineExecutor
from chongming_task.testing import FakeClock, wait_until

from .helpers import HAPPY, PATIENCE, TICK, S, path, reach


def test_task_context_is_runtime_context_and_public() -> None:
    assert TaskContext is RuntimeContext
    assert chongming_task.TaskContext is RuntimeContext
    assert chongming_task.RuntimeContext is RuntimeContext


def test_checkpoint_raises_task_cancelled_which_except_exception_cannot_swallow() -> None:
    seen: dict[str, Any] = {}
    started = threading.Event()

    def body(ctx: TaskContext) -> None:
        try:
            while True:
                try:
                    ctx.checkpoint()
                except Exception:  # the classic mistake of guide §10
                    seen["swallowed"] = True
                started.set()
                time.sleep(TICK)
        finally:
            seen["stop_seen"] = ctx.is_stop_requested

    run = TaskRun(body)
    run.start()
    assert started.wait(PATIENCE)
    assert run.stop(reason="enough")
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.STOPPED
    assert seen == {"stop_seen": True}
    assert issubclass(TaskCancelled, BaseException)
    assert not issubclass(TaskCancelled, Exception)
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED]


def test_probes_never_block_and_pause_happens_at_the_checkpoint() -> None:
    probes: list[tuple[bool, bool]] = []
    reached = threading.Event()
    go = threading.Event()

    def body(ctx: TaskContext) -> str:
        reached.set()
        go.wait(PATIENCE)
        probes.append((ctx.is_pause_requested, ctx.is_stop_requested))
        ctx.checkpoint()  # blocks here while paused
        probes.append((ctx.is_pause_requested, ctx.is_stop_requested))
        return "done"

    run = TaskRun(body)
    run.start()
    assert reached.wait(PATIENCE)
    pauser = threading.Thread(target=lambda: probes.append((run.pause(timeout=PATIENCE), False)))
    pauser.start()
    reach(run, S.PAUSING)
    go.set()
    pauser.join(PATIENCE)
    assert run.status is S.PAUSED
    assert run.resume()
    assert run.wait(PATIENCE).value == "done"
    assert probes == [(True, False), (True, False), (False, False)]


def test_checkpoint_and_beat_refresh_the_heartbeat_but_progress_does_not() -> None:
    clock = FakeClock()
    step = threading.Semaphore(0)
    done = threading.Semaphore(0)
    versions: list[int] = []

    def body(ctx: TaskContext) -> None:
        ctx.checkpoint()
        done.release()
        step.acquire()
        ctx.progress(1, total=3, unit="parts", message="p1")
        done.release()
        step.acquire()
        ctx.heartbeat.beat()
        done.release()
        step.acquire()

    run = TaskRun(body, clock=clock, executor=None)
    run.start()
    assert done.acquire(timeout=PATIENCE)
    first = run.snapshot
    assert first.last_heartbeat_at == clock.now()
    versions.append(first.status_version)

    clock.advance(7)
    step.release()
    assert done.acquire(timeout=PATIENCE)
    after_progress = run.snapshot
    assert after_progress.progress is not None
    assert after_progress.progress.done == 1
    assert after_progress.progress.message == "p1"
    assert after_progress.last_heartbeat_at == first.last_heartbeat_at  # progress is not a beat
    assert after_progress.status_version == first.status_version  # nor a transition

    clock.advance(5)
    step.release()
    assert done.acquire(timeout=PATIENCE)
    assert run.snapshot.last_heartbeat_at == clock.now()
    assert run.snapshot.status_version == first.status_version
    step.release()
    assert run.wait(PATIENCE).ok


def test_progress_with_a_non_number_is_refused_inside_the_body() -> None:
    def body(ctx: TaskContext) -> None:
        ctx.progress("half")  # type: ignore[arg-type]

    outcome = run_task(body, executor=InlineExecutor())
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.exception_type == "chongming_task.errors.ConfigurationError"


def test_logs_use_the_task_logger_with_extras_and_keep_the_last_200(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def body(ctx: TaskContext) -> int:
        ctx.log("start")
        ctx.warning("empty partition, skipped")
        ctx.error("write failed")
        ctx.log("details", level="DEBUG")
        for index in range(250):
            ctx.log(f"line {index}")
        return len(ctx.logs)

    caplog.set_level(logging.DEBUG, logger="chongming_task.task")
    run = TaskRun(body, task_id="log-1", name="logger")
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.value == 200
    records = [r for r in caplog.records if r.name == "chongming_task.task.log-1"]
    assert [r.getMessage() for r in records[:4]] == [
        "start",
        "empty partition, skipped",
        "write failed",
        "details",
    ]
    assert [r.levelno for r in records[:4]] == [
        logging.INFO,
        logging.WARNING,
        logging.ERROR,
        logging.DEBUG,
    ]
    first = records[0]
    assert (first.task_id, first.task_name, first.attempt) == ("log-1", "logger", 1)  # type: ignore[attr-defined]
    assert first.filename == Path(__file__).name  # the caller's line, not ours
    logs = run.logs
    assert len(logs) == 200
    assert logs[-1].message == "line 249"
    assert logs[-1].level_name == "INFO"
    assert logs[-1].attempt == 1


def test_a_configured_per_task_logger_filters_that_task(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="chongming_task.task")
    per_task = logging.getLogger("chongming_task.task.quiet-1")
    per_task.setLevel(logging.ERROR)
    try:

        def body(ctx: TaskContext) -> None:
            ctx.log("not shown")
            ctx.error("shown")

        run_task(body, task_id="quiet-1", executor=InlineExecutor())
        messages = [
            r.getMessage() for r in caplog.records if r.name == "chongming_task.task.quiet-1"
        ]
        assert messages == ["shown"]
    finally:
        per_task.setLevel(logging.NOTSET)


def test_a_bad_log_level_is_refused() -> None:
    def body(ctx: TaskContext) -> None:
        ctx.log("x", level="LOUD")

    outcome = run_task(body, executor=InlineExecutor())
    assert outcome.failure is not None
    assert "level" in outcome.failure.message


def test_upstream_and_input() -> None:
    def body(ctx: TaskContext) -> dict[str, Any]:
        with pytest.raises(TypeError):
            ctx.upstream["x"] = 1  # type: ignore[index]
        return {
            "extract": ctx.input("extract", []),
            "missing": ctx.input("missing", "default"),
            "all": dict(ctx.upstream),
        }

    run = TaskRun(body, upstream={"extract": [1, 2]}, executor=InlineExecutor())
    run.start()
    assert run.wait(PATIENCE).value == {
        "extract": [1, 2],
        "missing": "default",
        "all": {"extract": [1, 2]},
    }
    outside = run_task(lambda ctx: dict(ctx.upstream), executor=InlineExecutor())
    assert outside.value == {}


def test_artifact_dir_is_isolated_per_attempt(tmp_path: Path) -> None:
    seen: list[Path] = []

    def body(ctx: TaskContext) -> str:
        target = ctx.artifact_dir / "part-0.parquet"
        target.write_text(f"attempt {ctx.attempt}")
        seen.append(ctx.artifact_dir)
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")
        return str(target)

    outcome = run_task(
        body,
        task_id="job/../1",
        artifact_dir=tmp_path,
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)),
        executor=InlineExecutor(),
    )
    assert outcome.ok
    assert [p.name for p in seen] == ["attempt-1", "attempt-2"]
    assert all(p.parent.parent == tmp_path for p in seen)  # no path traversal from the id
    assert (seen[0] / "part-0.parquet").read_text() == "attempt 1"
    assert (seen[1] / "part-0.parquet").read_text() == "attempt 2"


def test_artifact_dir_without_configuration_says_how_to_enable_it() -> None:
    def body(ctx: TaskContext) -> None:
        ctx.artifact_dir  # noqa: B018

    outcome = run_task(body, executor=InlineExecutor())
    assert outcome.failure is not None
    assert "artifact_dir=" in outcome.failure.message
    assert outcome.failure.exception_type == (
        f"{ArtifactDirUnavailable.__module__}.{ArtifactDirUnavailable.__qualname__}"
    )
    assert issubclass(ArtifactDirUnavailable, ConfigurationError)


def test_task_skipped_ends_running_as_skipped_and_is_never_retried() -> None:
    calls = []

    def body(ctx: TaskContext) -> None:
        calls.append(1)
        raise TaskSkipped("nothing new since the last sync")

    run = TaskRun(body, retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0)))
    run.start()
    outcome = run.wait(PATIENCE)
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SKIPPED]
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CONDITION_FALSE
    assert outcome.failure.message == "nothing new since the last sync"
    assert outcome.failure.retryable is False
    assert calls == [1]
    assert TaskSkipped("x").reason == "x"


def test_acheckpoint_stops_and_pauses_an_async_task() -> None:
    rounds: list[int] = []

    async def body(ctx: TaskContext) -> None:
        while True:
            await ctx.acheckpoint()
            rounds.append(1)
            await asyncio.sleep(TICK)

    run = TaskRun(body)
    run.start()
    wait_until(lambda: len(rounds) > 2, timeout=PATIENCE)
    assert run.pause(timeout=PATIENCE)
    frozen = len(rounds)
    assert run.status is S.PAUSED
    assert len(rounds) == frozen
    assert run.resume()
    wait_until(lambda: len(rounds) > frozen + 2, timeout=PATIENCE)
    assert run.stop(reason="done")
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.STOPPED
    assert path(run) == [
        S.PENDING,
        S.QUEUED,
        S.STARTING,
        S.RUNNING,
        S.PAUSING,
        S.PAUSED,
        S.RUNNING,
        S.STOPPING,
        S.STOPPED,
    ]


def test_checkpoint_is_nearly_free_when_nothing_is_requested() -> None:
    def body(ctx: TaskContext) -> float:
        begin = time.perf_counter()
        for _ in range(100_000):
            ctx.checkpoint()
        return time.perf_counter() - begin

    outcome = run_task(body, executor=InlineExecutor())
    assert outcome.ok
    assert outcome.value < 2.0  # about 0.05 s on a laptop: two flag reads and a clock read


def test_happy_path_trajectory_constant_is_what_run_task_produces() -> None:
    run = TaskRun(lambda ctx: None, executor=InlineExecutor())
    run.start()
    assert path(run) == HAPPY
