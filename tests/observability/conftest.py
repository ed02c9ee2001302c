"""Fixtures of the observability tests: a controller, an in-memory span exporter."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chongming_task.controller import Controller
from chongming_task.runtime._context import TaskContext


class Gate:
    """Holds task bodies in a checkpoint loop until opened."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def open(self) -> None:
        self.event.set()

    def hold(self, ctx: TaskContext) -> None:
        while not self.event.is_set():
            ctx.checkpoint()
            time.sleep(0.002)


@pytest.fixture
def gate() -> Iterator[Gate]:
    gate = Gate()
    yield gate
    gate.open()  # never leave a body spinning after a failed test


@pytest.fixture
def controller() -> Iterator[Controller]:
    with Controller(max_parallel=4, graceful_stop=2.0) as controller:
        yield controller


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """(tracer_provider, exporter): the SDK with a synchronous in-memory exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()
