"""bench/dashboard_bench.py still runs (timings are not asserted here: that is bench/'s job)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dashboard_bench_runs_small(capsys: object) -> None:
    spec = importlib.util.spec_from_file_location(
        "dashboard_bench", ROOT / "bench" / "dashboard_bench.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    results = module.main(
        ["--tasks", "300", "--rounds", "2", "--clients", "3", "--live-seconds", "0.5"]
    )
    assert results["task_count"] == 300
    assert results["tasks"]["p50_ms"] > 0
    assert results["tasks, page 2"]["p50_ms"] > 0
    assert results["tasks, time range"]["p50_ms"] > 0
    assert "overview" in results
    for page in ("charts, hour", "charts, day", "charts (JSON), day", "task", "buckets"):
        assert results[page]["p50_ms"] > 0, page
    live = results["live clients"]
    assert live["clients"] == live["streams_open_at_end"] == 3
    assert live["cpu_share"] >= 0
