"""Observability: transition observers, Prometheus metrics, OpenTelemetry traces, JSON logs.

Everything here is an ordinary subscriber of ``Controller.subscribe``; the controller,
the runtime and the scheduler know nothing about metrics or tracing (as the Go
scheduler injects its tracer and observer at start-up). The extras are imported on
first use: ``prometheus_client`` (``pip install "chongming-task[prometheus]"``) and
``opentelemetry-api`` (``pip install "chongming-task[otel]"``).

===========================  ==================================================
``TransitionObserver``       base class with no-op ``on_*`` hooks
``install_prometheus``       metrics of a controller (+ store, scheduler)
``serve_metrics``            ``/metrics`` over HTTP, loopback by default
``expose_metrics``           both at once, for a worker (``--metrics-port``)
``install_tracing``          one span per run, one child span per attempt
``inject_trace_context``     the current trace context into a task's metadata
``JsonLogFormatter``         one JSON line per log record, secrets redacted
``TransitionLogger``         every transition as a structured log record
===========================  ==================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming_task._lazy import lazy_exports
from chongming_task.observability._collectors import (
    ControllerCollector,
    SchedulerCollector,
    StoreCollector,
)
from chongming_task.observability._endpoint import MetricsEndpoint, expose_metrics
from chongming_task.observability._events import TransitionObserver, timeout_scope
from chongming_task.observability._logging import JsonLogFormatter, TransitionLogger, task_extra
from chongming_task.observability._otel import TracingObserver, install_tracing, span_name
from chongming_task.observability._prometheus import PrometheusExporter, install_prometheus
from chongming_task.observability._server import MetricsServer, serve_metrics
from chongming_task.observability._trace_context import (
    TRACEPARENT,
    extract_trace_context,
    inject_trace_context,
)

if TYPE_CHECKING:  # resolved on first access: only a worker configures tracing from OTEL_*
    from chongming_task.observability._otel_env import tracing_from_env, wants_tracing

_LAZY: dict[str, str] = {
    "tracing_from_env": "chongming_task.observability._otel_env",
    "wants_tracing": "chongming_task.observability._otel_env",
}

__getattr__, __dir__ = lazy_exports("chongming_task.observability", globals(), _LAZY)

__all__ = [
    "TRACEPARENT",
    "ControllerCollector",
    "JsonLogFormatter",
    "MetricsEndpoint",
    "MetricsServer",
    "PrometheusExporter",
    "SchedulerCollector",
    "StoreCollector",
    "TracingObserver",
    "TransitionLogger",
    "TransitionObserver",
    "expose_metrics",
    "extract_trace_context",
    "inject_trace_context",
    "install_prometheus",
    "install_tracing",
    "serve_metrics",
    "span_name",
    "task_extra",
    "timeout_scope",
    "tracing_from_env",
    "wants_tracing",
]
