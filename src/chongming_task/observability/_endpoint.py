"""``expose_metrics``: the whole wiring of a worker's ``--metrics-port``.

An exporter on the worker's controller (and scheduler) plus the HTTP server of
:mod:`chongming_task.observability._server`, closed together. It sits above both so
neither imports the other's composition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming_task.observability._prometheus import install_prometheus
from chongming_task.observability._server import HealthCheck, MetricsServer, serve_metrics

if TYPE_CHECKING:
    from chongming_task.controller import Controller
    from chongming_task.observability._prometheus import PrometheusExporter
    from chongming_task.schedule import Scheduler

__all__ = ["MetricsEndpoint", "expose_metrics"]


class MetricsEndpoint:
    """An exporter bound to a controller plus the HTTP server that serves it."""

    def __init__(self, exporter: PrometheusExporter, server: MetricsServer) -> None:
        self.exporter = exporter
        self.server = server

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def health_url(self) -> str:
        return self.server.health_url

    @property
    def port(self) -> int:
        return self.server.port

    def close(self) -> None:
        """Stop serving, then detach the exporter (idempotent)."""
        self.server.close()
        self.exporter.close()


def expose_metrics(
    controller: Controller,
    port: int,
    *,
    host: str = "127.0.0.1",
    scheduler: Scheduler | None = None,
    health: HealthCheck | None = None,
) -> MetricsEndpoint:
    """``install_prometheus`` + ``serve_metrics`` in one call (what a worker needs).

    Raises:
        ConfigurationError: ``prometheus_client`` missing, or the port cannot be bound
            (nothing stays attached then).
    """
    exporter = install_prometheus(controller, scheduler=scheduler)
    try:
        server = serve_metrics(exporter.registry, port, host, health=health)
    except BaseException:
        exporter.close()
        raise
    return MetricsEndpoint(exporter, server)
