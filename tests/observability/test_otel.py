"""OpenTelemetry span trees, checked with the SDK's in-memory exporter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from chongming_task._model import Transition
from chongming_task.controller import Controller
from chongming_task.errors import ConfigurationError
from chongming_task.observability import (
    TracingObserver,
    extract_trace_context,
    inject_trace_context,
    install_tracing,
)
from chongming_task.policies import FixedBackoff, RetryPolicy
from chongming_task.run import TaskRun
from chongming_task.runtime._context import TaskContext
from chongming_task.runtime.executors._process import ProcessExecutor
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

from . import proc_tasks
from .conftest import Gate

S = TaskStatus
Spans = tuple[TracerProvider, InMemorySpanExporter]
RETRY = RetryPolicy(max_attempts=3, backoff=FixedBackoff(0))


def finished(exporter: InMemorySpanExporter, count: int) -> list[ReadableSpan]:
    def done() -> list[ReadableSpan] | None:
        spans = list(exporter.get_finished_spans())
        return spans if len(spans) >= count else None

    spans = wait_until(done, message=f"{count} finished spans")
    assert spans is not None
    return spans


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def fails_first_attempt(ctx: TaskContext) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("password=hunter2 rejected")
    return "ok"


def check_retried_tree(spans: list[ReadableSpan], parent: ReadableSpan, task_id: str) -> None:
    """The tree of a run that failed once and then succeeded, under ``parent``."""
    (run,) = named(spans, "task.flaky")
    first, second = named(spans, "task.flaky.attempt")
    assert run.context.trace_id == parent.context.trace_id
    assert parent_id(run) == parent.context.span_id
    assert parent_id(first) == parent_id(second) == run.context.span_id
    assert run.attributes is not None
    assert dict(run.attributes) == {
        "task.id": task_id,
        "task.name": "flaky",
        "task.trigger": "submit",
        "task.final_status": "succeeded",
        "task.attempt": 2,
        "task.end_trigger": "runtime:returned",
        "task.duration_seconds": pytest.approx(run.attributes["task.duration_seconds"]),
    }
    assert run.status.status_code is StatusCode.UNSET
    assert first.attributes is not None
    assert second.attributes is not None
    assert first.attributes["task.attempt"] == 1
    assert first.attributes["task.attempt_status"] == "retry_wait"
    assert first.status.status_code is StatusCode.ERROR
    assert "hunter2" not in (first.status.description or "")
    assert second.attributes["task.attempt"] == 2
    assert second.attributes["task.attempt_status"] == "succeeded"
    assert second.status.status_code is StatusCode.UNSET
    assert run.start_time is not None
    assert run.end_time is not None
    assert first.start_time is not None
    assert second.end_time is not None
    assert first.end_time is not None
    assert second.start_time is not None
    assert run.start_time <= first.start_time < first.end_time <= second.start_time
    assert second.end_time == run.end_time
    events = [e.name for e in run.events] + [e.name for e in (*first.events, *second.events)]
    assert sorted(events) == sorted(
        ["pending", "queued", "starting", "running", "retry_wait", "starting", "running",
         "succeeded"]
    )  # fmt: skip


def test_span_tree_of_a_retried_then_succeeded_run(controller: Controller, spans: Spans) -> None:
    provider, exporter = spans
    controller.register("flaky", fails_first_attempt, retry=RETRY)
    observer = install_tracing(controller, provider)
    with provider.get_tracer("test").start_as_current_span("request") as request:
        run = controller.submit("flaky")  # no metadata: the current span is captured inline
    assert run.wait(5).ok
    assert [t.to_status.value for t in run.transitions] == [
        "pending", "queued", "starting", "running", "retry_wait", "starting", "running",
        "succeeded",
    ]  # fmt: skip
    result = finished(exporter, 4)
    (parent,) = named(result, "request")
    assert parent.context.span_id == request.get_span_context().span_id
    check_retried_tree(result, parent, run.task_id)
    observer.close()


def test_span_tree_of_a_stopped_run(controller: Controller, spans: Spans, gate: Gate) -> None:
    provider, exporter = spans
    controller.register("held", gate.hold)
    observer = install_tracing(controller, provider)
    run = controller.submit("held")
    wait_until(lambda: run.status is S.RUNNING, message="running")
    controller.stop(run.task_id, reason="operator: token=s3cret")
    assert run.wait(5).status is S.STOPPED
    assert [t.to_status.value for t in run.transitions] == [
        "pending", "queued", "starting", "running", "stopping", "stopped",
    ]  # fmt: skip
    result = finished(exporter, 2)
    (root,) = named(result, "task.held")
    (attempt,) = named(result, "task.held.attempt")
    assert root.parent is None  # nothing was current at submit: a new trace
    assert parent_id(attempt) == root.context.span_id
    assert root.attributes is not None
    assert attempt.attributes is not None
    assert root.attributes["task.final_status"] == "stopped"
    assert attempt.attributes["task.attempt_status"] == "stopped"
    # A stop is an operator's decision, not an error.
    assert root.status.status_code is StatusCode.UNSET
    assert attempt.status.status_code is StatusCode.UNSET
    stopping = [e for e in attempt.events if e.name == "stopping"]
    assert stopping
    assert stopping[0].attributes is not None
    assert stopping[0].attributes["trigger"] == "control:stop_requested"
    assert "s3cret" not in str(stopping[0].attributes["reason"])
    observer.close()


def test_a_failed_run_is_an_error_span(controller: Controller, spans: Spans) -> None:
    provider, exporter = spans

    def broken(ctx: TaskContext) -> None:
        raise ValueError("api_key=XYZ not accepted")

    controller.register("broken", broken)
    observer = install_tracing(controller, provider)
    assert controller.submit("broken").wait(5).status is S.FAILED
    result = finished(exporter, 2)
    (root,) = named(result, "task.broken")
    assert root.status.status_code is StatusCode.ERROR
    assert "XYZ" not in (root.status.description or "")
    assert "ValueError" in (root.status.description or "")
    observer.close()


def test_the_parent_crosses_processes_in_the_metadata(controller: Controller, spans: Spans) -> None:
    provider, exporter = spans
    script = Path(__file__).with_name("make_context.py")
    output = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    remote = json.loads(output)
    assert remote["metadata"]["traceparent"].startswith(f"00-{remote['trace_id']}-")
    controller.register("flaky", fails_first_attempt, retry=RETRY)
    observer = install_tracing(controller, provider)
    # A span current here too: the metadata (the submitter's context) takes precedence.
    with provider.get_tracer("test").start_as_current_span("local"):
        run = controller.submit("flaky", metadata=remote["metadata"])
    assert run.wait(5).ok
    result = finished(exporter, 4)
    (root,) = named(result, "task.flaky")
    assert format(root.context.trace_id, "032x") == remote["trace_id"]
    assert root.parent is not None
    assert root.parent.is_remote
    assert format(root.parent.span_id, "016x") == remote["span_id"]
    stored = controller.get(run.task_id)
    assert stored is not None
    assert stored.metadata["traceparent"] == remote["metadata"]["traceparent"]
    observer.close()


@pytest.mark.slow
def test_a_process_executor_run_has_the_same_tree(spans: Spans) -> None:
    provider, exporter = spans
    with Controller(max_parallel=1, executor=ProcessExecutor()) as controller:
        controller.register("flaky", proc_tasks.fails_first_attempt, retry=RETRY)
        observer = install_tracing(controller, provider)
        with provider.get_tracer("test").start_as_current_span("request"):
            run = controller.submit("flaky", metadata=inject_trace_context())
        outcome = run.wait(60)
        assert outcome.ok
        assert outcome.value != os.getpid()  # the body ran in a child process
        result = finished(exporter, 4)
        (parent,) = named(result, "request")
        (root,) = named(result, "task.flaky")
        assert len(named(result, "task.flaky.attempt")) == 2
        assert parent_id(root) == parent.context.span_id
        observer.close()


def test_a_scheduled_run_is_named_after_its_schedule(controller: Controller, spans: Spans) -> None:
    provider, exporter = spans
    controller.register("job", lambda ctx: 1)
    observer = install_tracing(controller, provider)
    metadata = {"schedule": "nightly", "trigger_type": "cron"}
    controller.submit("job", metadata=metadata, bucket_key="tenant-1").wait(5)
    result = finished(exporter, 2)
    (root,) = named(result, "cron.nightly")
    (attempt,) = named(result, "cron.nightly.attempt")
    assert root.attributes is not None
    assert root.attributes["task.schedule"] == "nightly"
    assert root.attributes["task.trigger"] == "cron"
    assert isinstance(root.attributes["task.bucket"], int)
    assert parent_id(attempt) == root.context.span_id
    observer.close()


def test_close_ends_unfinished_spans(controller: Controller, spans: Spans, gate: Gate) -> None:
    provider, exporter = spans
    controller.register("held", gate.hold)
    observer = install_tracing(controller, provider)
    heard: list[Transition] = []
    controller.subscribe(lambda t, s: heard.append(t))  # queued after the observer's
    run = controller.submit("held")
    wait_until(lambda: any(t.to_status is S.RUNNING for t in heard), message="running heard")
    observer.close()
    result = finished(exporter, 2)
    assert all(span.attributes and span.attributes["task.unfinished"] for span in result)
    gate.open()
    run.wait(5)


def test_trace_context_helpers(spans: Spans) -> None:
    provider, _ = spans
    assert inject_trace_context({"a": 1}) == {"a": 1}  # no current span: nothing added
    assert extract_trace_context({"traceparent": "garbage"}) is None
    assert extract_trace_context({}) is None
    original = {"a": 1}
    with provider.get_tracer("test").start_as_current_span("x") as span:
        metadata = inject_trace_context(original)
    assert original == {"a": 1}
    context = extract_trace_context(metadata)
    assert context is not None
    from opentelemetry import trace

    remote = trace.get_current_span(context).get_span_context()
    assert remote.span_id == span.get_span_context().span_id


def test_missing_opentelemetry_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(ConfigurationError, match=r"chongming-task\[otel\]"):
        TracingObserver()
    with pytest.raises(ConfigurationError, match=r"chongming-task\[otel\]"):
        inject_trace_context({})


class WithSubmitHooks(Controller):
    """A controller with the (proposed) ``submit_hooks`` list."""

    def __init__(self) -> None:
        super().__init__()
        self.submit_hooks: list[Callable[[str, dict[str, Any]], None]] = []

    def submit(  # type: ignore[override]
        self, name: str, /, *args: Any, metadata: dict[str, Any] | None = None, **kwargs: Any
    ) -> TaskRun:
        meta = dict(metadata or {})
        for hook in self.submit_hooks:
            hook(name, meta)
        return super().submit(name, *args, metadata=meta, **kwargs)


def test_submit_hooks_persist_the_parent_in_the_metadata(spans: Spans) -> None:
    provider, exporter = spans
    controller = WithSubmitHooks()
    try:
        controller.register("job", lambda ctx: 1)
        observer = install_tracing(controller, provider)
        assert len(controller.submit_hooks) == 1
        with provider.get_tracer("test").start_as_current_span("request") as request:
            run = controller.submit("job")
        assert run.wait(5).ok
        stored = controller.get(run.task_id)
        assert stored is not None
        trace_id = f"{request.get_span_context().trace_id:032x}"
        assert str(stored.metadata["traceparent"]).startswith(f"00-{trace_id}-")
        (root,) = named(finished(exporter, 3), "task.job")
        assert parent_id(root) == request.get_span_context().span_id
        observer.close()
        assert controller.submit_hooks == []
    finally:
        controller.close()
