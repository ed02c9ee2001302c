"""``serve_metrics``: a small HTTP server for ``/metrics``, on loopback unless told otherwise.

A worker's metrics say which tasks exist and how they fail; that is not for the
whole network to read, so the default host is ``127.0.0.1`` and exposing it is an
explicit ``host="0.0.0.0"``. The server runs on its own daemon thread (one thread
per request) and :meth:`MetricsServer.close` shuts it down and joins it, so tests
and worker shutdowns leave nothing behind.

The wiring of a worker's ``--metrics-port`` (an exporter plus this server) is
:func:`chongming_task.observability._endpoint.expose_metrics`.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterable, Mapping
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from chongming_task._public import public
from chongming_task._service import FINISHED, BackgroundService, StepResult
from chongming_task._validation import check_int
from chongming_task.core import SystemClock
from chongming_task.errors import ConfigurationError
from chongming_task.observability._collectors import require_prometheus

__all__ = [
    "HealthCheck",
    "MetricsServer",
    "routed_app",
    "serve_metrics",
]

#: ``() -> (healthy, details)``: what ``/healthz`` reports (``Worker.health``).
HealthCheck = Callable[[], tuple[bool, Mapping[str, Any]]]

_JSON = [("Content-Type", "application/json; charset=utf-8")]


def routed_app(metrics_app: Any, health: HealthCheck | None = None) -> Any:
    """A WSGI app: ``/metrics`` from ``metrics_app``, ``/healthz``, 404 for anything else.

    ``/healthz`` answers ``200`` with ``{"status": "ok", ...}`` while ``health()`` says
    healthy and ``503`` with the failing details otherwise (or when it raises), so a
    Kubernetes liveness or readiness probe restarts or unroutes a stuck worker.
    Without a health check, ``/healthz`` answers ``200`` while the server runs.
    """

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == "/metrics":
            result: Iterable[bytes] = metrics_app(environ, start_response)
            return result
        if path == "/healthz":
            try:
                healthy, details = health() if health is not None else (True, {"status": "ok"})
            except Exception as exc:
                healthy, details = False, {"status": "unhealthy", "error": repr(exc)}
            body = json.dumps(dict(details), default=str).encode()
            start_response("200 OK" if healthy else "503 Service Unavailable", _JSON)
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"not found: try /metrics or /healthz\n"]

    return app


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    """No access log on stderr: a scrape every 15 s would drown the worker's own lines."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class MetricsServer:
    """A running ``/metrics`` endpoint; ``port`` is the bound one (useful with port 0)."""

    def __init__(self, server: WSGIServer) -> None:
        self._server = server
        self._closed = False
        self.host: str = str(server.server_address[0])
        self.port: int = int(server.server_address[1])
        # The clock only paces a retry after serve_forever() failed: real seconds.
        self._service = BackgroundService(
            f"chongming-metrics[{self.port}]", self._serve, clock=SystemClock()
        )
        self._service.start()

    def _serve(self) -> StepResult:
        self._server.serve_forever(poll_interval=0.2)
        return FINISHED  # shut down by close()

    @property
    def url(self) -> str:
        return f"{self._base}/metrics"

    @property
    def health_url(self) -> str:
        return f"{self._base}/healthz"

    @property
    def _base(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop serving and release the port (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._service.request_stop()
        self._server.shutdown()
        self._server.server_close()
        self._service.join(timeout)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MetricsServer({self.url!r})"


@public
def serve_metrics(
    registry: Any, port: int, host: str = "127.0.0.1", *, health: HealthCheck | None = None
) -> MetricsServer:
    """Serve ``registry`` over HTTP at ``http://host:port/metrics`` until ``close()``.

    ``/healthz`` is served next to it (see :func:`routed_app`); any other path is 404.

    Args:
        registry: A ``prometheus_client.CollectorRegistry`` (e.g. ``exporter.registry``).
        port: TCP port; 0 picks a free one (read it back from ``.port``).
        host: Interface to bind; loopback by default.
        health: What ``/healthz`` reports (``Worker.health``).

    Raises:
        ConfigurationError: Bad port, ``prometheus_client`` missing, or the address
            cannot be bound (in use, not local).
    """
    check_int(port, "metrics port", minimum=0, maximum=65535)
    require_prometheus()
    from prometheus_client import make_wsgi_app

    app = routed_app(make_wsgi_app(registry), health)
    server_class = _Server6 if ":" in host else _Server
    try:
        server = make_server(host, port, app, server_class, handler_class=_QuietHandler)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}; "
            "choose another --metrics-port (0 picks a free one) or host"
        ) from exc
    return MetricsServer(server)
