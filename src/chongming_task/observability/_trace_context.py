"""W3C trace context carried in a task's metadata, so a trace survives the store.

A task is submitted in one place and run in another: another thread, another
process (a worker taking a submission), or after a restart. The only thing that
travels with it is its JSON metadata, so the submitter's trace context is written
there in the W3C ``traceparent``/``tracestate`` form (via OpenTelemetry's propagator
API) and the tracing observer of whichever process runs the task reads it back as
the parent of the run's span::

    with tracer.start_as_current_span("nightly-import"):
        controller.submit("etl", metadata=inject_trace_context({"source": "cron"}))

Only ``opentelemetry-api`` is needed (``pip install "chongming-task[otel]"``); without
an SDK there is no current span and :func:`inject_trace_context` adds nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from chongming_task._model import JSONValue
from chongming_task._public import public
from chongming_task.observability._extras import require_extra

__all__ = [
    "INSTALL_HINT",
    "TRACEPARENT",
    "TRACESTATE",
    "extract_trace_context",
    "inject_trace_context",
    "require_otel",
]

INSTALL_HINT: Final = 'pip install "chongming-task[otel]"'
#: Metadata keys of the W3C trace context (top level, so ``metadata_eq`` can find them).
TRACEPARENT: Final = "traceparent"
TRACESTATE: Final = "tracestate"


def require_otel() -> Any:
    """The ``opentelemetry.trace`` module, or a ``ConfigurationError`` saying what to install."""
    return require_extra(
        "opentelemetry", "trace", f"tracing needs the opentelemetry-api package: {INSTALL_HINT}"
    )


def _propagator() -> Any:
    require_otel()
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


@public
def inject_trace_context(
    metadata: Mapping[str, JSONValue] | None = None, *, context: Any | None = None
) -> dict[str, JSONValue]:
    """A copy of ``metadata`` with the current (or given) trace context added.

    Args:
        metadata: The task's metadata; not modified.
        context: An OpenTelemetry ``Context`` (default: the current one).

    Raises:
        ConfigurationError: ``opentelemetry-api`` is not installed.
    """
    carrier: dict[str, str] = {}
    _propagator().inject(carrier, context=context)
    result: dict[str, JSONValue] = dict(metadata or {})
    for key in (TRACEPARENT, TRACESTATE):
        if key in carrier:
            result[key] = carrier[key]
    return result


def extract_trace_context(metadata: Mapping[str, JSONValue]) -> Any | None:
    """The ``Context`` whose span is the one recorded in ``metadata``; ``None`` if none is.

    A malformed ``traceparent`` (written by hand, or by a foreign tool) is ignored
    rather than raised: a bad trace header must never stop a task.
    """
    parent = metadata.get(TRACEPARENT)
    if not isinstance(parent, str):
        return None
    carrier = {TRACEPARENT: parent}
    state = metadata.get(TRACESTATE)
    if isinstance(state, str):
        carrier[TRACESTATE] = state
    trace = require_otel()
    context = _propagator().extract(carrier)
    if not trace.get_current_span(context).get_span_context().is_valid:
        return None
    return context
