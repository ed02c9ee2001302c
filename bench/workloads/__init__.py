"""The workloads of issue 10, in the order they run."""

from __future__ import annotations

from collections.abc import Callable

from harness.core import Workload

from workloads.w1_throughput import Throughput
from workloads.w2_latency import Latency

WORKLOADS: dict[str, Callable[[], Workload]] = {
    "W1": Throughput,
    "W2": Latency,
}
