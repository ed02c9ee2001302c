"""Observability: Prometheus metrics over HTTP, OpenTelemetry spans, JSON logs.

One controller, three ordinary subscribers: a Prometheus exporter (scraped over
HTTP on 127.0.0.1, as Prometheus would), a tracer (spans kept in memory here; use an
OTLP exporter in production) and a JSON transition logger. A task that fails once
and then succeeds shows up in all three. Every claim the output makes is asserted.

    python examples/13_observability.py

Needs the extras: pip install "chongming-task[prometheus,otel]" opentelemetry-sdk
"""

from __future__ import annotations

import io
import json
import logging
import sys
import urllib.request

from chongming_task import (
    Controller,
    FixedBackoff,
    JsonLogFormatter,
    RetryPolicy,
    TaskContext,
    TransitionLogger,
    install_prometheus,
    install_tracing,
)
from chongming_task.testing import wait_until

try:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print('this example needs: pip install "chongming-task[prometheus,otel]" opentelemetry-sdk')
    sys.exit(0)


def import_rows(ctx: TaskContext, table: str) -> int:
    """Fails its first attempt (a flaky connection), succeeds on the second."""
    if ctx.attempt == 1:
        raise ConnectionError(f"connection to {table} reset (password=hunter2)")
    return 42


def scrape(url: str) -> dict[str, float]:
    """One Prometheus scrape, as ``name{labels}`` -> value."""
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}"] = sample.value
    return samples


def main() -> None:
    # Tracing: the SDK with an in-memory exporter (production: BatchSpanProcessor + OTLP).
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))

    # Logs: one JSON object per line, secrets redacted.
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(JsonLogFormatter())
    transitions_log = logging.getLogger("chongming_task.transitions")
    transitions_log.addHandler(handler)
    transitions_log.setLevel(logging.INFO)

    with Controller(max_parallel=2) as controller:
        controller.register(
            "import_rows", import_rows, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0))
        )
        exporter = install_prometheus(controller)
        tracing = install_tracing(controller, provider)
        logger = TransitionLogger()
        logger.attach(controller)
        server = exporter.serve(port=0)  # 127.0.0.1, a free port
        print(f"metrics at {server.url}")

        with provider.get_tracer("example").start_as_current_span("nightly-import"):
            run = controller.submit("import_rows", "orders")
        outcome = run.wait(10)
        assert outcome.ok
        assert outcome.value == 42
        path = [t.to_status.value for t in run.transitions]
        assert path == [
            "pending", "queued", "starting", "running", "retry_wait", "starting", "running",
            "succeeded",
        ]  # fmt: skip

        # Metrics: counters from this process, task counts from the store.
        ok = "final_status=succeeded,name=import_rows"
        wait_until(
            lambda: scrape(server.url).get(f"chongming_task_runs_total{{{ok}}}") == 1,
            message="the finished run in /metrics",
        )
        samples = scrape(server.url)
        assert samples["chongming_task_attempts_total{name=import_rows}"] == 2
        assert samples["chongming_task_retries_total{name=import_rows}"] == 1
        assert samples["chongming_tasks{status=succeeded}"] == 1
        assert samples["chongming_store_up{}"] == 1
        for key in sorted(samples):
            if key.startswith(("chongming_task_runs_total", "chongming_task_attempts_total")):
                print(f"  {key} {samples[key]:g}")

        # Spans: the run under the submitting span, one child per attempt.
        wait_until(lambda: len(spans.get_finished_spans()) >= 4, message="four spans")
        by_name: dict[str, list[ReadableSpan]] = {}
        for span in spans.get_finished_spans():
            by_name.setdefault(span.name, []).append(span)
            parent = f"{span.parent.span_id:016x}" if span.parent else "-"
            print(f"  span {span.name:<24} {span.status.status_code.name:<5} parent {parent}")
        (root,) = by_name["nightly-import"]
        (task_span,) = by_name["task.import_rows"]
        attempts = by_name["task.import_rows.attempt"]
        assert task_span.parent is not None
        assert task_span.parent.span_id == root.context.span_id
        assert [a.parent.span_id for a in attempts if a.parent] == [task_span.context.span_id] * 2
        assert [a.status.status_code.name for a in attempts] == ["ERROR", "UNSET"]

        server.close()
        exporter.close()
        tracing.close()
        logger.detach()

    # Logs: structured fields, the password never written.
    records = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert any(r["to_status"] == "retry_wait" and r["attempt"] == 1 for r in records)
    assert all(r["task_name"] == "import_rows" for r in records)
    assert "hunter2" not in lines.getvalue()
    print(f"  log {json.dumps(records[-1])[:110]}...")
    transitions_log.removeHandler(handler)
    provider.shutdown()
    print("ok")


if __name__ == "__main__":
    main()
