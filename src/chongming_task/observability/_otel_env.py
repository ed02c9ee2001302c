"""OpenTelemetry for a worker, configured from the standard ``OTEL_*`` variables.

A worker started with ``OTEL_TRACES_EXPORTER`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set exports one span per run (see
:mod:`chongming_task.observability._otel`); nothing else needs configuring.
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` name the service as usual,
``OTEL_SDK_DISABLED=true`` turns it all off. Exporters (``OTEL_TRACES_EXPORTER``):

* ``otlp`` (the default when an endpoint is set): needs ``opentelemetry-exporter-otlp``
  (HTTP/protobuf is tried first, then gRPC);
* ``console``: spans as JSON on stdout (for a first look);
* ``none``: spans are built (their parents still propagate) but not exported.

Everything is imported lazily, only when one of the variables is set: a worker without
them never imports OpenTelemetry, and one without the ``otel`` extra installed is told
so once and runs on without tracing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from chongming_task.errors import ConfigurationError

if TYPE_CHECKING:
    from chongming_task.controller import Controller

__all__ = ["ENV_TRIGGERS", "EnvTracing", "tracing_from_env", "wants_tracing"]

#: Any of these set (non-empty) turns tracing on.
ENV_TRIGGERS: Final = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)


def wants_tracing(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for tracing (and does not disable the SDK)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(env.get(name, "").strip() for name in ENV_TRIGGERS)


@dataclass
class EnvTracing:
    """The tracer provider built from the environment and the observer on a controller."""

    provider: Any
    observer: Any
    exporter: str

    def close(self) -> None:
        """Detach the observer, then flush and shut the provider down (idempotent)."""
        self.observer.close()
        self.provider.shutdown()


def _exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter,
            )
        except ImportError:
            try:
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                    OTLPSpanExporter,
                )
            except ImportError as exc:
                raise ConfigurationError(
                    "OTEL_TRACES_EXPORTER=otlp needs an OTLP exporter: "
                    "pip install opentelemetry-exporter-otlp"
                ) from exc
        return OTLPSpanExporter()
    raise ConfigurationError(
        f"OTEL_TRACES_EXPORTER={name!r} is not supported here; use otlp, console or none"
    )


def tracing_from_env(
    controller: Controller, environ: Mapping[str, str] | None = None
) -> EnvTracing | None:
    """Install tracing on ``controller`` as the ``OTEL_*`` variables say; ``None`` if they don't.

    Raises:
        ConfigurationError: Tracing was asked for but the ``otel`` extra (the
            OpenTelemetry SDK) or the chosen exporter is not installed, or the exporter
            name is unknown.
    """
    env = os.environ if environ is None else environ
    if not wants_tracing(env):
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as exc:
        raise ConfigurationError(
            'OTEL_* tracing needs the OpenTelemetry SDK: pip install "chongming-task[otel]"'
        ) from exc
    name = (env.get("OTEL_TRACES_EXPORTER") or "otlp").split(",")[0].strip().lower()
    provider = TracerProvider(resource=Resource.create())
    if name != "none":
        exporter = _exporter(name)
        processor = SimpleSpanProcessor if name == "console" else BatchSpanProcessor
        provider.add_span_processor(processor(exporter))
    from chongming_task.observability._otel import install_tracing

    observer = install_tracing(controller, tracer_provider=provider)
    return EnvTracing(provider=provider, observer=observer, exporter=name)
