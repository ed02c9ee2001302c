"""Run in a separate process: start a span and print the metadata that carries it.

Prints one JSON line: ``{"metadata": {...}, "trace_id": "...", "span_id": "..."}``.
"""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import TracerProvider

from chongming_task.observability import inject_trace_context

if __name__ == "__main__":
    tracer = TracerProvider().get_tracer("submitter")
    with tracer.start_as_current_span("console-submit") as span:
        metadata = inject_trace_context({"origin": "console"})
        context = span.get_span_context()
        print(
            json.dumps(
                {
                    "metadata": metadata,
                    "trace_id": format(context.trace_id, "032x"),
                    "span_id": format(context.span_id, "016x"),
                }
            )
        )
