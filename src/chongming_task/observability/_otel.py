"""OpenTelemetry spans for runs: one span per run, one child span per attempt.

The span tree of a run that failed once and then succeeded::

    task.etl                      (run: submit -> succeeded)
    ├── task.etl.attempt          (attempt 1 -> retry_wait, status ERROR)
    └── task.etl.attempt          (attempt 2 -> succeeded)

Scheduled runs (metadata ``schedule``) are named ``cron.<schedule>`` instead, like the
Go scheduler's spans. Span times are the transitions' times, so spans are exact even
though they are built on the controller's event thread, after the fact.

**Parent.** The run span's parent is the trace context captured at submission: the
W3C ``traceparent`` in the task's metadata when present (it crosses processes through
the store), otherwise the span that was current in the thread that called
``controller.submit``; neither: a new trace (see ``submit_context``).

**Attributes.** ``task.id``, ``task.name``, ``task.bucket``, ``task.trigger`` (cron,
interval, manual, pipeline or submit), ``task.schedule``, ``task.attempt``,
``task.final_status``, ``task.duration_seconds``. Every transition is a span event.
``failed``, ``lost`` and ``cancelled`` runs get status ERROR with the (redacted)
failure message; ``stopped`` and ``skipped`` are decisions, not errors.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from chongming_task._model import TaskSnapshot, Transition
from chongming_task._public import public
from chongming_task._redact import redact
from chongming_task.core import Clock, SystemClock
from chongming_task.observability._events import TransitionObserver
from chongming_task.observability._submit_context import SubmitContexts
from chongming_task.observability._trace_context import require_otel
from chongming_task.states import TaskStatus

if TYPE_CHECKING:
    from chongming_task.controller import Controller

__all__ = ["ERROR_STATUSES", "TracingObserver", "install_tracing", "span_name"]

#: Final statuses whose run span (and last attempt span) get status ERROR.
ERROR_STATUSES: Final = frozenset({TaskStatus.FAILED, TaskStatus.LOST, TaskStatus.CANCELLED})
#: Attempt endings that are errors (a failed attempt before a retry, too).
_ATTEMPT_ERRORS: Final = ERROR_STATUSES | {TaskStatus.RETRY_WAIT}
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def span_name(snapshot: TaskSnapshot) -> str:
    """``cron.<schedule>`` for a scheduled run, ``task.<name>`` for any other."""
    schedule = snapshot.metadata.get("schedule")
    return f"cron.{schedule}" if isinstance(schedule, str) else f"task.{snapshot.name}"


def _trigger(snapshot: TaskSnapshot) -> str:
    metadata = snapshot.metadata
    kind = metadata.get("trigger_type")
    if isinstance(kind, str) and "schedule" in metadata:
        return kind
    return "pipeline" if "pipeline" in metadata else "submit"


def _ns(at: datetime) -> int:
    return (at - _EPOCH) // timedelta(microseconds=1) * 1000


@dataclass(slots=True)
class _Spans:
    run: Any
    attempt: Any | None = None


class TracingObserver(TransitionObserver):
    """Builds the span tree of each run from its transitions.

    Args:
        tracer_provider: An OpenTelemetry ``TracerProvider`` (default: the global one).
        clock: Time of spans ended by :meth:`close` before their run finished.

    Raises:
        ConfigurationError: ``opentelemetry-api`` is not installed.
    """

    def __init__(self, tracer_provider: Any | None = None, *, clock: Clock | None = None) -> None:
        super().__init__()
        trace = require_otel()
        from chongming_task import __version__

        self._trace = trace
        self.tracer: Any = trace.get_tracer("chongming_task", __version__, tracer_provider)
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._spans: dict[str, _Spans] = {}
        self.contexts = SubmitContexts()

    # ------------------------------------------------------------ hooks

    def on_transition(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        spans = self._run_spans(transition, snapshot)
        attributes = {
            "from": transition.from_status.value if transition.from_status else "none",
            "to": transition.to_status.value,
            "trigger": transition.trigger,
        }
        if transition.actor:
            attributes["actor"] = transition.actor
        if transition.reason:
            attributes["reason"] = redact(transition.reason) or ""
        target = spans.attempt if spans.attempt is not None else spans.run
        target.add_event(transition.to_status.value, attributes, timestamp=_ns(transition.at))

    def on_attempt_finished(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        with self._lock:
            spans = self._spans.get(transition.task_id)
            attempt = None if spans is None else spans.attempt
            if spans is not None:
                spans.attempt = None
        if attempt is None:
            return
        attempt.set_attribute("task.attempt_status", transition.to_status.value)
        if transition.to_status in _ATTEMPT_ERRORS:
            self._error(attempt, snapshot)
        attempt.end(end_time=_ns(transition.at))

    def on_attempt_started(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        with self._lock:
            spans = self._spans.get(transition.task_id)
        if spans is None:
            return
        attempt = self.tracer.start_span(
            f"{span_name(snapshot)}.attempt",
            context=self._trace.set_span_in_context(spans.run),
            attributes={
                "task.id": snapshot.task_id,
                "task.name": snapshot.name,
                "task.attempt": snapshot.attempt,
            },
            start_time=_ns(transition.at),
        )
        with self._lock:
            spans.attempt = attempt

    def on_run_finished(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        with self._lock:
            spans = self._spans.pop(transition.task_id, None)
        if spans is None:
            return
        run = spans.run
        run.set_attribute("task.final_status", snapshot.status.value)
        run.set_attribute("task.attempt", snapshot.attempt)
        run.set_attribute("task.end_trigger", transition.trigger)
        elapsed = snapshot.elapsed
        if elapsed is not None:
            run.set_attribute("task.duration_seconds", elapsed)
        if snapshot.status in ERROR_STATUSES:
            self._error(run, snapshot)
        run.end(end_time=_ns(transition.at))

    # ------------------------------------------------------------ lifecycle

    def attach(self, controller: Controller, *, inline: bool = False) -> Callable[[], None]:
        """Subscribe (queued) plus the submission-context capture (``SubmitContexts``)."""
        self.contexts.attach(controller)
        return super().attach(controller, inline=inline)

    def close(self) -> None:
        """Unsubscribe and end the spans of runs that have not finished (marked so)."""
        self.detach()
        self.contexts.close()
        with self._lock:
            open_spans = list(self._spans.values())
            self._spans.clear()
        now = _ns(self._clock.now())
        for spans in open_spans:
            for span in (spans.attempt, spans.run):
                if span is not None:
                    span.set_attribute("task.unfinished", True)
                    span.end(end_time=now)

    # ------------------------------------------------------------ internals

    def _run_spans(self, transition: Transition, snapshot: TaskSnapshot) -> _Spans:
        with self._lock:
            spans = self._spans.get(transition.task_id)
        if spans is not None:
            return spans
        attributes: dict[str, Any] = {
            "task.id": snapshot.task_id,
            "task.name": snapshot.name,
            "task.trigger": _trigger(snapshot),
        }
        if snapshot.bucket is not None:
            attributes["task.bucket"] = snapshot.bucket
        for key, attribute in (("schedule", "task.schedule"), ("pipeline", "task.pipeline")):
            value = snapshot.metadata.get(key)
            if isinstance(value, str):
                attributes[attribute] = value
        run = self.tracer.start_span(
            span_name(snapshot),
            context=self.contexts.parent_of(snapshot),
            attributes=attributes,
            start_time=_ns(transition.at),
        )
        spans = _Spans(run)
        with self._lock:
            self._spans[transition.task_id] = spans
        return spans

    def _error(self, span: Any, snapshot: TaskSnapshot) -> None:
        from opentelemetry.trace import Status, StatusCode

        failure = snapshot.failure
        message = redact(failure.message) if failure is not None else None
        span.set_status(Status(StatusCode.ERROR, message or snapshot.status.value))


@public
def install_tracing(controller: Controller, tracer_provider: Any | None = None) -> TracingObserver:
    """Attach a :class:`TracingObserver` to ``controller``; ``close()`` it to detach.

    Raises:
        ConfigurationError: ``opentelemetry-api`` is not installed.
    """
    observer = TracingObserver(tracer_provider, clock=controller.clock)
    observer.attach(controller)
    return observer
