"""serve_metrics: /metrics over HTTP on loopback, clean shutdown, helpful errors."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from chongming_task.controller import Controller
from chongming_task.errors import ConfigurationError
from chongming_task.observability import expose_metrics, install_prometheus, serve_metrics
from chongming_task.testing import wait_until


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_are_served_on_loopback(controller: Controller) -> None:
    controller.register("ok", lambda ctx: 1)
    exporter = install_prometheus(controller)
    with exporter.serve(0) as server:
        assert server.host == "127.0.0.1"
        assert server.port > 0
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        controller.submit("ok").wait(5)
        key = ("chongming_task_runs_total", (("final_status", "succeeded"), ("name", "ok")))

        def counted() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
            samples = scrape(server.url)
            return samples if samples.get(key) == 1 else None

        samples = wait_until(counted, message="the run is counted")
        assert samples is not None
        assert samples[("chongming_tasks", (("status", "succeeded"),))] == 1
        assert samples[("chongming_store_up", ())] == 1
    with pytest.raises(OSError):  # closed: the port is released, nothing answers
        urllib.request.urlopen(server.url, timeout=2)
    server.close()  # idempotent
    exporter.close()


def test_a_port_in_use_is_a_configuration_error() -> None:
    from prometheus_client import CollectorRegistry

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigurationError, match=f"127.0.0.1:{port}.*--metrics-port"):
            serve_metrics(CollectorRegistry(), port)


@pytest.mark.parametrize("port", [-1, 70000, "9464", True])
def test_a_bad_port_is_refused(port: object) -> None:
    from prometheus_client import CollectorRegistry

    with pytest.raises(ConfigurationError, match="metrics port"):
        serve_metrics(CollectorRegistry(), port)  # type: ignore[arg-type]


def test_expose_metrics_wires_and_unwires_a_controller(controller: Controller) -> None:
    controller.register("ok", lambda ctx: 1)
    endpoint = expose_metrics(controller, 0)
    try:
        controller.submit("ok").wait(5)
        key = ("chongming_task_runs_total", (("final_status", "succeeded"), ("name", "ok")))
        wait_until(lambda: scrape(endpoint.url).get(key) == 1, message="counted over HTTP")
    finally:
        endpoint.close()
        endpoint.close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(ConfigurationError, match="cannot serve metrics"):
            expose_metrics(controller, taken.getsockname()[1])
