"""The workloads of issue 10, in the order they run."""

from __future__ import annotations

from collections.abc import Callable

from harness.core import Workload

from workloads.w1_throughput import Throughput
from workloads.w2_latency import Latency
from workloads.w3_lateness import Lateness
from workloads.w4_stop import StopLatency
from workloads.w5_scale import Scale
from workloads.w6_overhead import Overhead

WORKLOADS: dict[str, Callable[[], Workload]] = {
    "W1": Throughput,
    "W2": Latency,
    "W3": Lateness,
    "W4": StopLatency,
    "W5": Scale,
    "W6": Overhead,
}
